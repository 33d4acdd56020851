/**
 * `PostgresSessionStore`: the {@link SessionStore} for many worker processes on many machines,
 * on PostgreSQL through the npm `pg` driver (issue 11; design in
 * `shared/research/distributed-sessions.md` §4.3).
 *
 * Why `pg`: it is the driver every surveyed peer uses (LangGraph.js, Vercel Workflow's Postgres
 * world, pg-boss, graphile-worker), it supports LISTEN/NOTIFY on a dedicated client, and it runs
 * unchanged under Deno and Node. It is loaded lazily (`import("pg")` on first use), so importing
 * `@zqagent/core` never loads it.
 *
 * How it stays correct:
 * - **Per-session `seq` from a counter on the session row**, taken under that row's lock, so
 *   events of one session commit in `seq` order and a reader of `seq > cursor` never skips one.
 * - **Fencing:** every owner write starts with `UPDATE …sessions … WHERE owner_id = $me AND
 *   lease_epoch = $e AND lease_expires_at > now()`; no row means the lease is gone
 *   ({@link LeaseLostError}). Lease times use the database clock only.
 * - **Idempotency keys** under a unique index `(session_id, idem_key)`.
 * - **Transactional outbox:** the state change, its events and its `pg_notify` commit together;
 *   notifications are hints (`"<sessionId> <lastSeq>"`) over durable rows, and every wait also
 *   polls, so a lost notification costs latency, never data. Events are only notified while
 *   someone tails the session (`watched_at`, bumped by tails).
 * - **Migrations** run under `pg_advisory_xact_lock`, so many processes may run {@link
 *   PostgresSessionStore.setup} at once (vercel/workflow#2019).
 *
 * Tables (prefix `agent_` by default): `sessions` (status, lease, counters), `events`
 * (`(session_id, seq)` primary key), `checkpoints` (latest 2 kept), `approvals`, `inbox`,
 * `schema_version`.
 *
 * @module
 */
import { EventEmitter } from "node:events";
import { storableJson } from "./_json.ts";
import {
  checkCheckpoint,
  checkDecision,
  checkEvents,
  checkItem,
  checkOwner,
  checkReadRange,
  checkStatus,
} from "./local_store.ts";
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
  type StoreCapabilities,
  type StoredEvent,
  type SubmitItem,
  type SubmitResult,
  type TailOptions,
  ttlOf,
  type WakeOptions,
} from "./types.ts";

/** The part of a `pg` query result this store reads. */
export interface PgResult {
  /** Rows as objects. */
  rows: Record<string, unknown>[];
  /** Rows affected. */
  rowCount: number | null;
}

/** A `pg` client (pooled or dedicated) as this store uses it. */
export interface PgClientLike {
  /** Runs a statement. */
  query(text: string, values?: unknown[]): Promise<PgResult>;
}

/** A `pg.Pool` as this store uses it. */
export interface PgPoolLike extends PgClientLike {
  /** A client for a transaction. */
  connect(): Promise<
    PgClientLike & {
      release(err?: Error | boolean): void;
      on(event: "error", fn: (err: Error) => void): unknown;
    }
  >;
  /** Closes the pool. */
  end(): Promise<void>;
  /** Error events of idle clients. */
  on(event: "error", fn: (err: Error) => void): unknown;
}

/** Options of {@link PostgresSessionStore}. */
export interface PostgresSessionStoreOptions {
  /** `postgres://…` URL (default env `DATABASE_URL`); ignored when `pool` is given. */
  connectionString?: string;
  /** A `pg.Pool` of the host's (then `close()` does not end it). */
  pool?: PgPoolLike;
  /** Pool size when the store makes its pool (default 10). */
  max?: number;
  /** Table-name prefix: lower-case letters, digits, `_` (default `"agent_"`). */
  tablePrefix?: string;
  /** Poll interval of tails and waits in ms when no notification arrives (default 2,000). */
  pollMs?: number;
  /**
   * Called with the size in bytes of each checkpoint written; default: a warning on stderr above
   * `checkpointWarnBytes`.
   */
  onCheckpointSize?: (sessionId: string, bytes: number) => void;
  /** Checkpoint size above which the default `onCheckpointSize` warns (default 8 MiB). */
  checkpointWarnBytes?: number;
}

interface PgModule {
  Pool: new (config: Record<string, unknown>) => PgPoolLike;
  Client: new (config: Record<string, unknown>) => PgListenClient;
}

interface PgListenClient extends PgClientLike {
  connect(): Promise<void>;
  end(): Promise<void>;
  on(event: string, fn: (arg: never) => void): unknown;
}

/** Schema version this library writes. */
const SCHEMA_VERSION = 1;

