/**
 * The tool table the engine offers the model (manual §7.2, DESIGN §5).
 *
 * @module
 */
import type { ToolSchema } from "../providers/mod.ts";

/** What a tool can do to the world; the permission engine decides from it (manual §7.1). */
export enum RiskClass {
  /** Reads inside the workspace; no side effects. */
  READ = "read",
  /** Writes local files. */
  WRITE = "write",
  /** Executes programs. */
  EXEC = "exec",
  /** Reaches outside the machine (network, external services). */
  EXTERNAL = "external",
  /** Asks a person (ask_user, propose_plan, request_directory). */
  INTERACTIVE = "interactive",
}

/** Risk metadata of a tool (manual §7.2). */
export interface ToolMetadata {
  /** Free-form category ("fs", "shell", "mcp", "business", …). */
  category: string;
  /** Risk level shown to people. */
  riskLevel: "low" | "medium" | "high";
  /** Capabilities, for display and filtering. */
  capabilities: string[];
  /** True when every call needs approval outside AUTO mode. */
  requiresApproval: boolean;
  /**
   * Risk class. Built-ins declare it; a custom tool without one counts as `READ` only when
   * `riskLevel` is `"low"` and `requiresApproval` is false, and as `EXEC`-like otherwise
   * (DESIGN §5).
   */
  riskClass?: RiskClass;
  /**
   * True when running the call twice has the same effect as once (issue 11). After a crash, a
   * call that started but did not finish is run again only when idempotent; otherwise the model
   * gets an "interrupted, not re-run" result. Default: true for read-only tools (`READ`), false
   * otherwise.
   */
  idempotent?: boolean;
}

/** A function that asks the host a question (the `ask_user` tool, manual §4). */
export type QuestionHandler = (
  question: string,
  options: string[],
  allowText: boolean,
  multi: boolean,
  context?: QuestionContext,
) => Promise<string | string[]>;

/** Where a question comes from, so a multi-tenant host can route it to the right session. */
export interface QuestionContext {
  /** The engine running the tool call (a `TurnEngine`). */
  engine?: unknown;
  /** The turn's task id. */
  taskId?: string;
  /** The tool call id (`reqId` in events). */
  toolCallId?: string;
  /** Aborted when the turn is interrupted. */
  signal?: AbortSignal;
}

// --- tool suite part B (issue 4): plan / directory handlers and queued media ---

/** How a person answered a proposed plan (`propose_plan`). */
export interface PlanDecision {
  /** True when the plan may be carried out. */
  approved: boolean;
  /** Comments or requested changes, passed to the model. */
  feedback?: string;
}

/**
 * Shows a plan (Markdown) to a person and resolves with their decision; `true`/`false` is short
 * for `{approved}`. `context` is the same as `ask_user`'s ({@link QuestionContext}).
 */
export type PlanHandler = (
  plan: string,
  context?: QuestionContext,
) => Promise<PlanDecision | boolean>;

/** What `request_directory` asks a person for. */
export interface DirectoryRequest {
  /** The directory, resolved to an absolute path. */
  path: string;
  /** Why the model needs it. */
  reason: string;
  /** True when the model wants to write there too. */
  writable: boolean;
}

/** How a person answered a directory request. */
export interface DirectoryDecision {
  /** True when access is granted. */
  granted: boolean;
  /** Grant writes too (default: what was asked); `false` grants read-only access. */
  writable?: boolean;
  /** A note passed to the model (e.g. why it was refused). */
  reason?: string;
}

/**
 * Asks a person for access to a directory outside the workspace and resolves with their decision;
 * `true`/`false` is short for `{granted}`. `context` is the same as `ask_user`'s.
 */
export type DirectoryHandler = (
  request: DirectoryRequest,
  context?: QuestionContext,
) => Promise<DirectoryDecision | boolean>;

/** A media file a tool queued for the next model request (the `media` tool, manual §13). */
export interface ToolAttachment {
  /** Display name (file name). */
  name: string;
  /** MIME type (`image/*`, `audio/*`, `video/*`). */
  mimeType: string;
  /** Size in bytes. */
  size: number;
  /** Where it came from: a workspace-relative path or a URL. */
  path: string;
  /** The content part sent to the model (an `image_url`, `input_audio` or `video_url` part). */
  part: Record<string, unknown>;
}

// --- end tool suite part B ---

