/**
 * `SessionWorker`: the worker runtime of distributed sessions (issue 11). It claims runnable
 * sessions from a {@link SessionStore}, rebuilds each engine from the store, heartbeats its
 * leases, runs the session's turns (input from the inbox, one turn each, in order), and shuts
 * down cleanly.
 *
 * Approvals: the worker's approver opens the request in the store (any process may answer it
 * with `store.answerApproval`), then holds the turn — and its lease — for `approvalHoldMs`
 * (default 30 s), woken by the answer's notification or a poll. When nobody answers in time the
 * session is **parked**: a checkpoint is written, the lease released as `waiting_approval`, and
 * the engine dropped. The answer then makes the session runnable and any worker resumes it,
 * finding the decision already stored.
 *
 * Cancel: `store.submit(id, {kind: "cancel", …})` from any process interrupts the session's
 * running turn (the submit wakes the worker; without a push it is seen within `cancelPollMs`),
 * drops the inputs queued before the cancel, and closes the turn's open approvals as denied
 * (`by: "cancel"`). The turn ends with `interrupted` and `turn_end{status:"interrupted"}`; a
 * tool call that was running gets an "interrupted" result. A parked session, or one whose
 * worker died after taking the cancel, is resumed and interrupted at once (nothing runs).
 * Inputs submitted after the cancel run as usual. A `retry` item runs `engine.retry()` in its
 * place in the queue (the last turn again, when it ended with a retriable error).
 *
 * A session that cannot run is not retried forever: when the host's `createEngine` throws, or a
 * run fails three times in a row on a worker, an `error` event with the reason is stored and the
 * session is released as `failed` (new input makes it runnable again).
 *
 * A lease the heartbeat no longer returns (or a fenced write that fails) stops the session at
 * once: nothing more is written, the turn is interrupted, and the new owner carries on from the
 * store.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import { ApprovalOutcome, type Approver } from "../permissions/mod.ts";
import { CompositeHook } from "../engine/hooks.ts";
import { FileLogHook, type SavedState } from "../engine/file_log_hook.ts";
import type { Message } from "../providers/mod.ts";
import type { TurnEngine } from "../engine/turn_engine.ts";
import { restoreSession, StoreHook } from "./store_hook.ts";
import {
  CHECKPOINT_SCHEMA_VERSION,
  DEFAULT_LEASE_TTL_MS,
  type InboxItem,
  type Lease,
  LeaseLostError,
  type SessionStore,
} from "./types.ts";

/** What {@link SessionWorkerOptions.createEngine} gets. */
export interface EngineContext {
  /** The session. */
  sessionId: string;
  /** The history rebuilt from the store (pass it as `messages`). */
  messages: Message[];
  /** The checkpoint's state (`SavedState` fields and host fields). */
  state: Record<string, unknown>;
  /** The host data given to `store.create`. */
  meta: Record<string, unknown>;
}

/** Options of {@link SessionWorker}. */
export interface SessionWorkerOptions {
  /**
   * Builds the engine of a session (required). The worker adds its own hook (composed with the
   * engine's) and approver, and restores the permission mode, allowlists and compaction state.
   */
  createEngine: (ctx: EngineContext) => TurnEngine | Promise<TurnEngine>;
  /** This worker's id (default: random, unique per worker). */
  ownerId?: string;
  /** Lease lifetime in ms (default 30,000). */
  ttlMs?: number;
  /** Heartbeat interval in ms (default a third of `ttlMs`). */
  heartbeatMs?: number;
  /** How often to look for runnable sessions, in ms (default 1,000). */
  pollMs?: number;
  /** Sessions run at once (default 8). */
  maxConcurrent?: number;
  /** How long a turn waiting for approval keeps its lease before parking, in ms (default 30,000). */
  approvalHoldMs?: number;
  /** Poll interval while holding for an approval, in ms (default 2,000; notifications come first). */
  approvalPollMs?: number;
  /** Coalescing window of streamed deltas in ms (default 50). */
  deltaFlushMs?: number;
  /**
   * How often a running turn looks for a `cancel` in the inbox when no notification came, in ms
   * (default 2,000; a `submit` wakes it at once on stores with push).
   */
  cancelPollMs?: number;
  /** Errors that do not stop the worker (store down, a session that failed). */
  onError?: (err: unknown, sessionId?: string) => void;
}