function migrations(p: string): string[][] {
  return [[
    `CREATE TABLE IF NOT EXISTS ${p}sessions (
      session_id text PRIMARY KEY,
      status text NOT NULL DEFAULT 'idle',
      owner_id text,
      lease_epoch bigint NOT NULL DEFAULT 0,
      lease_expires_at timestamptz,
      next_seq bigint NOT NULL DEFAULT 0,
      checkpoint_seq bigint NOT NULL DEFAULT 0,
      inbox_next bigint NOT NULL DEFAULT 0,
      watched_at timestamptz,
      meta jsonb NOT NULL DEFAULT '{}',
      ttl_ms bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now())`,
    `CREATE INDEX IF NOT EXISTS ${p}sessions_runnable ON ${p}sessions (updated_at)
      WHERE status = 'runnable'`,
    `CREATE INDEX IF NOT EXISTS ${p}sessions_leased ON ${p}sessions (lease_expires_at)
      WHERE status = 'running'`,
    `CREATE INDEX IF NOT EXISTS ${p}sessions_owner ON ${p}sessions (owner_id)
      WHERE owner_id IS NOT NULL`,
    `CREATE TABLE IF NOT EXISTS ${p}events (
      session_id text NOT NULL, seq bigint NOT NULL, kind text NOT NULL, payload jsonb NOT NULL,
      idem_key text, lease_epoch bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, seq))`,
    `CREATE UNIQUE INDEX IF NOT EXISTS ${p}events_idem ON ${p}events (session_id, idem_key)
      WHERE idem_key IS NOT NULL`,
    `CREATE TABLE IF NOT EXISTS ${p}checkpoints (
      session_id text NOT NULL, seq bigint NOT NULL, schema_version int NOT NULL,
      state jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, seq))`,
    `CREATE TABLE IF NOT EXISTS ${p}approvals (
      session_id text NOT NULL, tool_call_id text NOT NULL, request jsonb NOT NULL,
      requested_seq bigint NOT NULL, status text NOT NULL DEFAULT 'pending', decision jsonb,
      decided_by text, decided_at timestamptz, PRIMARY KEY (session_id, tool_call_id))`,
    `CREATE TABLE IF NOT EXISTS ${p}inbox (
      session_id text NOT NULL, id bigint NOT NULL, kind text NOT NULL, payload jsonb NOT NULL,
      idem_key text NOT NULL, consumed_seq bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, id), UNIQUE (session_id, idem_key))`,
  ]];
}

const iso = (v: unknown): string => (v instanceof Date ? v.toISOString() : String(v ?? ""));

function toEvent(r: Record<string, unknown>): StoredEvent {
  return {
    seq: Number(r.seq),
    kind: r.kind as string,
    payload: r.payload as Record<string, unknown>,
    ...(r.idem_key != null ? { idemKey: r.idem_key as string } : {}),
    epoch: Number(r.lease_epoch),
    at: iso(r.created_at),
  };
}

function toApproval(r: Record<string, unknown>): ApprovalRecord {
  return {
    toolCallId: r.tool_call_id as string,
    request: r.request as Record<string, unknown>,
    status: r.status as ApprovalRecord["status"],
    ...(r.decision != null ? { decision: r.decision as ApprovalDecision } : {}),
    ...(r.decided_by != null ? { decidedBy: r.decided_by as string } : {}),
    ...(r.decided_at != null ? { decidedAt: iso(r.decided_at) } : {}),
  };
}

function toInbox(r: Record<string, unknown>): InboxItem {
  return {
    id: Number(r.id),
    kind: r.kind as string,
    payload: r.payload as Record<string, unknown>,
    idemKey: r.idem_key as string,
    at: iso(r.created_at),
  };
}

/**
 * Sessions in PostgreSQL, shared by any number of processes (see the module doc).
 *
 * @example
 * ```ts ignore
 * import { PostgresSessionStore } from "@zqagent/core/store";
 * const store = new PostgresSessionStore({ connectionString: "postgres://app@db/agents" });
 * await store.setup(); // once per deployment (safe to run from every process)
 * await store.create("s1");
 * await store.submit("s1", { kind: "user_input", payload: { text: "Hi" }, idemKey: "msg-1" });
 * for await (const e of store.tail("s1", 0)) console.log(e.seq, e.kind);
 * ```
 */
export class PostgresSessionStore implements SessionStore {
  /** Many processes and machines; tails are woken by LISTEN/NOTIFY. */
  readonly capabilities: StoreCapabilities = { multiProcess: true, push: true };
  /** The table-name prefix. */
  readonly tablePrefix: string;
  #options: PostgresSessionStoreOptions;
  #pool: PgPoolLike | undefined;
  #ownPool = false;
  #pg: PgModule | undefined;
  #ready: Promise<void> | undefined;
  #bus = new EventEmitter();
  #listener: PgListenClient | undefined;
  #listening: Promise<void> | undefined;
  #reconnect: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  #pollMs: number;
  #onSize: (sessionId: string, bytes: number) => void;

