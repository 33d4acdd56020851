/**
 * `FileLogHook`: file-level persistence and recovery of a session (manual §11.3–11.4, DESIGN §6).
 *
 * Two files per session in `stateDir`:
 * - `<sessionId>.jsonl`: the event log, append-only, one JSON object `{type, data, time}` per
 *   line, written synchronously as events happen. A torn last line (a crash in the middle of a
 *   write) is skipped when reading and never glued to the next line.
 * - `<sessionId>_state.json`: the checkpoint ({@link SavedState}), written atomically (a
 *   temporary file, fsync, rename), so a crash leaves the previous or the new checkpoint, never a
 *   mix.
 *
 * Both are private to their owner: files mode 0600, `stateDir` 0700 when the hook creates it
 * (they are written through `FileSessionStore`, which sets the modes).
 *
 * ## When to call `saveState`
 *
 * Checkpoint at every durable point: after `run()` added the user message (`turn_start`), when a
 * model reply is complete (`assistant_message`: its pending tool calls are in `engine.messages`
 * from then on, before any approver is called), on `permission_required` or from inside the
 * approver before waiting for a person, on every `tool_finished`, on `iteration_end` and
 * `turn_end`, and when the process is about to exit. {@link FileLogHook.attach} does exactly
 * that for you. On restart, {@link FileLogHook.loadState} reconciles the checkpoint with the
 * event log: a tool call the log shows as finished is never run again (its recorded outcome is
 * given to the model), one the log shows as started but not finished is reported to the model as
 * interrupted ("may have partly run"), and only calls that never started stay pending, for
 * `engine.resume()` to evaluate again through the permission engine and the approver.
 *
 * @module
 */
import { CHECKPOINT_EVENT_TYPES as CHECKPOINT_EVENTS } from "./events.ts";
import { safeJson } from "../_internal/safe_json.ts";
import fs from "node:fs";
import path from "node:path";
import type { Message, ToolCall } from "../providers/mod.ts";
import type { Mode } from "../permissions/mod.ts";
import type { EngineHook } from "./hooks.ts";
import type { TurnEngine } from "./turn_engine.ts";
// --- distributed sessions (issue 11): writes go through the file store ---
import { FileSessionStore } from "../store/file_store.ts";
import { CHECKPOINT_SCHEMA_VERSION } from "../store/types.ts";
// --- end distributed sessions ---

/** A session checkpoint (manual §11.3, every field of its `SavedState`). */
export interface SavedState {
  /** The session id. */
  sessionId: string;
  /** The engine's model when saved. */
  model: string;
  /** The whole history (`engine.messages`). */
  messages: Message[];
  /** `engine.compactionState` when saved. */
  compaction: Record<string, unknown> | null;
  /** When it was saved (ISO 8601). */
  savedAt: string;
  /** Session name, when the host named it. */
  name?: string;
  /** Who named it. */
  nameSource?: "auto" | "user";
  /** Turns run so far, as the host counts them. */
  taskCount?: number;
  /** `engine.permissions.mode`. */
  permissionMode?: string;
  /** Tools allowed for the session ("always allow this tool"). */
  allowTools?: string[];
  /** Executables allowed for the session ("always allow this command"). */
  allowCommands?: string[];
  /**
   * Layout version of the checkpoint (`CHECKPOINT_SCHEMA_VERSION` from now on; files written
   * before it existed have none and load as version 0). Issue 11.
   */
  schemaVersion?: number;
  /** `seq` of the last event of the log the checkpoint includes (issue 11). */
  seq?: number;
  /**
   * `data.seq` of the last event the engine emitted (`engine.eventSeq`; not the log's `seq`,
   * which also counts host lines such as `paused`). {@link FileLogHook.loadState} raises it to
   * the highest `data.seq` in the event log, and {@link FileLogHook.applyState} continues the
   * numbering from it, so event `seq` never goes back across a restart (DESIGN §3).
   */
  eventSeq?: number;
}

/** Host fields stored with a checkpoint (manual §11.3: `{ name, nameSource, taskCount }`). */
export interface SaveStateExtra {
  /** Session name. */
  name?: string;
  /** Who named it. */
  nameSource?: "auto" | "user";
  /** Turns run so far. */
  taskCount?: number;
}

