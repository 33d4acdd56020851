/**
 * `createDefaultEngine`: one call that assembles provider, tools, permissions and prompt
 * (manual §6.1, "Ruta A").
 *
 * @module
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { envString } from "../_internal/env.ts";
import { type Message, OpenAIProvider, type ProviderClient } from "../providers/mod.ts";
import {
  ConflictGuard, // tool suite A
  registerAskTool,
  registerDiffTools, // tool suite A
  registerDirectoryTool, // tool suite B
  registerExploreTool, // tool suite B
  registerFileTools,
  registerGitTools, // tool suite A
  registerMediaTool, // tool suite B
  registerPlanTool, // tool suite B
  registerSearchTool,
  registerShellTool,
  registerTodoTool, // tool suite A
  registerWebTools, // tool suite B
  TodoList, // tool suite A
  ToolRegistry,
} from "../tools/mod.ts";
import {
  ApprovalOutcome,
  type FileToolIsolation,
  isolateFileTools,
  Mode,
  PermissionEngine,
  resolveSandbox,
  type SandboxOptions,
  type SandboxStatus,
  type ShellPolicy,
  wrapWithSandbox,
} from "../permissions/mod.ts";
import { EngineConfigError } from "./errors.ts";
import { CompositeHook, type EngineHook } from "./hooks.ts";
import { resolveVcsPlan, SessionVcs, VcsHook, type VcsPlan } from "../vcs/mod.ts";
import { buildInstructions } from "./prompts.ts";
import { DEFAULT_MAX_ITERATIONS, type LoopDetectionOptions, TurnEngine } from "./turn_engine.ts";
import { resolveLoopOptions } from "./_loop_guard.ts";

// Sandbox options (manual §8.4) are defined by the sandbox module (issue 8).
export type { SandboxOptions } from "../permissions/mod.ts";

/** Per-turn git snapshot options (manual §17). */
export interface VcsOptions {
  /** `"off"` (default), `"auto"`, `"native"`, `"shadow"`. */
  mode?: "off" | "auto" | "native" | "shadow";
  /** Session id for `refs/agent/<id>` (default `"default"`). */
  sessionId?: string;
}

/** Options of {@link createDefaultEngine} (manual §6.1, every parameter of its table). */
export interface CreateEngineOpts {
  /** Workspace root: the permission boundary of files and commands (required). */
  workspace: string;
  /** Model id; default env `OPENAI_MODEL`. When both are empty, `run()` fails clearly. */
  model?: string;
  /** Custom provider; default `new OpenAIProvider({ logDir })`. */
  provider?: ProviderClient;
  /** Run mode (default `Mode.INTERACTIVE`). */
  mode?: Mode;
  /** Iterations per turn (default 800). */
  maxIterations?: number;
  /**
   * Repeat ("doom loop") detection within a turn (default `{ maxRepeats: 3 }`; `false` turns it
   * off): a tool call repeated more than `maxRepeats` times in a row is not run and the model gets
   * a `repeated_call` tool error; repeating it again ends the turn with
   * `error{error_type: "loop_detected"}`. See `TurnEngineOpts.loopDetection`.
   */
  loopDetection?: LoopDetectionOptions | false;
  /** Reasoning effort; default env `OPENAI_REASONING_EFFORT`; skipped for DeepSeek. */
  reasoningEffort?: "low" | "medium" | "high";
  /** Command prefixes auto-allowed (manual §8.5; default `[]`). */
  allowedCommands?: string[];
  /** Shell approval exemption policy (manual §8.4; default `"approve"`). */
  shellPolicy?: ShellPolicy;
  /** Sandbox options (manual §8.4; default `{ mode: "auto" }`). */
  sandbox?: SandboxOptions;
  /** Git snapshots per turn (manual §17; default `{ mode: "off" }`). */
  vcs?: VcsOptions;
  /** System prompt; default `buildInstructions(agentType, workspace, today, lang)`. */
  instructions?: string;
  /** `"code"` (default) or `"cowork"`: picks the default prompt. */
  agentType?: "code" | "cowork";
  /** Prompt, naming and summary language (default `"zh"`). */
  lang?: string;
  /** Initial history (restoring a session). */
  messages?: Message[];
  /** Lifecycle hook (manual §11). */
  hook?: EngineHook;
  /** Makes a hook for each explore subagent call (manual §16.1). */
  subagentHookFactory?: () => EngineHook;
  /** Context window in tokens (default: detected, else 128,000). */
  contextWindow?: number;
  /** Hard compaction threshold as a fraction of the window (default 0.8). */
  thresholdPct?: number;
  /** Soft threshold as a fraction of the hard one (default 0.75). */
  softThresholdPct?: number;
  /** Absolute cap of the hard threshold in tokens (default `null`). */
  capTokens?: number | null;
  /** Where over-budget tool results are saved (default `<workspace>/.agent/tool-results`). */
  toolResultDir?: string;
  /** Root of LLM request audit logs, in date sub-folders (default: none). */
  logDir?: string;
  /**
   * What happens when a tool call needs approval and no approver was set (manual §8.3):
   * `"error"` (default) throws `ApprovalRequiredError` out of the stream; `"deny"` refuses;
   * `"allow"` allows once.
   */
  defaultApproval?: "error" | "deny" | "allow";
}

