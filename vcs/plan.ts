/**
 * `resolveVcsPlan`: decides, once and synchronously, how a workspace is snapshotted (manual
 * §17.1), plus the names of a session's refs and index file.
 *
 * @module
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { which } from "../_internal/process.ts";
import { gitSync } from "./_git.ts";
import { VcsError } from "./errors.ts";

/** Requested snapshot mode (manual §17.1). */
export type VcsMode = "off" | "auto" | "native" | "shadow";

/**
 * Default per-file size cap of snapshots: 10 MiB (the cap Codex uses for untracked files;
 * research notes §1.2). Larger files are skipped and reported.
 */
export const DEFAULT_VCS_MAX_FILE_BYTES: number = 10 * 1024 * 1024;

/** How a workspace is snapshotted: the result of {@link resolveVcsPlan}. */
export interface VcsPlan {
  /** The mode in effect: `"off"`, `"native"` (the workspace's `.git`) or `"shadow"`. */
  readonly mode: "off" | "native" | "shadow";
  /** The mode that was asked for. */
  readonly requested: VcsMode;
  /** Absolute, symlink-free workspace path. */
  readonly workspace: string;
  /** Git directory used for objects and refs (`null` when off). */
  readonly gitDir: string | null;
  /** Work tree root given to git: the repository's top level, or the workspace (shadow). */
  readonly workTree: string | null;
  /** The git executable (`null` when git was not found). */
  readonly git: string | null;
  /** Why this mode was chosen (e.g. why snapshots are off). */
  readonly reason: string;
  /** Files larger than this many bytes are skipped and reported. */
  readonly maxFileBytes: number;
}

/** Options of {@link resolveVcsPlan}. */
export interface ResolveVcsOptions {
  /** `"off"` (default), `"auto"`, `"native"` or `"shadow"` (manual §17.1). */
  mode?: VcsMode;
  /** The git executable (default: `git` found on the PATH). */
  gitPath?: string;
  /** Per-file size cap in bytes (default {@link DEFAULT_VCS_MAX_FILE_BYTES}, 10 MiB). */
  maxFileBytes?: number;
}

const MODES: readonly string[] = ["off", "auto", "native", "shadow"];

function realHome(): string | null {
  try {
    return fs.realpathSync(os.homedir());
  } catch {
    return null;
  }
}

/**
 * Decides how `workspace` is snapshotted (manual §17.1), synchronously:
 * - `off` (default): no snapshots;
 * - `auto`: native when the workspace is inside a git repository (and not ignored by it),
 *   else shadow;
 * - `native`: the repository's `.git`, with a per-session index and `refs/agent/<session>/…`;
 * - `shadow`: a separate repository in `<workspace>/.agent/vcs`.
 *
 * When git is not found every mode becomes `off` with a `reason` (write-conflict detection keeps
 * working: it does not depend on git).
 *
 * @param workspace The workspace folder (must exist unless the mode is `off`).
 * @param options See {@link ResolveVcsOptions}.
 * @returns The plan for `SessionVcs`.
 * @throws {VcsError} `bad_option` for an unknown mode, a bad size cap or a missing workspace;
 *   `unsafe_root` when the workspace is `/` or the home folder (snapshotting those filled disks
 *   elsewhere; research notes §10.1); `not_a_repository` for `native` outside a repository or
 *   in a folder the repository ignores.
 * @example
 * ```ts
 * import { resolveVcsPlan } from "@zqagent/core/vcs";
 * const plan = resolveVcsPlan(".", { mode: "auto" });
 * console.log(plan.mode, plan.reason);
 * ```
 */
