/**
 * `StoreHook`: records an engine's events in a {@link SessionStore} under a lease, with
 * checkpoints at every durable point, and `restoreSession`, which rebuilds the history from a
 * loaded session (issue 11).
 *
 * - Events are written in order through one serial writer. Streamed deltas
 *   (`assistant_delta`, `reasoning_delta`) are coalesced — consecutive deltas of one request
 *   become one stored event about every `deltaFlushMs` (default 50 ms) — so late viewers can
 *   replay them without one row per token.
 * - The engine awaits {@link StoreHook.flush} before every tool runs (write-ahead: the
 *   `tool_started` event is durable before the side effect), so a tool never runs when its
 *   start could not be recorded (a lost lease).
 * - A checkpoint is a snapshot taken synchronously when its event happens and stored with that
 *   event's `seq`, so "checkpoint + events after it" always describes one moment.
 *
 * @module
 */
import { CHECKPOINT_EVENT_TYPES as CHECKPOINT_EVENTS } from "../engine/mod.ts";
import type { Message, ToolCall } from "../providers/mod.ts";
import type { EngineHook } from "../engine/hooks.ts";
import type { TurnEngine } from "../engine/turn_engine.ts";
import type { ToolRegistry } from "../tools/registry.ts";
import {
  CHECKPOINT_SCHEMA_VERSION,
  type InboxItem,
  type Lease,
  type LoadedSession,
  type NewEvent,
  type SessionStore,
} from "./types.ts";

const DELTAS = new Set(["assistant_delta", "reasoning_delta"]);

/** Options of {@link StoreHook}. */
export interface StoreHookOptions {
  /** Coalescing window of streamed deltas in ms (default 50). */
  deltaFlushMs?: number;
  /** Called once with the first write error (then the hook stops writing). */
  onError?: (err: unknown) => void;
}

type Op = { event: NewEvent } | { checkpoint: Record<string, unknown> };

/**
 * Records an engine's events in a store (see the module doc). Use one per session and lease.
 *
 * @example
 * ```ts
 * import { MemorySessionStore, StoreHook } from "@zqagent/core/store";
 * const store = new MemorySessionStore();
 * await store.create("s1");
 * const lease = (await store.acquire("s1", { ownerId: "w1" }))!;
 * const hook = new StoreHook(store, lease);
 * // const engine = createDefaultEngine({ …, hook }); hook.attach(engine);
 * hook.onEvent("turn_start", { input: "hi" });
 * await hook.flush();
 * ```
 */
