/**
 * Permissions (manual §8): run modes, the {@link PermissionEngine} that decides each tool call,
 * approval types, shell command analysis for the allowlist, and the path guard tools use to stay
 * inside the workspace.
 *
 * @example Evaluate a shell command
 * ```ts
 * import { Mode, PermissionEngine } from "@zqagent/core/permissions";
 * import { RiskClass } from "@zqagent/core/tools";
 * const permissions = new PermissionEngine({
 *   workspaceRoot: "/srv/ws",
 *   mode: Mode.INTERACTIVE,
 *   allowedCommands: ["git status", "ls"],
 * });
 * const shell = {
 *   category: "shell",
 *   riskLevel: "high" as const,
 *   capabilities: [],
 *   requiresApproval: true,
 *   riskClass: RiskClass.EXEC,
 * };
 * const decision = permissions.evaluate("run_shell", { command: "ls -la" }, shell);
 * // decision.allowed === true; "ls; rm -rf ." would need the user.
 * ```
 *
 * @example Keep a tool path inside the workspace
 * ```ts
 * import { isInside, resolveWorkspacePath } from "@zqagent/core/permissions";
 * const target = resolveWorkspacePath("/srv/ws", "src/../notes.md");
 * if (!isInside("/srv/ws", target)) throw new Error("Cannot write notes.md: outside the workspace");
 * ```
 *
 * @module
 */
export {
  ApprovalOutcome,
  type Approver,
  type Decision,
  Mode,
  type PermissionRequest,
} from "./mode.ts";
export {
  type GrantDirectoryOptions,
  type GrantedDirectory,
  PermissionEngine,
  type PermissionEngineOptions,
  type SandboxStatus,
  type ShellPolicy,
} from "./permission_engine.ts";
export {
  analyzeCommand,
  type CommandAnalysis,
  commandExecutable,
  type CommandHazard,
  isCommandAllowed,
  type SimpleCommand,
} from "./command.ts";
export {
  checkPath,
  expandHome,
  isInside,
  PathResolutionError,
  resolveRoot,
  resolveWorkspacePath,
} from "./path_guard.ts";
