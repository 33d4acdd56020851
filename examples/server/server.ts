/**
 * The reference HTTP + SSE server (manual §18.1, §18.4) on `node:http`, so it runs unchanged
 * under Deno and Node:
 *
 * - one engine per session (`Map<tenant/session, SessionRuntime>`, manual §5.1);
 * - `run()` calls of a session queue up and run in order;
 * - events are written as SSE frames straight from the engine's stream, waiting for the socket
 *   to drain (the engine does not advance while the client is slow: no unbounded buffering);
 * - suspended approvals: `permission_required` goes to the client, `POST
 *   /sessions/:id/approvals/:reqId` answers it; a timeout or a disconnect answers DENY;
 * - a client disconnect interrupts the turn (`engine.requestInterrupt()`, manual §9.3);
 * - per tenant: workspace, provider, MCP config; per session: `toolResultDir`, `stateDir`
 *   (`FileLogHook`), VCS session (manual §18.4);
 * - a restart restores sessions from their `FileLogHook` files and asks again for approvals that
 *   were pending (`POST /sessions/:id/resume` → `engine.resume()`, manual §12.4);
 * - bearer-token auth per tenant: no token or a wrong one gets 401; another tenant's session is
 *   404, exactly like one that does not exist;
 * - request bodies are bounded (`MAX_BODY_BYTES`), and so are queued turns per session.
 *
 * Routes (all JSON unless noted; every `/sessions` route needs `Authorization: Bearer <token>`):
 *
 * | Method | Path | What |
 * | --- | --- | --- |
 * | GET | `/` | the browser page (no auth; it asks for the token) |
 * | GET | `/sessions` | the tenant's sessions |
 * | POST | `/sessions` | new session → `{id}` (201) |
 * | GET | `/sessions/:id` | history, pending approvals, whether a resume is due, `mode: "single"` |
 * | POST | `/sessions/:id/messages` | `{text}` → SSE of the turn |
 * | POST | `/sessions/:id/resume` | SSE of `engine.resume()` (after a restart) |
 * | POST | `/sessions/:id/approvals/:reqId` | `{outcome: once/always_tool/always_command/deny}` |
 * | POST | `/sessions/:id/retry` | SSE of `engine.retry()` after a retriable error (manual §9.4); 409 when there is none |
 * | POST | `/sessions/:id/interrupt` | stops the running turn |
 * | GET | `/sessions/:id/turns` | turns with changes (VCS, manual §17.2) |
 * | GET | `/sessions/:id/turns/:n/diff` | the turn's patch |
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import {
  approvalFields,
  ApprovalOutcome,
  createDefaultEngine,
  type EventStream,
  FileLogHook,
  type McpManager,
  type Message,
  Mode,
  OpenAIProvider,
  type PermissionRequest,
  type ProviderClient,
  type SessionVcs,
  type TurnEngine,
  type WsEvent,
} from "../../mod.ts";
import {
  HttpError,
  HttpListener,
  readJsonBody,
  SECURITY_HEADERS,
  sendJson,
  serveAsset,
  TenantTokens,
} from "./_http.ts";
import { startTenantMcp } from "./_mcp.ts";
import { openSessionVcs, turnDiffBody, turnsBody } from "./_vcs.ts";
import type { EngineLimits, ServerConfig, TenantConfig } from "./config.ts";

/** Options of {@link AgentServer}: a {@link ServerConfig} plus test seams. */
export interface AgentServerOptions extends ServerConfig {
  /** Makes a tenant's provider (default `OpenAIProvider` with the tenant's key and base URL). */
  providerFor?: (tenant: TenantConfig) => ProviderClient;
  /** Turns waiting per session beyond the running one before 429 (default 4). */
  maxQueuedTurns?: number;
  /** SSE keep-alive comment interval in ms (default 15,000). */
  keepAliveMs?: number;
}

interface PendingApproval {
  request: PermissionRequest;
  resolve: (outcome: ApprovalOutcome) => void;
  timer: ReturnType<typeof setTimeout>;
}

