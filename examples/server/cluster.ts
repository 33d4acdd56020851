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
 * | GET | `/sessions/:id/turns` | `{enabled, turns}`: turns with changes (VCS, manual §17.2), read from git |
 * | GET | `/sessions/:id/turns/:n/diff` | `{turn, patch}`: the turn's patch; 404 for a turn the session does not have |
 *
 * The browser page at `/` speaks both modes (it reads `mode` from `GET /sessions/:id`).
 *
 * Per-turn snapshots (`VCS_MODE`, manual §17) are taken by the worker running the turn, in the
 * git directory or shadow repository of the tenant's workspace. A worker that takes a session
 * over (after a crash, a park or a stop) reads the session's turn numbers and latest snapshot
 * from git, not from its own memory, and a turn number is never written twice. A turn that a
 * park, a crash or a stop cut short is one turn in the list, with all its changes, recorded by
 * the worker that finishes it. Front ends answer the turns routes from git alone (no engine,
 * nothing written).
 *
 * A tenant's MCP servers (`<DATA_DIR>/tenants/<id>/mcp.json`, as in single-process mode) start
 * on a worker when the tenant's first session runs there, serve all the tenant's sessions on
 * that worker (tools `mcp__<server>__<tool>`, each call approved), and are closed by the
 * worker's `stop()`. A worker reads `mcp.json` once: restart workers to apply a change.
 *
 * Workers and front ends need the tenants' folders (`DATA_DIR`): on shared storage when they
 * run on several machines.
 *
 * Not in this mode: `POST /sessions/:id/resume` (workers resume sessions themselves) and
 * `APPROVAL_TIMEOUT_MS` (an approval nobody answers parks the session, `APPROVAL_HOLD_MS`).
 *
 * The npm `pg` driver (the one `PostgresSessionStore` uses) is loaded only in this mode, by
 * {@link openClusterStore}.
 *
 * @module
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import {
  agentRef,
  approvalFields,
  CompositeHook,
  createDefaultEngine,
  type EngineHook,
  type McpManager,
  type Message,
  Mode,
  OpenAIProvider,
  type ProviderClient,
  resolveVcsPlan,
  SessionVcs,
  type ToolRegistry,
  type TurnEngine,
  type VcsCommitResult,
  VcsHook,
  type VcsSkippedFile,
} from "../../mod.ts";
import {
  type ApprovalDecision,
  type PgPoolLike,
  PostgresSessionStore,
  restoreSession,
  type SessionStore,
  SessionWorker,
  type SessionWorkerOptions,
  type StopOptions,
  StoreHook,
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
import { McpToolMirror, startTenantMcp } from "./_mcp.ts";
import { readSessionVcs, turnDiffBody, turnsBody } from "./_vcs.ts";
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

/** The tenant's folder: the same as in the single-process server. */
function tenantDirOf(config: ServerConfig, tenant: TenantConfig): string {
  return path.join(config.dataDir, "tenants", tenant.id);
}

/** The tenant's workspace: the same folder as in the single-process server. */
function workspaceOf(config: ServerConfig, tenant: TenantConfig): string {
  return path.join(tenantDirOf(config, tenant), "workspace");
}

/** Options of {@link createClusterWorker}. */
export interface ClusterWorkerOptions {
  /** Makes a tenant's provider (default `OpenAIProvider` with the tenant's key and base URL). */
  providerFor?: (tenant: TenantConfig) => ProviderClient;
  /**
   * Errors that do not stop the worker (default: logged on stderr): a session that failed,
   * a snapshot that could not be taken, an MCP server that did not connect.
   */
  onError?: (err: unknown, sessionId?: string) => void;
  /** How often to look for runnable sessions, in ms (default 1,000). */
  pollMs?: number;
}

/**
 * What a worker keeps beside its sessions: each tenant's MCP servers, started when the tenant's
 * first session runs here and shared by its sessions, and the snapshot handles of the sessions
 * it ran (their last snapshot may still be being written when a session ends).
 */
class WorkerResources {
  readonly #config: ServerConfig;
  readonly #report: (err: unknown, sessionId?: string) => void;
  readonly #mcp = new Map<string, Promise<McpToolMirror | null>>();
  readonly #managers: McpManager[] = [];
  readonly #vcs = new Map<string, SessionVcs>();
  #closed = false;

  constructor(config: ServerConfig, report: (err: unknown, sessionId?: string) => void) {
    this.#config = config;
    this.#report = report;
  }

  /**
   * The session's snapshot hook (manual §17), or `undefined` when snapshots are off. The
   * session's numbering and latest snapshot are read again from git: another worker may have
   * run it since this process last did (after a crash, a park or a stop), so nothing this
   * process remembers of it counts.
   *
   * @param resuming True when the history ends in a turn a crash or a park cut short, which
   *   `engine.resume()` goes on with: that turn's "before" snapshot, taken where it started, is
   *   still the session's latest, so it is kept (the whole turn's changes are the turn's own).
   */
  async vcsHook(
    workspace: string,
    sessionId: string,
    resuming: boolean,
  ): Promise<{ hook: VcsHook; vcs: WorkerSessionVcs } | undefined> {
    if (this.#config.vcsMode === "off") return undefined;
    let vcs: WorkerSessionVcs;
    try {
      const plan = resolveVcsPlan(workspace, { mode: this.#config.vcsMode });
      if (plan.mode === "off") return undefined;
      vcs = new WorkerSessionVcs(plan, sessionId);
    } catch (err) {
      this.#report(err, sessionId); // e.g. VCS_MODE=native outside a repository: no snapshots
      return undefined;
    }
    await vcs.reload();
    if (resuming && await vcs.hasSnapshot()) vcs.keepNextBefore();
    this.#vcs.set(sessionId, vcs);
    return { hook: new VcsHook(vcs, { onError: (err) => this.#report(err, sessionId) }), vcs };
  }

  /**
   * Gives `registry` the tenant's MCP tools, starting the tenant's servers on first use (their
   * first connect is awaited, as the single-process server awaits it before a turn).
   */
  async attachMcp(tenant: TenantConfig, registry: ToolRegistry): Promise<void> {
    if (this.#closed) return;
    let mirror = this.#mcp.get(tenant.id);
    if (!mirror) {
      const tools = new McpToolMirror();
      const mcp = startTenantMcp(tools, {
        tenantId: tenant.id,
        tenantDir: tenantDirOf(this.#config, tenant),
        workspace: workspaceOf(this.#config, tenant),
        log: (message) => this.#report(new Error(message)),
      });
      if (mcp) this.#managers.push(mcp.manager);
      mirror = mcp ? mcp.ready.then(() => tools) : Promise.resolve(null);
      this.#mcp.set(tenant.id, mirror);
    }
    (await mirror)?.attach(registry);
  }

  /** Waits for the snapshots being written, then closes every MCP server. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#vcs.values()].map((v) => v.idle()));
    this.#vcs.clear();
    await Promise.all(this.#managers.map((m) => m.closeAll()));
    this.#managers.length = 0;
    this.#mcp.clear();
  }
}

/** The worker's `StoreHook` among an engine's hooks (the worker adds it after `createEngine`). */
function storeHookOf(hook: EngineHook | undefined): StoreHook | undefined {
  if (hook instanceof StoreHook) return hook;
  if (hook instanceof CompositeHook) {
    for (const h of hook.hooks) {
      const found = storeHookOf(h);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * A session's snapshots on a worker: {@link SessionVcs}, plus two rules for turns that are cut
 * short (a park, a lost lease, a stop past its grace period) and go on elsewhere:
 *
 * - the end of a turn the worker no longer records (its `StoreHook` is detached, and the store
 *   never sees that `turn_end`) takes no snapshot: the turn is not over, whoever resumes it
 *   ends it;
 * - the turn that goes on here keeps the "before" snapshot taken where it started.
 */
class WorkerSessionVcs extends SessionVcs {
  #keepBefore = false;
  #engine: TurnEngine | undefined;

  /** Follows `engine`: its turn ends are snapshotted only while the worker records them. */
  follow(engine: TurnEngine): void {
    this.#engine = engine;
  }

  /** The next `beginTurn()` takes no snapshot: the session's latest is that turn's "before". */
  keepNextBefore(): void {
    this.#keepBefore = true;
  }

  /** Whether the session has a latest snapshot (`refs/agent/<id>/latest`). */
  hasSnapshot(): Promise<boolean> {
    const { git, gitDir } = this.plan;
    const ref = `${agentRef(this.sessionId)}/latest`;
    return new Promise((resolve) => {
      execFile(git!, ["--git-dir", gitDir!, "rev-parse", "-q", "--verify", ref], (err) => {
        resolve(!err);
      });
    });
  }

  /** `SessionVcs.beginTurn`, unless {@link WorkerSessionVcs.keepNextBefore} was called. */
  override beginTurn(): Promise<VcsSkippedFile[]> {
    if (!this.#keepBefore) return super.beginTurn();
    this.#keepBefore = false;
    return Promise.resolve([]);
  }

  /** `SessionVcs.commitTurn`, unless the worker stopped recording the engine's events. */
  override commitTurn(status: string): Promise<VcsCommitResult> {
    if (storeHookOf(this.#engine?.hook)?.detached) {
      return Promise.resolve({ turn: 0, changed: false, commit: null, skipped: [] });
    }
    return super.commitTurn(status);
  }
}

/**
 * Whether `engine.resume()` goes on with a turn of `messages` (the engine's rule, manual §12.4):
 * calls without results at the end, or a last tool result or user message with no turn end.
 */
function cutShort(messages: Message[]): boolean {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === "assistant") {
      const answered = new Set(
        messages.slice(i + 1).filter((x) => x.role === "tool").map((x) => x.tool_call_id),
      );
      if ((m.tool_calls ?? []).some((c) => !answered.has(c.id))) return true;
      break;
    }
    if (m.role !== "tool") break;
  }
  const last = messages.at(-1);
  if (!last || last.turnEnd) return false;
  return last.role === "tool" || (last.role === "user" && !last.compactionSummary);
}

/** A `SessionWorker` whose `stop()` also ends what {@link WorkerResources} holds. */
class ClusterWorker extends SessionWorker {
  readonly #resources: WorkerResources;

  constructor(store: SessionStore, options: SessionWorkerOptions, resources: WorkerResources) {
    super(store, options);
    this.#resources = resources;
  }

  /** Stops like `SessionWorker.stop`, then lets snapshots finish and closes the MCP servers. */
  override async stop(options: StopOptions = {}): Promise<void> {
    await super.stop(options);
    await this.#resources.close();
  }
}

/**
 * A `SessionWorker` that runs the reference server's sessions: each session's engine is built
 * like the single-process server's (the tenant's workspace and provider, `Mode.INTERACTIVE`, the
 * engine limits, no `ask_user` / `propose_plan` / `request_directory`, per-turn snapshots with
 * `VCS_MODE`, the tenant's MCP servers from its `mcp.json`), from the history in the store. A
 * tenant's MCP servers start when its first session runs on this worker and serve all its
 * sessions here. Call `start()` on it, and `stop()` before exit (it also waits for snapshots
 * being written and closes the MCP servers).
 *
 * @param config The server configuration (tenants, model, limits, `vcsMode`, `workerId`,
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
  const report = options.onError ?? ((err: unknown, sessionId?: string) => {
    console.error(`worker: ${sessionId ?? "-"}: ${(err as Error)?.message ?? err}`);
  });
  const resources = new WorkerResources(config, report);
  return new ClusterWorker(store, {
    ownerId: config.workerId,
    maxConcurrent: config.workerConcurrency ?? 8,
    ttlMs: config.leaseTtlMs ?? 30_000,
    approvalHoldMs: config.approvalHoldMs ?? 30_000,
    pollMs: options.pollMs,
    onError: report,
    createEngine: async ({ sessionId, messages, meta }): Promise<TurnEngine> => {
      const tenant = tenants.get(String(meta.tenant));
      if (!tenant) {
        throw new Error(`Cannot run session ${sessionId}: tenant ${meta.tenant} is not configured`);
      }
      const workspace = workspaceOf(config, tenant);
      fs.mkdirSync(workspace, { recursive: true });
      const limits = config.limits;
      const snapshots = await resources.vcsHook(workspace, sessionId, cutShort(messages));
      const engine = createDefaultEngine({
        workspace,
        model: tenant.model ?? config.model,
        provider: providerOf(tenant),
        mode: Mode.INTERACTIVE,
        toolResultDir: path.join(
          tenantDirOf(config, tenant),
          "sessions",
          sessionId,
          "tool-results",
        ),
        // Snapshots through this hook (not the `vcs` option): its state is read from git first.
        vcs: { mode: "off" },
        hook: snapshots?.hook,
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
      snapshots?.vcs.follow(engine);
      await resources.attachMcp(tenant, engine.registry);
      return engine;
    },
  }, resources);
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
    // Snapshots are read from git in the tenant's workspace (workers write them; no engine here).
    if (parts.length === 3 && method === "GET" && action === "turns") {
      const { enabled, vcs } = await this.#vcs(tenant, id);
      return this.#json(res, 200, await turnsBody(vcs, enabled));
    }
    if (parts.length === 5 && method === "GET" && action === "turns" && parts[4] === "diff") {
      const { vcs } = await this.#vcs(tenant, id);
      return this.#json(res, 200, await turnDiffBody(vcs, parts[3]));
    }
    throw new HttpError(404, "not found");
  }

  /** The session's snapshots, read-only (`_vcs.ts`). */
  #vcs(tenant: TenantConfig, id: string): ReturnType<typeof readSessionVcs> {
    return readSessionVcs(workspaceOf(this.#o, tenant), this.#o.vcsMode, id);
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
