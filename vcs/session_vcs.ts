/**
 * `SessionVcs`: per-turn snapshots of a workspace with git, listing, diffing and restoring
 * them (manual §17.2; DESIGN §6 for the exact restore contract).
 *
 * How a snapshot is taken (research notes §1.5): the session keeps its own index file between
 * turns, so git's stat cache stays warm and only changed files are hashed. Changed tracked files
 * come from `git diff-files` and new files from `git ls-files --others --exclude-standard` (both
 * honour the repository's ignore rules), run side by side; files over the size cap are skipped;
 * the rest go to `git update-index`, then `git write-tree`. Commits are made with
 * `git commit-tree` and pinned by refs under `refs/agent/<session>/`. HEAD, the user's index and
 * staging area are never touched, and nothing ever runs `git clean`.
 *
 * Symbolic links: a path beyond a link in a parent position (a folder swapped for a link) counts
 * as deleted in a snapshot and the link itself is recorded; a restore never reads, hashes,
 * writes or deletes through such a link (it reports the path in `kept` with a reason), replaces
 * a link at the final component instead of writing its target, and checks that the real path of
 * each written file's folder is inside the workspace (`_workspace_guard.ts`). Paths cross to git
 * NUL-separated (`-z`) only, so any file name works.
 *
 * @module
 */
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { Git, splitNul } from "./_git.ts";
import { VcsError } from "./errors.ts";
import { agentRef, sessionIndexPath, type VcsPlan } from "./plan.ts";
import {
  type BlockedPath,
  blockedReason,
  UnsafePathError,
  WorkspaceGuard,
} from "./_workspace_guard.ts";

/** A file left out of a snapshot because it is larger than the plan's `maxFileBytes`. */
export interface VcsSkippedFile {
  /** Workspace-relative path. */
  path: string;
  /** Its size in bytes. */
  bytes: number;
}

/** What {@link SessionVcs.commitTurn} did. */
export interface VcsCommitResult {
  /** Always 0 (manual §17.2): the real number comes from {@link SessionVcs.listTurns}. */
  turn: 0;
  /** True when the turn changed files and was recorded. */
  changed: boolean;
  /** The turn's commit, or `null` when nothing changed. */
  commit: string | null;
  /** Files skipped by the size cap. */
  skipped: VcsSkippedFile[];
}

/** One changed path of a turn. */
export interface VcsFileChange {
  /** Workspace-relative path (the new path of a rename). */
  path: string;
  /** What happened to it. */
  change: "added" | "modified" | "deleted" | "renamed" | "type_changed";
  /** The old path of a rename. */
  from?: string;
}

/** A turn with changes, as listed by {@link SessionVcs.listTurns}. */
export interface VcsTurn {
  /** Number among the session's turns with changes, from 1 (manual §17.2). */
  turn: number;
  /** Commit of the state after the turn. */
  commit: string;
  /** Commit of the state before the turn. */
  parent: string;
  /** The turn's end status (`completed`, `error`, `interrupted`, …). */
  status: string;
  /** When the turn was recorded (ms since the epoch). */
  time: number;
  /** The paths the turn changed. */
  files: VcsFileChange[];
  /** Files the snapshot skipped because of the size cap. */
  skipped: VcsSkippedFile[];
}

/** Options of {@link SessionVcs.restoreTurn}. */
export interface RestoreOptions {
  /** Restore only these workspace-relative paths (files or folders). Default: every path. */
  paths?: string[];
  /** Report what would happen without changing anything (default false). */
  dryRun?: boolean;
}

/** A path a restore left alone, and why (see {@link RestoreResult.kept}). */
export interface VcsKeptPath {
  /** Workspace-relative path. */
  path: string;
  /** Why it was not restored, e.g. "its parent folder cfg is now a symbolic link". */
  reason: string;
}

/** What {@link SessionVcs.restoreTurn} did (or would do, with `dryRun`). DESIGN §6. */
export interface RestoreResult {
  /** Paths now as they were after the turn (sorted). */
  restored: string[];
  /** Those of `restored` whose content someone else changed since the session's last snapshot. */
  overwritten: string[];
  /** Requested paths that exist neither in the turn's state nor on disk. */
  missing: string[];
  /**
   * Paths left alone although the turn's state differs: files that would have to be deleted
   * but were changed since the last snapshot (deleting them would lose someone's work), that
   * a folder now occupies, or that cannot be reached safely (a parent folder is now a symbolic
   * link or a file: writing through it could leave the workspace). Sorted.
   */
  kept: string[];
  /** Why each path of `kept` was left alone, in the same order. */
  keptReasons: VcsKeptPath[];
  /** Commit holding the overwritten files' previous content (`null` when none). */
  backup: string | null;
}

