/**
 * The shared core of the single-process stores (memory, files): session records held in this
 * process, each change applied synchronously so no two calls interleave inside one method, and a
 * persistence layer the file store fills in. Private.
 *
 * @module
 */
import { EventEmitter } from "node:events";
import { storable } from "./_json.ts";
import {
  type AnswerResult,
  type AppendResult,
  type ApprovalDecision,
  type ApprovalRecord,
  type Checkpoint,
  checkSessionId,
  type ClaimOptions,
  type CreateOptions,
  type InboxItem,
  type Lease,
  LeaseLostError,
  type LeaseOptions,
  type LoadedSession,
  type NewEvent,
  type PrunePolicy,
  type SessionStatus,
  type SessionStore,
  sleep,
  type StoreCapabilities,
  type StoredEvent,
  type SubmitItem,
  type SubmitKind,
  type SubmitResult,
  type TailOptions,
  ttlOf,
  type WakeOptions,
} from "./types.ts";

/** One session as the single-process stores hold it. */
export interface LocalRecord {
  /** The session id. */
  sessionId: string;
  /** Its status. */
  status: SessionStatus;
  /** Host data. */
  meta: Record<string, unknown>;
  /** Lease owner, or null. */
  ownerId: string | null;
  /** Lease epoch. */
  epoch: number;
  /** Lease expiry (ms since the epoch, this process's clock). */
  expiresAt: number;
  /** Last `seq` written. */
  nextSeq: number;
  /** Idempotency keys stored. */
  idem: Set<string>;
  /** Approval requests. */
  approvals: ApprovalRecord[];
  /** Inbox items (taken ones flagged `consumed`, kept for duplicate detection). */
  inbox: (InboxItem & { consumed?: boolean })[];
  /** Id of the next inbox item. */
  inboxNext: number;
  /** Created (ms). */
  createdAt: number;
  /** Last changed (ms). */
  updatedAt: number;
  /** Time to live after finishing (ms), or null. */
  ttlMs: number | null;
  /** `seq` of the latest checkpoint. */
  checkpointSeq: number;
}

/** The durable part of a record (what the file store writes to `<id>_session.json`). */
export function recordToJson(r: LocalRecord): Record<string, unknown> {
  return {
    sessionId: r.sessionId,
    status: r.status,
    meta: r.meta,
    ownerId: r.ownerId,
    epoch: r.epoch,
    expiresAt: r.expiresAt,
    approvals: r.approvals,
    inbox: r.inbox,
    inboxNext: r.inboxNext,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    ttlMs: r.ttlMs,
    checkpointSeq: r.checkpointSeq,
  };
}

/** A fresh record. */
export function newRecord(sessionId: string, options: CreateOptions = {}): LocalRecord {
  const now = Date.now();
  return {
    sessionId,
    status: "idle",
    meta: storable(options.meta ?? {}, "create a session"),
    ownerId: null,
    epoch: 0,
    expiresAt: 0,
    nextSeq: 0,
    idem: new Set(),
    approvals: [],
    inbox: [],
    inboxNext: 1,
    createdAt: now,
    updatedAt: now,
    ttlMs: options.ttlMs ?? null,
    checkpointSeq: 0,
  };
}

/**
 * Base of `MemorySessionStore` and `FileSessionStore`: the whole {@link SessionStore} logic for
 * one process, with persistence left to subclasses. Not safe across processes.
 */
export abstract class LocalStore implements SessionStore {
  /** Single process only; tails and waits are pushed within the process. */
  readonly capabilities: StoreCapabilities = { multiProcess: false, push: true };
  /** Session records loaded in this process. */
  protected records: Map<string, LocalRecord> = new Map();
  #bus = new EventEmitter();
  #pollMs: number;
  #closed = false;

  /**
   * Creates the store.
   *
   * @param pollMs Safety-net poll interval of tails (ms).
   */
  constructor(pollMs: number) {
    this.#pollMs = pollMs;
    this.#bus.setMaxListeners(0);
  }

