/**
 * The `SessionStore` contract: where sessions live when they must outlive one process, and how
 * many processes share them safely (issue 11; design in
 * `shared/research/distributed-sessions.md` §4.2).
 *
 * The event log is the truth and the checkpoint a cache: `load` returns the latest checkpoint
 * plus every event after it. Every event gets a per-session `seq` (1, 2, 3, … with no gaps). One
 * process owns a session at a time through a lease whose `epoch` fences every owner write: a write
 * under a lease that was taken over throws {@link LeaseLostError}.
 *
 * @module
 */

/** Ownership of one session by one worker; `epoch` grows with every new owner. */
export interface Lease {
  /** The session. */
  sessionId: string;
  /** The owning worker's id. */
  ownerId: string;
  /** Fencing epoch: writes under an older epoch are rejected. */
  epoch: number;
}

/** An event to append. */
export interface NewEvent {
  /** Event kind: an engine `EventType` value, or a store kind (`inbox`, `approval.requested`, …). */
  kind: string;
  /** The event's data (JSON). */
  payload: Record<string, unknown>;
  /**
   * Idempotency key: an event whose key the session already holds is dropped (counted in
   * `deduped`), so a retried append never writes it twice.
   */
  idemKey?: string;
}

/** A stored event. */
export interface StoredEvent extends NewEvent {
  /** Position in the session's log: 1, 2, 3, … without gaps. */
  seq: number;
  /** Lease epoch it was written under (0 for writes that need no lease). */
  epoch: number;
  /** When it was stored (ISO 8601, the store's clock). */
  at: string;
}

/** A snapshot of the session "as of" event `seq`. */
export interface Checkpoint {
  /** Last event the snapshot includes. */
  seq: number;
  /** Layout version of `state` ({@link CHECKPOINT_SCHEMA_VERSION} when written by this library). */
  schemaVersion: number;
  /** The snapshot (a `SavedState` plus host fields). */
  state: Record<string, unknown>;
}

/** What happened to an approval request. */
export type ApprovalStatus = "pending" | "approved" | "denied";

/** A person's answer to an approval request. */
export interface ApprovalDecision {
  /** True to run the tool call. */
  approve: boolean;
  /** Remember the approval for the session: for this tool, or for this command's executable. */
  always?: "tool" | "command";
  /** A note shown to the model when denied. */
  note?: string;
}

/** An approval request of a session, stored so any process can answer it. */
export interface ApprovalRecord {
  /** The tool call waiting. */
  toolCallId: string;
  /** What was asked (tool name, arguments, reason). */
  request: Record<string, unknown>;
  /** Its status. */
  status: ApprovalStatus;
  /** The answer, once given. */
  decision?: ApprovalDecision;
  /** Who answered. */
  decidedBy?: string;
  /** When (ISO 8601). */
  decidedAt?: string;
}

/**
 * What {@link SessionStore.submit} queues:
 * - `user_input` (payload `{text}`): a message; each runs as one turn, in order;
 * - `cancel`: interrupts the running turn (or ends a parked one without running anything) and
 *   drops the inputs queued before it;
 * - `retry`: runs `engine.retry()` — the last turn again, when it ended with a retriable error
 *   (manual §9.4); nothing otherwise.
 */
export type SubmitKind = "user_input" | "cancel" | "retry";

/** An item for {@link SessionStore.submit}. */
export interface SubmitItem {
  /** What it asks for. */
  kind: SubmitKind;
  /** Its data (`{text}` for `user_input`). */
  payload: Record<string, unknown>;
  /** Idempotency key: a second submit with the same key is a `duplicate`. */
  idemKey: string;
}

/** Input for a session from any process: a user message, a cancel or a retry request. */
export interface InboxItem {
  /** Position in the session's inbox (1, 2, 3, …). */
  id: number;
  /** A {@link SubmitKind}, or `approval` (written by `answerApproval`). */
  kind: string;
  /** The item's data. */
  payload: Record<string, unknown>;
  /** Idempotency key: a second submit with the same key is a `duplicate`. */
  idemKey: string;
  /** When it was submitted (ISO 8601). */
  at: string;
}

/**
 * Where a session is in its life:
 * - `idle`: created, nothing to do;
 * - `runnable`: has work (input, a decided approval, a crashed owner) — any worker may claim it;
 * - `running`: owned by a worker under a lease;
 * - `waiting_approval`: parked until someone answers an approval (no process holds it);
 * - `done`: the last turn finished; new input makes it runnable again;
 * - `failed`: given up on.
 */