/** One line of the event log. */
export interface LoggedEvent {
  /** Event type (an `EventType` value, or `paused` / `resumed`). */
  type: string;
  /** The event's data. */
  data: Record<string, unknown>;
  /** When it was logged (ISO 8601). */
  time: string;
}

const SESSION_ID_RE = /^[A-Za-z0-9._-]{1,200}$/;

function checkSessionId(sessionId: unknown, what: string): string {
  if (typeof sessionId !== "string" || !SESSION_ID_RE.test(sessionId) || /^\.+$/.test(sessionId)) {
    throw new TypeError(
      `Cannot ${what}: sessionId ${JSON.stringify(sessionId)} must be 1–200 letters, digits, ` +
        "'.', '_' or '-' (it names files)",
    );
  }
  return sessionId;
}

/**
 * Persists a session as an event log and checkpoints (manual §11.3). Use it as the engine's hook
 * (alone or in a `CompositeHook`); it records every event.
 *
 * @example Persist and restore a session
 * ```ts
 * import { createDefaultEngine, FileLogHook } from "@zqagent/core";
 *
 * const sessionId = "s-42";
 * const stateDir = "/var/lib/myapp/sessions";
 * const saved = FileLogHook.loadState(sessionId, stateDir);
 * const hook = new FileLogHook(sessionId, stateDir);
 * const engine = createDefaultEngine({ workspace: ".", messages: saved?.messages, hook });
 * if (saved) FileLogHook.applyState(engine, saved); // mode, allowlists, compaction state
 * hook.attach(engine); // checkpoints at every durable point
 * for await (const _ of engine.resume()) { } // finishes a turn a crash cut short
 * ```
 */
export class FileLogHook implements EngineHook {
  /** The session id. */
  readonly sessionId: string;
  /** The folder holding the files. */
  readonly stateDir: string;
  #engine: TurnEngine | undefined;
  #extra: SaveStateExtra & Record<string, unknown> = {};
  #lastError: unknown = undefined;

  /**
   * Creates the hook (synchronous; files are created on first write).
   *
   * @param sessionId Session id; names the files, so only letters, digits, `.`, `_`, `-`.
   * @param stateDir Folder of the files (created when missing). Use one per tenant (manual §11.3).
   * @throws {TypeError} When `sessionId` is not a safe file name or `stateDir` is empty.
   */
  constructor(sessionId: string, stateDir: string) {
    this.sessionId = checkSessionId(sessionId, "create FileLogHook");
    if (typeof stateDir !== "string" || stateDir === "") {
      throw new TypeError("Cannot create FileLogHook: stateDir is required");
    }
    this.stateDir = stateDir;
  }

  /** `<stateDir>/<sessionId>.jsonl`. */
  get logPath(): string {
    return path.join(this.stateDir, `${this.sessionId}.jsonl`);
  }

  /** `<stateDir>/<sessionId>_state.json`. */
  get statePath(): string {
    return path.join(this.stateDir, `${this.sessionId}_state.json`);
  }

  /** The last error of an automatic checkpoint or a log write, if any (hooks never throw). */
  get lastError(): unknown {
    return this.#lastError;
  }