  // --- persistence (the memory store keeps everything in memory) ---
  /** Loads a record not yet in memory; undefined when the session does not exist. */
  protected abstract loadRecord(sessionId: string): LocalRecord | undefined;
  /** Writes the record's durable part. */
  protected abstract saveRecord(r: LocalRecord): void;
  /** Writes events (already numbered). */
  protected abstract writeEvents(r: LocalRecord, events: StoredEvent[]): void;
  /** Events with `seq > after`, in order. */
  protected abstract readEvents(sessionId: string, after: number, limit?: number): StoredEvent[];
  /** Writes a checkpoint and keeps at most `keep` of them. */
  protected abstract writeCheckpoint(r: LocalRecord, cp: Checkpoint, keep: number): void;
  /** The latest checkpoint. */
  protected abstract readCheckpoint(sessionId: string): Checkpoint | undefined;
  /** Removes everything of a session. */
  protected abstract removeSession(sessionId: string): void;
  /** Ids of every stored session. */
  protected abstract listSessions(): string[];

  /** The record, loaded when needed. */
  protected rec(sessionId: string): LocalRecord | undefined {
    let r = this.records.get(sessionId);
    if (!r) {
      r = this.loadRecord(sessionId);
      if (r) this.records.set(sessionId, r);
    }
    return r;
  }

