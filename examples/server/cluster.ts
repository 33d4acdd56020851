/**
 * The reference server's multi-worker mode (issue 11), selected by `DATABASE_URL`: sessions live
 * in a {@link PostgresSessionStore}, and two kinds of process share it.
 *
 * - **Front ends** ({@link ClusterFrontEnd}, `deno task server`): accept messages
 *   (`store.submit`, into the session's inbox), answer approvals (`store.answerApproval`: the
 *   first answer wins, from any front end) and stream a session's events by tailing the store —
 *   every event once, in order, from a given `seq`. The `seq` is the SSE `id`, so a client that
 *   reconnects, to this or any other front end, resumes with `Last-Event-ID`.
 * - **Workers** ({@link createClusterWorker}, `deno task server:worker`): `SessionWorker`s that
 *   claim runnable sessions, rebuild each engine from the store and run its turns. A worker that
 *   dies mid-turn loses its lease after `LEASE_TTL_MS`; another worker takes the session over,
 *   and a tool that had started is not run again (it gets an "interrupted, not re-run" result).
 *
 * Tenancy and auth are the single-process server's: a bearer token per tenant, the tenant kept
 * in the session's `meta`, and another tenant's session answered 404 exactly like a missing one.
 *
 * Routes (all under `Authorization: Bearer <token>`, JSON unless noted):
 *
 * | Method | Path | What |
 * | --- | --- | --- |
 * | GET | `/sessions` | the tenant's sessions and their status |
 * | POST | `/sessions` | new session → `{id}` (201) |
 * | GET | `/sessions/:id` | status, history, pending approvals, `lastSeq`, `mode: "cluster"` |
 * | POST | `/sessions/:id/messages` | `{text}` → 202 `{status: "queued" \| "duplicate"}`; header `Idempotency-Key` makes a retry safe |
 * | GET | `/sessions/:id/events` | SSE of the session's events after `Last-Event-ID` (or `?after=N`, default 0), kept open |
 * | POST | `/sessions/:id/approvals/:reqId` | `{outcome}`; 409 when it was already answered |
 * | POST | `/sessions/:id/retry` | → 202 `{status}`: the last turn again, when it ended with a retriable error (manual §9.4); 409 otherwise |
 * | POST | `/sessions/:id/interrupt` | → 202 `{status}`: a `cancel` in the inbox; the worker running the turn interrupts it (tool processes killed, open approvals closed), inputs sent before it are dropped; `Idempotency-Key` as for messages |
 *
 * The browser page at `/` speaks both modes (it reads `mode` from `GET /sessions/:id`).
 *
 * Not in this mode: per-turn VCS snapshots and per-tenant MCP servers. Workers on several
 * machines need the tenants' workspaces (`DATA_DIR`) on shared storage.
 *
 * The npm `pg` driver (the one `PostgresSessionStore` uses) is loaded only in this mode, by
 * {@link openClusterStore}.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import {
  approvalFields,
  createDefaultEngine,
  type Message,
  Mode,
  OpenAIProvider,
  type ProviderClient,
  type TurnEngine,
} from "../../mod.ts";
import {
  type ApprovalDecision,
  type PgPoolLike,
  PostgresSessionStore,
  restoreSession,
  type SessionStore,
  SessionWorker,
} from "../../store/mod.ts";
import {
  HttpError,
  HttpListener,
  readJsonBody,
  SECURITY_HEADERS,
  sendJson,
  serveAsset,
  TenantTokens,
} from "./_http.ts";
import type { ServerConfig, TenantConfig } from "./config.ts";

/** One session as listed by `GET /sessions`. */
export interface SessionSummary {
  /** Session id. */
  id: string;
  /** Store status (`idle`, `runnable`, `running`, `waiting_approval`, `done`, `failed`). */
  status: string;
}

/** The store of the multi-worker mode and what the front end needs besides it. */
export interface ClusterStore {
  /** The shared store. */
  store: PostgresSessionStore;
  /** The tenant's sessions, by id. */
  listSessions(tenantId: string): Promise<SessionSummary[]>;
  /** Closes the store and its connections. */
  close(): Promise<void>;
}

/** Options of {@link openClusterStore}. */
export interface OpenClusterStoreOptions {
  /** Connections of the pool (default 10). */
  max?: number;
  /** Poll interval of tails and waits when no notification arrives, in ms (default 2,000). */
  pollMs?: number;
}