interface SessionRuntime {
  tenant: TenantConfig;
  id: string;
  engine: TurnEngine;
  hook: FileLogHook;
  mcp: McpManager | null;
  mcpReady: Promise<void>;
  vcs: SessionVcs | null;
  queue: Promise<void>;
  waiting: number;
  pending: Map<string, PendingApproval>;
}

/** An HTTP error with its status, answered as `{error}`. */
const SESSION_ID_RE = /^s-[a-f0-9]{16}$/;
const OUTCOMES = new Set<string>(Object.values(ApprovalOutcome));
/** True when the history ends with tool calls that have no result yet (manual §12.4). */
function pendingCalls(messages: Message[]): { id: string; name: string; arguments: string }[] {
  const i = messages.findLastIndex((m) => m.role === "assistant");
  if (i < 0 || !messages[i].tool_calls?.length) return [];
  const answered = new Set(messages.slice(i + 1).map((m) => m.tool_call_id));
  return messages[i].tool_calls!.filter((c) => !answered.has(c.id)).map((c) => ({
    id: c.id,
    name: c.function.name,
    arguments: c.function.arguments,
  }));
}

/** A short, renderable transcript of the history (no system prompt). */
function transcript(messages: Message[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const m of messages) {
    if (m.role === "system") continue;
    const text = typeof m.content === "string"
      ? m.content
      : (m.content ?? []).map((p) => (p.type === "text" ? p.text : "")).join("");
    if (m.role === "tool") {
      out.push({ role: "tool", toolCallId: m.tool_call_id, text: text.slice(0, 2000) });
    } else {
      out.push({
        role: m.role,
        text,
        toolCalls: (m.tool_calls ?? []).map((c) => ({
          id: c.id,
          name: c.function.name,
          arguments: c.function.arguments,
        })),
      });
    }
  }
  return out;
}

/**
 * The reference server. Create, {@link AgentServer.listen}, and {@link AgentServer.close} for a
 * graceful stop (pending approvals stay pending on disk for the next start).
 *
 * @example
 * ```ts
 * import { configFromEnv } from "./config.ts";
 * const server = new AgentServer(configFromEnv(process.env));
 * console.log(await server.listen());
 * ```
 */
export class AgentServer {
  readonly #options: AgentServerOptions;
  readonly #tenants: TenantTokens;
  readonly #providers = new Map<string, ProviderClient>();
  readonly #sessions = new Map<string, SessionRuntime>();
  /** Open SSE responses and their keep-alive timers. */
  readonly #streams = new Map<ServerResponse, ReturnType<typeof setInterval>>();
  #http: HttpListener | undefined;
  #closing = false;