  #touch(r: LocalRecord): void {
    r.updatedAt = Date.now();
    this.saveRecord(r);
  }

  /** The record of a live lease, or LeaseLostError. */
  protected fenced(lease: Lease, what: string): LocalRecord {
    const r = this.rec(lease.sessionId);
    if (
      !r || r.ownerId !== lease.ownerId || r.epoch !== lease.epoch || r.expiresAt <= Date.now()
    ) {
      const why = !r
        ? "the session no longer exists"
        : r.epoch !== lease.epoch
        ? `another worker took it over (epoch ${r.epoch}, ours ${lease.epoch})`
        : "the lease expired";
      throw new LeaseLostError(`Cannot ${what} for ${lease.sessionId}: ${why}`, lease);
    }
    return r;
  }

  #wake(sessionId: string): void {
    this.#bus.emit(`wake:${sessionId}`);
  }

  create(sessionId: string, options: CreateOptions = {}): Promise<boolean> {
    return guard(() => this.#create(sessionId, options));
  }

  #create(sessionId: string, options: CreateOptions = {}): Promise<boolean> {
    checkSessionId(sessionId, "create a session");
    if (this.rec(sessionId)) return Promise.resolve(false);
    const r = newRecord(sessionId, options);
    this.records.set(sessionId, r);
    this.saveRecord(r);
    return Promise.resolve(true);
  }

  load(sessionId: string): Promise<LoadedSession | null> {
    const r = this.rec(sessionId);
    if (!r) return Promise.resolve(null);
    const checkpoint = this.readCheckpoint(sessionId);
    const events = this.readEvents(sessionId, checkpoint?.seq ?? 0);
    const live = r.ownerId !== null && r.expiresAt > Date.now();
    return Promise.resolve({
      sessionId,
      status: r.status,
      meta: structuredClone(r.meta),
      ...(checkpoint ? { checkpoint } : {}),
      events,
      approvals: structuredClone(r.approvals),
      inbox: r.inbox.filter((i) => !i.consumed).map(({ consumed: _, ...i }) => ({ ...i })),
      ...(live
        ? {
          lease: {
            sessionId,
            ownerId: r.ownerId!,
            epoch: r.epoch,
            expiresAt: new Date(r.expiresAt).toISOString(),
          },
        }
        : {}),
      lastSeq: r.nextSeq,
    });
  }

  read(sessionId: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    try {
      checkReadRange(afterSeq, limit);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!this.rec(sessionId)) return Promise.resolve([]);
    return Promise.resolve(this.readEvents(sessionId, afterSeq, limit));
  }

  async *tail(
    sessionId: string,
    afterSeq: number,
    options: TailOptions = {},
  ): AsyncIterable<StoredEvent> {
    const { signal } = options;
    const pollMs = options.pollMs ?? this.#pollMs;
    let cursor = afterSeq;
    while (!signal?.aborted && !this.#closed) {
      const hinted = new Promise<void>((resolve) => {
        const done = () => {
          this.#bus.off(`events:${sessionId}`, done);
          this.#bus.off("close", done);
          signal?.removeEventListener("abort", done);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(done, pollMs);
        this.#bus.on(`events:${sessionId}`, done);
        this.#bus.on("close", done);
        signal?.addEventListener("abort", done, { once: true });
      });
      // Subscribed before reading: an append between the read and the wait still wakes us.
      const batch = this.readEvents(sessionId, cursor);
      for (const e of batch) {
        if (e.seq <= cursor) continue;
        cursor = e.seq;
        yield e;
        if (signal?.aborted) return;
      }
      if (batch.length) continue;
      await hinted;
    }
  }

  submit(
    sessionId: string,
    item: SubmitItem,
  ): Promise<SubmitResult> {
    return guard(() => this.#submit(sessionId, item));
  }

  #submit(
    sessionId: string,
    item: SubmitItem,
  ): Promise<SubmitResult> {
    checkItem(item);
    const payload = storable(item.payload, "submit");
    const r = this.rec(sessionId);
    if (!r) return Promise.resolve("unknown");
    if (r.inbox.some((i) => i.idemKey === item.idemKey)) return Promise.resolve("duplicate");
    r.inbox.push({
      id: r.inboxNext++,
      kind: item.kind,
      payload,
      idemKey: item.idemKey,
      at: new Date().toISOString(),
    });
    if (r.status !== "running") r.status = "runnable";
    this.#touch(r);
    this.#wake(sessionId);
    return Promise.resolve("queued");
  }

  answerApproval(
    sessionId: string,
    answer: { toolCallId: string; decision: ApprovalDecision; by?: string },
  ): Promise<AnswerResult> {
    return guard(() => this.#answerApproval(sessionId, answer));
  }

  #answerApproval(
    sessionId: string,
    answer: { toolCallId: string; decision: ApprovalDecision; by?: string },
  ): Promise<AnswerResult> {
    checkDecision(answer?.decision);
    const r = this.rec(sessionId);
    const a = r?.approvals.find((x) => x.toolCallId === answer.toolCallId);
    if (!r || !a) return Promise.resolve("unknown");
    if (a.status !== "pending") return Promise.resolve("already-decided");
    a.status = answer.decision.approve ? "approved" : "denied";
    a.decision = storable(answer.decision, "answer an approval");
    a.decidedBy = answer.by ?? "";
    a.decidedAt = new Date().toISOString();
    const key = `approval:${answer.toolCallId}`;
    if (!r.inbox.some((i) => i.idemKey === key)) {
      r.inbox.push({
        id: r.inboxNext++,
        kind: "approval",
        payload: { toolCallId: answer.toolCallId, decision: a.decision },
        idemKey: key,
        at: a.decidedAt,
      });
    }
    if (r.status === "waiting_approval") r.status = "runnable";
    this.#touch(r);
    this.#wake(sessionId);
    return Promise.resolve("applied");
  }

  waitForWake(sessionId: string, options: WakeOptions): Promise<boolean> {
    return new Promise((resolve) => {
      const finish = (v: boolean) => {
        this.#bus.off(`wake:${sessionId}`, onWake);
        options.signal?.removeEventListener("abort", onAbort);
        clearTimeout(timer);
        resolve(v);
      };
      const onWake = () => finish(true);
      const onAbort = () => finish(false);
      const timer = setTimeout(() => finish(false), options.timeoutMs);
      if (options.signal?.aborted) return finish(false);
      this.#bus.on(`wake:${sessionId}`, onWake);
      options.signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  #take(r: LocalRecord, options: LeaseOptions, ttl: number): Lease {
    r.ownerId = options.ownerId;
    r.epoch++;
    r.expiresAt = Date.now() + ttl;
    r.status = "running";
    this.#touch(r);
    return { sessionId: r.sessionId, ownerId: options.ownerId, epoch: r.epoch };
  }

  acquire(sessionId: string, options: LeaseOptions): Promise<Lease | null> {
    return guard(() => this.#acquire(sessionId, options));
  }

  #acquire(sessionId: string, options: LeaseOptions): Promise<Lease | null> {
    const ttl = ttlOf(options?.ttlMs);
    checkOwner(options?.ownerId);
    const r = this.rec(sessionId);
    if (!r || (r.ownerId !== null && r.expiresAt > Date.now())) return Promise.resolve(null);
    return Promise.resolve(this.#take(r, options, ttl));
  }

  claimRunnable(options: ClaimOptions): Promise<Lease[]> {
    return guard(() => this.#claimRunnable(options));
  }

  #claimRunnable(options: ClaimOptions): Promise<Lease[]> {
    const ttl = ttlOf(options?.ttlMs);
    checkOwner(options?.ownerId);
    const max = options.max ?? 1;
    const now = Date.now();
    const out: Lease[] = [];
    for (const id of this.listSessions()) {
      if (out.length >= max) break;
      const r = this.rec(id);
      if (!r) continue;
      const free = r.ownerId === null || r.expiresAt <= now;
      if (free && (r.status === "runnable" || r.status === "running")) {
        out.push(this.#take(r, options, ttl));
      }
    }
    return Promise.resolve(out);
  }

  heartbeat(options: LeaseOptions): Promise<Lease[]> {
    return guard(() => this.#heartbeat(options));
  }

  #heartbeat(options: LeaseOptions): Promise<Lease[]> {
    const ttl = ttlOf(options?.ttlMs);
    const now = Date.now();
    const out: Lease[] = [];
    for (const r of this.records.values()) {
      if (r.ownerId === options.ownerId && r.expiresAt > now) {
        r.expiresAt = now + ttl;
        this.saveRecord(r);
        out.push({ sessionId: r.sessionId, ownerId: r.ownerId, epoch: r.epoch });
      }
    }
    return Promise.resolve(out);
  }

  release(lease: Lease, next: SessionStatus): Promise<void> {
    try {
      checkStatus(next);
      const r = this.fenced(lease, "release the session");
      r.ownerId = null;
      r.expiresAt = 0;
      r.status = nextStatus(r, next);
      this.#touch(r);
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Numbers and writes events under a checked record; returns what was written. */
  protected appendTo(r: LocalRecord, events: NewEvent[], epoch: number): StoredEvent[] {
    const at = new Date().toISOString();
    const out: StoredEvent[] = [];
    const keys = new Set<string>();
    for (const e of events) {
      if (e.idemKey !== undefined && (r.idem.has(e.idemKey) || keys.has(e.idemKey))) continue;
      if (e.idemKey !== undefined) keys.add(e.idemKey);
      out.push({
        seq: r.nextSeq + out.length + 1,
        kind: e.kind,
        payload: storable(e.payload, "append events"),
        ...(e.idemKey !== undefined ? { idemKey: e.idemKey } : {}),
        epoch,
        at,
      });
    }
    if (out.length === 0) return out;
    this.writeEvents(r, out); // throws before any state changes when the write fails
    r.nextSeq += out.length;
    for (const k of keys) r.idem.add(k);
    this.#bus.emit(`events:${r.sessionId}`);
    return out;
  }

  append(lease: Lease, events: NewEvent[]): Promise<AppendResult> {
    try {
      checkEvents(events);
      const r = this.fenced(lease, "append events");
      const written = this.appendTo(r, events, lease.epoch);
      return Promise.resolve({
        firstSeq: written[0]?.seq ?? r.nextSeq + 1,
        lastSeq: r.nextSeq,
        deduped: events.length - written.length,
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  peekInbox(sessionId: string): Promise<InboxItem[]> {
    const r = this.rec(sessionId);
    if (!r) return Promise.resolve([]);
    return Promise.resolve(
      r.inbox.filter((i) => !i.consumed).map(({ consumed: _, ...i }) => structuredClone(i)),
    );
  }

  takeInbox(lease: Lease): Promise<InboxItem[]> {
    try {
      const r = this.fenced(lease, "take the inbox");
      const items = r.inbox.filter((i) => !i.consumed);
      if (items.length === 0) return Promise.resolve([]);
      this.appendTo(
        r,
        items.map((i) => ({
          kind: "inbox",
          payload: { id: i.id, kind: i.kind, payload: i.payload, idemKey: i.idemKey },
          idemKey: `inbox:${i.id}`,
        })),
        lease.epoch,
      );
      for (const i of items) i.consumed = true;
      this.#touch(r);
      return Promise.resolve(items.map(({ consumed: _, ...i }) => ({ ...i })));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  putCheckpoint(lease: Lease, checkpoint: Checkpoint): Promise<void> {
    try {
      const r = this.fenced(lease, "store a checkpoint");
      checkCheckpoint(checkpoint, r.nextSeq);
      this.writeCheckpoint(r, storable(checkpoint, "store a checkpoint"), 2);
      r.checkpointSeq = checkpoint.seq;
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  openApproval(lease: Lease, toolCallId: string, request: Record<string, unknown>): Promise<void> {
    try {
      if (typeof toolCallId !== "string" || toolCallId === "") {
        throw new TypeError("Cannot open an approval: toolCallId is required");
      }
      const r = this.fenced(lease, "open an approval");
      if (r.approvals.some((a) => a.toolCallId === toolCallId)) return Promise.resolve();
      this.appendTo(r, [{
        kind: "approval.requested",
        payload: { toolCallId, request },
        idemKey: `approval.req:${toolCallId}`,
      }], lease.epoch);
      r.approvals.push({
        toolCallId,
        request: storable(request, "open an approval"),
        status: "pending",
      });
      this.#touch(r);
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  delete(sessionId: string): Promise<void> {
    this.records.delete(sessionId);
    this.removeSession(sessionId);
    return Promise.resolve();
  }

  async prune(policy: PrunePolicy = {}): Promise<number> {
    const now = Date.now();
    let n = 0;
    for (const id of this.listSessions()) {
      const r = this.rec(id);
      if (!r) continue;
      if (!["done", "failed", "idle"].includes(r.status)) continue;
      if (r.ownerId !== null && r.expiresAt > now) continue;
      const age = now - r.updatedAt;
      const expired = (r.ttlMs !== null && age >= r.ttlMs) ||
        (policy.finishedOlderThanMs !== undefined && age >= policy.finishedOlderThanMs);
      if (expired) {
        await this.delete(id);
        n++;
      }
    }
    return n;
  }

  close(): Promise<void> {
    this.#closed = true;
    this.#bus.emit("close");
    return Promise.resolve();
  }

  /** Sleeps (for subclasses' polls). */
  protected sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleep(ms, signal);
  }
}

/** Calls `fn`, turning a synchronous throw into a rejection. */
function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return fn();
  } catch (err) {
    return Promise.reject(err);
  }
}

/** The status a release leaves (see {@link SessionStore.release}). */
export function nextStatus(
  r: { approvals: ApprovalRecord[]; inbox: { kind: string; consumed?: boolean }[] },
  next: SessionStatus,
): SessionStatus {
  // Anything submitted (input, a cancel, a retry) is work for a worker; answers are not.
  const input = r.inbox.some((i) => !i.consumed && SUBMIT_KINDS.has(i.kind));
  if (next === "waiting_approval") {
    if (!r.approvals.some((a) => a.status === "pending")) return "runnable";
    return input ? "runnable" : next;
  }
  if ((next === "done" || next === "idle") && input) return "runnable";
  return next;
}

/** Validates events before anything is written. */
export function checkEvents(events: NewEvent[]): void {
  if (!Array.isArray(events)) throw new TypeError("Cannot append: events must be an array");
  for (const e of events) {
    if (!e || typeof e.kind !== "string" || e.kind === "") {
      throw new TypeError("Cannot append: every event needs a non-empty kind");
    }
    if (!e.payload || typeof e.payload !== "object") {
      throw new TypeError(`Cannot append ${e.kind}: payload must be an object`);
    }
    if (e.idemKey !== undefined && (typeof e.idemKey !== "string" || e.idemKey === "")) {
      throw new TypeError(`Cannot append ${e.kind}: idemKey must be a non-empty string`);
    }
  }
}

const STATUSES: ReadonlySet<string> = new Set<SessionStatus>([
  "idle",
  "runnable",
  "running",
  "waiting_approval",
  "done",
  "failed",
]);

/** Validates the status a session is released with. */
export function checkStatus(next: unknown): void {
  if (typeof next !== "string" || !STATUSES.has(next) || next === "running") {
    throw new TypeError(
      `Cannot release the session: status ${JSON.stringify(next)} must be idle, runnable, ` +
        "waiting_approval, done or failed",
    );
  }
}

/** Validates the range of a `read`. */
export function checkReadRange(afterSeq: unknown, limit: unknown): void {
  if (typeof afterSeq !== "number" || !Number.isSafeInteger(afterSeq) || afterSeq < 0) {
    throw new RangeError(`Cannot read events: afterSeq ${afterSeq} must be a non-negative integer`);
  }
  if (
    limit !== undefined && (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0)
  ) {
    throw new RangeError(`Cannot read events: limit ${limit} must be a non-negative integer`);
  }
}

/** The kinds `submit` takes. */
const SUBMIT_KINDS: ReadonlySet<string> = new Set<SubmitKind>(["user_input", "cancel", "retry"]);

/** Validates a submitted item. */
export function checkItem(item: { kind: string; payload: unknown; idemKey: string }): void {
  if (!item || !SUBMIT_KINDS.has(item.kind)) {
    throw new TypeError(
      `Cannot submit: kind ${JSON.stringify(item?.kind)} must be "user_input", "cancel" or "retry"`,
    );
  }
  if (!item.payload || typeof item.payload !== "object") {
    throw new TypeError("Cannot submit: payload must be an object");
  }
  if (typeof item.idemKey !== "string" || item.idemKey === "") {
    throw new TypeError("Cannot submit: idemKey is required (it makes a retried submit safe)");
  }
}

/** Validates an approval decision. */
export function checkDecision(d: ApprovalDecision | undefined): void {
  if (!d || typeof d.approve !== "boolean") {
    throw new TypeError("Cannot answer the approval: decision.approve must be true or false");
  }
}

/** Validates an owner id. */
export function checkOwner(ownerId: unknown): void {
  if (typeof ownerId !== "string" || ownerId === "") {
    throw new TypeError("Cannot take a lease: ownerId is required");
  }
}

/** Validates a checkpoint against the log's last seq. */
export function checkCheckpoint(cp: Checkpoint, lastSeq: number): void {
  if (!cp || !Number.isInteger(cp.seq) || cp.seq < 0) {
    throw new TypeError("Cannot store the checkpoint: seq must be a non-negative integer");
  }
  if (cp.seq > lastSeq) {
    throw new RangeError(
      `Cannot store the checkpoint: seq ${cp.seq} is ahead of the log (last seq ${lastSeq})`,
    );
  }
  if (!cp.state || typeof cp.state !== "object") {
    throw new TypeError("Cannot store the checkpoint: state must be an object");
  }
  if (!Number.isInteger(cp.schemaVersion)) {
    throw new TypeError("Cannot store the checkpoint: schemaVersion must be an integer");
  }
}