/**
 * Opens the PostgreSQL store of `config.databaseUrl` (loading `pg` now) and migrates it
 * (`setup()`, safe from every process at once).
 *
 * @param config The server configuration (`databaseUrl`, `tablePrefix`).
 * @throws {Error} When `databaseUrl` is missing, or the database cannot be reached or migrated.
 */
export async function openClusterStore(
  config: ServerConfig,
  options: OpenClusterStoreOptions = {},
): Promise<ClusterStore> {
  const url = config.databaseUrl;
  if (!url) throw new Error("Cannot open the session store: DATABASE_URL is not set");
  const mod = await import("pg") as unknown as {
    default?: { Pool: new (c: Record<string, unknown>) => PgPoolLike };
    Pool?: new (c: Record<string, unknown>) => PgPoolLike;
  };
  const Pool = (mod.default ?? mod).Pool!;
  const pool = new Pool({ connectionString: url, max: options.max ?? 10 });
  pool.on("error", () => {}); // an idle client dropped by the server: the next query reconnects
  const prefix = config.tablePrefix ?? "agent_";
  const store = new PostgresSessionStore({
    pool,
    connectionString: url,
    tablePrefix: prefix,
    pollMs: options.pollMs,
  });
  try {
    await store.setup();
  } catch (err) {
    await store.close().catch(() => {});
    await pool.end().catch(() => {});
    throw new Error(`Cannot open the session store: ${(err as Error).message}`);
  }
  return {
    store,
    async listSessions(tenantId) {
      const r = await pool.query(
        `SELECT session_id, status FROM ${prefix}sessions WHERE meta->>'tenant' = $1
         ORDER BY session_id`,
        [tenantId],
      );
      return r.rows.map((row) => ({ id: String(row.session_id), status: String(row.status) }));
    },
    async close() {
      await store.close();
      await pool.end();
    },
  };
}

/** The tenant's workspace: the same folder as in the single-process server. */
function workspaceOf(config: ServerConfig, tenant: TenantConfig): string {
  return path.join(config.dataDir, "tenants", tenant.id, "workspace");
}

/** Options of {@link createClusterWorker}. */
export interface ClusterWorkerOptions {
  /** Makes a tenant's provider (default `OpenAIProvider` with the tenant's key and base URL). */
  providerFor?: (tenant: TenantConfig) => ProviderClient;
  /** Errors that do not stop the worker (default: logged on stderr). */
  onError?: (err: unknown, sessionId?: string) => void;
  /** How often to look for runnable sessions, in ms (default 1,000). */
  pollMs?: number;
}

/**
 * A `SessionWorker` that runs the reference server's sessions: each session's engine is built
 * like the single-process server's (the tenant's workspace and provider, `Mode.INTERACTIVE`, the
 * engine limits, no `ask_user` / `propose_plan` / `request_directory`), from the history in the
 * store. Call `start()` on it, and `stop()` before exit.
 *
 * @param config The server configuration (tenants, model, limits, `workerId`,
 *   `workerConcurrency`, `leaseTtlMs`, `approvalHoldMs`).
 * @param store The shared store.
 */
export function createClusterWorker(
  config: ServerConfig,
  store: SessionStore,
  options: ClusterWorkerOptions = {},
): SessionWorker {
  const tenants = new Map(config.tenants.map((t) => [t.id, t]));
  const providers = new Map<string, ProviderClient>();
  const providerOf = (tenant: TenantConfig): ProviderClient => {
    let p = providers.get(tenant.id);
    if (!p) {
      // One provider per tenant: credentials never cross tenants (manual §18.4).
      p = options.providerFor?.(tenant) ??
        new OpenAIProvider({ apiKey: tenant.apiKey, baseURL: tenant.baseURL });
      providers.set(tenant.id, p);
    }
    return p;
  };
  return new SessionWorker(store, {
    ownerId: config.workerId,
    maxConcurrent: config.workerConcurrency ?? 8,
    ttlMs: config.leaseTtlMs ?? 30_000,
    approvalHoldMs: config.approvalHoldMs ?? 30_000,
    pollMs: options.pollMs,
    onError: options.onError ?? ((err, sessionId) => {
      console.error(`worker: ${sessionId ?? "-"}: ${(err as Error)?.message ?? err}`);
    }),
    createEngine: ({ sessionId, messages, meta }): TurnEngine => {
      const tenant = tenants.get(String(meta.tenant));
      if (!tenant) {
        throw new Error(`Cannot run session ${sessionId}: tenant ${meta.tenant} is not configured`);
      }
      const limits = config.limits;
      const engine = createDefaultEngine({
        workspace: workspaceOf(config, tenant),
        model: tenant.model ?? config.model,
        provider: providerOf(tenant),
        mode: Mode.INTERACTIVE,
        toolResultDir: path.join(
          config.dataDir,
          "tenants",
          tenant.id,
          "sessions",
          sessionId,
          "tool-results",
        ),
        vcs: { mode: "off" },
        // Commands see no other tenant's folder: DATA_DIR is hidden, this workspace bound back.
        sandbox: { hidePaths: [config.dataDir] },
        messages,
        lang: "en",
        maxIterations: limits.maxIterations,
        contextWindow: limits.contextWindow,
        thresholdPct: limits.thresholdPct,
        softThresholdPct: limits.softThresholdPct,
        capTokens: limits.capTokens,
      });
      for (const name of ["ask_user", "propose_plan", "request_directory"]) {
        engine.registry.disable(name);
      }
      return engine;
    },
  });
}

