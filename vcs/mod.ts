/**
 * Per-turn snapshots of the workspace with git, and rollback (manual §17): what each turn
 * changed on disk, shell commands included, and how to undo it.
 *
 * - {@link resolveVcsPlan} picks `off` / `native` (the workspace's `.git`, with a separate index
 *   and `refs/agent/<session>/…`; HEAD, the user's index and `git status` stay as they were) /
 *   `shadow` (a repository in `<workspace>/.agent/vcs`).
 * - {@link SessionVcs} takes the snapshots and lists, diffs and restores turns.
 * - {@link VcsHook} wires it to the engine; `createDefaultEngine({ vcs })` does that for you.
 *
 * @example Query and roll back (manual §17.2)
 * ```ts
 * import { resolveVcsPlan, SessionVcs } from "@zqagent/core/vcs";
 *
 * const vcs = new SessionVcs(resolveVcsPlan(".", { mode: "auto" }), "tenant-42-session-7");
 * const turns = await vcs.listTurns();
 * if (turns.length >= 2) {
 *   console.log(await vcs.diffTurn(2));
 *   const result = await vcs.restoreTurn(2, { paths: ["src/app.ts"], dryRun: true });
 *   console.log(result.restored, result.overwritten, result.missing);
 * }
 * ```
 *
 * @module
 */
export {
  agentRef,
  DEFAULT_VCS_MAX_FILE_BYTES,
  type ResolveVcsOptions,
  resolveVcsPlan,
  sessionIndexPath,
  type VcsMode,
  type VcsPlan,
} from "./plan.ts";
export {
  type RestoreOptions,
  type RestoreResult,
  SessionVcs,
  type VcsCommitResult,
  type VcsFileChange,
  type VcsKeptPath,
  type VcsSkippedFile,
  type VcsTurn,
} from "./session_vcs.ts";
export { type VcsErrorSink, VcsHook, type VcsHookOptions } from "./vcs_hook.ts";
export { VcsError, type VcsErrorCode } from "./errors.ts";
