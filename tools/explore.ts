/**
 * The `explore` subagent (manual §16.1): the main agent delegates a research task; a subagent
 * with its own context and its own tool registry investigates and returns only its final report.
 *
 * - The subagent runs in `Mode.PLAN` (writes strictly refused) with read-only tools: `read_file`,
 *   `list_files`, `grep`, `git_log`, `git_status` and `git_diff`. Directories the
 *   parent was granted are visible to it read-only. Anything that would need a person is refused.
 * - At most `EXPLORE_MAX_ITERATIONS` iterations (default 30); on reaching the cap it makes one
 *   final model call without tools and reports (`finalizeOnMaxIterations`).
 * - Only the report enters the parent's context. The subagent's events are forwarded into the
 *   parent's stream as `subagent_event {agent: "explore", parentReqId, event}` (DESIGN §3), and a
 *   hook from `hookFactory` (e.g. `SubagentHook`) sees them too.
 * - Interrupting the parent turn interrupts the subagent.
 *
 * The subagent is a `TurnEngine`; it is loaded with a dynamic `import()` on the first call, so
 * the tools layer does not depend on the engine at load time (DESIGN §2).
 *
 * @example Register explore by hand (manual §16.1)
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerExploreTool } from "@zqagent/core/tools/explore";
 * import { OpenAIProvider } from "@zqagent/core/providers";
 * registerExploreTool(new ToolRegistry(), {
 *   workspace: "/srv/workspace",
 *   provider: new OpenAIProvider({ apiKey: "sk-…" }),
 *   model: "gpt-4o-mini",
 *   lang: "en",
 * });
 * ```
 *
 * @module
 */
import path from "node:path";
import type { EngineHook } from "../engine/hooks.ts";
import type { Message, ProviderClient } from "../providers/mod.ts";
import { ApprovalOutcome, Mode, PermissionEngine } from "../permissions/mod.ts";
import { envNumber, envString } from "../_internal/env.ts";
import { RiskClass, type ToolContext, ToolRegistry } from "./registry.ts";
import { registerReadOnlyFileTools } from "./fs.ts";
import { registerSearchTool } from "./search.ts";
import { registerGitTools } from "./git.ts";
import { abortError, stringArg } from "./_common.ts";

/** Default iteration cap of one explore run (manual §16.1, env `EXPLORE_MAX_ITERATIONS`). */
export const DEFAULT_EXPLORE_MAX_ITERATIONS = 30;

/** Options of {@link registerExploreTool} (manual §16.1). */
export interface ExploreToolOptions {
  /** Workspace root the subagent reads (required). */
  workspace: string;
  /** Model provider. Default: the calling engine's provider. */
  provider?: ProviderClient;
  /** Model id. Default: the calling engine's current model, else env `OPENAI_MODEL`. */
  model?: string;
  /** Prompt language (`zh`, `en`, `zh-TW`, `ja`, `ko`, `es`). Default: the calling engine's. */
  lang?: string;
  /** Makes a hook for each explore call (e.g. `() => new SubagentHook("explore")`). */
  hookFactory?: () => EngineHook | undefined;
  /** Where over-budget tool results of the subagent are saved (default: the engine's default). */
  toolResultDir?: string;
  /** Iteration cap (default env `EXPLORE_MAX_ITERATIONS`, else 30). */
  maxIterations?: number;
  /** System prompt of the subagent (default: the explore prompt of `lang`). */
  instructions?: string;
  /** Adds more read-only tools to the subagent's registry (called once per explore call). */
  extraTools?: (registry: ToolRegistry, workspace: string) => void;
}

/** What explore reads of the calling engine (a `TurnEngine` fits). */
interface ParentEngine {
  provider?: ProviderClient;
  model?: string;
  lang?: string;
  permissions?: { grantedDirectories?: () => { path: string; writable: boolean }[] };
}

/** The subagent's tool registry: read-only files, search, and git when available. */
function subagentRegistry(workspace: string, options: ExploreToolOptions): ToolRegistry {
  const registry = new ToolRegistry();
  registerReadOnlyFileTools(registry, workspace);
  registerSearchTool(registry, workspace);
  registerGitTools(registry, workspace);
  options.extraTools?.(registry, workspace);
  // Only tools that count as read-only may stay (a host's extraTools included).
  for (const spec of registry.list()) {
    if (spec.metadata.riskClass !== RiskClass.READ) registry.remove(spec.name);
  }
  return registry;
}

function lastReport(messages: Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role !== "assistant") continue;
    const text = typeof m.content === "string"
      ? m.content
      : (m.content ?? []).map((p) => (p.type === "text" ? p.text : "")).join("");
    if (text.trim() !== "") return text.trim();
  }
  return "";
}