/** What the engine passes to a tool function as its second argument. */
export interface ToolContext {
  /** Aborted when the turn is interrupted; long-running tools must honour it. */
  signal?: AbortSignal;
  /** The turn's task id. */
  taskId?: string;
  /** The tool call id. */
  toolCallId?: string;
  /**
   * Idempotency key of this call (`tool_result:<toolCallId>`), the same on a re-run after a
   * crash: pass it to external APIs that deduplicate (issue 11).
   */
  idempotencyKey?: string;
  /** The engine running the call (a `TurnEngine`), for tools that need it. */
  engine?: unknown;
  /** Emits an engine event (e.g. `ask_user_question`) into the turn's stream. */
  emit?: (type: string, data: Record<string, unknown>) => void;
  /** The engine's question handler, when it has its own (overrides the global one). */
  questionHandler?: QuestionHandler;
  // --- tool suite part B (issue 4) ---
  /** The engine's plan handler, when it has its own (overrides the global one). */
  planHandler?: PlanHandler;
  /** The engine's directory handler, when it has its own (overrides the global one). */
  directoryHandler?: DirectoryHandler;
  /**
   * Media queued for the next model request: the engine appends them as one `user` message after
   * this iteration's tool results (marked with `attachments` refs). Absent when the engine
   * cannot attach media.
   */
  attachments?: ToolAttachment[];
  // --- end tool suite part B ---
}

/** A tool implementation: may return a value or a Promise; throwing yields an error result. */
export type ToolFunc = (args: Record<string, unknown>, ctx?: ToolContext) => unknown;

/** A registered tool. */
export interface ToolSpec {
  /** Tool name (from `schema.function.name`). */
  name: string;
  /** The implementation. */
  func: ToolFunc;
  /** Risk metadata. */
  metadata: ToolMetadata;
  /** The schema shown to the model. */
  schema: ToolSchema;
  /** Where it comes from: `"internal"`, `"mcp:<server>"`, or a host's label. */
  source: string;
  /** False when disabled: still registered, but not offered to the model. */
  enabled: boolean;
}

/**
 * Holds the tools of one engine. Registering a name again replaces the previous tool.
 *
 * @example Register a custom tool
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * const registry = new ToolRegistry();
 * registry.register(
 *   (args) => `hello ${args.name}`,
 *   { category: "demo", riskLevel: "low", capabilities: [], requiresApproval: false },
 *   {
 *     type: "function",
 *     function: {
 *       name: "greet",
 *       description: "Greets someone",
 *       parameters: { type: "object", properties: { name: { type: "string" } } },
 *     },
 *   },
 * );
 * ```
 */
export class ToolRegistry {
  #tools = new Map<string, ToolSpec>();

  /**
   * Registers (or replaces) a tool.
   *
   * @param func The implementation; receives the parsed arguments and a {@link ToolContext}.
   * @param metadata Risk metadata.
   * @param schema The schema; when omitted the function's name is used with empty parameters.
   * @param source Display label (default `"internal"`).
   * @returns The registered tool.
   * @throws {TypeError} When no usable name can be found (anonymous function and no schema), or
   *   the schema is not a function schema.
   */
  register(
    func: ToolFunc,
    metadata: ToolMetadata,
    schema?: ToolSchema,
    source = "internal",
  ): ToolSpec {
    if (typeof func !== "function") {
      throw new TypeError("Cannot register tool: func is not a function");
    }
    if (!metadata || typeof metadata !== "object") {
      throw new TypeError("Cannot register tool: metadata is required");
    }
    let resolved = schema;
    if (resolved === undefined) {
      if (!func.name) {
        throw new TypeError("Cannot register tool: an anonymous function needs a schema");
      }
      resolved = {
        type: "function",
        function: { name: func.name, parameters: { type: "object", properties: {} } },
      };
    }
    const name = resolved?.function?.name;
    if (typeof name !== "string" || name === "") {
      throw new TypeError("Cannot register tool: schema.function.name is missing");
    }
    const spec: ToolSpec = {
      name,
      func,
      metadata: { ...metadata, capabilities: [...(metadata.capabilities ?? [])] },
      schema: resolved,
      source,
      enabled: true,
    };
    this.#tools.set(name, spec);
    return spec;
  }

  /** Removes a tool. Returns false when there was none of that name. */
  remove(name: string): boolean {
    return this.#tools.delete(name);
  }

  /** Hides a tool from the model (it stays registered). Returns false when unknown. */
  disable(name: string): boolean {
    const spec = this.#tools.get(name);
    if (!spec) return false;
    spec.enabled = false;
    return true;
  }

  /** Shows a disabled tool to the model again. Returns false when unknown. */
  enable(name: string): boolean {
    const spec = this.#tools.get(name);
    if (!spec) return false;
    spec.enabled = true;
    return true;
  }

  /** Any registered tool, enabled or not. */
  get(name: string): ToolSpec | undefined {
    return this.#tools.get(name);
  }

  /** True when a tool of that name is registered. */
  has(name: string): boolean {
    return this.#tools.has(name);
  }

  /** Names of all registered tools, in registration order. */
  names(): string[] {
    return [...this.#tools.keys()];
  }

  /** All registered tools, in registration order. */
  list(): ToolSpec[] {
    return [...this.#tools.values()];
  }

  /** Schemas of the enabled tools, as sent to the model. */
  schemas(): ToolSchema[] {
    const out: ToolSchema[] = [];
    for (const spec of this.#tools.values()) if (spec.enabled) out.push(spec.schema);
    return out;
  }
}