/** Options of {@link ClusterFrontEnd}: a {@link ServerConfig} plus the store. */
export interface ClusterFrontEndOptions extends ServerConfig {
  /** The shared store. */
  store: SessionStore;
  /** Lists a tenant's sessions (`GET /sessions`; without it, that route answers 501). */
  listSessions?: (tenantId: string) => Promise<SessionSummary[]>;
  /** SSE keep-alive comment interval in ms (default 15,000). */
  keepAliveMs?: number;
  /** Safety-net poll interval of event tails in ms (default: the store's). */
  tailPollMs?: number;
}

const SESSION_ID_RE = /^s-[a-f0-9]{16}$/;
const IDEM_KEY_RE = /^[\x21-\x7e]{1,200}$/;
/** The request's `Idempotency-Key` header (checked), or a new random key. */
function idempotencyKey(req: IncomingMessage): string {
  const given = req.headers["idempotency-key"];
  if (given !== undefined && (typeof given !== "string" || !IDEM_KEY_RE.test(given))) {
    throw new HttpError(400, "Idempotency-Key must be 1–200 visible ASCII characters");
  }
  return given ?? randomUUID();
}

const DECISIONS: Record<string, ApprovalDecision> = {
  once: { approve: true },
  always_tool: { approve: true, always: "tool" },
  always_command: { approve: true, always: "command" },
  deny: { approve: false },
};
/** A short, renderable transcript of the history (no system prompt). */
function transcript(messages: Message[]): Record<string, unknown>[] {
  return messages.filter((m) => m.role !== "system").map((m) => {
    const text = typeof m.content === "string"
      ? m.content
      : (m.content ?? []).map((p) => (p.type === "text" ? p.text : "")).join("");
    if (m.role === "tool") {
      return { role: "tool", toolCallId: m.tool_call_id, text: text.slice(0, 2000) };
    }
    return {
      role: m.role,
      text,
      toolCalls: (m.tool_calls ?? []).map((c) => ({
        id: c.id,
        name: c.function.name,
        arguments: c.function.arguments,
      })),
    };
  });
}

/**
 * An HTTP front end of the multi-worker mode (see the module doc). It runs no turns: workers do.
 * Create, {@link ClusterFrontEnd.listen}, and {@link ClusterFrontEnd.close}.
 *
 * @example
 * ```ts
 * import { configFromEnv } from "./config.ts";
 * const config = configFromEnv(process.env);
 * const { store, listSessions } = await openClusterStore(config);
 * const front = new ClusterFrontEnd({ ...config, store, listSessions });
 * console.log(await front.listen());
 * ```
 */
export class ClusterFrontEnd {
  readonly #o: ClusterFrontEndOptions;
  readonly #tenants: TenantTokens;
  /** Session → tenant, for sessions seen (a session's tenant never changes). */
  readonly #owners = new Map<string, string>();
  readonly #streams = new Set<AbortController>();
  #http: HttpListener | undefined;
  #closing = false;

  /**
   * @param options The configuration and the store.
   */
  constructor(options: ClusterFrontEndOptions) {
    this.#o = options;
    this.#tenants = new TenantTokens(options.tenants);
  }

  /** `http://host:port` once listening. */
  get url(): string {
    return this.#http?.url ?? "";
  }

