/**
 * Per-turn snapshots (manual §17) as both server modes use them: a session's {@link SessionVcs}
 * in its tenant's workspace, and the bodies of `GET /sessions/:id/turns` and
 * `GET /sessions/:id/turns/:n/diff`.
 *
 * @module
 */
import fs from "node:fs";
import { resolveVcsPlan, sessionIndexPath, SessionVcs } from "../../mod.ts";
import { HttpError } from "./_http.ts";
import type { ServerConfig } from "./config.ts";

/** A session's snapshots for reading, from {@link readSessionVcs}. */
export interface SessionVcsReader {
  /** True when snapshots are on (`VCS_MODE` is not `off` and git can be used). */
  enabled: boolean;
  /** The session's snapshots; `null` when off or when the session has none yet. */
  vcs: SessionVcs | null;
}

/** `GET /sessions/:id/turns`: whether snapshots are on, and the turns that changed files. */
export interface TurnsBody {
  /** True when snapshots are on. */
  enabled: boolean;
  /** The turns with changes, numbered from 1 (manual §17.2). */
  turns: {
    turn: number;
    status: string;
    /** When the turn was recorded, in ms since the epoch. */
    time: number;
    files: { path: string; change: string; from?: string }[];
  }[];
}

/**
 * Opens a session's snapshots in `workspace` (the engine's `VcsHook` and the turns routes use
 * handles of the same session, which share their state in one process).
 *
 * @param workspace The tenant's workspace (must exist unless `mode` is `off`).
 * @param mode `VCS_MODE`.
 * @param sessionId Names the session's refs (`refs/agent/<id>/…`).
 * @returns The handle, or `null` when the mode is `off` or git is missing.
 * @throws {VcsError} When the plan cannot be made (`native` outside a repository, a workspace
 *   that is `/` or the home folder).
 */
export function openSessionVcs(
  workspace: string,
  mode: ServerConfig["vcsMode"],
  sessionId: string,
): SessionVcs | null {
  if (mode === "off") return null;
  const plan = resolveVcsPlan(workspace, { mode });
  return plan.mode === "off" ? null : new SessionVcs(plan, sessionId);
}

/**
 * A session's snapshots for a process that only reads them (the multi-worker front end): the
 * state is read again from git on each call (workers in other processes take the snapshots),
 * and nothing is written — a session with no snapshot index yet has no turns, and its shadow
 * repository is not created.
 *
 * @param workspace The tenant's workspace.
 * @param mode `VCS_MODE`.
 * @param sessionId The session.
 */
export async function readSessionVcs(
  workspace: string,
  mode: ServerConfig["vcsMode"],
  sessionId: string,
): Promise<SessionVcsReader> {
  if (mode === "off") return { enabled: false, vcs: null };
  // No workspace yet: no turn ran, so none was snapshotted.
  if (!fs.existsSync(workspace)) return { enabled: true, vcs: null };
  let vcs: SessionVcs | null;
  try {
    vcs = openSessionVcs(workspace, mode, sessionId);
  } catch {
    return { enabled: false, vcs: null }; // the workers cannot snapshot it either
  }
  if (!vcs) return { enabled: false, vcs: null };
  // Every snapshot that recorded a change went through the session's index file.
  if (!fs.existsSync(sessionIndexPath(vcs.plan, sessionId))) return { enabled: true, vcs: null };
  await vcs.reload();
  return { enabled: true, vcs };
}

/**
 * The body of `GET /sessions/:id/turns`.
 *
 * @param vcs The session's snapshots, or `null`.
 * @param enabled Whether snapshots are on (default: `vcs` is not `null`).
 * @throws {VcsError} `git_failed`.
 */
export async function turnsBody(
  vcs: SessionVcs | null,
  enabled: boolean = vcs !== null,
): Promise<TurnsBody> {
  const turns = vcs ? await vcs.listTurns() : [];
  return {
    enabled,
    turns: turns.map((t) => ({ turn: t.turn, status: t.status, time: t.time, files: t.files })),
  };
}

/**
 * The body of `GET /sessions/:id/turns/:n/diff`: `{turn, patch}`.
 *
 * @param vcs The session's snapshots, or `null`.
 * @param n The turn number as written in the path.
 * @throws {HttpError} 404 when snapshots are off, or the session has no such turn.
 */
export async function turnDiffBody(
  vcs: SessionVcs | null,
  n: string,
): Promise<{ turn: number; patch: string }> {
  const turn = Number(n);
  if (!vcs || !Number.isInteger(turn) || turn < 1) throw new HttpError(404, "not found");
  try {
    return { turn, patch: await vcs.diffTurn(turn) };
  } catch {
    throw new HttpError(404, "not found");
  }
}