interface TreeEntry {
  mode: string;
  sha: string;
}

/**
 * State shared by every `SessionVcs` of one session in this process (same workspace and index
 * file), so two handles — e.g. the engine's `VcsHook` and the host's `new SessionVcs(...)` of
 * manual §17.2 — queue on one chain and see the same turns.
 */
interface SessionState {
  queue: Promise<unknown>;
  ready: boolean;
  /** Tree of the index as last written (skips write-tree when nothing changed). */
  indexTree: string | null;
  /** Latest snapshot commit and its tree. */
  latest: { commit: string; tree: string } | null;
  /** The snapshot taken by beginTurn, waiting for commitTurn. */
  before: { commit: string; tree: string } | null;
  turnCount: number;
}

function newState(): SessionState {
  return {
    queue: Promise.resolve(),
    ready: false,
    indexTree: null,
    latest: null,
    before: null,
    turnCount: 0,
  };
}

const SESSIONS = new Map<string, SessionState>();

const EMPTY: VcsCommitResult = { turn: 0, changed: false, commit: null, skipped: [] };
const EXCLUDED_SEGMENTS = new Set([".git", ".agent", "node_modules"]);

function excluded(rel: string): boolean {
  if (rel.endsWith("/")) return true; // a nested repository listed as a folder
  return rel.split("/").some((s) => EXCLUDED_SEGMENTS.has(s));
}

/**
 * Snapshots one session's turns in a workspace (manual §17.2). All methods are serialised on
 * one promise chain, so calls made without `await` (as {@link VcsHook} does) run in order;
 * {@link SessionVcs.idle} waits for them. Handles of the same session (same workspace and id)
 * in one process share that chain and their state, so the host's `new SessionVcs(...)` of manual
 * §17.2 queues behind the engine's `VcsHook`. Where another process may snapshot the session
 * too (workers sharing sessions), call {@link SessionVcs.reload} before using a handle again.
 *
 * @example List, diff and restore (manual §17.2)
 * ```ts
 * import { resolveVcsPlan, SessionVcs } from "@zqagent/core/vcs";
 * const vcs = new SessionVcs(resolveVcsPlan(".", { mode: "auto" }), "session-1");
 * const turns = await vcs.listTurns();
 * if (turns.length > 0) {
 *   console.log(await vcs.diffTurn(1));
 *   const preview = await vcs.restoreTurn(1, { dryRun: true });
 *   console.log(preview.overwritten);
 * }
 * ```
 */
export class SessionVcs {
  /** The plan this session uses. */
  readonly plan: VcsPlan;
  /** The session id. */
  readonly sessionId: string;
  readonly #git: Git | null;
  readonly #gitTop: Git | null;
  readonly #index: string | null;
  readonly #ref: string;
  readonly #s: SessionState;

  /**
   * Opens the session `sessionId` on `plan` (no git runs until the first call).
   *
   * @param plan From `resolveVcsPlan` (an `off` plan makes every method a no-op or an error).
   * @param sessionId Names the refs (`refs/agent/<id>/…`) and the index file.
   * @throws {VcsError} `bad_option` for an empty session id.
   */
  constructor(plan: VcsPlan, sessionId: string) {
    this.plan = plan;
    this.sessionId = sessionId;
    this.#ref = agentRef(sessionId);
    if (plan.mode === "off" || !plan.git || !plan.gitDir || !plan.workTree) {
      this.#s = newState();
      this.#git = null;
      this.#gitTop = null;
      this.#index = null;
      return;
    }
    this.#index = sessionIndexPath(plan, sessionId);
    const env = { GIT_DIR: plan.gitDir, GIT_WORK_TREE: plan.workTree, GIT_INDEX_FILE: this.#index };
    this.#git = new Git(plan.git, { cwd: plan.workspace, env });
    this.#gitTop = new Git(plan.git, { cwd: plan.workTree, env });
    const key = `${plan.workspace}\0${this.#index}`;
    let state = SESSIONS.get(key);
    if (!state) SESSIONS.set(key, state = newState());
    this.#s = state;
  }

  /** True when snapshots are taken (the plan is not `off`). */
  get enabled(): boolean {
    return this.#git !== null;
  }

  /** Resolves when every call made so far (and any queued meanwhile) has finished. */
  async idle(): Promise<void> {
    let tail: Promise<unknown>;
    do {
      tail = this.#s.queue;
      await tail;
    } while (tail !== this.#s.queue);
  }

  /**
   * Forgets what this process knows of the session — its latest snapshot, turn count and index
   * tree — so the next call reads them again from git. For a session another process may have
   * snapshotted since this one last did: a worker taking over a session that ran elsewhere, or
   * a reader in another process than the one taking the snapshots. Without it, a process keeps
   * numbering turns from what it read first. The state is shared by the session's handles in
   * this process, so they all reload; queued like every call. A no-op when snapshots are off.
   */
  reload(): Promise<void> {
    if (!this.#git) return Promise.resolve();
    return this.#enqueue(() => {
      this.#s.ready = false;
      this.#s.indexTree = null;
      this.#s.latest = null;
      this.#s.before = null;
      this.#s.turnCount = 0;
      return Promise.resolve();
    });
  }

  #enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#s.queue.then(fn);
    this.#s.queue = run.catch(() => {});
    return run;
  }

