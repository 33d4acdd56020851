/**
 * Private path guard of the VCS subsystem: the checks that keep snapshots and restores inside
 * the workspace when folders have been swapped for symbolic links (or files) since a snapshot.
 *
 * Rules (issue 7 follow-up, DESIGN §6): no path is read, hashed, written, deleted or chmod-ed
 * through a symlinked ancestor; a write never follows a link at the final component (the link
 * itself is replaced); and the real path of every touched file's parent stays inside the
 * workspace. Node has no `openat`/`O_NOFOLLOW` walk, so the checks are made just before each
 * operation (and again right before a restore's final rename); a process racing the restore
 * could still swap a folder in that short window.
 *
 * @module
 */
import fs from "node:fs/promises";
import path from "node:path";

/** Why a path cannot be touched safely: its ancestor `at` is a symbolic link or not a folder. */
export interface BlockedPath {
  /** Workspace-relative path of the first ancestor that is not a real folder. */
  at: string;
  /** `link`: a symbolic link; `file`: a file or other non-folder. */
  kind: "link" | "file";
}

/** Raised by {@link WorkspaceGuard} when a path cannot be touched safely; callers report it. */
export class UnsafePathError extends Error {
  /** Always `"UnsafePathError"`. */
  override name = "UnsafePathError";
}

/** Human-readable reason for a {@link BlockedPath}. */
export function blockedReason(block: BlockedPath): string {
  return block.kind === "link"
    ? `its parent folder ${block.at} is now a symbolic link`
    : `${block.at} is now a file where a folder must be`;
}

type Kind = "dir" | "absent" | "link" | "file";

/** Checks and prepares workspace-relative paths (`/`-separated) under one workspace root. */
export class WorkspaceGuard {
  readonly #root: string;
  readonly #cache = new Map<string, Kind>();
  #realRoot: Promise<string> | null = null;

  /** @param root The workspace (absolute). */
  constructor(root: string) {
    this.#root = root;
  }

  async #kind(rel: string): Promise<Kind> {
    let kind = this.#cache.get(rel);
    if (kind) return kind;
    const st = await fs.lstat(path.join(this.#root, rel)).catch(() => null);
    kind = !st ? "absent" : st.isSymbolicLink() ? "link" : st.isDirectory() ? "dir" : "file";
    this.#cache.set(rel, kind);
    return kind;
  }

  /**
   * The first ancestor of `rel` that is not a real folder, or `null` when every existing
   * ancestor is one (missing ancestors are fine: nothing lies beyond them). Only ancestors
   * already known to be real folders are looked through. Results are cached per guard, so
   * make a new guard when the disk may have changed.
   */
  async blockedAncestor(rel: string): Promise<BlockedPath | null> {
    const parts = rel.split("/");
    let prefix = "";
    for (let i = 0; i < parts.length - 1; i++) {
      prefix = prefix ? `${prefix}/${parts[i]}` : parts[i];
      const kind = await this.#kind(prefix);
      if (kind === "absent") return null;
      if (kind === "link" || kind === "file") return { at: prefix, kind };
    }
    return null;
  }

  /**
   * Creates the missing parent folders of `rel` one by one, never through a link, and checks
   * that the parent's real path is inside the workspace.
   *
   * @returns The parent folder (absolute).
   * @throws {UnsafePathError} When an ancestor is a link or not a folder, or the parent's real
   *   path leaves the workspace.
   */
  async makeParents(rel: string): Promise<string> {
    const parts = rel.split("/");
    let dir = this.#root;
    let prefix = "";
    for (let i = 0; i < parts.length - 1; i++) {
      prefix = prefix ? `${prefix}/${parts[i]}` : parts[i];
      dir = path.join(dir, parts[i]);
      let st = await fs.lstat(dir).catch(() => null);
      if (!st) {
        await fs.mkdir(dir).catch((e: { code?: string }) => {
          if (e.code !== "EEXIST") throw e;
        });
        st = await fs.lstat(dir);
      }
      if (st.isSymbolicLink()) {
        throw new UnsafePathError(blockedReason({ at: prefix, kind: "link" }));
      }
      if (!st.isDirectory()) throw new UnsafePathError(blockedReason({ at: prefix, kind: "file" }));
    }
    this.#cache.clear();
    await this.checkInside(dir);
    return dir;
  }

  /**
   * Checks that the real path of `dir` (absolute) is the workspace or inside it.
   *
   * @throws {UnsafePathError} When it is not (or `dir` cannot be resolved).
   */
  async checkInside(dir: string): Promise<void> {
    this.#realRoot ??= fs.realpath(this.#root);
    const root = await this.#realRoot;
    const real = await fs.realpath(dir).catch(() => null);
    if (real === null || (real !== root && !real.startsWith(root + path.sep))) {
      const rel = path.relative(this.#root, dir).split(path.sep).join("/") || ".";
      throw new UnsafePathError(`the real path of ${rel} is outside the workspace`);
    }
  }

  /**
   * Deletes the file or link `rel` itself (never a link's target, never a folder), after
   * checking its ancestors again.
   *
   * @throws {UnsafePathError} When an ancestor is a link or not a folder.
   */
  async removeFile(rel: string): Promise<void> {
    this.#cache.clear();
    const block = await this.blockedAncestor(rel);
    if (block) throw new UnsafePathError(blockedReason(block));
    const file = path.join(this.#root, rel);
    if (!(await fs.lstat(file).catch(() => null))) return;
    await this.checkInside(path.dirname(file));
    await fs.unlink(file).catch((e: { code?: string }) => {
      if (e.code !== "ENOENT") throw e;
    });
  }
}
