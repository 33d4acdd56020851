/**
 * The error the VCS subsystem throws.
 *
 * @module
 */

/** What went wrong, for programs (see {@link VcsError}). */
export type VcsErrorCode =
  | "bad_option"
  | "unsafe_root"
  | "not_a_repository"
  | "off"
  | "bad_turn"
  | "bad_path"
  | "git_failed";

/**
 * Thrown by `resolveVcsPlan` and `SessionVcs` when a snapshot, diff or restore cannot be done
 * (manual §17). Hosts catch it to tell the user why, by `code`:
 * `bad_option` (unknown mode, bad session id), `unsafe_root` (`/` or the home folder),
 * `not_a_repository` (native mode outside a git repository), `off` (snapshots are off),
 * `bad_turn` (no such turn), `bad_path` (a path outside the workspace), `git_failed`.
 *
 * @example
 * ```ts
 * import { resolveVcsPlan, VcsError } from "@zqagent/core/vcs";
 * try {
 *   resolveVcsPlan("/", { mode: "auto" });
 * } catch (e) {
 *   if (e instanceof VcsError) console.log(e.code); // "unsafe_root"
 * }
 * ```
 */
export class VcsError extends Error {
  /** Always `"VcsError"`. */
  override name = "VcsError";
  /** Machine-readable reason. */
  readonly code: VcsErrorCode;

  /**
   * Creates the error.
   *
   * @param message Human-readable, "Cannot X: reason".
   * @param code Machine-readable reason.
   */
  constructor(message: string, code: VcsErrorCode) {
    super(message);
    this.code = code;
  }
}