  /**
   * Appends a line to the event log (synchronously).
   *
   * @param type Event type.
   * @param data Event data.
   * @throws {Error} When the log cannot be written (the file-system error).
   */
  #append(type: string, data: Record<string, unknown>): void {
    // Issue 11: through the file store, which numbers each line (`seq`) and keeps a torn last
    // line alone on its line.
    const payload = JSON.parse(safeJson(data)) as Record<string, unknown>;
    FileSessionStore.forDir(this.stateDir).appendLocal(this.sessionId, [{ kind: type, payload }]);
  }

  /** Records every event (the engine calls it for each one; see `EngineHook.onEvent`). */
  onEvent(type: string, data: Record<string, unknown>): void {
    try {
      this.#append(type, data);
    } catch (err) {
      this.#lastError = err;
    }
    if (this.#engine && CHECKPOINT_EVENTS.has(type)) {
      try {
        this.saveState(this.#engine);
      } catch (err) {
        this.#lastError = err;
      }
    }
  }

  /**
   * Records that the host paused the session (not part of `EngineHook`; call it yourself,
   * manual §11.3).
   *
   * @param info Anything worth keeping (reason, who).
   */
  onPaused(info: Record<string, unknown> = {}): void {
    try {
      this.#append("paused", info);
    } catch (err) {
      this.#lastError = err;
    }
  }

  /**
   * Records that the host resumed the session (see {@link FileLogHook.onPaused}).
   *
   * @param info Anything worth keeping.
   */
  onResumed(info: Record<string, unknown> = {}): void {
    try {
      this.#append("resumed", info);
    } catch (err) {
      this.#lastError = err;
    }
  }

  /**
   * Saves checkpoints automatically at every durable point (see the module doc) from now on,
   * with `extra` (and whatever a later {@link FileLogHook.saveState} call passes) included.
   *
   * @param engine The session's engine.
   * @param extra Host fields to store.
   * @returns This hook.
   */
  attach(engine: TurnEngine, extra: SaveStateExtra & Record<string, unknown> = {}): this {
    this.#engine = engine;
    this.#extra = { ...this.#extra, ...extra };
    return this;
  }

  /**
   * Writes the checkpoint `<sessionId>_state.json` atomically (synchronous).
   *
   * @param engine The session's engine: history, model, compaction state and permissions
   *   (`permissionMode`, `allowTools`, `allowCommands`) are taken from it.
   * @param extra Host fields (`name`, `nameSource`, `taskCount`, …); remembered for later
   *   automatic checkpoints.
   * @returns What was saved.
   * @throws {Error} When the folder cannot be written (the file-system error); the previous
   *   checkpoint is then left as it was.
   */
  saveState(engine: TurnEngine, extra: SaveStateExtra & Record<string, unknown> = {}): SavedState {
    this.#extra = { ...this.#extra, ...extra };
    const state: SavedState = {
      ...this.#extra,
      sessionId: this.sessionId,
      model: engine.model,
      messages: engine.messages,
      compaction: { ...engine.compactionState } as Record<string, unknown>,
      savedAt: new Date().toISOString(),
      permissionMode: engine.permissions.mode,
      allowTools: engine.permissions.sessionAllowedTools(),
      allowCommands: engine.permissions.sessionAllowedCommands(),
      eventSeq: engine.eventSeq,
    };
    // Issue 11: through the file store (atomic write, with `schemaVersion` and `seq`).
    const json = JSON.parse(safeJson(state)) as Record<string, unknown>;
    const cp = FileSessionStore.forDir(this.stateDir).writeCheckpointLocal(this.sessionId, json);
    return {
      ...state,
      messages: [...state.messages],
      schemaVersion: CHECKPOINT_SCHEMA_VERSION,
      seq: cp.seq,
    };
  }

  /**
   * Reads the event log; unreadable lines (a torn last line) are skipped.
   *
   * @param sessionId Session id.
   * @param stateDir Folder of the files.
   * @returns The events in order; `[]` when there is no log.
   */
  static readEvents(sessionId: string, stateDir: string): LoggedEvent[] {
    let text: string;
    try {
      checkSessionId(sessionId, "read the event log");
      text = fs.readFileSync(path.join(stateDir, `${sessionId}.jsonl`), "utf8");
    } catch {
      return [];
    }
    const out: LoggedEvent[] = [];
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      try {
        const e = JSON.parse(line);
        if (e && typeof e.type === "string" && e.data && typeof e.data === "object") out.push(e);
      } catch {
        // a torn line: skipped
      }
    }
    return out;
  }

  /**
   * Loads the checkpoint of a session and reconciles it with the event log (see the module
   * doc): tool calls left without results get the outcome the log recorded, or an "interrupted,
   * may have partly run" result when the log shows they started; calls that never started stay
   * pending for `engine.resume()`.
   *
   * @param sessionId Session id.
   * @param stateDir Folder of the files.
   * @returns The state, or `null` — never an exception — when the file is missing, unreadable
   *   or not a checkpoint.
   */
  static loadState(sessionId: string, stateDir: string): SavedState | null {
    let state: SavedState;
    try {
      checkSessionId(sessionId, "load state");
      const raw = JSON.parse(
        fs.readFileSync(path.join(stateDir, `${sessionId}_state.json`), "utf8"),
      );
      if (!raw || typeof raw !== "object" || !Array.isArray(raw.messages)) return null;
      if (!raw.messages.every((m: unknown) => m && typeof m === "object" && "role" in m)) {
        return null;
      }
      state = raw as SavedState;
      state.sessionId = typeof raw.sessionId === "string" ? raw.sessionId : sessionId;
      state.model = typeof raw.model === "string" ? raw.model : "";
      state.compaction = raw.compaction && typeof raw.compaction === "object"
        ? raw.compaction
        : null;
    } catch {
      return null;
    }
    const events = FileLogHook.readEvents(sessionId, stateDir);
    // The log runs ahead of the checkpoint (deltas, events after the last durable point): the
    // restored engine must number its events after the last one logged.
    const eventSeq = lastEventSeq(events, state.eventSeq);
    if (eventSeq > 0) state.eventSeq = eventSeq;
    else delete state.eventSeq;
    try {
      reconcile(state.messages, events);
    } catch {
      // the checkpoint alone is still usable
    }
    return state;
  }

  /**
   * Restores the parts of a saved state that live outside the history (manual §11.3 "Al
   * restaurar"): permission mode, tools and commands allowed for the session, the compaction
   * state, and the event numbering (`eventSeq`: the engine's next event gets a higher `data.seq`
   * than any the session emitted before, DESIGN §3). Pass the history itself as `messages` when
   * creating the engine.
   *
   * @param engine The restored session's engine.
   * @param state A state from {@link FileLogHook.loadState}.
   */
  static applyState(engine: TurnEngine, state: SavedState): void {
    if (typeof state.permissionMode === "string") {
      try {
        engine.permissions.mode = state.permissionMode as Mode;
      } catch {
        // an unknown mode keeps the engine's
      }
    }
    for (const t of state.allowTools ?? []) engine.permissions.allowToolForSession(t);
    for (const c of state.allowCommands ?? []) engine.permissions.allowCommandForSession(c);
    if (state.compaction) engine.restoreCompactionState(state.compaction);
    engine.restoreEventSeq(state.eventSeq);
  }
}