/** Options of {@link SessionWorker.stop}. */
export interface StopOptions {
  /**
   * How long running sessions may go on finishing, in ms (default 10,000); after that they are
   * interrupted, without recording the interruption, and released as runnable for another
   * worker.
   */
  graceMs?: number;
}

/** Runs of a session that may fail in a row on one worker before it is marked `failed`. */
const MAX_TRIES = 3;

/** The host's `createEngine` threw: retrying at once would not help. */
class SessionSetupError extends Error {
  constructor(cause: unknown) {
    super(`Cannot build the session's engine: ${errorText(cause)}`, { cause });
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

interface Active {
  lease: Lease;
  engine?: TurnEngine;
  hook?: StoreHook;
  lost: boolean;
  parked: boolean;
  done: Promise<void>;
  /** Inputs taken from the inbox whose turn has not started, in order. */
  queue: InboxItem[];
  /** A cancel was taken for the running turn. */
  cancelled: boolean;
  /** Aborted when the running turn's stream ends (stops its approver's wait). */
  turnSignal?: AbortSignal;
}

/**
 * Claims runnable sessions and runs their turns (see the module doc).
 *
 * @example
 * ```ts
 * import { createDefaultEngine } from "@zqagent/core";
 * import { MemorySessionStore, SessionWorker } from "@zqagent/core/store";
 *
 * const store = new MemorySessionStore();
 * const worker = new SessionWorker(store, {
 *   createEngine: ({ messages }) =>
 *     createDefaultEngine({ workspace: ".", model: "gpt-4o-mini", messages }),
 * });
 * worker.start();
 * await store.create("s1");
 * await store.submit("s1", { kind: "user_input", payload: { text: "Hi" }, idemKey: "m1" });
 * // … later
 * await worker.stop();
 * ```
 */
export class SessionWorker {
  /** The store. */
  readonly store: SessionStore;
  /** This worker's id (the lease owner). */
  readonly ownerId: string;
  #o: Required<Omit<SessionWorkerOptions, "onError" | "ownerId">> & {
    onError?: SessionWorkerOptions["onError"];
  };
  #active = new Map<string, Active>();
  #running = false;
  #loop: Promise<void> | undefined;
  #beat: ReturnType<typeof setInterval> | undefined;
  #kick: (() => void) | undefined;
  #lastBeat = Date.now();
  #claiming = 0;
  #stopAc = new AbortController();
  /** Failed runs in a row per session (see {@link MAX_TRIES}). */
  #failures = new Map<string, number>();

  /**
   * Creates a worker (nothing runs until {@link SessionWorker.start}).
   *
   * @param store Where sessions live.
   * @throws {TypeError} When `createEngine` is missing.
   */
  constructor(store: SessionStore, options: SessionWorkerOptions) {
    if (typeof options?.createEngine !== "function") {
      throw new TypeError("Cannot create SessionWorker: createEngine is required");
    }
    this.store = store;
    this.ownerId = options.ownerId ?? `worker-${randomUUID().slice(0, 12)}`;
    const ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    this.#o = {
      createEngine: options.createEngine,
      ttlMs,
      heartbeatMs: options.heartbeatMs ?? Math.max(10, Math.floor(ttlMs / 3)),
      pollMs: options.pollMs ?? 1000,
      maxConcurrent: options.maxConcurrent ?? 8,
      approvalHoldMs: options.approvalHoldMs ?? 30_000,
      approvalPollMs: options.approvalPollMs ?? 2000,
      deltaFlushMs: options.deltaFlushMs ?? 50,
      cancelPollMs: options.cancelPollMs ?? 2000,
      onError: options.onError,
    };
  }

