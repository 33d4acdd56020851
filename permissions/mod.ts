/**
 * Permissions (manual §8): run modes, the {@link PermissionEngine} that decides each tool call,
 * approval types, shell command analysis for the allowlist, the path guard tools use to stay
 * inside the workspace, the OS sandbox for shell commands (bubblewrap, sandbox-exec) and the
 * Deno permission layer (isolated file tools).
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
 * @example Run a command in the OS sandbox (manual §8.4)
 * ```ts
 * import { describeSandbox, resolveSandbox, wrapWithSandbox } from "@zqagent/core/permissions";
 * const status = resolveSandbox({ mode: "auto" }, { workspace: "/srv/ws" });
 * console.log(describeSandbox(status));
 * const run = wrapWithSandbox(status, {
 *   program: "/bin/bash",
 *   args: ["-c", "make test"],
 *   cwd: "/srv/ws",
 *   env: { PATH: "/usr/bin:/bin" },
 * }, { workspace: "/srv/ws" });
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
  buildBwrapArgs,
  buildMacProfile,
  type BwrapArgsOptions,
  describeSandbox,
  homeSecretPaths,
  type MacProfile,
  type MacProfileOptions,
  type ProtectedPaths,
  resolveSandbox,
  type ResolveSandboxContext,
  type SandboxCommand,
  type SandboxMode,
  type SandboxOptions,
  sandboxProtectedPaths,
  SandboxUnavailableError,
  type WrapOptions,
  wrapWithSandbox,
} from "./sandbox.ts";
export {
  type FileToolIsolation,
  isolateFileTools,
  type IsolateFileToolsOptions,
  type RouteFileToolsOptions,
} from "./isolated_file_tools.ts";
export {
  checkPath,
  expandHome,
  isInside,
  isProtectedPath,
  pathFromFileUrl,
  type PathResolutionCode,
  PathResolutionError,
  resolveRoot,
  resolveWorkspacePath,
  urlScheme,
} from "./path_guard.ts";