  /**
   * Records the workspace's state before a turn. Changes made since the last snapshot (by the
   * user, between turns) are recorded separately, so they are not counted as the turn's.
   * A no-op when snapshots are off.
   *
   * @returns The files skipped by the size cap.
   * @throws {VcsError} `git_failed`.
   */
  beginTurn(): Promise<VcsSkippedFile[]> {
    if (!this.#git) return Promise.resolve([]);
    return this.#enqueue(async () => {
      const { tree, skipped } = await this.#snapshot();
      this.#s.before = await this.#advance(tree, "agent: state before a turn");
      return skipped;
    });
  }

  /**
   * Records the workspace's state after a turn; the turn is listed only when it changed files
   * (manual §17.2). Without a `beginTurn` first, the last snapshot is the "before" state.
   *
   * @param status The turn's end status (`completed`, `error`, `interrupted`…).
   * @returns `{turn: 0, changed, commit, skipped}`.
   * @throws {VcsError} `git_failed`, also when another process recorded a turn of the session
   *   since this one read its refs (see {@link SessionVcs.reload}): turns are never overwritten.
   */
  commitTurn(status: string): Promise<VcsCommitResult> {
    if (!this.#git) return Promise.resolve({ ...EMPTY, skipped: [] });
    return this.#enqueue(async () => {
      const { tree, skipped } = await this.#snapshot();
      const before = this.#s.before ?? this.#s.latest;
      this.#s.before = null;
      if (!before) {
        await this.#advance(tree, "agent: session base");
        return { ...EMPTY, skipped };
      }
      if (before.tree === tree) return { ...EMPTY, skipped };
      const n = this.#s.turnCount + 1;
      const body = [`Status: ${status}`, ...skipped.map((s) => `Skipped: ${JSON.stringify(s)}`)];
      const commit = await this.#commitTree(
        tree,
        before.commit,
        `agent turn ${n}: ${status}\n\n${body.join("\n")}\n`,
      );
      // `create`: a turn another process recorded under this number (it took the session over
      // since this process last read the refs) is never overwritten; the call fails instead.
      await this.#git!.run(["update-ref", "--stdin"], {
        stdin: `create ${agentRef(this.sessionId, n)} ${commit}\n` +
          `update ${this.#ref}/latest ${commit}\n`,
      });
      this.#s.turnCount = n;
      this.#s.latest = { commit, tree };
      return { turn: 0, changed: true, commit, skipped };
    });
  }

  /**
   * Lists the session's turns that changed files, numbered from 1 (manual §17.2).
   *
   * @throws {VcsError} `git_failed`.
   */
  listTurns(): Promise<VcsTurn[]> {
    if (!this.#git) return Promise.resolve([]);
    return this.#enqueue(async () => {
      await this.#load();
      const out = await this.#git!.run([
        "for-each-ref",
        "--format=%(refname)%00%(objectname)%00%(parent)%00%(creatordate:unix)%00" +
        "%(contents:subject)%00%(contents:body)%01",
        `${this.#ref}/turns/`,
      ]);
      const turns: VcsTurn[] = [];
      for (const record of out.stdout.split("\x01")) {
        const [ref, commit, parent, time, subject, body] = record.replace(/^\n/, "").split("\0");
        if (!ref || !commit) continue;
        const n = Number(ref.slice(ref.lastIndexOf("/") + 1));
        if (!Number.isInteger(n) || n < 1) continue;
        const skipped: VcsSkippedFile[] = [];
        for (const line of (body ?? "").split("\n")) {
          if (!line.startsWith("Skipped: ")) continue;
          try {
            skipped.push(JSON.parse(line.slice(9)));
          } catch {
            // a hand-edited message: ignore the line
          }
        }
        turns.push({
          turn: n,
          commit,
          parent: parent.split(" ")[0] ?? "",
          status: /^agent turn \d+: (.*)$/.exec(subject ?? "")?.[1] ?? "",
          time: Number(time) * 1000,
          files: await this.#changes(parent.split(" ")[0], commit),
          skipped,
        });
      }
      return turns.sort((a, b) => a.turn - b.turn);
    });
  }

  /**
   * The patch of turn `n` (`git diff` of its before and after states, renames detected;
   * manual §17.2 "git show --patch"), with workspace-relative paths.
   *
   * @param n Turn number from {@link SessionVcs.listTurns}.
   * @throws {VcsError} `off`, `bad_turn`, `git_failed`.
   */
  diffTurn(n: number): Promise<string> {
    return this.#enqueue(async () => {
      const turn = await this.#turnCommit(n, "diff");
      const out = await this.#git!.run([
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "-M",
        "--relative",
        `${turn}^`,
        turn,
      ]);
      return out.stdout;
    });
  }

  /**
   * Brings files back to their state after turn `n` (manual §17.2; DESIGN §6): only paths that
   * differ between that state and the session's latest snapshot are touched; a file no snapshot
   * of this session saw is never touched; never `git clean`. Files whose content changed since
   * the latest snapshot are listed in `overwritten` (their previous content is kept in the
   * `backup` commit); files that would have to be deleted but were changed since are kept,
   * and so are paths that cannot be reached without going through a symbolic link (each kept
   * path has its reason in `keptReasons`).
   *
   * @param n Turn number from {@link SessionVcs.listTurns}.
   * @param options `paths` to restore only some paths; `dryRun` to only report.
   * @returns `{restored, overwritten, missing, kept, backup}`.
   * @throws {VcsError} `off`, `bad_turn`, `bad_path` (a path outside the workspace),
   *   `git_failed`.
   */
  restoreTurn(n: number, options: RestoreOptions = {}): Promise<RestoreResult> {
    return this.#enqueue(async () => {
      const target = await this.#turnCommit(n, "restore");
      return await this.#restore(target, options);
    });
  }

  /**
   * Forgets the session: deletes its refs (`refs/agent/<id>/…`) and its index file. Files in
   * the workspace are not restored or changed (manual §17.2).
   *
   * @throws {VcsError} `git_failed`.
   */
  forget(): Promise<void> {
    if (!this.#git) return Promise.resolve();
    return this.#enqueue(async () => {
      const out = await this.#git!.run(["for-each-ref", "--format=%(refname)", `${this.#ref}/`]);
      const refs = out.stdout.split("\n").filter((r) => r !== "");
      if (refs.length > 0) {
        await this.#git!.run(["update-ref", "--stdin"], {
          stdin: refs.map((r) => `delete ${r}\n`).join(""),
        });
      }
      await fs.rm(this.#index!, { force: true });
      this.#s.ready = false;
      this.#s.indexTree = null;
      this.#s.latest = null;
      this.#s.before = null;
      this.#s.turnCount = 0;
    });
  }

  // --- internals ---

  async #turnCommit(n: number, what: string): Promise<string> {
    if (!this.#git) {
      throw new VcsError(`Cannot ${what} turn ${n}: ${this.plan.reason}`, "off");
    }
    await this.#load();
    if (!Number.isInteger(n) || n < 1 || n > this.#s.turnCount) {
      throw new VcsError(
        `Cannot ${what} turn ${n}: the session has ${this.#s.turnCount} turn(s) with changes, ` +
          "numbered from 1",
        "bad_turn",
      );
    }
    const out = await this.#git.run(["rev-parse", "--verify", "-q", agentRef(this.sessionId, n)], {
      okCodes: [0, 1],
    });
    const sha = out.stdout.trim();
    if (!sha) throw new VcsError(`Cannot ${what} turn ${n}: its ref is gone`, "bad_turn");
    return sha;
  }

  /** Reads the session's refs once (a new process resumes where the last one stopped). */
  async #load(): Promise<void> {
    if (this.#s.ready) return;
    const git = this.#git!;
    if (this.plan.mode === "shadow") {
      await fs.mkdir(this.plan.gitDir!, { recursive: true });
      try {
        await fs.access(path.join(this.plan.gitDir!, "HEAD"));
      } catch {
        await git.run(["init", "--quiet"]);
      }
    }
    await fs.mkdir(path.dirname(this.#index!), { recursive: true });
    const refs = await git.run([
      "for-each-ref",
      "--format=%(refname) %(objectname) %(tree)",
      `${this.#ref}/`,
    ]);
    this.#s.turnCount = 0;
    this.#s.latest = null;
    for (const line of refs.stdout.split("\n")) {
      const [ref, commit, tree] = line.split(" ");
      if (!ref) continue;
      if (ref === `${this.#ref}/latest`) this.#s.latest = { commit, tree };
      const m = /\/turns\/(\d+)$/.exec(ref);
      if (m) this.#s.turnCount = Math.max(this.#s.turnCount, Number(m[1]));
    }
    this.#s.ready = true;
  }

  /**
   * Native mode, first use: copy the user's index (keeping its mtime, so git's racy-entry
   * checks behave as for the original) so tracked files are not hashed again; drop excluded
   * paths from the copy.
   */
  async #seedIndex(): Promise<void> {
    const index = this.#index!;
    try {
      await fs.access(index);
      return;
    } catch {
      // not seeded yet
    }
    if (this.plan.mode !== "native") return;
    const userIndex = path.join(this.plan.gitDir!, "index");
    let stat;
    try {
      stat = await fs.stat(userIndex);
    } catch {
      return; // a repository without an index (no commit, nothing staged)
    }
    const tmp = `${index}.${randomBytes(4).toString("hex")}.tmp`;
    await fs.copyFile(userIndex, tmp);
    await fs.utimes(tmp, stat.atime, stat.mtime);
    await fs.rename(tmp, index);
    const listed = await this.#git!.run([
      "ls-files",
      "-z",
      "--full-name",
      "--",
      ":(top,glob)**/node_modules/**",
      ":(top,glob)**/.agent/**",
    ]);
    const drop = splitNul(listed.stdout);
    if (drop.length > 0) {
      // update-index takes plain paths relative to its working folder: run it from the top.
      await this.#gitTop!.run(["update-index", "--force-remove", "-z", "--stdin"], {
        stdin: drop.join("\0") + "\0",
      });
    }
  }

  /** Takes a snapshot into the session index; returns its tree. */
  async #snapshot(): Promise<{ tree: string; skipped: VcsSkippedFile[] }> {
    await this.#load();
    if (this.#s.indexTree === null) await this.#seedIndex();
    const git = this.#git!;
    const [modified, untracked] = await Promise.all([
      git.run(["diff-files", "--name-only", "--relative", "-z"]),
      git.run([
        "ls-files",
        "--others",
        "--exclude-standard",
        "--exclude=.agent/",
        "--exclude=node_modules/",
        "-z",
      ]),
    ]);
    const candidates = [...splitNul(modified.stdout), ...splitNul(untracked.stdout)]
      .filter((p) => !excluded(p));
    const skipped: VcsSkippedFile[] = [];
    const update: string[] = [];
    const forceRemove: string[] = [];
    const ws = this.plan.workspace;
    // A path beyond a symbolic link (a folder swapped for a link, or for a file) is gone as far
    // as the snapshot goes: git refuses to read it ("beyond a symbolic link"), and it must not
    // be looked at through the link. It is dropped; the link itself is snapshotted.
    const guard = new WorkspaceGuard(ws);
    const blockers = new Set<string>();
    for (let i = 0; i < candidates.length; i += 64) {
      const batch = candidates.slice(i, i + 64);
      const blocks = await Promise.all(batch.map((p) => guard.blockedAncestor(p)));
      const stats = await Promise.all(
        batch.map((p, j) => blocks[j] ? null : fs.lstat(path.join(ws, p)).catch(() => null)),
      );
      batch.forEach((p, j) => {
        const st = stats[j];
        const block = blocks[j];
        if (block) {
          forceRemove.push(p);
          if (!excluded(block.at)) blockers.add(block.at);
        } else if (st?.isDirectory()) forceRemove.push(p);
        else if (st?.isFile() && st.size > this.plan.maxFileBytes) {
          skipped.push({ path: p, bytes: st.size });
        } else update.push(p);
      });
    }
    const listed = new Set(update);
    for (const b of blockers) if (!listed.has(b)) update.push(b);
    if (forceRemove.length > 0) {
      await git.run(["update-index", "--force-remove", "-z", "--stdin"], {
        stdin: forceRemove.join("\0") + "\0",
      });
    }
    if (update.length > 0) {
      await git.run(["update-index", "--add", "--remove", "--replace", "-z", "--stdin"], {
        stdin: update.join("\0") + "\0",
      });
    }
    if (update.length > 0 || forceRemove.length > 0 || this.#s.indexTree === null) {
      this.#s.indexTree = (await git.run(["write-tree"])).stdout.trim();
    }
    return { tree: this.#s.indexTree, skipped };
  }

  /** Makes `tree` the session's latest snapshot (a new commit only when it changed). */
  async #advance(tree: string, message: string): Promise<{ commit: string; tree: string }> {
    if (this.#s.latest?.tree === tree) return this.#s.latest;
    const commit = await this.#commitTree(tree, this.#s.latest?.commit ?? null, message);
    await this.#git!.run(["update-ref", `${this.#ref}/latest`, commit]);
    this.#s.latest = { commit, tree };
    return this.#s.latest;
  }

  async #commitTree(tree: string, parent: string | null, message: string): Promise<string> {
    const args = ["commit-tree", tree];
    if (parent) args.push("-p", parent);
    const out = await this.#git!.run(args, { stdin: message });
    return out.stdout.trim();
  }

  async #changes(from: string, to: string): Promise<VcsFileChange[]> {
    const out = await this.#git!.run([
      "diff-tree",
      "-r",
      "-z",
      "-M",
      "--name-status",
      "--relative",
      from,
      to,
    ]);
    const parts = splitNul(out.stdout);
    const files: VcsFileChange[] = [];
    for (let i = 0; i < parts.length;) {
      const status = parts[i++];
      if (status.startsWith("R") || status.startsWith("C")) {
        const fromPath = parts[i++];
        const toPath = parts[i++];
        if (status.startsWith("R")) files.push({ path: toPath, change: "renamed", from: fromPath });
        else files.push({ path: toPath, change: "added" });
        continue;
      }
      const p = parts[i++];
      const change = status === "A"
        ? "added"
        : status === "D"
        ? "deleted"
        : status === "T"
        ? "type_changed"
        : "modified";
      files.push({ path: p, change });
    }
    return files;
  }

  /** Entries that differ between two commits, keyed by workspace-relative path. */
  async #differing(
    from: string,
    to: string,
    pathspecs: string[],
  ): Promise<Map<string, { a: TreeEntry | null; b: TreeEntry | null }>> {
    const args = ["diff-tree", "-r", "-z", "--no-renames", "--relative", from, to];
    if (pathspecs.length > 0) args.push("--", ...pathspecs);
    const out = await this.#git!.run(args, { env: { GIT_LITERAL_PATHSPECS: "1" } });
    const parts = splitNul(out.stdout);
    const map = new Map<string, { a: TreeEntry | null; b: TreeEntry | null }>();
    for (let i = 0; i + 1 < parts.length; i += 2) {
      // ":<modeA> <modeB> <shaA> <shaB> <status>"
      const [modeA, modeB, shaA, shaB] = parts[i].slice(1).split(" ");
      const zero = /^0+$/;
      map.set(parts[i + 1], {
        a: zero.test(modeA) ? null : { mode: modeA, sha: shaA },
        b: zero.test(modeB) ? null : { mode: modeB, sha: shaB },
      });
    }
    return map;
  }

  /**
   * The state of paths on disk, as git would store them: `ids` maps a path to its blob id,
   * `null` (absent) or `"dir"` (a folder); `blocked` holds the paths beyond a symbolic link (or
   * a file) in a parent position, which are never looked at. Files and links are hashed by
   * git itself through a throw-away index (`update-index --info-only -z`, then
   * `ls-files -s -z`), so names with newlines are safe and the repository's filters apply.
   */
  async #diskIds(
    paths: string[],
    guard: WorkspaceGuard,
  ): Promise<{ ids: Map<string, string | null>; blocked: Map<string, BlockedPath> }> {
    const ws = this.plan.workspace;
    const ids = new Map<string, string | null>();
    const blocked = new Map<string, BlockedPath>();
    const files: string[] = [];
    for (const p of paths) {
      const block = await guard.blockedAncestor(p);
      if (block) {
        blocked.set(p, block);
        continue;
      }
      const st = await fs.lstat(path.join(ws, p)).catch(() => null);
      if (!st) ids.set(p, null);
      else if (st.isDirectory()) ids.set(p, "dir");
      else files.push(p);
    }
    if (files.length === 0) return { ids, blocked };
    const env = { GIT_INDEX_FILE: `${this.#index}.probe-${randomBytes(4).toString("hex")}` };
    try {
      // --remove: a path that vanished meanwhile is dropped instead of failing the call.
      await this.#git!.run(["update-index", "--add", "--remove", "--info-only", "-z", "--stdin"], {
        stdin: files.join("\0") + "\0",
        env,
      });
      const out = await this.#git!.run(["ls-files", "-s", "-z"], { env });
      const found = new Map<string, string>();
      for (const record of splitNul(out.stdout)) {
        // "<mode> <sha> <stage>\t<path>"
        const tab = record.indexOf("\t");
        found.set(record.slice(tab + 1), record.slice(0, tab).split(" ")[1]);
      }
      for (const p of files) ids.set(p, found.get(p) ?? null);
    } finally {
      await fs.rm(env.GIT_INDEX_FILE, { force: true });
    }
    return { ids, blocked };
  }

  /** Reads blobs with one `git cat-file --batch`. */
  async #blobs(shas: string[]): Promise<Map<string, Uint8Array>> {
    const unique = [...new Set(shas)];
    const map = new Map<string, Uint8Array>();
    if (unique.length === 0) return map;
    const out = await this.#git!.runBytes(["cat-file", "--batch"], {
      stdin: unique.join("\n") + "\n",
    });
    const bytes = out.bytes!;
    let at = 0;
    for (const sha of unique) {
      const nl = bytes.indexOf(10, at);
      const header = new TextDecoder().decode(bytes.subarray(at, nl)).split(" ");
      const size = Number(header[2]);
      if (header[1] !== "blob" || !Number.isFinite(size)) {
        throw new VcsError(`Cannot read object ${sha}: ${header.join(" ")}`, "git_failed");
      }
      map.set(sha, bytes.slice(nl + 1, nl + 1 + size));
      at = nl + 1 + size + 1;
    }
    return map;
  }

  #normalisePath(p: string): string {
    const ws = this.plan.workspace;
    const abs = path.resolve(ws, p);
    const rel = path.relative(ws, abs);
    if (rel.startsWith("..") || path.isAbsolute(rel)) {
      throw new VcsError(`Cannot restore ${p}: it is outside the workspace ${ws}`, "bad_path");
    }
    return rel.split(path.sep).join("/") || ".";
  }

  async #restore(target: string, options: RestoreOptions): Promise<RestoreResult> {
    const git = this.#git!;
    const ws = this.plan.workspace;
    const requested = (options.paths ?? []).map((p) => this.#normalisePath(p));
    const latest = this.#s.latest!;
    const diff = await this.#differing(target, latest.commit, requested);
    const guard = new WorkspaceGuard(ws);
    const { ids: disk, blocked } = await this.#diskIds([...diff.keys()], guard);
    const restored: string[] = [];
    const overwritten: string[] = [];
    const reasons = new Map<string, string>();
    const deletes: string[] = [];
    const writes: { path: string; entry: TreeEntry }[] = [];
    const plan = (
      p: string,
      want: TreeEntry | null,
      last: TreeEntry | null,
      now: string | null,
    ) => {
      if (now === (want?.sha ?? null)) {
        restored.push(p);
        return;
      }
      const changedSinceLatest = now !== (last?.sha ?? null);
      if (!want) {
        if (changedSinceLatest) reasons.set(p, "it was changed since the last snapshot");
        else {
          deletes.push(p);
          restored.push(p);
        }
      } else if (now === "dir") {
        reasons.set(p, "a folder is there now");
      } else {
        writes.push({ path: p, entry: want });
        restored.push(p);
        if (changedSinceLatest) overwritten.push(p);
      }
    };
    const beyond: [string, TreeEntry | null, TreeEntry | null, BlockedPath][] = [];
    for (const [p, { a: want, b: last }] of diff) {
      if (want?.mode === "160000" || last?.mode === "160000") continue; // nested repositories
      const block = blocked.get(p);
      if (block) beyond.push([p, want, last, block]);
      else plan(p, want, last, disk.get(p) ?? null);
    }
    // A path beyond a link (or a file) in a parent position is absent from the workspace; it
    // can be restored only when this restore deletes that link first. Otherwise it is kept:
    // writing or deleting it would go through the link, maybe outside the workspace.
    const deleted = new Set(deletes);
    for (const [p, want, last, block] of beyond) {
      if (deleted.has(block.at)) plan(p, want, last, null);
      else reasons.set(p, blockedReason(block));
    }
    const missing: string[] = [];
    for (const q of requested) {
      const inTarget = await git.run(["ls-tree", "-r", "-z", "--name-only", target, "--", q], {
        env: { GIT_LITERAL_PATHSPECS: "1" },
      });
      if (inTarget.stdout !== "" || q === ".") continue;
      // Not looked at through a link: beyond one, a path is not in the workspace.
      const onDisk = !(await guard.blockedAncestor(q)) &&
        await fs.lstat(path.join(ws, q)).then(() => true, () => false);
      if (!onDisk) missing.push(q);
    }
    let backup: string | null = null;
    if (!options.dryRun) {
      const existing = overwritten.filter((p) => disk.get(p) != null);
      if (existing.length > 0) backup = await this.#backup(existing, latest.commit);
      const blobs = await this.#blobs(writes.map((w) => w.entry.sha));
      const fail = (p: string, e: unknown): void => {
        // e.g. a link or a file now sits where a parent folder must be: leave it, report it
        restored.splice(restored.indexOf(p), 1);
        const o = overwritten.indexOf(p);
        if (o >= 0) overwritten.splice(o, 1);
        reasons.set(p, e instanceof UnsafePathError ? e.message : `Cannot write it: ${e}`);
      };
      for (const p of deletes) {
        try {
          await guard.removeFile(p);
          await this.#removeEmptyParents(p);
        } catch (e) {
          fail(p, e);
        }
      }
      for (const w of writes) {
        try {
          await this.#writeEntry(guard, w.path, w.entry, blobs.get(w.entry.sha)!);
        } catch (e) {
          fail(w.path, e);
        }
      }
    }
    const kept = [...reasons.keys()].sort();
    return {
      restored: restored.sort(),
      overwritten: overwritten.sort(),
      missing: missing.sort(),
      kept,
      keptReasons: kept.map((p) => ({ path: p, reason: reasons.get(p)! })),
      backup,
    };
  }

  /** Saves the current content of `paths` in a commit under `refs/agent/<id>/backups/`. */
  async #backup(paths: string[], parent: string): Promise<string> {
    const tmpIndex = `${this.#index}.backup-${randomBytes(4).toString("hex")}`;
    const env = { GIT_INDEX_FILE: tmpIndex };
    try {
      await this.#git!.run(["update-index", "--add", "-z", "--stdin"], {
        stdin: paths.join("\0") + "\0",
        env,
      });
      const tree = (await this.#git!.run(["write-tree"], { env })).stdout.trim();
      const listed = paths.map((p) => `Path: ${JSON.stringify(p)}`).join("\n");
      const commit = await this.#commitTree(
        tree,
        parent,
        `agent: content overwritten by a restore\n\n${listed}\n`,
      );
      const stamp = `${Date.now()}-${createHash("sha1").update(commit).digest("hex").slice(0, 8)}`;
      await this.#git!.run(["update-ref", `${this.#ref}/backups/${stamp}`, commit]);
      return commit;
    } finally {
      await fs.rm(tmpIndex, { force: true });
    }
  }

  /**
   * Writes one tree entry at `rel` through a temporary file and a rename, so a link at `rel`
   * is replaced (never followed); parents are created without following links and checked to
   * be inside the workspace, again right before the rename.
   */
  async #writeEntry(
    guard: WorkspaceGuard,
    rel: string,
    entry: TreeEntry,
    content: Uint8Array,
  ): Promise<void> {
    const dir = await guard.makeParents(rel);
    const file = path.join(dir, path.basename(rel));
    const tmp = path.join(dir, `.zqagent-restore-${randomBytes(6).toString("hex")}.tmp`);
    try {
      if (entry.mode === "120000") {
        await fs.symlink(new TextDecoder().decode(content), tmp);
      } else {
        const mode = entry.mode === "100755" ? 0o755 : 0o644;
        // "wx": O_CREAT|O_EXCL, so an existing link at the temporary name is never followed.
        const handle = await fs.open(tmp, "wx", mode);
        try {
          await handle.writeFile(content);
          await handle.chmod(mode);
        } finally {
          await handle.close();
        }
      }
      await guard.makeParents(rel);
      await fs.rename(tmp, file);
    } catch (e) {
      await fs.rm(tmp, { force: true });
      throw e;
    }
  }

  async #removeEmptyParents(rel: string): Promise<void> {
    let dir = path.dirname(rel);
    while (dir !== "." && dir !== "" && dir !== "/") {
      try {
        await fs.rmdir(path.join(this.plan.workspace, dir));
      } catch {
        return; // not empty (or gone): stop
      }
      dir = path.dirname(dir);
    }
  }
}