  /**
   * Creates the store (synchronous; nothing connects until first use).
   *
   * @throws {TypeError} When `tablePrefix` is not lower-case letters, digits and `_`.
   */
  constructor(options: PostgresSessionStoreOptions = {}) {
    const prefix = options.tablePrefix ?? "agent_";
    if (!/^[a-z_][a-z0-9_]{0,30}$/.test(prefix)) {
      throw new TypeError(
        `Cannot create PostgresSessionStore: tablePrefix ${JSON.stringify(prefix)} must be ` +
          "lower-case letters, digits and '_' (at most 31)",
      );
    }
    this.tablePrefix = prefix;
    this.#options = options;
    this.#pollMs = options.pollMs ?? 2000;
    this.#pool = options.pool;
    this.#bus.setMaxListeners(0);
    const warnAt = options.checkpointWarnBytes ?? 8 * 1024 * 1024;
    this.#onSize = options.onCheckpointSize ?? ((id, bytes) => {
      if (bytes > warnAt) {
        console.warn(`[zqagent] checkpoint of session ${id} is ${bytes} bytes (over ${warnAt})`);
      }
    });
  }

  #t(name: string): string {
    return `${this.tablePrefix}${name}`;
  }

  get #eventsChannel(): string {
    return `${this.tablePrefix}events`;
  }

  get #wakeChannel(): string {
    return `${this.tablePrefix}wake`;
  }

  async #module(): Promise<PgModule> {
    if (!this.#pg) {
      const mod = await import("pg") as unknown as { default?: PgModule } & PgModule;
      this.#pg = mod.default ?? mod;
    }
    return this.#pg;
  }

  #url(): string {
    const url = this.#options.connectionString ??
      (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env
        ?.DATABASE_URL;
    if (!url) {
      throw new TypeError(
        "Cannot connect PostgresSessionStore: pass connectionString or pool, or set DATABASE_URL",
      );
    }
    return url;
  }

  async #db(): Promise<PgPoolLike> {
    if (this.#closed) throw new Error("Cannot use PostgresSessionStore: it was closed");
    if (!this.#pool) {
      const pg = await this.#module();
      const pool = new pg.Pool({ connectionString: this.#url(), max: this.#options.max ?? 10 });
      pool.on("error", () => {}); // idle clients dropped by a server restart: the next query reconnects
      this.#pool = pool;
      this.#ownPool = true;
    }
    return this.#pool;
  }

  /** The pool, migrated. */
  async #q(): Promise<PgPoolLike> {
    const pool = await this.#db();
    if (!this.#ready) {
      this.#ready = this.setup().catch((err) => {
        this.#ready = undefined;
        throw err;
      });
    }
    await this.#ready;
    return pool;
  }

  /**
   * Creates or upgrades the tables. Safe to run from many processes at once: each step runs
   * under a transaction-level advisory lock (`pg_advisory_xact_lock`). The other methods run it
   * on first use; hosts may run it once before starting workers.
   *
   * @throws {Error} The database error when it cannot connect or migrate.
   */
  async setup(): Promise<void> {
    const pool = await this.#db();
    const client = await pool.connect();
    guardClient(client); // a server gone mid-query rejects the query; never an uncaught error
    try {
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
        `${this.tablePrefix}:schema`,
      ]);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${this.#t("schema_version")} (v int PRIMARY KEY)`,
      );
      const r = await client.query(
        `SELECT coalesce(max(v), 0) AS v FROM ${this.#t("schema_version")}`,
      );
      const have = Number(r.rows[0].v);
      const steps = migrations(this.tablePrefix);
      for (let v = have + 1; v <= SCHEMA_VERSION; v++) {
        for (const sql of steps[v - 1]) await client.query(sql);
        await client.query(`INSERT INTO ${this.#t("schema_version")} (v) VALUES ($1)`, [v]);
      }
      await client.query("COMMIT");
    } catch (err) {
      await client.query("ROLLBACK").catch(() => {});
      client.release(true);
      throw err;
    }
    client.release();
  }

  /** Runs `fn` in a transaction; rolls back on any error. */
  async #tx<T>(fn: (c: PgClientLike) => Promise<T>): Promise<T> {
    const pool = await this.#q();
    const client = await pool.connect();
    guardClient(client);
    let broken = false;
    try {
      await client.query("BEGIN");
      const out = await fn(client);
      await client.query("COMMIT");
      return out;
    } catch (err) {
      await client.query("ROLLBACK").catch(() => {
        broken = true;
      });
      throw err;
    } finally {
      client.release(broken);
    }
  }

  /** Locks the session row under a live lease, or throws LeaseLostError. */
  async #fence(c: PgClientLike, lease: Lease, what: string): Promise<Record<string, unknown>> {
    const r = await c.query(
      `SELECT next_seq, inbox_next, (watched_at > now() - interval '60 seconds') AS watched
       FROM ${this.#t("sessions")}
       WHERE session_id = $1 AND owner_id = $2 AND lease_epoch = $3 AND lease_expires_at > now()
       FOR UPDATE`,
      [lease.sessionId, lease.ownerId, lease.epoch],
    );
    if (r.rows.length === 0) {
      const now = await c.query(
        `SELECT lease_epoch FROM ${this.#t("sessions")} WHERE session_id = $1`,
        [lease.sessionId],
      );
      const epoch = now.rows[0] ? Number(now.rows[0].lease_epoch) : undefined;
      const why = epoch === undefined
        ? "the session no longer exists"
        : epoch !== lease.epoch
        ? `another worker took it over (epoch ${epoch}, ours ${lease.epoch})`
        : "the lease expired";
      throw new LeaseLostError(`Cannot ${what} for ${lease.sessionId}: ${why}`, lease);
    }
    return r.rows[0];
  }

  /** Appends under a locked row; returns the events written. */
  async #appendIn(
    c: PgClientLike,
    lease: Lease,
    row: Record<string, unknown>,
    events: NewEvent[],
  ): Promise<StoredEvent[]> {
    const keys = events.map((e) => e.idemKey).filter((k): k is string => k !== undefined);
    let have = new Set<string>();
    if (keys.length) {
      const r = await c.query(
        `SELECT idem_key FROM ${this.#t("events")} WHERE session_id = $1 AND idem_key = ANY($2)`,
        [lease.sessionId, keys],
      );
      have = new Set(r.rows.map((x) => x.idem_key as string));
    }
    const fresh: NewEvent[] = [];
    for (const e of events) {
      if (e.idemKey !== undefined) {
        if (have.has(e.idemKey)) continue;
        have.add(e.idemKey);
      }
      fresh.push(e);
    }
    if (fresh.length === 0) return [];
    const base = Number(row.next_seq);
    const ins = await c.query(
      `INSERT INTO ${this.#t("events")} (session_id, seq, kind, payload, idem_key, lease_epoch)
       SELECT $1, $2 + t.ord, t.kind, t.payload::jsonb, t.idem, $3
       FROM unnest($4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS t(kind, payload, idem, ord)
       RETURNING seq, kind, payload, idem_key, lease_epoch, created_at`,
      [
        lease.sessionId,
        base,
        lease.epoch,
        fresh.map((e) => e.kind),
        fresh.map((e) => storableJson(e.payload, "append events")),
        fresh.map((e) => e.idemKey ?? null),
      ],
    );
    const last = base + fresh.length;
    row.next_seq = last;
    await c.query(
      `UPDATE ${this.#t("sessions")} SET next_seq = $2, updated_at = now() WHERE session_id = $1`,
      [lease.sessionId, last],
    );
    if (row.watched) {
      await c.query("SELECT pg_notify($1, $2)", [
        this.#eventsChannel,
        `${lease.sessionId} ${last}`,
      ]);
    }
    return ins.rows.map(toEvent).sort((a, b) => a.seq - b.seq);
  }

  /** {@inheritDoc SessionStore.create} */
  async create(sessionId: string, options: CreateOptions = {}): Promise<boolean> {
    checkSessionId(sessionId, "create a session");
    const db = await this.#q();
    const r = await db.query(
      `INSERT INTO ${this.#t("sessions")} (session_id, meta, ttl_ms) VALUES ($1, $2::jsonb, $3)
       ON CONFLICT (session_id) DO NOTHING`,
      [sessionId, storableJson(options.meta ?? {}, "create a session"), options.ttlMs ?? null],
    );
    return (r.rowCount ?? 0) > 0;
  }

  /** {@inheritDoc SessionStore.load} */
  async load(sessionId: string): Promise<LoadedSession | null> {
    const pool = await this.#q();
    const c = await pool.connect();
    guardClient(c);
    let broken = false;
    try {
      // One snapshot for every read, so the parts agree with each other.
      await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      const s = await c.query(
        `SELECT *, lease_expires_at > now() AS live FROM ${this.#t("sessions")}
         WHERE session_id = $1`,
        [sessionId],
      );
      if (s.rows.length === 0) {
        await c.query("COMMIT");
        return null;
      }
      const row = s.rows[0];
      const cp = await c.query(
        `SELECT seq, schema_version, state FROM ${this.#t("checkpoints")} WHERE session_id = $1
         ORDER BY seq DESC LIMIT 1`,
        [sessionId],
      );
      const checkpoint: Checkpoint | undefined = cp.rows[0]
        ? {
          seq: Number(cp.rows[0].seq),
          schemaVersion: Number(cp.rows[0].schema_version),
          state: cp.rows[0].state as Record<string, unknown>,
        }
        : undefined;
      const ev = await c.query(
        `SELECT seq, kind, payload, idem_key, lease_epoch, created_at FROM ${this.#t("events")}
         WHERE session_id = $1 AND seq > $2 ORDER BY seq`,
        [sessionId, checkpoint?.seq ?? 0],
      );
      const ap = await c.query(
        `SELECT * FROM ${this.#t("approvals")} WHERE session_id = $1 ORDER BY requested_seq`,
        [sessionId],
      );
      const ib = await c.query(
        `SELECT * FROM ${this.#t("inbox")} WHERE session_id = $1 AND consumed_seq IS NULL
         ORDER BY id`,
        [sessionId],
      );
      await c.query("COMMIT");
      return {
        sessionId,
        status: row.status as SessionStatus,
        meta: row.meta as Record<string, unknown>,
        ...(checkpoint ? { checkpoint } : {}),
        events: ev.rows.map(toEvent),
        approvals: ap.rows.map(toApproval),
        inbox: ib.rows.map(toInbox),
        ...(row.live && row.owner_id != null
          ? {
            lease: {
              sessionId,
              ownerId: row.owner_id as string,
              epoch: Number(row.lease_epoch),
              expiresAt: iso(row.lease_expires_at),
            },
          }
          : {}),
        lastSeq: Number(row.next_seq),
      };
    } catch (err) {
      await c.query("ROLLBACK").catch(() => {
        broken = true;
      });
      throw err;
    } finally {
      c.release(broken);
    }
  }

  /** {@inheritDoc SessionStore.read} */
  async read(sessionId: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    checkReadRange(afterSeq, limit);
    const db = await this.#q();
    const r = await db.query(
      `SELECT seq, kind, payload, idem_key, lease_epoch, created_at FROM ${this.#t("events")}
       WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [sessionId, afterSeq, limit ?? null],
    );
    return r.rows.map(toEvent);
  }

  /** Starts the LISTEN client (once; reconnects after it fails). */
  #listen(): Promise<void> {
    if (this.#listening) return this.#listening;
    this.#listening = (async () => {
      const pg = await this.#module();
      const client = new pg.Client({ connectionString: this.#url() });
      const lost = () => {
        if (this.#listener !== client) return;
        this.#listener = undefined;
        this.#listening = undefined;
        client.end().catch(() => {});
        this.#bus.emit("reset"); // readers re-query: nothing between here and reconnect is lost
        if (!this.#closed && this.#bus.listenerCount("reset") > 0) {
          this.#reconnect = setTimeout(() => {
            this.#reconnect = undefined;
            if (!this.#closed) this.#listen().catch(() => {});
          }, 200);
        }
      };
      client.on("error", lost as (arg: never) => void);
      client.on("end", lost as (arg: never) => void);
      client.on(
        "notification",
        ((msg: { channel: string; payload?: string }) => {
          const sid = (msg.payload ?? "").split(" ")[0];
          if (msg.channel === this.#eventsChannel) this.#bus.emit(`events:${sid}`);
          else if (msg.channel === this.#wakeChannel) this.#bus.emit(`wake:${sid}`);
        }) as (arg: never) => void,
      );
      this.#listener = client;
      try {
        await client.connect();
        await client.query(`LISTEN ${this.#eventsChannel}`);
        await client.query(`LISTEN ${this.#wakeChannel}`);
        this.#bus.emit("reset"); // (re)connected: re-query whatever came before
      } catch (err) {
        lost();
        throw err;
      }
    })();
    return this.#listening;
  }

  /**
   * PID of the LISTEN connection's server process (for fault tests: terminating it must not lose
   * events); undefined when not listening.
   */
  async listenerPid(): Promise<number | undefined> {
    const client = this.#listener;
    if (!client) return undefined;
    const r = await client.query("SELECT pg_backend_pid() AS pid");
    return Number(r.rows[0].pid);
  }

  /** Waits for a hint on `event`, a LISTEN reset, `ms`, or the abort signal. */
  #hint(
    event: string,
    ms: number,
    signal?: AbortSignal,
  ): { promise: Promise<boolean>; cancel: () => void } {
    let resolve!: (v: boolean) => void;
    const promise = new Promise<boolean>((r) => (resolve = r));
    const finish = (v: boolean) => {
      this.#bus.off(event, onHint);
      this.#bus.off("reset", onReset);
      this.#bus.off("close", onAbort);
      signal?.removeEventListener("abort", onAbort);
      clearTimeout(timer);
      resolve(v);
    };
    const onHint = () => finish(true);
    const onReset = () => finish(false);
    const onAbort = () => finish(false);
    const timer = setTimeout(() => finish(false), ms);
    this.#bus.on(event, onHint);
    this.#bus.on("reset", onReset);
    this.#bus.on("close", onAbort);
    if (signal?.aborted) finish(false);
    else signal?.addEventListener("abort", onAbort, { once: true });
    return { promise, cancel: () => finish(false) };
  }

  /** {@inheritDoc SessionStore.tail} */
  async *tail(
    sessionId: string,
    afterSeq: number,
    options: TailOptions = {},
  ): AsyncIterable<StoredEvent> {
    const { signal } = options;
    const pollMs = options.pollMs ?? this.#pollMs;
    let cursor = afterSeq;
    let watchedAt = 0;
    while (!signal?.aborted && !this.#closed) {
      const db = await this.#q();
      this.#listen().catch(() => {}); // polls keep going while it (re)connects
      if (Date.now() - watchedAt > 10_000) {
        watchedAt = Date.now();
        await db.query(
          `UPDATE ${this.#t("sessions")} SET watched_at = now() WHERE session_id = $1`,
          [sessionId],
        );
      }
      // Subscribed before reading: a commit between the read and the wait still wakes us.
      const hint = this.#hint(`events:${sessionId}`, pollMs, signal);
      let batch: StoredEvent[];
      try {
        batch = await this.read(sessionId, cursor, 1000);
      } catch (err) {
        if (this.#closed || signal?.aborted) return;
        // The server is away (restart): wait and retry; readers never lose their place.
        await hint.promise;
        if (isConnectionError(err)) continue;
        throw err;
      }
      for (const e of batch) {
        if (e.seq <= cursor) continue; // duplicates dropped by seq
        cursor = e.seq;
        yield e;
        if (signal?.aborted) return;
      }
      if (batch.length) {
        hint.cancel();
        continue;
      }
      await hint.promise;
    }
  }

  /** {@inheritDoc SessionStore.submit} */
  submit(
    sessionId: string,
    item: SubmitItem,
  ): Promise<SubmitResult> {
    let payload: string;
    try {
      checkItem(item);
      payload = storableJson(item.payload, "submit");
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#tx(async (c) => {
      const s = await c.query(
        `UPDATE ${this.#t("sessions")} SET inbox_next = inbox_next + 1, updated_at = now(),
           status = CASE WHEN status = 'running' THEN status ELSE 'runnable' END
         WHERE session_id = $1 RETURNING inbox_next`,
        [sessionId],
      );
      if (s.rows.length === 0) return "unknown";
      const ins = await c.query(
        `INSERT INTO ${this.#t("inbox")} (session_id, id, kind, payload, idem_key)
         VALUES ($1, $2, $3, $4::jsonb, $5) ON CONFLICT (session_id, idem_key) DO NOTHING`,
        [sessionId, s.rows[0].inbox_next, item.kind, payload, item.idemKey],
      );
      if ((ins.rowCount ?? 0) === 0) {
        throw new DuplicateSubmit();
      }
      await c.query("SELECT pg_notify($1, $2)", [this.#wakeChannel, sessionId]);
      return "queued" as const;
    }).catch((err) => {
      if (err instanceof DuplicateSubmit) return "duplicate";
      throw err;
    });
  }

  /** {@inheritDoc SessionStore.answerApproval} */
  answerApproval(
    sessionId: string,
    answer: { toolCallId: string; decision: ApprovalDecision; by?: string },
  ): Promise<AnswerResult> {
    try {
      checkDecision(answer?.decision);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#tx(async (c) => {
      const a = await c.query(
        `UPDATE ${this.#t("approvals")} SET status = $3, decision = $4::jsonb, decided_by = $5,
           decided_at = now()
         WHERE session_id = $1 AND tool_call_id = $2 AND status = 'pending' RETURNING tool_call_id`,
        [
          sessionId,
          answer.toolCallId,
          answer.decision.approve ? "approved" : "denied",
          storableJson(answer.decision, "answer an approval"),
          answer.by ?? "",
        ],
      );
      if (a.rows.length === 0) {
        const e = await c.query(
          `SELECT 1 FROM ${this.#t("approvals")} WHERE session_id = $1 AND tool_call_id = $2`,
          [sessionId, answer.toolCallId],
        );
        return e.rows.length ? "already-decided" : "unknown";
      }
      const s = await c.query(
        `UPDATE ${this.#t("sessions")} SET inbox_next = inbox_next + 1, updated_at = now(),
           status = CASE WHEN status = 'waiting_approval' THEN 'runnable' ELSE status END
         WHERE session_id = $1 RETURNING inbox_next`,
        [sessionId],
      );
      await c.query(
        `INSERT INTO ${this.#t("inbox")} (session_id, id, kind, payload, idem_key)
         VALUES ($1, $2, 'approval', $3::jsonb, $4) ON CONFLICT DO NOTHING`,
        [
          sessionId,
          s.rows[0].inbox_next,
          storableJson(
            { toolCallId: answer.toolCallId, decision: answer.decision },
            "answer an approval",
          ),
          `approval:${answer.toolCallId}`,
        ],
      );
      await c.query("SELECT pg_notify($1, $2)", [this.#wakeChannel, sessionId]);
      return "applied";
    });
  }

  /** {@inheritDoc SessionStore.waitForWake} */
  async waitForWake(sessionId: string, options: WakeOptions): Promise<boolean> {
    try {
      await this.#listen();
    } catch {
      // no push: the caller's own poll (its timeout) still finds the answer
    }
    const end = Date.now() + options.timeoutMs;
    while (!options.signal?.aborted && !this.#closed) {
      const left = end - Date.now();
      if (left <= 0) return false;
      // A LISTEN reset ends a wait early without a hint: wait again for what is left.
      if (await this.#hint(`wake:${sessionId}`, left, options.signal).promise) return true;
    }
    return false;
  }

  /** {@inheritDoc SessionStore.acquire} */
  async acquire(sessionId: string, options: LeaseOptions): Promise<Lease | null> {
    const ttl = ttlOf(options?.ttlMs);
    checkOwner(options?.ownerId);
    const db = await this.#q();
    const r = await db.query(
      `UPDATE ${this.#t("sessions")} SET owner_id = $2, lease_epoch = lease_epoch + 1,
         lease_expires_at = now() + $3 * interval '1 millisecond', status = 'running',
         updated_at = now()
       WHERE session_id = $1 AND (owner_id IS NULL OR lease_expires_at <= now())
       RETURNING lease_epoch`,
      [sessionId, options.ownerId, ttl],
    );
    if (r.rows.length === 0) return null;
    return { sessionId, ownerId: options.ownerId, epoch: Number(r.rows[0].lease_epoch) };
  }

  /** {@inheritDoc SessionStore.claimRunnable} */
  async claimRunnable(options: ClaimOptions): Promise<Lease[]> {
    const ttl = ttlOf(options?.ttlMs);
    checkOwner(options?.ownerId);
    const db = await this.#q();
    const s = this.#t("sessions");
    const r = await db.query(
      `UPDATE ${s} AS s SET owner_id = $1, lease_epoch = s.lease_epoch + 1,
         lease_expires_at = now() + $2 * interval '1 millisecond', status = 'running',
         updated_at = now()
       FROM (SELECT session_id FROM ${s}
             WHERE (status = 'runnable' AND (owner_id IS NULL OR lease_expires_at <= now()))
                OR (status = 'running' AND lease_expires_at <= now())
             ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED) AS c
       WHERE s.session_id = c.session_id
       RETURNING s.session_id, s.lease_epoch`,
      [options.ownerId, ttl, options.max ?? 1],
    );
    return r.rows.map((x) => ({
      sessionId: x.session_id as string,
      ownerId: options.ownerId,
      epoch: Number(x.lease_epoch),
    }));
  }

  /** {@inheritDoc SessionStore.heartbeat} */
  async heartbeat(options: LeaseOptions): Promise<Lease[]> {
    const ttl = ttlOf(options?.ttlMs);
    checkOwner(options?.ownerId);
    const db = await this.#q();
    const r = await db.query(
      `UPDATE ${this.#t("sessions")} SET lease_expires_at = now() + $2 * interval '1 millisecond'
       WHERE owner_id = $1 AND lease_expires_at > now() RETURNING session_id, lease_epoch`,
      [options.ownerId, ttl],
    );
    return r.rows.map((x) => ({
      sessionId: x.session_id as string,
      ownerId: options.ownerId,
      epoch: Number(x.lease_epoch),
    }));
  }

  /** {@inheritDoc SessionStore.release} */
  release(lease: Lease, next: SessionStatus): Promise<void> {
    try {
      checkStatus(next);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#tx(async (c) => {
      await this.#fence(c, lease, "release the session");
      // A new statement after the row lock: sees inputs and answers committed meanwhile.
      const w = await c.query(
        `SELECT
           EXISTS (SELECT 1 FROM ${this.#t("approvals")} WHERE session_id = $1
                   AND status = 'pending') AS pending,
           EXISTS (SELECT 1 FROM ${this.#t("inbox")} WHERE session_id = $1
                   AND consumed_seq IS NULL AND kind IN ('user_input', 'cancel', 'retry')) AS input`,
        [lease.sessionId],
      );
      let status = next;
      const { pending, input } = w.rows[0] as { pending: boolean; input: boolean };
      if (next === "waiting_approval" && (!pending || input)) status = "runnable";
      if ((next === "done" || next === "idle") && input) status = "runnable";
      await c.query(
        `UPDATE ${this.#t("sessions")} SET owner_id = NULL, lease_expires_at = NULL,
           status = $2, updated_at = now() WHERE session_id = $1`,
        [lease.sessionId, status],
      );
    });
  }

  /** {@inheritDoc SessionStore.append} */
  append(lease: Lease, events: NewEvent[]): Promise<AppendResult> {
    try {
      checkEvents(events);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#tx(async (c) => {
      const row = await this.#fence(c, lease, "append events");
      const before = Number(row.next_seq);
      const written = await this.#appendIn(c, lease, row, events);
      return {
        firstSeq: written[0]?.seq ?? before + 1,
        lastSeq: Number(row.next_seq),
        deduped: events.length - written.length,
      };
    });
  }

  /** {@inheritDoc SessionStore.peekInbox} */
  async peekInbox(sessionId: string): Promise<InboxItem[]> {
    const db = await this.#q();
    const r = await db.query(
      `SELECT * FROM ${this.#t("inbox")} WHERE session_id = $1 AND consumed_seq IS NULL
       ORDER BY id`,
      [sessionId],
    );
    return r.rows.map(toInbox);
  }

  /** {@inheritDoc SessionStore.takeInbox} */
  takeInbox(lease: Lease): Promise<InboxItem[]> {
    return this.#tx(async (c) => {
      const row = await this.#fence(c, lease, "take the inbox");
      const r = await c.query(
        `SELECT * FROM ${this.#t("inbox")} WHERE session_id = $1 AND consumed_seq IS NULL
         ORDER BY id`,
        [lease.sessionId],
      );
      const items = r.rows.map(toInbox);
      if (items.length === 0) return [];
      const written = await this.#appendIn(
        c,
        lease,
        row,
        items.map((i) => ({
          kind: "inbox",
          payload: { id: i.id, kind: i.kind, payload: i.payload, idemKey: i.idemKey },
          idemKey: `inbox:${i.id}`,
        })),
      );
      await c.query(
        `UPDATE ${this.#t("inbox")} SET consumed_seq = $3 WHERE session_id = $1 AND id = ANY($2)`,
        [lease.sessionId, items.map((i) => i.id), written.at(-1)?.seq ?? Number(row.next_seq)],
      );
      return items;
    });
  }

  /** {@inheritDoc SessionStore.putCheckpoint} */
  async putCheckpoint(lease: Lease, checkpoint: Checkpoint): Promise<void> {
    const text = storableJson(checkpoint?.state ?? null, "store a checkpoint");
    await this.#tx(async (c) => {
      const row = await this.#fence(c, lease, "store a checkpoint");
      checkCheckpoint(checkpoint, Number(row.next_seq));
      await c.query(
        `INSERT INTO ${this.#t("checkpoints")} (session_id, seq, schema_version, state)
         VALUES ($1, $2, $3, $4::jsonb)
         ON CONFLICT (session_id, seq) DO UPDATE SET schema_version = excluded.schema_version,
           state = excluded.state, created_at = now()`,
        [lease.sessionId, checkpoint.seq, checkpoint.schemaVersion, text],
      );
      await c.query(
        `UPDATE ${this.#t("sessions")} SET checkpoint_seq = greatest(checkpoint_seq, $2)
         WHERE session_id = $1`,
        [lease.sessionId, checkpoint.seq],
      );
    });
    try {
      this.#onSize(lease.sessionId, new TextEncoder().encode(text).length);
    } catch {
      // a logging callback never fails a checkpoint
    }
    // Older checkpoints go in a separate statement: a failed prune never fails the checkpoint.
    try {
      const db = await this.#q();
      await db.query(
        `DELETE FROM ${this.#t("checkpoints")} WHERE session_id = $1 AND seq < (
           SELECT min(seq) FROM (SELECT seq FROM ${this.#t("checkpoints")} WHERE session_id = $1
           ORDER BY seq DESC LIMIT 2) AS k)`,
        [lease.sessionId],
      );
    } catch {
      // retried by the next checkpoint or prune()
    }
  }

  /** {@inheritDoc SessionStore.openApproval} */
  openApproval(lease: Lease, toolCallId: string, request: Record<string, unknown>): Promise<void> {
    if (typeof toolCallId !== "string" || toolCallId === "") {
      return Promise.reject(new TypeError("Cannot open an approval: toolCallId is required"));
    }
    return this.#tx(async (c) => {
      const row = await this.#fence(c, lease, "open an approval");
      const have = await c.query(
        `SELECT 1 FROM ${this.#t("approvals")} WHERE session_id = $1 AND tool_call_id = $2`,
        [lease.sessionId, toolCallId],
      );
      if (have.rows.length) return;
      const written = await this.#appendIn(c, lease, row, [{
        kind: "approval.requested",
        payload: { toolCallId, request },
        idemKey: `approval.req:${toolCallId}`,
      }]);
      await c.query(
        `INSERT INTO ${this.#t("approvals")} (session_id, tool_call_id, request, requested_seq)
         VALUES ($1, $2, $3::jsonb, $4)`,
        [
          lease.sessionId,
          toolCallId,
          storableJson(request, "open an approval"),
          written[0]?.seq ?? row.next_seq,
        ],
      );
    });
  }

  async #deleteIn(c: PgClientLike, ids: string[]): Promise<void> {
    for (const t of ["events", "checkpoints", "approvals", "inbox", "sessions"]) {
      await c.query(`DELETE FROM ${this.#t(t)} WHERE session_id = ANY($1)`, [ids]);
    }
  }

  /** {@inheritDoc SessionStore.delete} */
  async delete(sessionId: string): Promise<void> {
    await this.#tx((c) => this.#deleteIn(c, [sessionId]));
  }

  /** {@inheritDoc SessionStore.prune} */
  async prune(policy: PrunePolicy = {}): Promise<number> {
    let total = 0;
    const s = this.#t("sessions");
    while (true) {
      const n = await this.#tx(async (c) => {
        const r = await c.query(
          `SELECT session_id FROM ${s}
           WHERE status IN ('done', 'failed', 'idle')
             AND (owner_id IS NULL OR lease_expires_at <= now())
             AND ((ttl_ms IS NOT NULL AND updated_at + ttl_ms * interval '1 millisecond' <= now())
               OR ($1::bigint IS NOT NULL
                   AND updated_at + $1::bigint * interval '1 millisecond' <= now()))
           LIMIT 500 FOR UPDATE SKIP LOCKED`,
          [policy.finishedOlderThanMs ?? null],
        );
        const ids = r.rows.map((x) => x.session_id as string);
        if (ids.length) await this.#deleteIn(c, ids);
        return ids.length;
      });
      total += n;
      if (n < 500) break;
    }
    const keep = Math.max(1, policy.keepCheckpoints ?? 2);
    const db = await this.#q();
    await db.query(
      `DELETE FROM ${this.#t("checkpoints")} AS c USING (
         SELECT session_id, seq, row_number() OVER (PARTITION BY session_id ORDER BY seq DESC) AS rn
         FROM ${this.#t("checkpoints")}) AS x
       WHERE c.session_id = x.session_id AND c.seq = x.seq AND x.rn > $1`,
      [keep],
    );
    return total;
  }

  /** {@inheritDoc SessionStore.close} */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#bus.emit("close");
    if (this.#reconnect) clearTimeout(this.#reconnect);
    const listener = this.#listener;
    this.#listener = undefined;
    await this.#listening?.catch(() => {});
    await listener?.end().catch(() => {});
    if (this.#ownPool) await this.#pool?.end().catch(() => {});
  }
}

class DuplicateSubmit extends Error {}

function noop(): void {}

const guarded = new WeakSet<object>();

/** Adds one error listener per pooled client (clients are reused). */
function guardClient(c: { on(event: "error", fn: (err: Error) => void): unknown }): void {
  if (guarded.has(c)) return;
  guarded.add(c);
  c.on("error", noop);
}

function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  const code = e?.code ?? "";
  return code.startsWith("08") || code === "57P01" || code === "57P03" ||
    code === "ECONNREFUSED" || code === "ECONNRESET" ||
    /Connection terminated|connect ECONNREFUSED|terminating connection/i.test(e?.message ?? "");
}