export type SessionStatus =
  | "idle"
  | "runnable"
  | "running"
  | "waiting_approval"
  | "done"
  | "failed";

/** Everything needed to rebuild a session in a fresh process. */
export interface LoadedSession {
  /** The session id. */
  sessionId: string;
  /** Its status. */
  status: SessionStatus;
  /** The host's data given to `create`. */
  meta: Record<string, unknown>;
  /** The latest checkpoint, if any. */
  checkpoint?: Checkpoint;
  /** Events after the checkpoint (all events when there is none), in `seq` order. */
  events: StoredEvent[];
  /** Every approval request of the session. */
  approvals: ApprovalRecord[];
  /** Inbox items not yet taken. */
  inbox: InboxItem[];
  /** The current lease, when one is held. */
  lease?: Lease & { expiresAt: string };
  /** The last `seq` written. */
  lastSeq: number;
}

/** Who takes a lease and for how long. */
export interface LeaseOptions {
  /** The worker's id (unique per process). */
  ownerId: string;
  /** Lease lifetime in ms (default 30,000); renew it with `heartbeat`. */
  ttlMs?: number;
}

/** Options of {@link SessionStore.claimRunnable}. */
export interface ClaimOptions extends LeaseOptions {
  /** At most this many sessions (default 1). */
  max?: number;
}

/** Options of {@link SessionStore.tail}. */
export interface TailOptions {
  /** Stops the iteration. */
  signal?: AbortSignal;
  /** Safety-net poll interval in ms when no push arrives (default: the store's). */
  pollMs?: number;
}

/** Options of {@link SessionStore.waitForWake}. */
export interface WakeOptions {
  /** Give up after this many ms (resolves `false`). */
  timeoutMs: number;
  /** Stops the wait (resolves `false`). */
  signal?: AbortSignal;
}

/** Options of {@link SessionStore.create}. */
export interface CreateOptions {
  /** Host data kept with the session (tenant, user, …). */
  meta?: Record<string, unknown>;
  /** Time to live after it finishes, in ms, for `prune` (default: none). */
  ttlMs?: number;
}

/** What {@link SessionStore.prune} removes. */
export interface PrunePolicy {
  /**
   * Delete sessions that are `done`, `failed` or `idle`, not leased, and not updated for this
   * many ms (also those past their own `ttlMs`). Omitted: only sessions past their `ttlMs`.
   */
  finishedOlderThanMs?: number;
  /** Checkpoints kept per session (default 2; older ones are removed). */
  keepCheckpoints?: number;
}

/** What an append did. */
export interface AppendResult {
  /** `seq` of the first event written (`lastSeq + 1` when none was). */
  firstSeq: number;
  /** `seq` of the last event written (unchanged when none was). */
  lastSeq: number;
  /** Events dropped because their `idemKey` was already stored. */
  deduped: number;
}

/** What a store can do. */
export interface StoreCapabilities {
  /** Safe to share between processes and machines. */
  multiProcess: boolean;
  /** Tails and waits are woken by pushes, not only by polling. */
  push: boolean;
}

/** Result of {@link SessionStore.submit}. */
export type SubmitResult = "queued" | "duplicate" | "unknown";

/** Result of {@link SessionStore.answerApproval}. */
export type AnswerResult = "applied" | "already-decided" | "unknown";

/**
 * Durable sessions shared by processes (issue 11). Every method is async. Methods taking a
 * {@link Lease} are owner writes: each is fenced and throws {@link LeaseLostError} when the lease
 * expired or another worker took the session over.
 */