export class StoreHook implements EngineHook {
  /** The store. */
  readonly store: SessionStore;
  /** The lease every write is made under. */
  readonly lease: Lease;
  #ops: Op[] = [];
  #delta: {
    kind: string;
    reqId: unknown;
    data: Record<string, unknown>;
    text: string;
    seq: unknown;
  } | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #chain: Promise<void> = Promise.resolve();
  #scheduled = false;
  #failed: unknown = undefined;
  #detached = false;
  #engine: TurnEngine | undefined;
  #extra: Record<string, unknown> = {};
  #lastSeq = 0;
  #deltaMs: number;
  #onError: ((err: unknown) => void) | undefined;

  /**
   * Creates the hook (nothing is written until the first event).
   *
   * @param store The store.
   * @param lease The session's lease (from `acquire` or `claimRunnable`).
   */
  constructor(store: SessionStore, lease: Lease, options: StoreHookOptions = {}) {
    this.store = store;
    this.lease = lease;
    this.#deltaMs = options.deltaFlushMs ?? 50;
    this.#onError = options.onError;
  }

  /** `seq` of the last event written. */
  get lastSeq(): number {
    return this.#lastSeq;
  }

  /** The write error that stopped the hook, if any (usually a `LeaseLostError`). */
  get error(): unknown {
    return this.#failed;
  }

  /**
   * True once {@link StoreHook.detach} was called: the engine's later events are not recorded
   * (the session was parked, its lease lost, or its worker stopped), so whoever runs the
   * session next goes on from what was recorded before.
   */
  get detached(): boolean {
    return this.#detached;
  }

  /**
   * Stores checkpoints of `engine` at every durable point from now on.
   *
   * @param engine The session's engine.
   * @param extra Host fields stored in every checkpoint (see {@link StoreHook.setExtra}).
   * @returns This hook.
   */
  attach(engine: TurnEngine, extra: Record<string, unknown> = {}): this {
    this.#engine = engine;
    this.#extra = { ...this.#extra, ...extra };
    return this;
  }

  /** Merges host fields into later checkpoints (`inboxCursor`, `name`, `taskCount`, …). */
  setExtra(extra: Record<string, unknown>): void {
    this.#extra = { ...this.#extra, ...extra };
  }

  /** Stops recording: later events are ignored (after parking or losing the lease). */
  detach(): void {
    this.#detached = true;
    this.#delta = null;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#ops = [];
  }

  /**
   * A snapshot of the engine now (`SavedState` fields plus host fields), as stored in
   * checkpoints.
   *
   * @throws {Error} When no engine is attached.
   */
  snapshot(): Record<string, unknown> {
    const engine = this.#engine;
    if (!engine) throw new Error("Cannot snapshot: no engine attached (call attach first)");
    return JSON.parse(JSON.stringify({
      ...this.#extra,
      sessionId: this.lease.sessionId,
      model: engine.model,
      messages: engine.messages,
      compaction: { ...engine.compactionState },
      savedAt: new Date().toISOString(),
      permissionMode: engine.permissions.mode,
      allowTools: engine.permissions.sessionAllowedTools(),
      allowCommands: engine.permissions.sessionAllowedCommands(),
      eventSeq: engine.eventSeq,
    }));
  }

  /**
   * The stored `tool_finished` carries the result the model got (`content`, already within the
   * result budget), so a session rebuilt from the log after a crash gives the model the whole
   * result, not the event's 200-character preview.
   */
  #withResult(data: Record<string, unknown>): Record<string, unknown> {
    const messages = this.#engine?.messages ?? [];
    for (let i = messages.length - 1; i >= 0; i--) {
      const m = messages[i];
      if (m.role === "tool" && m.tool_call_id === data.reqId) {
        return typeof m.content === "string" ? { ...data, content: m.content } : data;
      }
    }
    return data;
  }

  /** Records an event (the engine calls it for each one). */
  onEvent(type: string, data: Record<string, unknown>): void {
    if (this.#detached || this.#failed) return;
    if (DELTAS.has(type)) {
      const d = this.#delta;
      if (d && d.kind === type && d.reqId === data.reqId) {
        d.text += typeof data.text === "string" ? data.text : "";
        // The stored event carries the `seq` of its last part, so the log knows the engine's
        // numbering got that far (restoreSession continues after it).
        d.seq = data.seq;
      } else {
        this.#flushDelta();
        this.#delta = {
          kind: type,
          reqId: data.reqId,
          data,
          text: typeof data.text === "string" ? data.text : "",
          seq: data.seq,
        };
      }
      this.#timer ??= setTimeout(() => {
        this.#timer = undefined;
        this.#flushDelta();
        this.#kick();
      }, this.#deltaMs);
      return;
    }
    this.#flushDelta();
    const idemKey = typeof data.idemKey === "string" ? data.idemKey : undefined;
    const payload = type === "tool_finished" ? this.#withResult(data) : data;
    this.#ops.push({ event: { kind: type, payload, ...(idemKey ? { idemKey } : {}) } });
    if (this.#engine && CHECKPOINT_EVENTS.has(type)) {
      try {
        this.#ops.push({ checkpoint: this.snapshot() });
      } catch {
        // an unserialisable history: the events still go out
      }
    }
    this.#kick();
  }

  /**
   * Appends an event of the host's (`paused`, `parked`, …) through the same ordered writer.
   *
   * @param kind Event kind.
   * @param payload Its data.
   * @param idemKey Optional idempotency key.
   */
  record(kind: string, payload: Record<string, unknown>, idemKey?: string): void {
    if (this.#detached || this.#failed) return;
    this.#flushDelta();
    this.#ops.push({ event: { kind, payload, ...(idemKey ? { idemKey } : {}) } });
    this.#kick();
  }

  /**
   * Writes everything recorded so far.
   *
   * @throws {LeaseLostError | Error} The write error that stopped the hook.
   */
  async flush(): Promise<void> {
    this.#flushDelta();
    this.#kick();
    await this.#chain;
    if (this.#failed) throw this.#failed;
  }

  #flushDelta(): void {
    const d = this.#delta;
    if (!d) return;
    this.#delta = null;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const payload: Record<string, unknown> = { ...d.data, text: d.text };
    if (d.seq !== undefined) payload.seq = d.seq;
    this.#ops.push({ event: { kind: d.kind, payload } });
  }

  #kick(): void {
    if (this.#scheduled || this.#ops.length === 0) return;
    this.#scheduled = true;
    this.#chain = this.#chain.then(async () => {
      this.#scheduled = false;
      await this.#drain();
    });
  }

  async #drain(): Promise<void> {
    while (this.#ops.length && !this.#failed && !this.#detached) {
      const events: NewEvent[] = [];
      while (this.#ops.length && "event" in this.#ops[0]) {
        events.push((this.#ops.shift() as { event: NewEvent }).event);
      }
      try {
        if (events.length) {
          const r = await this.store.append(this.lease, events);
          this.#lastSeq = r.lastSeq;
        }
        const next = this.#ops[0];
        if (next && "checkpoint" in next) {
          this.#ops.shift();
          // Only the latest of consecutive checkpoints matters.
          if (!(this.#ops[0] && "checkpoint" in this.#ops[0])) {
            await this.store.putCheckpoint(this.lease, {
              seq: this.#lastSeq,
              schemaVersion: CHECKPOINT_SCHEMA_VERSION,
              state: next.checkpoint,
            });
          }
        }
      } catch (err) {
        this.#failed = err;
        this.#ops = [];
        try {
          this.#onError?.(err);
        } catch {
          // best-effort
        }
      }
    }
  }
}

/** Options of {@link restoreSession}. */
export interface RestoreSessionOptions {
  /** Tool table: a started tool with no `idempotent` flag in its event is looked up here. */
  registry?: ToolRegistry;
}

/** A session rebuilt from its store. */
export interface RestoredSession {
  /** The history for `createDefaultEngine({ messages })`. */
  messages: Message[];
  /** The checkpoint's state (`SavedState` fields and host fields); `{}` without checkpoint. */
  state: Record<string, unknown>;
  /** Inputs taken from the inbox whose turn never started (run them in order). */
  pendingInputs: InboxItem[];
  /** Tool calls that started but never finished and were not idempotent (not re-run). */
  interrupted: string[];
  /**
   * True when the last turn's answer is complete but its `turn_end` was never recorded (the
   * process stopped right after the reply): nothing is left to run, but viewers still wait for
   * a `turn_end`.
   */
  answeredWithoutEnd: boolean;
  /**
   * True when a `cancel` was taken while the last turn ran and that turn never recorded its
   * `turn_end` (the process stopped in between): the turn is to be ended as interrupted, not
   * resumed.
   */
  cancelled: boolean;
}

/**
 * Rebuilds a session's history from `store.load()`: the checkpoint, then the events after it
 * replayed onto it (user message, model reply, tool results). A tool call that started but did
 * not finish gets a synthetic "interrupted, not re-run" result unless it is idempotent (then it
 * stays pending and `engine.resume()` runs it again with the same idempotency key); calls that
 * never started stay pending for `resume()` to evaluate. `state.eventSeq` is raised to the
 * highest event `data.seq` stored, so an engine given the state through
 * `FileLogHook.applyState` numbers its events after them (DESIGN §3).
 *
 * @param loaded What `store.load()` returned.
 */
export function restoreSession(
  loaded: LoadedSession,
  options: RestoreSessionOptions = {},
): RestoredSession {
  const state = structuredClone(loaded.checkpoint?.state ?? {}) as Record<string, unknown>;
  const messages: Message[] = Array.isArray(state.messages) ? state.messages as Message[] : [];
  const started = new Map<string, boolean>();
  const turnTasks = new Set<string>();
  const inputs: InboxItem[] = [];
  let retriable = false;
  // A checkpoint taken mid-turn leaves its last message without a turn-end mark.
  let turnOpen = messages.length > 0 && !messages.at(-1)!.turnEnd;
  let cancelled = false;
  // Event numbering goes on after the last event the engine emitted (DESIGN §3).
  let eventSeq = seqOf(state.eventSeq);
  for (const e of loaded.events) {
    const d = e.payload;
    eventSeq = Math.max(eventSeq, seqOf(d.seq));
    switch (e.kind) {
      case "turn_start":
        if (typeof d.taskId === "string") turnTasks.add(d.taskId);
        if (d.kind === undefined) messages.push({ role: "user", content: String(d.input ?? "") });
        retriable = false;
        turnOpen = true;
        break;
      case "assistant_message": {
        const calls = (d.toolCallsFull ?? []) as ToolCall[];
        const m: Message = { role: "assistant", content: d.text ? String(d.text) : null };
        if (calls.length) m.tool_calls = calls;
        if (d.reasoning) m.reasoning_content = String(d.reasoning);
        messages.push(m);
        break;
      }
      case "tool_started":
        if (typeof d.reqId === "string") {
          const spec = options.registry?.get(String(d.name));
          const idem = typeof d.idempotent === "boolean"
            ? d.idempotent
            : spec?.metadata.idempotent ?? false;
          started.set(d.reqId, idem);
        }
        break;
      case "tool_finished":
        if (typeof d.reqId === "string") {
          started.delete(d.reqId);
          messages.push({
            role: "tool",
            tool_call_id: d.reqId,
            name: String(d.name ?? ""),
            // Logs written before the result was stored hold only the event's preview.
            content: typeof d.content === "string" ? d.content : JSON.stringify({
              status: d.status,
              recovered: true,
              note: "This tool call finished before the process stopped, but only the start " +
                "of its result was recorded. Do not run it again unless you need the full output.",
              result_preview: d.result_preview ?? "",
            }),
            recovered: true,
          });
        }
        break;
      case "error":
        retriable = d.retriable === true;
        break;
      case "turn_end": {
        const last = messages.at(-1);
        if (last) last.turnEnd = { status: d.status, retriable };
        turnOpen = false;
        cancelled = false;
        break;
      }
      case "inbox":
        if (d.kind === "user_input" || d.kind === "retry") {
          inputs.push({
            id: Number(d.id),
            kind: d.kind,
            payload: (d.payload ?? {}) as Record<string, unknown>,
            idemKey: String(d.idemKey ?? ""),
            at: e.at,
          });
        } else if (d.kind === "cancel") {
          // A cancel drops the inputs queued before it and ends the turn that was running.
          inputs.length = 0;
          if (turnOpen) cancelled = true;
        }
        break;
    }
  }
  // Calls of the last reply that started and never finished.
  const interrupted: string[] = [];
  const lastAssistant = [...messages].reverse().find((m) => m.role === "assistant");
  const answered = new Set(messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id));
  for (const call of (lastAssistant?.tool_calls ?? []) as ToolCall[]) {
    if (answered.has(call.id) || !started.has(call.id) || started.get(call.id)) continue;
    interrupted.push(call.id);
    messages.push({
      role: "tool",
      tool_call_id: call.id,
      name: call.function.name,
      content: JSON.stringify({
        error: "Interrupted, not re-run: the process running this tool stopped before it " +
          "finished, so it may have partly run. Check its effects before running it again.",
        error_type: "interrupted",
      }),
      recovered: true,
    });
  }
  if (eventSeq > 0) state.eventSeq = eventSeq;
  const cursor = Number(state.inboxCursor ?? 0);
  const pendingInputs = inputs.filter((i) => i.id > cursor && !turnTasks.has(`in_${i.id}`));
  const last = messages.at(-1);
  const answeredWithoutEnd = !!last && last.role === "assistant" && !last.turnEnd &&
    !(last.tool_calls?.length);
  return { messages, state, pendingInputs, interrupted, answeredWithoutEnd, cancelled };
}

/** A stored event `seq` as a number; 0 when missing or not a non-negative safe integer. */
function seqOf(value: unknown): number {
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? value : 0;
}