  /**
   * Starts listening on `host:port`.
   *
   * @returns The base URL.
   * @throws {Error} When the port cannot be bound.
   */
  async listen(): Promise<string> {
    this.#http = await HttpListener.listen(
      (req, res) => void this.#handle(req, res),
      this.#o.host,
      this.#o.port,
    );
    return this.#http.url;
  }

  /**
   * Stops: no new requests, event streams ended (clients resume elsewhere with
   * `Last-Event-ID`). Sessions are untouched: they live in the store and run on workers.
   */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    const closed = this.#http?.stop() ?? Promise.resolve();
    for (const ac of this.#streams) ac.abort();
    this.#http?.destroySockets();
    await closed;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      await this.#route(req, res);
    } catch (err) {
      const status = err instanceof HttpError ? err.status : 500;
      if (status === 500) console.error(err);
      if (!res.headersSent) {
        this.#json(res, status, {
          error: status === 500 ? "internal error" : (err as Error).message,
        });
      } else res.end();
    }
  }

  #json(res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}) {
    sendJson(res, status, body, extra);
  }

  #body(req: IncomingMessage): Promise<Record<string, unknown>> {
    return readJsonBody(req, this.#o.maxBodyBytes);
  }

  /** The session's tenant check: another tenant's session is a 404 like a missing one. */
  async #own(tenant: TenantConfig, id: string): Promise<void> {
    if (!SESSION_ID_RE.test(id)) throw new HttpError(404, "not found");
    let owner = this.#owners.get(id);
    if (owner === undefined) {
      const loaded = await this.#o.store.load(id);
      if (!loaded) throw new HttpError(404, "not found");
      owner = String(loaded.meta.tenant ?? "");
      if (this.#owners.size > 10_000) this.#owners.clear();
      this.#owners.set(id, owner);
    }
    if (owner !== tenant.id) throw new HttpError(404, "not found");
  }

  async #route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const parts = url.pathname.split("/").filter(Boolean);
    const method = req.method ?? "GET";
    if (parts[0] !== "sessions") {
      return await serveAsset(method, url.pathname, res);
    }
    if (this.#closing) throw new HttpError(503, "shutting down");
    const tenant = this.#tenants.tenantOf(req);
    if (!tenant) {
      return this.#json(res, 401, { error: "unauthorized" }, { "www-authenticate": "Bearer" });
    }
    const store = this.#o.store;
    if (parts.length === 1) {
      if (method === "GET") {
        if (!this.#o.listSessions) throw new HttpError(501, "listing sessions is not configured");
        const sessions = await this.#o.listSessions(tenant.id);
        return this.#json(res, 200, {
          sessions: sessions.map((s) => ({ ...s, running: s.status === "running" })),
        });
      }
      if (method === "POST") {
        await this.#body(req);
        const id = `s-${randomUUID().replaceAll("-", "").slice(0, 16)}`;
        await store.create(id, { meta: { tenant: tenant.id } });
        this.#owners.set(id, tenant.id);
        return this.#json(res, 201, { id });
      }
      throw new HttpError(404, "not found");
    }
    const id = parts[1];
    await this.#own(tenant, id);
    const action = parts[2];
    if (parts.length === 2 && method === "GET") {
      const loaded = await store.load(id);
      if (!loaded) throw new HttpError(404, "not found");
      const { messages } = restoreSession(loaded);
      return this.#json(res, 200, {
        id,
        mode: "cluster", // the page's cue: events come from GET /events
        status: loaded.status,
        running: loaded.status === "running",
        lastSeq: loaded.lastSeq,
        messages: transcript(messages),
        pendingApprovals: loaded.approvals.filter((a) => a.status === "pending").map((a) => {
          const name = String(a.request.toolName ?? "");
          const args = (a.request.arguments ?? {}) as Record<string, unknown>;
          return {
            reqId: a.toolCallId,
            name,
            arguments: args,
            reason: a.request.reason,
            fields: approvalFields({ name, arguments: args }),
          };
        }),
      });
    }
    if (parts.length === 3 && method === "POST" && action === "messages") {
      const body = await this.#body(req);
      if (typeof body.text !== "string" || body.text.trim() === "") {
        throw new HttpError(400, "text must be a non-empty string");
      }
      const result = await store.submit(id, {
        kind: "user_input",
        payload: { text: body.text },
        idemKey: idempotencyKey(req),
      });
      if (result === "unknown") throw new HttpError(404, "not found");
      return this.#json(res, 202, { status: result });
    }
    if (parts.length === 3 && method === "POST" && action === "retry") {
      await this.#body(req);
      const loaded = await store.load(id);
      if (!loaded) throw new HttpError(404, "not found");
      const mark = restoreSession(loaded).messages.at(-1)?.turnEnd as
        | { status?: string; retriable?: boolean }
        | undefined;
      if (!(mark?.status === "error" && mark.retriable === true)) {
        throw new HttpError(
          409,
          "nothing to retry: the last turn did not end with a retriable error",
        );
      }
      const result = await store.submit(id, {
        kind: "retry",
        payload: {},
        idemKey: idempotencyKey(req),
      });
      return this.#json(res, 202, { status: result });
    }
    if (parts.length === 3 && method === "POST" && action === "interrupt") {
      await this.#body(req);
      const result = await store.submit(id, {
        kind: "cancel",
        payload: { by: tenant.id },
        idemKey: idempotencyKey(req),
      });
      if (result === "unknown") throw new HttpError(404, "not found");
      return this.#json(res, 202, { status: result });
    }
    if (parts.length === 3 && method === "GET" && action === "events") {
      const raw = req.headers["last-event-id"] ?? url.searchParams.get("after") ?? "0";
      const after = Number(raw);
      if (typeof raw !== "string" || !/^\d+$/.test(raw) || !Number.isSafeInteger(after)) {
        throw new HttpError(400, "Last-Event-ID (or after) must be a non-negative integer");
      }
      return this.#tail(id, after, res);
    }
    if (parts.length === 4 && method === "POST" && action === "approvals") {
      const body = await this.#body(req);
      const decision = DECISIONS[String(body.outcome ?? "")];
      if (!decision) {
        throw new HttpError(400, "outcome must be once, always_tool, always_command or deny");
      }
      const r = await this.#answer(id, { toolCallId: parts[3], decision, by: tenant.id });
      if (r === "unknown") throw new HttpError(404, "no such pending approval");
      if (r === "already-decided") throw new HttpError(409, "the approval was already answered");
      return this.#json(res, 200, { ok: true });
    }
    throw new HttpError(404, "not found");
  }

  /**
   * Answers an approval. A client that answers as soon as it reads `permission_required` (the
   * manual's pattern) can be a moment ahead of the worker opening the request in the store: then
   * the answer is retried for up to 5 s while the log shows that request and no answer.
   */
  async #answer(
    id: string,
    answer: { toolCallId: string; decision: ApprovalDecision; by: string },
  ): Promise<"applied" | "already-decided" | "unknown"> {
    const store = this.#o.store;
    const end = Date.now() + 5000;
    let asked = false;
    for (;;) {
      const r = await store.answerApproval(id, answer);
      if (r !== "unknown" || Date.now() >= end) return r;
      asked ||= (await store.read(id, 0)).some((e) =>
        e.kind === "permission_required" && e.payload.reqId === answer.toolCallId
      );
      if (!asked) return r;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Streams the session's events after `after` as SSE until the client or this server goes. */
  async #tail(id: string, after: number, res: ServerResponse): Promise<void> {
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-store",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    res.write(": start\n\n");
    const ac = new AbortController();
    this.#streams.add(ac);
    const onClose = () => ac.abort();
    res.on("close", onClose);
    const keepAlive = setInterval(() => {
      if (!ac.signal.aborted) res.write(": ping\n\n");
    }, this.#o.keepAliveMs ?? 15_000);
    try {
      const events = this.#o.store.tail(id, after, {
        signal: ac.signal,
        ...(this.#o.tailPollMs ? { pollMs: this.#o.tailPollMs } : {}),
      });
      for await (const e of events) {
        if (ac.signal.aborted) break;
        let data = e.payload;
        if (e.kind === "permission_required") {
          data = { ...data, fields: approvalFields(data as { name: string }) };
        } else if (e.kind === "tool_finished" && "content" in data) {
          // The stored result is for rebuilding the session; clients get the event as the
          // engine emits it (with its preview), as in single-process mode.
          const { content: _, ...rest } = data;
          data = rest;
        }
        const frame = `id: ${e.seq}\nevent: ${e.kind}\ndata: ${
          JSON.stringify({ ...data, seq: e.seq })
        }\n\n`;
        if (!res.write(frame)) {
          // Wait for the client: the tail does not run ahead of a slow reader.
          await new Promise<void>((resolve) => {
            res.once("drain", resolve);
            res.once("close", resolve);
          });
        }
      }
    } catch (err) {
      if (!ac.signal.aborted) {
        res.write(
          `event: server_error\ndata: ${JSON.stringify({ error: (err as Error).message })}\n\n`,
        );
      }
    } finally {
      clearInterval(keepAlive);
      res.off("close", onClose);
      this.#streams.delete(ac);
      ac.abort();
      res.end();
    }
  }
}