export function resolveVcsPlan(workspace: string, options: ResolveVcsOptions = {}): VcsPlan {
  const requested = options.mode ?? "off";
  if (!MODES.includes(requested)) {
    throw new VcsError(
      `Cannot resolve the vcs plan: mode ${JSON.stringify(requested)} is not off, auto, native ` +
        "or shadow",
      "bad_option",
    );
  }
  const maxFileBytes = options.maxFileBytes ?? DEFAULT_VCS_MAX_FILE_BYTES;
  if (!Number.isFinite(maxFileBytes) || maxFileBytes <= 0) {
    throw new VcsError(
      `Cannot resolve the vcs plan: maxFileBytes ${maxFileBytes} is not a positive number`,
      "bad_option",
    );
  }
  if (typeof workspace !== "string" || workspace.trim() === "") {
    throw new VcsError("Cannot resolve the vcs plan: workspace is required", "bad_option");
  }
  let ws = path.resolve(workspace);
  const off = (reason: string): VcsPlan => ({
    mode: "off",
    requested,
    workspace: ws,
    gitDir: null,
    workTree: null,
    git: null,
    reason,
    maxFileBytes,
  });
  if (requested === "off") return off("vcs mode is off");
  try {
    ws = fs.realpathSync(ws);
  } catch {
    throw new VcsError(
      `Cannot resolve the vcs plan: workspace ${ws} does not exist`,
      "bad_option",
    );
  }
  if (!fs.statSync(ws).isDirectory()) {
    throw new VcsError(`Cannot resolve the vcs plan: ${ws} is not a folder`, "bad_option");
  }
  if (ws === path.parse(ws).root || ws === realHome()) {
    throw new VcsError(
      `Cannot snapshot ${ws}: it is the file-system root or the home folder; use a project folder`,
      "unsafe_root",
    );
  }
  const git = options.gitPath ? which(options.gitPath) : which("git");
  if (!git) {
    return off(
      `git was not found${options.gitPath ? ` at ${options.gitPath}` : " on the PATH"}; ` +
        "snapshots are off (write-conflict detection still works)",
    );
  }
  let repo: { gitDir: string; top: string } | null = null;
  if (requested !== "shadow") {
    const out = gitSync(git, ["rev-parse", "--absolute-git-dir", "--show-toplevel"], ws);
    const lines = out?.split("\n").filter((l) => l !== "") ?? [];
    if (lines.length === 2) {
      const ignored = gitSync(git, ["check-ignore", "-q", "--", "."], ws) !== null;
      if (!ignored) repo = { gitDir: lines[0], top: fs.realpathSync(lines[1]) };
    }
  }
  if (requested === "native" && !repo) {
    throw new VcsError(
      `Cannot snapshot ${ws} in native mode: it is not inside a git repository (or the ` +
        'repository ignores it); use mode "auto" or "shadow"',
      "not_a_repository",
    );
  }
  if (repo) {
    return {
      mode: "native",
      requested,
      workspace: ws,
      gitDir: repo.gitDir,
      workTree: repo.top,
      git,
      reason: `the workspace is inside the git repository ${repo.top}`,
      maxFileBytes,
    };
  }
  return {
    mode: "shadow",
    requested,
    workspace: ws,
    gitDir: path.join(ws, ".agent", "vcs"),
    workTree: ws,
    git,
    reason: requested === "shadow"
      ? "shadow mode was asked for"
      : "the workspace is not a git repository: a shadow repository is used",
    maxFileBytes,
  };
}

/** Encodes a session id as one safe ref-name component (`[A-Za-z0-9_-]`, others as `%XX`). */
function encodeSessionId(sessionId: string): string {
  if (typeof sessionId !== "string" || sessionId === "") {
    throw new VcsError("Cannot name the session's refs: sessionId is empty", "bad_option");
  }
  let out = "";
  for (const byte of new TextEncoder().encode(sessionId)) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9_-]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/**
 * The git ref of a session (manual §17.2: `refs/agent/<id>`), or of one of its turns with
 * changes. Characters outside `[A-Za-z0-9_-]` in the id are written as `%XX` so any id is a
 * valid, unambiguous ref component.
 *
 * @param sessionId The session id.
 * @param turn A turn number (from 1), for that turn's commit.
 * @returns `refs/agent/<id>` or `refs/agent/<id>/turns/<turn>`.
 * @throws {VcsError} `bad_option` for an empty id or a turn that is not a positive integer.
 * @example
 * ```ts
 * import { agentRef } from "@zqagent/core/vcs";
 * agentRef("tenant-42-session-7", 2); // "refs/agent/tenant-42-session-7/turns/2"
 * ```
 */
export function agentRef(sessionId: string, turn?: number): string {
  const base = `refs/agent/${encodeSessionId(sessionId)}`;
  if (turn === undefined) return base;
  if (!Number.isInteger(turn) || turn < 1) {
    throw new VcsError(`Cannot name turn ${turn}: turns are numbered from 1`, "bad_option");
  }
  return `${base}/turns/${turn}`;
}

/**
 * The per-session index file: `<gitDir>/agent/<id>.index`. It is kept between turns so files
 * that did not change are not hashed again; the user's own index is never used.
 *
 * @param plan A plan from {@link resolveVcsPlan}.
 * @param sessionId The session id.
 * @returns Absolute path of the index file.
 * @throws {VcsError} `off` when the plan is off; `bad_option` for an empty id.
 * @example
 * ```ts
 * import { resolveVcsPlan, sessionIndexPath } from "@zqagent/core/vcs";
 * const plan = resolveVcsPlan(".", { mode: "auto" });
 * if (plan.mode !== "off") console.log(sessionIndexPath(plan, "s1"));
 * ```
 */
export function sessionIndexPath(plan: VcsPlan, sessionId: string): string {
  if (plan.mode === "off" || !plan.gitDir) {
    throw new VcsError(`Cannot locate the session index: ${plan.reason}`, "off");
  }
  return path.join(plan.gitDir, "agent", `${encodeSessionId(sessionId)}.index`);
}