/**
 * The highest event `data.seq` known: `saved` (a checkpoint's `eventSeq`) or any in `events`;
 * 0 when there is none. Non-integer values are ignored.
 */
function lastEventSeq(events: readonly LoggedEvent[], saved: unknown): number {
  let max = typeof saved === "number" && Number.isSafeInteger(saved) && saved > 0 ? saved : 0;
  for (const e of events) {
    const seq = e.data.seq;
    if (typeof seq === "number" && Number.isSafeInteger(seq) && seq > max) max = seq;
  }
  return max;
}

/** Gives pending calls whose fate the log knows their result (see {@link FileLogHook.loadState}). */
function reconcile(messages: Message[], events: LoggedEvent[]): void {
  let ai = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === "assistant") {
      ai = i;
      break;
    }
    if (messages[i].role !== "tool") return;
  }
  if (ai < 0) return;
  const calls = (messages[ai].tool_calls ?? []) as ToolCall[];
  const answered = new Set(messages.slice(ai + 1).map((m) => m.tool_call_id));
  const pending = calls.filter((c) => !answered.has(c.id));
  if (pending.length === 0) return;
  const ids = new Set(pending.map((c) => c.id));
  // Only events after the assistant message that proposed these calls count (ids may repeat
  // across turns on some servers).
  let from = -1;
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    if (e.type !== "assistant_message") continue;
    const full = (e.data.toolCallsFull ?? []) as ToolCall[];
    if (full.some((c) => ids.has(c.id))) {
      from = i;
      break;
    }
  }
  if (from < 0) return;
  const started = new Set<string>();
  const finished = new Map<string, Record<string, unknown>>();
  for (const e of events.slice(from + 1)) {
    const id = e.data.reqId;
    if (typeof id !== "string" || !ids.has(id)) continue;
    if (e.type === "tool_started") started.add(id);
    if (e.type === "tool_finished") finished.set(id, e.data);
  }
  for (const call of pending) {
    const done = finished.get(call.id);
    let content: string | undefined;
    if (done) {
      content = JSON.stringify({
        status: done.status,
        recovered: true,
        note: "This tool call finished before the process stopped, but only the start of its " +
          "result was recorded. Do not run it again unless you need the full output.",
        result_preview: done.result_preview ?? "",
        ...(done.reason ? { reason: done.reason } : {}),
      });
    } else if (started.has(call.id)) {
      content = JSON.stringify({
        error: "The process stopped while this tool was running; it may have partly run. " +
          "Check its effects before running it again.",
        error_type: "interrupted",
      });
    }
    if (content !== undefined) {
      messages.push({
        role: "tool",
        tool_call_id: call.id,
        name: call.function.name,
        content,
        recovered: true,
      });
    }
  }
}
