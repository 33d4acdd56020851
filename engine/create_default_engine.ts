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
  registerAskTool,
  registerFileTools,
  registerSearchTool,
  registerShellTool,
  ToolRegistry,
} from "../tools/mod.ts";
import {
  ApprovalOutcome,
  Mode,
  PermissionEngine,
  type SandboxStatus,
  type ShellPolicy,
} from "../permissions/mod.ts";
import { EngineConfigError } from "./errors.ts";
import type { EngineHook } from "./hooks.ts";
import { buildInstructions } from "./prompts.ts";
import { DEFAULT_MAX_ITERATIONS, TurnEngine } from "./turn_engine.ts";

/** Sandbox options (manual §8.4). Enforcement arrives with the sandbox subsystem. */
export interface SandboxOptions {
  /** `"auto"` (use one when available, default), `"off"`, or `"required"` (fail without one). */
  mode?: "auto" | "off" | "required";
  /** Extra writable paths inside the sandbox. */
  extraWritable?: string[];
  /** Allow network access from sandboxed commands. */
  network?: boolean;
}

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
 * `replace_in_file`, `run_shell`, `shell_task_output`, `shell_task_kill`, `grep`, `ask_user`.
 *
 * @param opts See {@link CreateEngineOpts}.
 * @returns A ready {@link TurnEngine}.
 * @throws {EngineConfigError} When `workspace` is missing, a file, `/` or the home folder (a
 *   folder that does not exist yet is accepted; the first turn fails clearly if it still does not);
 *   when `reasoningEffort` is not low/medium/high; when `sandbox.mode` is `"required"` (no sandbox
 *   can be enforced by this version) or `vcs.mode` is not `"off"` (snapshots are not available in
 *   this version).
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
  const sandboxMode = opts.sandbox?.mode ?? "auto";
  if (sandboxMode === "required") {
    throw new EngineConfigError(
      'Cannot create engine: sandbox mode is "required" but no OS sandbox can be enforced ' +
        "by this version",
      "bad_option",
    );
  }
  if (opts.vcs?.mode && opts.vcs.mode !== "off") {
    throw new EngineConfigError(
      `Cannot create engine: vcs mode "${opts.vcs.mode}" is not available in this version`,
      "bad_option",
    );
  }
  const sandbox: SandboxStatus = {
    mode: sandboxMode,
    kind: "none",
    enforced: false,
    reason: "no OS sandbox is enforced by this version",
  };
  const provider = opts.provider ?? new OpenAIProvider({ logDir: opts.logDir });
  const lang = opts.lang ?? "zh";
  const registry = new ToolRegistry();
  registerFileTools(registry, workspace);
  registerShellTool(registry, workspace);
  registerSearchTool(registry, workspace);
  registerAskTool(registry);
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
    reasoningEffort: effort as "low" | "medium" | "high" | undefined,
    messages: opts.messages,
    hook: opts.hook,
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