export interface SessionStore {
  /** What this store can do. */
  readonly capabilities: StoreCapabilities;
  /** Creates a session (`idle`); false when it existed (then nothing changes). */
  create(sessionId: string, options?: CreateOptions): Promise<boolean>;
  /** Checkpoint + events after it + approvals + inbox; null when the session does not exist. */
  load(sessionId: string): Promise<LoadedSession | null>;
  /** Events with `seq > afterSeq`, in order, at most `limit` (default all). */
  read(sessionId: string, afterSeq: number, limit?: number): Promise<StoredEvent[]>;
  /** Every event after `afterSeq`, then each new one as it is stored, once each, in order. */
  tail(sessionId: string, afterSeq: number, options?: TailOptions): AsyncIterable<StoredEvent>;
  /**
   * Queues input for the session (any process); a session that is not running becomes
   * `runnable`.
   */
  submit(sessionId: string, item: SubmitItem): Promise<SubmitResult>;
  /**
   * Answers a pending approval (any process). The first answer wins; a parked session becomes
   * `runnable`, and a turn holding its lease is woken.
   */
  answerApproval(
    sessionId: string,
    answer: { toolCallId: string; decision: ApprovalDecision; by?: string },
  ): Promise<AnswerResult>;
  /** Resolves true when the session is woken (an answer, an input), false on timeout or abort. */
  waitForWake(sessionId: string, options: WakeOptions): Promise<boolean>;
  /** Takes the session when nobody holds a live lease on it; null otherwise. */
  acquire(sessionId: string, options: LeaseOptions): Promise<Lease | null>;
  /** Takes up to `max` sessions that are runnable or whose owner's lease expired. */
  claimRunnable(options: ClaimOptions): Promise<Lease[]>;
  /** Renews every live lease of `ownerId`; returns those still held (the others are lost). */
  heartbeat(options: LeaseOptions): Promise<Lease[]>;
  /**
   * Gives the session up with status `next`. A session released as `waiting_approval` whose
   * approvals are all answered, or with a submitted item waiting in the inbox (input, a cancel,
   * a retry), becomes `runnable`.
   */
  release(lease: Lease, next: SessionStatus): Promise<void>;
  /** Appends events (fenced); keys already stored are dropped. */
  append(lease: Lease, events: NewEvent[]): Promise<AppendResult>;
  /** Takes the inbox (fenced), recording each item as an `inbox` event in the same write. */
  takeInbox(lease: Lease): Promise<InboxItem[]>;
  /**
   * The inbox items not yet taken, in order, without taking them (any process; `[]` for an
   * unknown session). A worker running a turn uses it to notice a `cancel`.
   */
  peekInbox(sessionId: string): Promise<InboxItem[]>;
  /** Stores a checkpoint (fenced); `seq` must not be ahead of the log. */
  putCheckpoint(lease: Lease, checkpoint: Checkpoint): Promise<void>;
  /** Opens an approval request (fenced) with an `approval.requested` event in the same write. */
  openApproval(lease: Lease, toolCallId: string, request: Record<string, unknown>): Promise<void>;
  /** Removes a session and everything it holds. */
  delete(sessionId: string): Promise<void>;
  /** Removes finished sessions and old checkpoints; returns how many sessions were removed. */
  prune(policy?: PrunePolicy): Promise<number>;
  /** Releases connections, timers and listeners. */
  close(): Promise<void>;
}

/**
 * A write under a lease that is no longer held (it expired, or another worker took the session
 * over with a newer epoch). Whoever holds the lease must stop working on the session.
 */
export class LeaseLostError extends Error {
  /** `"LeaseLostError"`. */
  override name = "LeaseLostError";
  /** The lease that was lost. */
  readonly lease: Lease;
  /**
   * Creates the error.
   *
   * @param message What could not be done.
   * @param lease The lease that was lost.
   */
  constructor(message: string, lease: Lease) {
    super(message);
    this.lease = lease;
  }
}

/** Layout version of checkpoints written by this library (older files have none: version 0). */
export const CHECKPOINT_SCHEMA_VERSION = 1;

/** Default lease lifetime (ms). */
export const DEFAULT_LEASE_TTL_MS = 30_000;

const SESSION_ID_RE = /^[A-Za-z0-9._-]{1,200}$/;

/**
 * Checks a session id (letters, digits, `.`, `_`, `-`; 1–200 chars; names files in the file
 * store).
 *
 * @throws {TypeError} When it is not one.
 */
export function checkSessionId(sessionId: unknown, what: string): string {
  if (typeof sessionId !== "string" || !SESSION_ID_RE.test(sessionId) || /^\.+$/.test(sessionId)) {
    throw new TypeError(
      `Cannot ${what}: sessionId ${JSON.stringify(sessionId)} must be 1–200 letters, digits, ` +
        "'.', '_' or '-'",
    );
  }
  return sessionId;
}

/** Checks a lease TTL. */
export function ttlOf(ms: number | undefined): number {
  const ttl = ms ?? DEFAULT_LEASE_TTL_MS;
  if (!Number.isFinite(ttl) || ttl <= 0) {
    throw new RangeError(`Cannot take a lease: ttlMs ${ms} must be a positive number of ms`);
  }
  return ttl;
}

/** Resolves after `ms`, or at once when aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