async function runExplore(
  options: ExploreToolOptions,
  workspace: string,
  args: Record<string, unknown>,
  ctx: ToolContext | undefined,
): Promise<string> {
  const task = stringArg(args, "task", "explore").trim();
  if (task === "") throw new Error("Cannot explore: task is empty");
  const parent = (ctx?.engine ?? {}) as ParentEngine;
  const provider = options.provider ?? parent.provider;
  if (!provider) throw new Error("Cannot explore: no model provider (pass provider)");
  const model = options.model ?? parent.model ?? envString("OPENAI_MODEL") ?? "";
  if (!model) throw new Error("Cannot explore: no model (pass model or set OPENAI_MODEL)");
  const lang = options.lang ?? parent.lang ?? "zh";
  const maxIterations = options.maxIterations ??
    envNumber("EXPLORE_MAX_ITERATIONS", DEFAULT_EXPLORE_MAX_ITERATIONS);
  const [{ TurnEngine }, { buildExploreInstructions }] = await Promise.all([
    import("../engine/turn_engine.ts"),
    import("../engine/prompts.ts"),
  ]);
  const child = new TurnEngine({
    provider,
    registry: subagentRegistry(workspace, options),
    permissions: new PermissionEngine({
      workspaceRoot: workspace,
      mode: Mode.PLAN,
      grantedDirectories: (parent.permissions?.grantedDirectories?.() ?? []).map((g) => ({
        path: g.path,
        writable: false,
      })),
    }),
    model,
    instructions: options.instructions ?? buildExploreInstructions(workspace, undefined, lang),
    lang,
    maxIterations: Math.max(1, Math.trunc(maxIterations)),
    finalizeOnMaxIterations: true,
    hook: options.hookFactory?.() ?? undefined,
    toolResultDir: options.toolResultDir,
    // Nobody can answer for a subagent: whatever would need a person is refused.
    approver: () => Promise.resolve(ApprovalOutcome.DENY),
  });
  const signal = ctx?.signal;
  if (signal?.aborted) throw abortError("explore");
  const onAbort = () => child.requestInterrupt();
  signal?.addEventListener("abort", onAbort, { once: true });
  let status = "";
  let error = "";
  try {
    for await (const event of child.run(task, ctx?.taskId ? `${ctx.taskId}:explore` : undefined)) {
      ctx?.emit?.("subagent_event", {
        agent: "explore",
        parentReqId: ctx.toolCallId,
        event: { type: event.type, data: event.data },
      });
      // An abort that came before the subagent's turn started found nothing to interrupt.
      if (event.type === "turn_start" && signal?.aborted) child.requestInterrupt();
      if (event.type === "turn_end") status = String(event.data.status);
      if (event.type === "error") error = String(event.data.error);
    }
  } catch (err) {
    if (!status) status = "error";
    if (!error) error = (err as Error)?.message ?? String(err);
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
  if (status === "interrupted" || signal?.aborted) throw abortError("explore");
  if (status === "error") {
    throw new Error(`Cannot finish explore: ${error || "the subagent failed"}`);
  }
  const report = lastReport(child.messages);
  if (!report) throw new Error("Cannot finish explore: the subagent gave no report");
  return report;
}

/**
 * Registers `explore {task}` (manual §7.1, §16.1; risk class READ: it only reads). The result is
 * the subagent's final report. Errors given to the model: an empty task, no provider or model,
 * a subagent turn that ended with an error ("Cannot finish explore: …"), no report.
 *
 * @param registry The parent's registry.
 * @param options Workspace (required), provider, model, lang, hookFactory, toolResultDir,
 *   maxIterations, instructions, extraTools.
 * @throws {TypeError} When `workspace` is missing.
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerExploreTool } from "@zqagent/core/tools/explore";
 * // provider and model default to those of the engine that calls the tool
 * registerExploreTool(new ToolRegistry(), { workspace: "/srv/workspace", maxIterations: 10 });
 * ```
 */
export function registerExploreTool(registry: ToolRegistry, options: ExploreToolOptions): void {
  if (!options || typeof options.workspace !== "string" || options.workspace === "") {
    throw new TypeError("Cannot register explore: workspace is required");
  }
  const workspace = path.resolve(options.workspace);
  registry.register(
    (args, ctx) => runExplore(options, workspace, args, ctx),
    {
      category: "subagent",
      riskLevel: "low",
      capabilities: ["explore", "read_files"],
      requiresApproval: false,
      riskClass: RiskClass.READ,
    },
    {
      type: "function",
      function: {
        name: "explore",
        description: "Delegate a read-only research task to a subagent with its own context " +
          "(find where something is implemented, how modules fit together, what a change " +
          "would touch). It reads files, searches and looks at git history, then returns a " +
          "concise report; its intermediate steps do not fill your context. Give a precise " +
          "task and what the report must contain.",
        parameters: {
          type: "object",
          properties: {
            task: { type: "string", description: "The research task and the expected report" },
          },
          required: ["task"],
        },
      },
    },
  );
}
