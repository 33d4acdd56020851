/**
 * `MemorySessionStore`: the {@link SessionStore} contract held in this process's memory, for tests
 * and single-process hosts that need no durability.
 *
 * @module
 */
import { type LocalRecord, LocalStore } from "./local_store.ts";
import type { Checkpoint, StoredEvent } from "./types.ts";

/** Options of {@link MemorySessionStore}. */
export interface MemorySessionStoreOptions {
  /** Safety-net poll interval of tails in ms (default 1,000; appends wake tails at once). */
  pollMs?: number;
}

/**
 * Sessions in memory: everything is lost when the process ends. Leases use this process's clock.
 *
 * @example
 * ```ts
 * import { MemorySessionStore } from "@zqagent/core/store";
 * const store = new MemorySessionStore();
 * await store.create("s1");
 * const lease = await store.acquire("s1", { ownerId: "w1", ttlMs: 30_000 });
 * await store.append(lease!, [{ kind: "note", payload: { text: "hi" } }]);
 * ```
 */
export class MemorySessionStore extends LocalStore {
  #events = new Map<string, StoredEvent[]>();
  #checkpoints = new Map<string, Checkpoint[]>();

  /** Creates an empty store. */
  constructor(options: MemorySessionStoreOptions = {}) {
    super(options.pollMs ?? 1000);
  }

  /** Nothing is stored outside memory. */
  protected loadRecord(): LocalRecord | undefined {
    return undefined;
  }
  /** Nothing to write. */
  protected saveRecord(): void {}
  /** Keeps the events. */
  protected writeEvents(r: LocalRecord, events: StoredEvent[]): void {
    const list = this.#events.get(r.sessionId) ?? [];
    list.push(...events.map((e) => structuredClone(e)));
    this.#events.set(r.sessionId, list);
  }
  /** Events after `after`. */
  protected readEvents(sessionId: string, after: number, limit?: number): StoredEvent[] {
    const list = this.#events.get(sessionId) ?? [];
    // seq n is at index n - 1: no gaps.
    const out = list.slice(Math.max(0, after), limit === undefined ? undefined : after + limit);
    return out.map((e) => structuredClone(e));
  }
  /** Keeps the latest `keep` checkpoints. */
  protected writeCheckpoint(r: LocalRecord, cp: Checkpoint, keep: number): void {
    const list = this.#checkpoints.get(r.sessionId) ?? [];
    list.push(cp);
    this.#checkpoints.set(r.sessionId, list.slice(-Math.max(1, keep)));
  }
  /** The latest checkpoint. */
  protected readCheckpoint(sessionId: string): Checkpoint | undefined {
    const cp = this.#checkpoints.get(sessionId)?.at(-1);
    return cp ? structuredClone(cp) : undefined;
  }
  /** Forgets a session. */
  protected removeSession(sessionId: string): void {
    this.#events.delete(sessionId);
    this.#checkpoints.delete(sessionId);
  }
  /** Every session id. */
  protected listSessions(): string[] {
    return [...this.records.keys()];
  }
}