const EFFORTS = ["low", "medium", "high"] as const;

function resolveWorkspace(workspace: unknown): string {
  if (typeof workspace !== "string" || workspace.trim() === "") {
    throw new EngineConfigError(
      "Cannot create engine: workspace is required (the folder the agent works in)",
      "bad_option",
    );
  }
  const absolute = path.resolve(workspace);
  let real = absolute;
  try {
    real = fs.realpathSync(absolute);
  } catch {
    // Not created yet: the host may create it before the first turn (checked then).
  }
  if (fs.existsSync(real) && !fs.statSync(real).isDirectory()) {
    throw new EngineConfigError(
      `Cannot create engine: workspace ${workspace} is not a folder`,
      "bad_option",
    );
  }
  let home = os.homedir();
  try {
    home = fs.realpathSync(home);
  } catch {
    // keep the unresolved home path
  }
  if (real === path.parse(real).root || real === home) {
    throw new EngineConfigError(
      `Cannot create engine: workspace ${real} is the file-system root or the home folder; ` +
        "use a dedicated project folder (manual §8.6)",
      "bad_option",
    );
  }
  return real;
}

/**
 * Assembles an engine with the built-in tools (manual §6.1): provider, tool registry, permission
 * engine, system prompt, hooks and a fallback approver per `defaultApproval`.
 *
 * Registers the tools available in this version: `read_file`, `list_files`, `write_file`,
 * `replace_in_file`, `run_shell`, `shell_task_output`, `shell_task_kill`, `grep`, `ask_user`,
 * `web_fetch`, `web_search` (disabled without a search backend), `propose_plan`,
 * `request_directory`, `media`, `explore` (its subagent gets a hook from `subagentHookFactory`).
 *
 * @param opts See {@link CreateEngineOpts}.
 * @returns A ready {@link TurnEngine}.
 * @throws {EngineConfigError} When `workspace` is missing, a file, `/` or the home folder (a
 *   folder that does not exist yet is accepted; the first turn fails clearly if it still does not);
 *   when `reasoningEffort` is not low/medium/high; when `sandbox.mode` is `"required"` and no OS
 *   sandbox can be enforced here (manual §8.4); when `vcs` cannot be used (`/` or the home
 *   folder, `native` outside a git repository, a bad session id; a missing git only turns
 *   snapshots off); when `loopDetection.maxRepeats` is not an integer of at least 1.
 * @example
 * ```ts
 * import { createDefaultEngine, Mode } from "@zqagent/core";
 * const engine = createDefaultEngine({ workspace: ".", model: "gpt-4o-mini", mode: Mode.INTERACTIVE });
 * ```
 */
