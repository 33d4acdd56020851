/**
 * Sessions beyond one process (issue 11): the {@link SessionStore} contract, its three stores —
 * {@link MemorySessionStore} (tests), {@link FileSessionStore} (the embedded default, one
 * process) and {@link PostgresSessionStore} (many workers on many machines) — the
 * {@link StoreHook} that records an engine's events through a store, and the
 * {@link SessionWorker} that claims runnable sessions and runs their turns.
 *
 * @example Run sessions on a worker
 * ```ts
 * import { createDefaultEngine } from "@zqagent/core";
 * import { MemorySessionStore, SessionWorker } from "@zqagent/core/store";
 *
 * const store = new MemorySessionStore();
 * const worker = new SessionWorker(store, {
 *   createEngine: ({ messages }) => createDefaultEngine({ workspace: ".", model: "gpt-4o-mini", messages }),
 * });
 * await store.create("s1");
 * await store.submit("s1", { kind: "user_input", payload: { text: "Hi" }, idemKey: "m1" });
 * // worker.start(); … await worker.stop();
 * ```
 *
 * @module
 */
export {
  type AnswerResult,
  type AppendResult,
  type ApprovalDecision,
  type ApprovalRecord,
  type ApprovalStatus,
  type Checkpoint,
  CHECKPOINT_SCHEMA_VERSION,
  type ClaimOptions,
  type CreateOptions,
  DEFAULT_LEASE_TTL_MS,
  type InboxItem,
  type Lease,
  LeaseLostError,
  type LeaseOptions,
  type LoadedSession,
  type NewEvent,
  type PrunePolicy,
  type SessionStatus,
  type SessionStore,
  type StoreCapabilities,
  type StoredEvent,
  type SubmitItem,
  type SubmitKind,
  type SubmitResult,
  type TailOptions,
  type WakeOptions,
} from "./types.ts";
export { MemorySessionStore, type MemorySessionStoreOptions } from "./memory_store.ts";
export { FileSessionStore, type FileSessionStoreOptions } from "./file_store.ts";
export {
  type PgClientLike,
  type PgPoolLike,
  type PgResult,
  PostgresSessionStore,
  type PostgresSessionStoreOptions,
} from "./postgres_store.ts";
export {
  type RestoredSession,
  restoreSession,
  type RestoreSessionOptions,
  StoreHook,
  type StoreHookOptions,
} from "./store_hook.ts";
export {
  type EngineContext,
  SessionWorker,
  type SessionWorkerOptions,
  type StopOptions,
} from "./session_worker.ts";
export { type LocalRecord, LocalStore } from "./local_store.ts";