  /**
   * @param options The configuration (see {@link configFromEnv}) and test seams.
   */
  constructor(options: AgentServerOptions) {
    this.#options = options;
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
      this.#options.host,
      this.#options.port,
    );
    return this.#http.url;
  }

  /**
   * Stops gracefully: no new requests; turns that are working (not waiting for a person) are
   * interrupted and awaited; approvals that are pending stay pending in the checkpoint, to be
   * asked again after the next start; every session's state is saved and its MCP servers
   * closed (checklist §19: "Salida del proceso → mcpManager.closeAll(), hook.saveState()").
   */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    const closed = this.#http?.stop() ?? Promise.resolve();
    const working: Promise<void>[] = [];
    for (const rt of this.#sessions.values()) {
      for (const p of rt.pending.values()) clearTimeout(p.timer);
      if (rt.engine.running && rt.pending.size === 0) {
        rt.engine.requestInterrupt();
        working.push(rt.queue);
      }
    }
    await Promise.all(working);
    for (const rt of this.#sessions.values()) {
      try {
        rt.hook.saveState(rt.engine);
      } catch (err) {
        console.error(`Cannot save session ${rt.tenant.id}/${rt.id}: ${(err as Error).message}`);
      }
      await rt.mcpReady;
      await rt.mcp?.closeAll();
    }
    for (const [res, timer] of this.#streams) {
      clearInterval(timer);
      res.destroy();
    }
    this.#streams.clear();
    this.#http?.destroySockets();
    await closed;
  }

  // --- tenants and sessions ---

  #tenantDir(tenant: TenantConfig): string {
    return path.join(this.#options.dataDir, "tenants", tenant.id);
  }

  #workspace(tenant: TenantConfig): string {
    const ws = path.join(this.#tenantDir(tenant), "workspace");
    fs.mkdirSync(ws, { recursive: true });
    return ws;
  }

  #provider(tenant: TenantConfig): ProviderClient {
    let p = this.#providers.get(tenant.id);
    if (!p) {
      // One provider per tenant: credentials never cross tenants (manual §18.4).
      p = this.#options.providerFor?.(tenant) ??
        new OpenAIProvider({ apiKey: tenant.apiKey, baseURL: tenant.baseURL });
      this.#providers.set(tenant.id, p);
    }
    return p;
  }

  #sessionDir(tenant: TenantConfig, id: string): string {
    return path.join(this.#tenantDir(tenant), "sessions", id);
  }

  /** The session's runtime; restored from disk after a restart; `null` when it does not exist. */
  #runtime(tenant: TenantConfig, id: string, create = false): SessionRuntime | null {
    if (!SESSION_ID_RE.test(id)) return null;
    const key = `${tenant.id}/${id}`;
    const known = this.#sessions.get(key);
    if (known) return known;
    const dir = this.#sessionDir(tenant, id);
    if (!create && !fs.existsSync(dir)) return null;
    fs.mkdirSync(dir, { recursive: true });
    const stateDir = path.join(dir, "state");
    const workspace = this.#workspace(tenant);
    const saved = FileLogHook.loadState(id, stateDir);
    const hook = new FileLogHook(id, stateDir);
    const limits: EngineLimits = this.#options.limits;
    const engine = createDefaultEngine({
      workspace,
      model: tenant.model ?? this.#options.model,
      provider: this.#provider(tenant),
      mode: Mode.INTERACTIVE,
      toolResultDir: path.join(dir, "tool-results"),
      // Commands see no other tenant's folder: DATA_DIR is hidden, this workspace bound back.
      sandbox: { hidePaths: [this.#options.dataDir] },
      vcs: { mode: this.#options.vcsMode, sessionId: id },
      messages: saved?.messages,
      hook,
      lang: "en",
      maxIterations: limits.maxIterations,
      contextWindow: limits.contextWindow,
      thresholdPct: limits.thresholdPct,
      softThresholdPct: limits.softThresholdPct,
      capTokens: limits.capTokens,
    });
    if (saved) FileLogHook.applyState(engine, saved);
    hook.attach(engine);
    // This server has no UI for questions, plans or extra folders: the model does not see those
    // tools rather than calling them into a void (checklist §19: handlers "si se usan").
    for (const name of ["ask_user", "propose_plan", "request_directory"]) {
      engine.registry.disable(name);
    }
    const rt: SessionRuntime = {
      tenant,
      id,
      engine,
      hook,
      mcp: null,
      mcpReady: Promise.resolve(),
      vcs: null,
      queue: Promise.resolve(),
      waiting: 0,
      pending: new Map(),
    };
    rt.vcs = openSessionVcs(workspace, this.#options.vcsMode, id);
    // MCP: the tenant's own servers (`_mcp.ts`), in this session's engine's registry.
    const mcp = startTenantMcp(engine.registry, {
      tenantId: tenant.id,
      tenantDir: this.#tenantDir(tenant),
      workspace,
    });
    if (mcp) {
      rt.mcp = mcp.manager;
      rt.mcpReady = mcp.ready;
    }
    engine.setApprover((request) =>
      new Promise<ApprovalOutcome>((resolve) => {
        const reqId = request.toolCallId ?? `approval-${randomUUID()}`;
        // A timeout answers DENY (checklist §19: a fallback for timeout/disconnect).
        const timer = setTimeout(
          () => this.#settle(rt, reqId, ApprovalOutcome.DENY),
          this.#options.approvalTimeoutMs,
        );
        rt.pending.set(reqId, { request, resolve, timer });
      })
    );
    this.#sessions.set(key, rt);
    return rt;
  }

  #settle(rt: SessionRuntime, reqId: string, outcome: ApprovalOutcome): boolean {
    const p = rt.pending.get(reqId);
    if (!p) return false;
    clearTimeout(p.timer);
    rt.pending.delete(reqId);
    p.resolve(outcome);
    return true;
  }

  #denyAll(rt: SessionRuntime): void {
    for (const reqId of [...rt.pending.keys()]) this.#settle(rt, reqId, ApprovalOutcome.DENY);
  }

  // --- HTTP ---

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

  /** Reads a JSON object body of at most `maxBodyBytes` (413 beyond, 400 when not JSON). */
  #body(req: IncomingMessage): Promise<Record<string, unknown>> {
    return readJsonBody(req, this.#options.maxBodyBytes);
  }

  /** The tenant of the bearer token, or a 401. */
  #auth(req: IncomingMessage): TenantConfig {
    const tenant = this.#tenants.tenantOf(req);
    if (!tenant) throw new HttpError(401, "unauthorized");
    return tenant;
  }

  async #route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const parts = url.pathname.split("/").filter(Boolean);
    const method = req.method ?? "GET";
    if (parts[0] !== "sessions") {
      return await serveAsset(method, url.pathname, res);
    }
    if (this.#closing) throw new HttpError(503, "shutting down");
    let tenant: TenantConfig;
    try {
      tenant = this.#auth(req);
    } catch (err) {
      // Drain nothing, tell nothing: the same answer for every unauthorised request.
      this.#json(res, 401, { error: "unauthorized" }, { "www-authenticate": "Bearer" });
      void err;
      return;
    }
    if (parts.length === 1) {
      if (method === "GET") return this.#json(res, 200, { sessions: this.#list(tenant) });
      if (method === "POST") {
        await this.#body(req);
        const id = `s-${randomUUID().replaceAll("-", "").slice(0, 16)}`;
        this.#runtime(tenant, id, true);
        return this.#json(res, 201, { id });
      }
      throw new HttpError(404, "not found");
    }
    const rt = this.#runtime(tenant, parts[1]);
    if (!rt) throw new HttpError(404, "not found"); // also another tenant's session
    const action = parts[2];
    if (parts.length === 2 && method === "GET") return this.#json(res, 200, this.#describe(rt));
    if (parts.length === 3 && method === "POST" && action === "messages") {
      const body = await this.#body(req);
      if (typeof body.text !== "string" || body.text.trim() === "") {
        throw new HttpError(400, "text must be a non-empty string");
      }
      const text = body.text;
      return this.#streamTurn(rt, res, () => rt.engine.run(text));
    }
    if (parts.length === 3 && method === "POST" && action === "resume") {
      await this.#body(req);
      return this.#streamTurn(rt, res, () => rt.engine.resume());
    }
    if (parts.length === 3 && method === "POST" && action === "retry") {
      await this.#body(req);
      if (!canRetry(rt.engine)) {
        throw new HttpError(
          409,
          "nothing to retry: the last turn did not end with a retriable error",
        );
      }
      return this.#streamTurn(rt, res, () => rt.engine.retry());
    }
    if (parts.length === 3 && method === "POST" && action === "interrupt") {
      await this.#body(req);
      const running = rt.engine.running;
      rt.engine.requestInterrupt();
      this.#denyAll(rt);
      return this.#json(res, 200, { interrupted: running });
    }
    if (parts.length === 4 && method === "POST" && action === "approvals") {
      const body = await this.#body(req);
      const outcome = String(body.outcome ?? "");
      if (!OUTCOMES.has(outcome)) {
        throw new HttpError(400, "outcome must be once, always_tool, always_command or deny");
      }
      if (!this.#settle(rt, parts[3], outcome as ApprovalOutcome)) {
        throw new HttpError(404, "no such pending approval");
      }
      return this.#json(res, 200, { ok: true });
    }
    if (parts.length === 3 && method === "GET" && action === "turns") {
      return this.#json(res, 200, await turnsBody(rt.vcs));
    }
    if (parts.length === 5 && method === "GET" && action === "turns" && parts[4] === "diff") {
      return this.#json(res, 200, await turnDiffBody(rt.vcs, parts[3]));
    }
    throw new HttpError(404, "not found");
  }

  #list(tenant: TenantConfig): { id: string; running: boolean }[] {
    let ids: string[] = [];
    try {
      ids = fs.readdirSync(path.join(this.#tenantDir(tenant), "sessions"))
        .filter((id) => SESSION_ID_RE.test(id)).sort();
    } catch {
      // no sessions yet
    }
    return ids.map((id) => ({
      id,
      running: this.#sessions.get(`${tenant.id}/${id}`)?.engine.running ?? false,
    }));
  }

  #describe(rt: SessionRuntime): Record<string, unknown> {
    const pending = [...rt.pending.entries()].map(([reqId, p]) => ({
      reqId,
      name: p.request.toolName,
      arguments: p.request.arguments,
      reason: p.request.reason,
      fields: approvalFields(p.request),
    }));
    return {
      id: rt.id,
      mode: "single", // the page's cue: turns stream from POST /messages
      running: rt.engine.running,
      messages: transcript(rt.engine.messages),
      pendingApprovals: pending,
      // Calls left without results by a restart: POST /resume asks for them again.
      needsResume: !rt.engine.running && pendingCalls(rt.engine.messages).length > 0,
      // The last turn ended with a retriable error (manual §9.4): POST /retry runs it again.
      canRetry: canRetry(rt.engine),
      vcs: rt.vcs !== null,
    };
  }

  /**
   * Runs a turn in the session's queue and forwards its events as SSE, one frame per event,
   * written as they come and waiting for the socket to drain (manual §9.3, checklist §19).
   */
  async #streamTurn(
    rt: SessionRuntime,
    res: ServerResponse,
    start: () => EventStream<WsEvent>,
  ): Promise<void> {
    if (rt.waiting >= (this.#options.maxQueuedTurns ?? 4)) {
      throw new HttpError(429, "too many turns queued for this session");
    }
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-store",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    res.write(": start\n\n");
    let gone = false;
    let active = false;
    const onClose = () => {
      if (res.writableFinished) return;
      gone = true;
      if (this.#closing) return; // a graceful stop keeps pending approvals for the next start
      if (active) {
        // Disconnect: pending approvals are denied and the turn is interrupted (manual §9.3).
        this.#denyAll(rt);
        rt.engine.requestInterrupt();
      }
    };
    res.on("close", onClose);
    const keepAlive = setInterval(() => {
      if (!gone) res.write(": ping\n\n");
    }, this.#options.keepAliveMs ?? 15_000);
    this.#streams.set(res, keepAlive);
    const write = async (frame: string) => {
      if (gone) return;
      if (!res.write(frame)) {
        await new Promise<void>((resolve) => {
          res.once("drain", resolve);
          res.once("close", resolve);
        });
      }
    };
    rt.waiting++;
    const task = rt.queue.then(async () => {
      rt.waiting--;
      if (gone || this.#closing) return; // the client left while the turn was queued
      active = true;
      await rt.mcpReady;
      try {
        for await (const event of start()) {
          await write(
            `id: ${event.data.seq}\nevent: ${event.type}\ndata: ${
              JSON.stringify(
                event.type === "permission_required"
                  ? { ...event.data, fields: approvalFields(event.data as { name: string }) }
                  : event.data,
              )
            }\n\n`,
          );
        }
      } catch (err) {
        // Host mistakes thrown after the events (DESIGN §3).
        await write(
          `event: server_error\ndata: ${JSON.stringify({ error: (err as Error).message })}\n\n`,
        );
      } finally {
        active = false;
      }
    });
    rt.queue = task.catch(() => {});
    try {
      await task;
    } finally {
      clearInterval(keepAlive);
      res.off("close", onClose);
      this.#streams.delete(res);
      if (!gone) res.end();
    }
  }
}

/** Whether the engine's last turn ended with a retriable error (`engine.retry()` would run). */
function canRetry(engine: TurnEngine): boolean {
  if (engine.running) return false;
  const mark = engine.messages.at(-1)?.turnEnd as
    | { status?: string; retriable?: boolean }
    | undefined;
  return mark?.status === "error" && mark.retriable === true;
}