export function createDefaultEngine(opts: CreateEngineOpts): TurnEngine {
  if (!opts || typeof opts !== "object") {
    throw new EngineConfigError("Cannot create engine: options are required", "bad_option");
  }
  const workspace = resolveWorkspace(opts.workspace);
  const effort = opts.reasoningEffort ?? envString("OPENAI_REASONING_EFFORT");
  if (effort !== undefined && !(EFFORTS as readonly string[]).includes(effort)) {
    throw new EngineConfigError(
      `Cannot create engine: reasoningEffort ${JSON.stringify(effort)} is not low, medium or high`,
      "bad_option",
    );
  }
  try {
    resolveLoopOptions(opts.loopDetection);
  } catch (e) {
    throw new EngineConfigError((e as Error).message, "bad_option");
  }
  // Sandbox (manual §8.4, issue 8): resolved once; "required" without one fails here.
  let sandbox: SandboxStatus;
  try {
    sandbox = resolveSandbox(opts.sandbox ?? {}, { workspace });
  } catch (e) {
    throw new EngineConfigError(`Cannot create engine: ${(e as Error).message}`, "bad_option");
  }
  // VCS (manual §17, issue 7): VcsHook runs beside the host's hook through CompositeHook.
  let hook = opts.hook;
  if (opts.vcs?.mode && opts.vcs.mode !== "off") {
    let plan: VcsPlan;
    let vcs: SessionVcs;
    try {
      plan = resolveVcsPlan(workspace, { mode: opts.vcs.mode });
      vcs = new SessionVcs(plan, opts.vcs.sessionId ?? "default");
    } catch (e) {
      throw new EngineConfigError(`Cannot create engine: ${(e as Error).message}`, "bad_option");
    }
    if (plan.mode !== "off") {
      hook = new CompositeHook([opts.hook, new VcsHook(vcs, { reportTo: opts.hook })]);
    }
  }
  const provider = opts.provider ?? new OpenAIProvider({ logDir: opts.logDir });
  const lang = opts.lang ?? "zh";
  const registry = new ToolRegistry();
  // One ConflictGuard per engine, shared by the file and patch tools (manual §6.1 step 3).
  const conflictGuard = new ConflictGuard();
  registerFileTools(registry, workspace, { conflictGuard });
  registerShellTool(registry, workspace, {
    wrapCommand: (command) => wrapWithSandbox(sandbox, command, { workspace }),
  });
  registerSearchTool(registry, workspace);
  registerAskTool(registry);
  // Tool suite part A (issue 4): git, patches, the task list (restored from `messages`).
  registerGitTools(registry, workspace);
  registerDiffTools(registry, workspace, { conflictGuard });
  registerTodoTool(registry, { list: TodoList.fromMessages(opts.messages ?? []) });
  // Tool suite part B (issue 4): web, plan, directories, media, explore. The explore subagent
  // uses the engine's model at call time (engine.model may change between turns).
  try {
    registerWebTools(registry);
  } catch (e) {
    throw new EngineConfigError(`Cannot create engine: ${(e as Error).message}`, "bad_option");
  }
  registerPlanTool(registry);
  registerDirectoryTool(registry);
  registerMediaTool(registry, workspace);
  // sandbox.deno (DESIGN §5): the tools that touch files run in a child deno process, the
  // explore subagent's read-only ones too.
  let isolation: FileToolIsolation | undefined;
  registerExploreTool(registry, {
    workspace,
    provider,
    lang,
    hookFactory: opts.subagentHookFactory,
    toolResultDir: opts.toolResultDir,
    extraTools: sandbox.deno ? (r) => void isolation?.route(r, { readOnly: true }) : undefined,
  });
  if (sandbox.deno) {
    try {
      isolation = isolateFileTools(registry, workspace);
    } catch (e) {
      throw new EngineConfigError(`Cannot create engine: ${(e as Error).message}`, "bad_option");
    }
  }
  const permissions = new PermissionEngine({
    workspaceRoot: workspace,
    mode: opts.mode ?? Mode.INTERACTIVE,
    allowedCommands: opts.allowedCommands ?? [],
    shellPolicy: opts.shellPolicy ?? "approve",
    sandbox,
  });
  const instructions = opts.instructions ??
    buildInstructions(opts.agentType ?? "code", workspace, undefined, lang);
  const defaultApproval = opts.defaultApproval ?? "error";
  if (!["error", "deny", "allow"].includes(defaultApproval)) {
    throw new EngineConfigError(
      `Cannot create engine: defaultApproval ${JSON.stringify(defaultApproval)} is not ` +
        "error, deny or allow",
      "bad_option",
    );
  }
  return new TurnEngine({
    provider,
    registry,
    permissions,
    model: opts.model ?? envString("OPENAI_MODEL") ?? "",
    instructions,
    lang,
    maxIterations: opts.maxIterations ?? DEFAULT_MAX_ITERATIONS,
    loopDetection: opts.loopDetection,
    reasoningEffort: effort as "low" | "medium" | "high" | undefined,
    messages: opts.messages,
    hook,
    contextWindow: opts.contextWindow,
    thresholdPct: opts.thresholdPct,
    softThresholdPct: opts.softThresholdPct,
    capTokens: opts.capTokens,
    toolResultDir: opts.toolResultDir,
    approver: defaultApproval === "deny"
      ? () => Promise.resolve(ApprovalOutcome.DENY)
      : defaultApproval === "allow"
      ? () => Promise.resolve(ApprovalOutcome.ONCE)
      : undefined,
  });
}