  /** Ids of the sessions this worker runs now. */
  get active(): string[] {
    return [...this.#active.keys()];
  }

  /** Starts claiming and heartbeating (does nothing when started). */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#beat = setInterval(() => void this.#heartbeat(), this.#o.heartbeatMs);
    this.#loop = this.#claimLoop();
  }

  /**
   * Stops claiming, lets running sessions finish for `graceMs`, then interrupts the rest and
   * releases them as runnable; stops the heartbeat. Resolves when nothing of the worker runs.
   */
  async stop(options: StopOptions = {}): Promise<void> {
    this.#running = false;
    this.#stopAc.abort();
    this.#kick?.();
    await this.#loop;
    const all = Promise.all([...this.#active.values()].map((a) => a.done));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const graced = await Promise.race([
      all.then(() => true),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(false), options.graceMs ?? 10_000))),
    ]);
    clearTimeout(timer);
    if (!graced) {
      for (const a of this.#active.values()) {
        a.hook?.detach();
        a.engine?.requestInterrupt();
        await this.store.release(a.lease, "runnable").catch(() => {});
        a.lost = true;
      }
      await all;
    }
    if (this.#beat) clearInterval(this.#beat);
    this.#beat = undefined;
  }

  /**
   * Claims what it can and runs it to the end (tests and hosts that drive the worker
   * themselves; no heartbeat unless started).
   *
   * @returns How many sessions it ran.
   */
  async runOnce(): Promise<number> {
    const free = this.#o.maxConcurrent - this.#active.size;
    if (free <= 0) return 0;
    const leases = await this.store.claimRunnable({
      ownerId: this.ownerId,
      ttlMs: this.#o.ttlMs,
      max: free,
    });
    await Promise.all(leases.map((l) => this.#start(l)));
    return leases.length;
  }

  async #claimLoop(): Promise<void> {
    while (this.#running) {
      try {
        if (this.#active.size < this.#o.maxConcurrent) {
          this.#claiming++;
          let leases: Lease[];
          try {
            leases = await this.store.claimRunnable({
              ownerId: this.ownerId,
              ttlMs: this.#o.ttlMs,
              max: this.#o.maxConcurrent - this.#active.size,
            });
            for (const l of leases) void this.#start(l);
          } finally {
            this.#claiming--;
          }
          if (leases.length) continue;
        }
      } catch (err) {
        this.#report(err);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, this.#o.pollMs);
        function done() {
          clearTimeout(t);
          resolve();
        }
        this.#kick = done;
      });
      this.#kick = undefined;
    }
  }

  async #heartbeat(): Promise<void> {
    if (this.#active.size === 0) {
      this.#lastBeat = Date.now();
      return;
    }
    try {
      const held = await this.store.heartbeat({ ownerId: this.ownerId, ttlMs: this.#o.ttlMs });
      this.#lastBeat = Date.now();
      const ids = new Set(held.map((l) => `${l.sessionId}#${l.epoch}`));
      for (const a of this.#active.values()) {
        if (!a.parked && !ids.has(`${a.lease.sessionId}#${a.lease.epoch}`)) this.#lose(a);
      }
      // Leases held but no longer run here (a session that stopped on a store error): give
      // them back so another worker resumes them.
      if (this.#claiming === 0) {
        for (const l of held) {
          const a = this.#active.get(l.sessionId);
          if (!a || a.lease.epoch !== l.epoch) {
            this.store.release(l, "runnable").catch(() => {});
          }
        }
      }
    } catch (err) {
      this.#report(err);
      // Without a confirmed heartbeat for half the TTL, our leases may be gone: stop writing.
      if (Date.now() - this.#lastBeat > this.#o.ttlMs / 2) {
        for (const a of this.#active.values()) this.#lose(a);
      }
    }
  }

  /** Records why the session cannot run and releases it as `failed` (best-effort). */
  async #fail(lease: Lease, err: unknown): Promise<void> {
    const cause = err instanceof SessionSetupError ? err.cause : err;
    try {
      await this.store.append(lease, [{
        kind: "error",
        payload: {
          error: `Cannot run session ${lease.sessionId}: ${errorText(cause)}`,
          error_type: err instanceof SessionSetupError ? "session_setup" : "worker_error",
          retriable: false,
          by: this.ownerId,
        },
      }]);
      await this.store.release(lease, "failed");
    } catch {
      await this.store.release(lease, "runnable").catch(() => {});
    }
  }

  #lose(a: Active): void {
    if (a.lost) return;
    a.lost = true;
    a.hook?.detach();
    a.engine?.requestInterrupt();
  }

  #report(err: unknown, sessionId?: string): void {
    try {
      this.#o.onError?.(err, sessionId);
    } catch {
      // best-effort
    }
  }

  #start(lease: Lease): Promise<void> {
    const a: Active = {
      lease,
      lost: false,
      parked: false,
      done: Promise.resolve(),
      queue: [],
      cancelled: false,
    };
    this.#active.set(lease.sessionId, a);
    a.done = this.#run(a).then(() => {
      this.#failures.delete(lease.sessionId);
    }, (err) => {
      this.#report(err, lease.sessionId);
      a.hook?.detach();
      if (err instanceof LeaseLostError) return;
      // A session that cannot be rebuilt (the host's createEngine throws, its data is refused)
      // would be claimed again at once, forever: after a few tries in a row it is marked failed,
      // with the reason in its log. New input makes it runnable again.
      const tries = (this.#failures.get(lease.sessionId) ?? 0) + 1;
      this.#failures.set(lease.sessionId, tries);
      if (err instanceof SessionSetupError || tries >= MAX_TRIES) {
        this.#failures.delete(lease.sessionId);
        return this.#fail(lease, err);
      }
      // Give it back for another try; when the store is down, the heartbeat does it later.
      return this.store.release(lease, "runnable").catch(() => {});
    }).finally(() => {
      this.#active.delete(lease.sessionId);
      this.#kick?.();
    });
    return a.done;
  }

  async #run(a: Active): Promise<void> {
    const { lease } = a;
    const loaded = await this.store.load(lease.sessionId);
    if (!loaded) return;
    const restored = restoreSession(loaded);
    let engine: TurnEngine;
    try {
      engine = await this.#o.createEngine({
        sessionId: lease.sessionId,
        messages: restored.messages,
        state: restored.state,
        meta: loaded.meta,
      });
    } catch (err) {
      throw new SessionSetupError(err);
    }
    if (restored.messages.length) {
      FileLogHook.applyState(engine, restored.state as unknown as SavedState);
    }
    engine.restoreEventSeq(restored.state.eventSeq); // data.seq goes on across workers
    const hook = new StoreHook(this.store, lease, {
      deltaFlushMs: this.#o.deltaFlushMs,
      onError: (err) => {
        // The store no longer matches the engine: stop; whoever claims it next resumes from
        // what is durable (a lease still held is released by the heartbeat).
        if (!(err instanceof LeaseLostError)) this.#report(err, lease.sessionId);
        this.#lose(a);
      },
    });
    hook.attach(engine, { inboxCursor: Number(restored.state.inboxCursor ?? 0) });
    engine.hook = engine.hook ? new CompositeHook([engine.hook, hook]) : hook;
    engine.setApprover(this.#approver(a, hook, engine));
    a.engine = engine;
    a.hook = hook;

    // Calls a dead owner started and that are not run again: their end goes into the log, so
    // viewers do not show them as still running or as never run.
    for (const id of restored.interrupted) {
      const m = restored.messages.find((x) => x.role === "tool" && x.tool_call_id === id);
      hook.record("tool_finished", {
        reqId: id,
        name: m?.name ?? "",
        status: "interrupted",
        reason: "the process running it stopped before it finished; it is not run again",
        recovered: true,
        idemKey: `tool_result:${id}`,
        ...(typeof m?.content === "string" ? { content: m.content } : {}),
      }, `tool_result:${id}`);
    }
    a.queue.push(...restored.pendingInputs);
    // 1. A turn a crash or a park cut short; ended as interrupted when a cancel is waiting for
    // it (or was taken before the crash).
    let cancelNow = restored.cancelled || restored.state.cancelRequested === true;
    if ((await this.store.peekInbox(lease.sessionId)).some((i) => i.kind === "cancel")) {
      cancelNow = (await this.#takeInbox(a)) || cancelNow;
    }
    await this.#turn(a, engine.resume(`resume_${lease.epoch}`), cancelNow);
    if (a.lost || a.parked) return;
    if (restored.answeredWithoutEnd) {
      // The reply was stored but not its turn_end: record it, so viewers see the turn end.
      const last = engine.messages.at(-1);
      if (last && !last.turnEnd) last.turnEnd = { status: "completed", retriable: false };
      hook.record("turn_end", {
        status: "completed",
        iterations: 0,
        produced_files: [],
        recovered: true,
      }, `turn_end:recovered:${lease.epoch}`);
    }
    // 2. Inputs taken before a crash whose turn never started, then the inbox, in order.
    while (!a.lost && !a.parked) {
      if (a.queue.length === 0) {
        try {
          await hook.flush();
          await this.#takeInbox(a);
        } catch (err) {
          if (err instanceof LeaseLostError) this.#lose(a);
          else throw err;
          break;
        }
        if (a.queue.length === 0) break;
      }
      const item = a.queue.shift()!;
      hook.setExtra({ inboxCursor: item.id });
      const taskId = `in_${item.id}`;
      const stream = item.kind === "retry"
        ? engine.retry(taskId) // nothing runs unless the last turn ended with a retriable error
        : engine.run(String(item.payload.text ?? ""), taskId);
      await this.#turn(a, stream, false);
    }
    if (a.lost || a.parked) return;
    try {
      await hook.flush();
      await this.store.release(lease, "done");
    } catch (err) {
      if (!(err instanceof LeaseLostError)) throw err;
    }
  }

  /**
   * Takes the inbox into the session's queue. A `cancel` drops the inputs queued before it.
   *
   * @returns Whether a `cancel` was among the items.
   */
  async #takeInbox(a: Active): Promise<boolean> {
    await a.hook?.flush(); // the turn's events are stored before the inbox items that follow them
    let cancelled = false;
    for (const item of await this.store.takeInbox(a.lease)) {
      if (item.kind === "cancel") {
        cancelled = true;
        a.queue.length = 0;
      } else if (item.kind === "user_input" || item.kind === "retry") {
        a.queue.push(item);
      }
    }
    return cancelled;
  }

  /**
   * Runs one turn's event stream to its end (events reach the store through the hook). While it
   * runs, a `cancel` submitted to the session interrupts it; with `cancelNow` it is interrupted
   * as soon as it starts (a cancel taken before the turn was resumed).
   */
  async #turn(a: Active, stream: AsyncIterable<unknown>, cancelNow: boolean): Promise<void> {
    const engine = a.engine!;
    const stop = new AbortController();
    a.turnSignal = stop.signal;
    if (cancelNow) a.hook?.setExtra({ cancelRequested: true });
    const watch = cancelNow ? Promise.resolve() : this.#watchCancel(a, stop.signal);
    try {
      for await (const _ of stream) {
        if (cancelNow) engine.requestInterrupt();
      }
    } catch (err) {
      if (!a.lost && !a.parked) this.#report(err, a.lease.sessionId);
    } finally {
      stop.abort();
      await watch;
    }
    if (cancelNow || a.cancelled) {
      a.cancelled = false;
      a.hook?.setExtra({ cancelRequested: false });
      if (!a.lost && !a.parked) await this.#denyOpenApprovals(a);
    }
  }

  /** Waits for a `cancel` in the inbox while a turn runs, then takes it and interrupts. */
  async #watchCancel(a: Active, signal: AbortSignal): Promise<void> {
    const sessionId = a.lease.sessionId;
    while (!signal.aborted && !a.lost && !a.parked) {
      await this.store.waitForWake(sessionId, { timeoutMs: this.#o.cancelPollMs, signal });
      if (signal.aborted || a.lost || a.parked) return;
      try {
        const waiting = await this.store.peekInbox(sessionId);
        if (!waiting.some((i) => i.kind === "cancel")) continue;
        if (signal.aborted || a.lost || a.parked) return;
        a.cancelled = true;
        a.hook?.setExtra({ cancelRequested: true });
        await this.#takeInbox(a);
        a.engine?.requestInterrupt();
        return;
      } catch (err) {
        if (err instanceof LeaseLostError) return this.#lose(a);
        this.#report(err, sessionId); // the store is away: look again at the next wake or poll
      }
    }
  }

  /** Closes the approvals a cancelled turn left open, so no viewer offers them any more. */
  async #denyOpenApprovals(a: Active): Promise<void> {
    const sessionId = a.lease.sessionId;
    try {
      const open = (await this.store.load(sessionId))?.approvals.filter((x) =>
        x.status === "pending"
      ) ?? [];
      for (const x of open) {
        await this.store.answerApproval(sessionId, {
          toolCallId: x.toolCallId,
          decision: { approve: false, note: "The turn was cancelled." },
          by: "cancel",
        });
      }
    } catch (err) {
      this.#report(err, sessionId);
    }
  }

  /** The approver of a session run by this worker (see the module doc). */
  #approver(a: Active, hook: StoreHook, engine: TurnEngine): Approver {
    return async (req) => {
      const id = req.toolCallId ?? "";
      await hook.flush(); // permission_required is durable before anyone can answer
      let approval = (await this.store.load(a.lease.sessionId))?.approvals.find((x) =>
        x.toolCallId === id
      );
      if (!approval) {
        await this.store.openApproval(a.lease, id, {
          toolName: req.toolName,
          arguments: req.arguments,
          reason: req.reason,
        });
      }
      const until = Date.now() + this.#o.approvalHoldMs;
      const turn = a.turnSignal;
      const ended = () => a.lost || a.cancelled || !!turn?.aborted;
      while (!approval || approval.status === "pending") {
        if (ended()) return new Promise<never>(() => {}); // the turn is being interrupted
        const left = until - Date.now();
        if (left <= 0) {
          await this.#park(a, hook, engine);
          return new Promise<never>(() => {}); // the interrupt ends the turn
        }
        await this.store.waitForWake(a.lease.sessionId, {
          timeoutMs: Math.min(left, this.#o.approvalPollMs),
          signal: turn ? AbortSignal.any([this.#stopAc.signal, turn]) : this.#stopAc.signal,
        });
        if (ended()) return new Promise<never>(() => {});
        if (!this.#running && this.#stopAc.signal.aborted && Date.now() < until) {
          // Shutting down: park now rather than keep the lease.
          await this.#park(a, hook, engine);
          return new Promise<never>(() => {});
        }
        approval = (await this.store.load(a.lease.sessionId))?.approvals.find((x) =>
          x.toolCallId === id
        );
      }
      const d = approval.decision;
      if (!d?.approve) return ApprovalOutcome.DENY;
      if (d.always === "tool") return ApprovalOutcome.ALWAYS_TOOL;
      if (d.always === "command") return ApprovalOutcome.ALWAYS_COMMAND;
      return ApprovalOutcome.ONCE;
    };
  }

  /** Checkpoint, stop recording, release as waiting_approval, interrupt the turn. */
  async #park(a: Active, hook: StoreHook, engine: TurnEngine): Promise<void> {
    hook.record("parked", { reason: "approval not answered in time" });
    await hook.flush();
    await this.store.putCheckpoint(a.lease, {
      seq: hook.lastSeq,
      schemaVersion: CHECKPOINT_SCHEMA_VERSION,
      state: hook.snapshot(),
    });
    hook.detach();
    a.parked = true;
    await this.store.release(a.lease, "waiting_approval");
    engine.requestInterrupt();
  }
}
