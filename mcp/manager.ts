/**
 * `McpManager`: connects the configured MCP servers and keeps their tools in a
 * {@link ToolRegistry} (manual §15.1, §15.3–§15.5): safe names, approval metadata, normalised
 * schemas, lazy tool search for large tool sets, refresh on `tools/list_changed`, reconnect after a
 * crash on next use, and clean shutdown.
 *
 * @module
 */
import process from "node:process";
import { envAll, envString } from "../_internal/env.ts";
import type { ToolContext, ToolMetadata, ToolRegistry } from "../tools/mod.ts";
import { McpConfigError, type McpServerConfig, normalizeMcpConfig } from "./config.ts";
import {
  type McpBuiltinContext,
  McpClient,
  type McpInProcessServer,
  type McpLogger,
  type McpServerState,
  type McpToolInfo,
  type McpTransportKind,
} from "./client.ts";
import { assignToolNames } from "./naming.ts";
import { definitionChars, type JsonSchema, normalizeInputSchema } from "./schema.ts";
import { formatCallToolResult } from "./result.ts";
import { editDistance, rankDocuments } from "./_search.ts";

/** Name of the lazy-mode search tool (manual §15.4). */
export const MCP_SEARCH_TOOL = "mcp_search_tools";
/** Name of the lazy-mode call tool (manual §15.4). */
export const MCP_CALL_TOOL = "mcp_call_tool";

/** Matches loaded per search (manual §15.4: "las primeras 8 coincidencias"). */
const SEARCH_LOAD_LIMIT = 8;

/** Lazy-mode options (manual §15.4). */
export interface McpLazyOptions {
  /**
   * `true` forces lazy mode, `false` turns it off, unset lets the thresholds decide. Env
   * `ZQAGENT_MCP_LAZY=1/0` overrides all of them.
   */
  enabled?: boolean;
  /** Lazy when there are more MCP tools than this (default 16). */
  thresholdTools?: number;
  /** Lazy when the tool definitions (name + description + schema) exceed this many chars (default 24,000). */
  thresholdChars?: number;
  /** Most tools loaded at once; loading one more unloads the least recently used (default 40). */
  maxLoaded?: number;
}

/** Options of {@link McpManager}. */
export interface McpManagerOptions {
  /** Context of the built-in presets (workspace, env, the session's model for OCR). */
  builtin?: McpBuiltinContext;
  /** Lazy tool loading (manual §15.4). */
  lazy?: McpLazyOptions;
  /** Parent environment for `${VAR}` and children (default `builtin.env`, else `process.env`). */
  env?: Record<string, string | undefined>;
  /** Give stdio children the whole parent environment (default false; per server `inheritEnv`). */
  inheritEnv?: boolean;
  /** Connect + initialize + list timeout per server, ms (default 30,000). */
  connectTimeoutMs?: number;
  /** Per-call timeout, ms (default env `MCP_CALL_TIMEOUT_MS`, else 300,000). */
  callTimeoutMs?: number;
  /** Diagnostics sink: mode decisions, stderr notes, skipped tools (default: none). */
  log?: McpLogger;
  /** Creates in-process servers for `builtin` configs (default: the OCR preset). */
  builtinServer?: (
    name: string,
    ctx: McpBuiltinContext,
  ) => McpInProcessServer | Promise<McpInProcessServer>;
}

/** Status of one configured server. */
export interface McpServerStatus {
  /** Server name. */
  name: string;
  /** Lifecycle state. */
  state: McpServerState;
  /** Configured transport. */
  type: McpServerConfig["type"];
  /** Transport in use once connected (`sse` after the HTTP fallback). */
  transport?: McpTransportKind;
  /** Registered tools of this server. */
  tools: string[];
  /** Last error (connect failure, crash). */
  error?: string;
  /** Tail of the server's stderr. */
  stderr?: string;
  /** Child process id (stdio, while running). */
  pid?: number;
  /** Warnings from launching and listing. */
  warnings: string[];
}

/** Result of {@link McpManager.connectAll}. */
export interface McpConnectResult {
  /** Servers now connected. */
  connected: string[];
  /** Servers that could not connect, with the reason. */
  failed: { name: string; error: string }[];
}

/** The lazy-mode decision and its numbers. */
export interface McpLazyState {
  /** True when only the meta tools and loaded tools are offered. */
  active: boolean;
  /** Why. */
  reason: string;
  /** MCP tools known. */
  toolCount: number;
  /** Characters of their normalised definitions. */
  chars: number;
  /** Tool-count threshold. */
  thresholdTools: number;
  /** Character threshold. */
  thresholdChars: number;
  /** Registered names of the loaded tools, least recently used first. */
  loaded: string[];
}

interface Entry {
  name: string;
  server: string;
  tool: McpToolInfo;
  schema: JsonSchema;
  description: string;
  chars: number;
}

const MCP_METADATA: ToolMetadata = {
  category: "mcp",
  riskLevel: "high",
  capabilities: ["mcp"],
  requiresApproval: true,
};

function errorResult(error: string, type: string): { error: string; error_type: string } {
  return { error, error_type: type };
}

/**
 * Connects MCP servers and registers their tools (manual §15).
 *
 * @example Connect the workspace's servers (manual §15.1)
 * ```ts
 * import {
 *   defaultMcpConfigPath,
 *   loadMcpConfigFile,
 *   McpManager,
 *   ToolRegistry,
 *   withBuiltinMcpConfigs,
 * } from "@zqagent/core";
 * const registry = new ToolRegistry();
 * const { configs } = loadMcpConfigFile(defaultMcpConfigPath("."));
 * const manager = new McpManager(registry, withBuiltinMcpConfigs(configs), {
 *   builtin: { workspace: "." },
 * });
 * const { connected, failed } = await manager.connectAll();
 * await manager.closeAll();
 * ```
 */
export class McpManager {
  #registry: ToolRegistry;
  #configs: McpServerConfig[] = [];
  #clients = new Map<string, McpClient>();
  #entries = new Map<string, Entry>();
  #opts: McpManagerOptions;
  #loaded = new Map<string, true>();
  #lazyActive = false;
  #lastDecision = "";
  #reconnects = new Map<string, Promise<void>>();
  #changeTimers = new Map<string, ReturnType<typeof setTimeout>>();
  #closed = false;

  /**
   * Creates a manager (synchronous; nothing is started until {@link connectAll} or
   * {@link connectServer}).
   *
   * @param registry The registry that receives the tools.
   * @param configs Server entries (usually from {@link loadMcpConfigFile} and
   *   {@link withBuiltinMcpConfigs}); entries are normalised again, so raw objects work too.
   * @param options Built-in context, lazy mode, timeouts, logger.
   * @throws {McpConfigError} For an entry that cannot be normalised or a duplicate name.
   */
  constructor(
    registry: ToolRegistry,
    configs: readonly McpServerConfig[] = [],
    options: McpManagerOptions = {},
  ) {
    this.#registry = registry;
    this.#opts = options;
    for (const c of configs) this.addConfig(c);
  }

  /** The configs in memory (save them with `saveMcpConfigFile`; the manager never writes). */
  get configs(): McpServerConfig[] {
    return this.#configs.map((c) => ({ ...c }));
  }

  /** The current lazy-mode decision. */
  get lazyState(): McpLazyState {
    const { active, reason, toolCount, chars, thresholdTools, thresholdChars } = this.#decide();
    return {
      active,
      reason,
      toolCount,
      chars,
      thresholdTools,
      thresholdChars,
      loaded: [...this.#loaded.keys()],
    };
  }

  /** The client of a server, if it was ever connected. */
  client(name: string): McpClient | undefined {
    return this.#clients.get(name);
  }

  /** Status of one server; `undefined` for an unknown name. */
  status(name: string): McpServerStatus | undefined {
    const config = this.#configs.find((c) => c.name === name);
    if (!config) return undefined;
    const client = this.#clients.get(name);
    const tools = [...this.#entries.values()].filter((e) => e.server === name).map((e) => e.name);
    return {
      name,
      state: !config.enabled ? "disabled" : client?.state ?? "idle",
      type: config.type,
      ...(client?.transportKind ? { transport: client.transportKind } : {}),
      tools,
      ...(client?.error ? { error: client.error } : {}),
      ...(client?.stderr ? { stderr: client.stderr } : {}),
      ...(client?.pid ? { pid: client.pid } : {}),
      warnings: client?.warnings ?? [],
    };
  }

  /** Status of every configured server, in config order. */
  statuses(): McpServerStatus[] {
    return this.#configs.map((c) => this.status(c.name)!);
  }

  #log(level: "debug" | "info" | "warn" | "error", text: string, data?: Record<string, unknown>) {
    try {
      this.#opts.log?.(level, text, data);
    } catch {
      // never let a logger break the manager
    }
  }

  /**
   * Adds a server entry in memory (not connected, not saved).
   *
   * @returns The normalised entry.
   * @throws {McpConfigError} When the entry is invalid or the name is taken.
   */
  addConfig(config: McpServerConfig | Record<string, unknown>): McpServerConfig {
    const normalized = normalizeMcpConfig(config);
    if (this.#configs.some((c) => c.name === normalized.name)) {
      throw new McpConfigError(
        `Cannot add MCP server "${normalized.name}": a server of that name exists`,
      );
    }
    this.#configs.push(normalized);
    return normalized;
  }

  /**
   * Changes a server entry in memory. A connected server is reconnected with the new entry (or
   * closed when it is now disabled).
   *
   * @throws {McpConfigError} When the server is unknown or the new entry is invalid.
   */
  async updateConfig(
    name: string,
    patch: Partial<McpServerConfig> | Record<string, unknown>,
  ): Promise<McpServerConfig> {
    const i = this.#configs.findIndex((c) => c.name === name);
    if (i < 0) throw new McpConfigError(`Cannot update MCP server "${name}": it is not configured`);
    const merged = normalizeMcpConfig({ ...this.#configs[i], ...patch, name });
    if ("disabled" in patch && patch.disabled === true) merged.enabled = false;
    this.#configs[i] = merged;
    const client = this.#clients.get(name);
    const wasUp = client && (client.state === "connected" || client.state === "disconnected");
    if (client) {
      await client.close();
      this.#clients.delete(name);
    }
    if (wasUp && merged.enabled) {
      try {
        await this.connectServer(name);
      } catch {
        // the status says why
      }
    } else this.#sync();
    return merged;
  }

  /** Removes a server entry, closes it and unregisters its tools. False when unknown. */
  async removeConfig(name: string): Promise<boolean> {
    const i = this.#configs.findIndex((c) => c.name === name);
    if (i < 0) return false;
    this.#configs.splice(i, 1);
    const client = this.#clients.get(name);
    this.#clients.delete(name);
    await client?.close();
    this.#sync();
    return true;
  }

  /**
   * Connects every enabled server concurrently (all at once; a server's connect is spawn or
   * HTTP handshake, `initialize` and `tools/list`). Never rejects: one server's failure does not
   * affect the others.
   *
   * What it waits for: every enabled server to be connected or failed, so it takes as long as
   * the slowest one — a server that never answers holds it for `connectTimeoutMs` (default
   * 30,000 ms). Each server's tools are registered in the registry the moment that server is
   * connected, not when `connectAll` resolves: a host that does not want to wait for slow
   * servers can start its engine without awaiting the promise (tools of servers that connect
   * later are offered from the next model request on) and watch {@link McpManager.statuses}.
   * {@link McpManager.closeAll} ends connects still pending; they then count as failed.
   *
   * @returns Connected and failed servers, each list in config order (not in the order they
   *   finished).
   */
  async connectAll(): Promise<McpConnectResult> {
    const enabled = this.#configs.filter((c) => c.enabled);
    const results = await Promise.allSettled(enabled.map((c) => this.connectServer(c.name)));
    const out: McpConnectResult = { connected: [], failed: [] };
    results.forEach((r, i) => {
      if (r.status === "fulfilled") out.connected.push(enabled[i].name);
      else {
        out.failed.push({
          name: enabled[i].name,
          error: r.reason instanceof Error ? r.reason.message : String(r.reason),
        });
      }
    });
    return out;
  }

  /**
   * Connects (or reconnects) one server and registers its tools.
   *
   * @throws {McpConfigError} When the server is not configured.
   * @throws {McpServerError} When it cannot connect (its status then says why).
   */
  async connectServer(name: string): Promise<void> {
    const config = this.#configs.find((c) => c.name === name);
    if (!config) {
      throw new McpConfigError(`Cannot connect MCP server "${name}": it is not configured`);
    }
    this.#closed = false;
    // Closing the old client drops its tools (and so their place in the loaded set) for a moment;
    // a reconnect must give back the same loaded set (refresh keeps what search loaded).
    const loadedBefore = [...this.#loaded.keys()];
    const old = this.#clients.get(name);
    if (old) await old.close();
    const client = this.#newClient(config);
    this.#clients.set(name, client);
    try {
      await client.connect();
    } finally {
      if (this.#clients.get(name) === client) {
        this.#sync();
        this.#restoreLoaded(loadedBefore);
      }
    }
    for (const w of client.warnings) this.#log("warn", `[mcp:${name}] ${w}`);
  }

  #newClient(config: McpServerConfig): McpClient {
    const env = this.#opts.env ?? this.#opts.builtin?.env ?? envAll();
    const workspace = this.#opts.builtin?.workspace ?? process.cwd();
    const builtinCtx: McpBuiltinContext = { ...this.#opts.builtin, workspace, env };
    const client: McpClient = new McpClient(config, {
      workspace,
      env,
      inheritEnv: this.#opts.inheritEnv,
      connectTimeoutMs: this.#opts.connectTimeoutMs,
      callTimeoutMs: this.#opts.callTimeoutMs,
      log: this.#opts.log,
      builtinServer: async (name) => {
        if (this.#opts.builtinServer) return await this.#opts.builtinServer(name, builtinCtx);
        const { createOcrServer } = await import("./ocr.ts");
        return await createOcrServer(builtinCtx);
      },
      onToolsChanged: () => this.#toolsChanged(config.name, client),
      onDisconnect: () => this.#sync(),
    });
    return client;
  }

  #toolsChanged(name: string, client: McpClient): void {
    clearTimeout(this.#changeTimers.get(name));
    // Debounced: servers often send several notifications at once.
    this.#changeTimers.set(
      name,
      setTimeout(async () => {
        this.#changeTimers.delete(name);
        if (this.#clients.get(name) !== client || client.state !== "connected") return;
        try {
          await client.listTools();
          this.#sync();
          this.#log("info", `[mcp:${name}] tool list changed; ${client.tools.length} tools`);
        } catch (err) {
          this.#log("warn", `[mcp:${name}] cannot refresh tools: ${(err as Error).message}`);
        }
      }, 100),
    );
  }

  /**
   * Reconnects a server (disconnect → connect → re-register; same names as before), or every
   * connected server when no name is given.
   *
   * @throws {McpServerError} When it cannot connect.
   */
  async refresh(name?: string): Promise<void> {
    if (name === undefined) {
      const up = [...this.#clients.values()].filter((c) =>
        c.state === "connected" || c.state === "disconnected"
      );
      await Promise.all(up.map((c) => this.connectServer(c.name)));
      return;
    }
    await this.connectServer(name);
  }

  /**
   * Moves the tools to another registry (when the host rebuilds its engine, manual §15.5): they
   * are removed from the current one and registered, with the same names and the same loaded
   * set, in `registry`.
   */
  attach(registry: ToolRegistry): void {
    if (registry === this.#registry) return;
    for (const name of this.#ownedNames()) this.#registry.remove(name);
    this.#registry = registry;
    this.#entries.clear();
    this.#sync();
  }

  /**
   * Closes every server in parallel (stdio children are stopped) and removes their tools.
   * Idempotent.
   */
  async closeAll(): Promise<void> {
    this.#closed = true;
    for (const t of this.#changeTimers.values()) clearTimeout(t);
    this.#changeTimers.clear();
    const clients = [...this.#clients.values()];
    await Promise.all(clients.map((c) => c.close()));
    this.#sync();
  }

  #ownedNames(): string[] {
    const names = [...this.#entries.keys()];
    for (const meta of [MCP_SEARCH_TOOL, MCP_CALL_TOOL]) {
      if (this.#registry.get(meta)?.source === "mcp") names.push(meta);
    }
    return names;
  }

  /** Puts back loaded tools that exist again, in their least-recently-used order. */
  #restoreLoaded(names: string[]): void {
    const now = [...this.#loaded.keys()];
    const order = [...names.filter((n) => this.#entries.has(n)), ...now];
    if (order.length === now.length) return;
    this.#loaded = new Map(order.map((n) => [n, true] as const));
    this.#applyMode();
  }

  /** Recomputes names, registrations and the lazy decision from the clients' tool lists. */
  #sync(): void {
    const requests: { server: string; tool: McpToolInfo }[] = [];
    if (!this.#closed) {
      for (const config of this.#configs) {
        const client = this.#clients.get(config.name);
        // A crashed server keeps its tools listed: calls reconnect it (case reconnect-after-crash).
        if (!client || (client.state !== "connected" && client.state !== "disconnected")) continue;
        for (const tool of client.tools) requests.push({ server: config.name, tool });
      }
    }
    const owned = new Set(this.#entries.keys());
    const names = assignToolNames(
      requests.map((r) => ({ server: r.server, tool: r.tool.name })),
      (n) => !owned.has(n) && this.#registry.has(n),
    );
    const next = new Map<string, Entry>();
    requests.forEach((r, i) => {
      const name = names[i];
      const prev = this.#entries.get(name);
      if (prev && prev.server === r.server && prev.tool === r.tool) {
        next.set(name, prev);
        return;
      }
      const normalized = normalizeInputSchema(r.tool.inputSchema);
      for (const w of normalized.warnings) {
        this.#log("warn", `[mcp:${r.server}] ${r.tool.name}: ${w}`);
      }
      const base = r.tool.description ?? r.tool.title ?? "";
      const description = normalized.note ? `${base}${base ? " " : ""}${normalized.note}` : base;
      next.set(name, {
        name,
        server: r.server,
        tool: r.tool,
        schema: normalized.schema,
        description,
        chars: definitionChars(name, description, normalized.schema),
      });
    });
    for (const name of owned) {
      if (!next.has(name) && this.#registry.get(name)?.source.startsWith("mcp:")) {
        this.#registry.remove(name);
      }
    }
    this.#entries = next;
    for (const entry of next.values()) this.#register(entry);
    for (const name of [...this.#loaded.keys()]) if (!next.has(name)) this.#loaded.delete(name);
    this.#applyMode();
  }

  #register(entry: Entry): void {
    const server = entry.server;
    const raw = entry.tool.name;
    this.#registry.register(
      (args: Record<string, unknown>, ctx?: ToolContext) => this.#call(server, raw, args, ctx),
      { ...MCP_METADATA, capabilities: ["mcp", `mcp:${server}`] },
      {
        type: "function",
        function: { name: entry.name, description: entry.description, parameters: entry.schema },
      },
      `mcp:${server}`,
    );
  }

  #decide(): McpLazyState & { reason: string } {
    const lazy = this.#opts.lazy ?? {};
    const thresholdTools = lazy.thresholdTools ?? 16;
    const thresholdChars = lazy.thresholdChars ?? 24_000;
    const toolCount = this.#entries.size;
    let chars = 0;
    for (const e of this.#entries.values()) chars += e.chars;
    const env = envString("ZQAGENT_MCP_LAZY");
    let active: boolean;
    let reason: string;
    if (env === "1" || env === "0" || env === "true" || env === "false") {
      active = env === "1" || env === "true";
      reason = `ZQAGENT_MCP_LAZY=${env}`;
    } else if (typeof lazy.enabled === "boolean") {
      active = lazy.enabled;
      reason = `lazy.enabled=${lazy.enabled}`;
    } else {
      active = toolCount > thresholdTools || chars > thresholdChars;
      reason = active
        ? (toolCount > thresholdTools
          ? `${toolCount} tools > ${thresholdTools}`
          : `${chars} chars > ${thresholdChars}`)
        : `${toolCount} tools <= ${thresholdTools} and ${chars} chars <= ${thresholdChars}`;
    }
    if (toolCount === 0) active = false;
    return {
      active,
      reason,
      toolCount,
      chars,
      thresholdTools,
      thresholdChars,
      loaded: [...this.#loaded.keys()],
    };
  }

  #applyMode(): void {
    const d = this.#decide();
    this.#lazyActive = d.active;
    const line = `lazy mode ${d.active ? "on" : "off"}: ${d.reason} ` +
      `(${d.toolCount} tools, ${d.chars} chars; thresholds ${d.thresholdTools} tools, ` +
      `${d.thresholdChars} chars)`;
    if (line !== this.#lastDecision) {
      this.#lastDecision = line;
      this.#log("info", `[mcp] ${line}`, { ...d });
    }
    if (d.active) {
      this.#registerMetaTools();
      for (const name of this.#entries.keys()) {
        if (this.#loaded.has(name)) this.#registry.enable(name);
        else this.#registry.disable(name);
      }
    } else {
      for (const meta of [MCP_SEARCH_TOOL, MCP_CALL_TOOL]) {
        if (this.#registry.get(meta)?.source === "mcp") this.#registry.remove(meta);
      }
      for (const name of this.#entries.keys()) this.#registry.enable(name);
    }
  }

  #servers(): string {
    return this.#configs.filter((c) => c.enabled).map((c) => c.name).join(", ");
  }

  #registerMetaTools(): void {
    const servers = this.#servers();
    this.#registry.register(
      (args: Record<string, unknown>) => this.#search(args),
      {
        category: "mcp",
        riskLevel: "low",
        capabilities: ["mcp", "search"],
        requiresApproval: false,
      },
      {
        type: "function",
        function: {
          name: MCP_SEARCH_TOOL,
          description:
            `Searches the tools of the connected MCP servers (${servers}) by keywords and loads ` +
            `the best ${SEARCH_LOAD_LIMIT} matches, so they can be called directly from the next ` +
            `step. Use ${MCP_CALL_TOOL} to call any tool by its name.`,
          parameters: {
            type: "object",
            properties: {
              query: { type: "string", description: "Keywords: what the tool should do" },
              limit: {
                type: "integer",
                description:
                  `Most matches to load (1-${SEARCH_LOAD_LIMIT}, default ${SEARCH_LOAD_LIMIT})`,
              },
            },
            required: ["query"],
          },
        },
      },
      "mcp",
    );
    this.#registry.register(
      (args: Record<string, unknown>, ctx?: ToolContext) => this.#callByName(args, ctx),
      { ...MCP_METADATA },
      {
        type: "function",
        function: {
          name: MCP_CALL_TOOL,
          description:
            `Calls a tool of a connected MCP server (${servers}) by its name (as returned by ` +
            `${MCP_SEARCH_TOOL}, e.g. mcp__<server>__<tool>) with its arguments.`,
          parameters: {
            type: "object",
            properties: {
              name: { type: "string", description: "The tool's name, mcp__<server>__<tool>" },
              arguments: { type: "object", description: "The tool's arguments" },
            },
            required: ["name"],
          },
        },
      },
      "mcp",
    );
  }

  #touch(name: string): void {
    const max = Math.max(1, this.#opts.lazy?.maxLoaded ?? 40);
    this.#loaded.delete(name);
    this.#loaded.set(name, true);
    if (this.#lazyActive) this.#registry.enable(name);
    while (this.#loaded.size > max) {
      const oldest = this.#loaded.keys().next().value as string;
      this.#loaded.delete(oldest);
      if (this.#lazyActive) this.#registry.disable(oldest);
    }
  }

  #search(args: Record<string, unknown>): unknown {
    const query = typeof args.query === "string" ? args.query : "";
    if (!query.trim()) {
      return errorResult("Cannot search MCP tools: query is empty", "invalid_arguments");
    }
    const limit = Math.min(
      SEARCH_LOAD_LIMIT,
      Math.max(
        1,
        Number.isFinite(Number(args.limit)) ? Math.floor(Number(args.limit)) : SEARCH_LOAD_LIMIT,
      ),
    );
    const docs = [...this.#entries.values()].map((e) => ({
      id: e.name,
      text: [
        e.name,
        e.tool.name,
        e.server,
        e.tool.title ?? "",
        e.description,
        Object.keys((e.schema.properties ?? {}) as Record<string, unknown>).join(" "),
      ].join(" "),
    }));
    const ids = rankDocuments(query, docs, limit);
    for (const id of [...ids].reverse()) this.#touch(id);
    return {
      matches: ids.map((id) => {
        const e = this.#entries.get(id)!;
        return {
          name: id,
          server: e.server,
          tool: e.tool.name,
          description: e.description.split("\n")[0].slice(0, 200),
          loaded: this.#loaded.has(id),
        };
      }),
      note: ids.length
        ? "These tools are loaded: call them directly from the next step."
        : "No tool matched; try other keywords.",
    };
  }

  async #callByName(args: Record<string, unknown>, ctx?: ToolContext): Promise<unknown> {
    const name = typeof args.name === "string" ? args.name : "";
    const entry = this.#entries.get(name) ??
      [...this.#entries.values()].find((e) => e.tool.name === name);
    if (!entry) {
      const near = [...this.#entries.keys()]
        .map((n) => ({ n, d: editDistance(n, name) }))
        .sort((a, b) => a.d - b.d)
        .slice(0, 3)
        .map((x) => x.n);
      return errorResult(
        `Cannot call MCP tool ${JSON.stringify(name)}: no tool of that name` +
          (near.length ? `; did you mean ${near.join(", ")}?` : ""),
        "unknown_tool",
      );
    }
    const inner = args.arguments;
    const toolArgs = inner && typeof inner === "object" && !Array.isArray(inner)
      ? inner as Record<string, unknown>
      : typeof inner === "string" && inner.trim()
      ? JSON.parse(inner)
      : {};
    return await this.#call(entry.server, entry.tool.name, toolArgs, ctx);
  }

  async #call(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    ctx?: ToolContext,
  ): Promise<unknown> {
    for (const e of this.#entries.values()) {
      if (e.server === server && e.tool.name === tool && this.#loaded.has(e.name)) {
        this.#touch(e.name);
      }
    }
    let client = this.#clients.get(server);
    if (!client) {
      return errorResult(
        `Cannot call ${tool}: MCP server "${server}" is not connected`,
        "mcp_not_connected",
      );
    }
    if (client.state === "disconnected") {
      // Reconnect on next use after a crash; parallel calls share one reconnect.
      let pending = this.#reconnects.get(server);
      if (!pending) {
        this.#log("info", `[mcp:${server}] reconnecting after: ${client.error}`);
        pending = this.connectServer(server).finally(() => this.#reconnects.delete(server));
        this.#reconnects.set(server, pending);
      }
      try {
        await pending;
      } catch (err) {
        return errorResult(
          `Cannot call ${tool}: MCP server "${server}" crashed and could not be restarted: ` +
            (err as Error).message,
          "mcp_not_connected",
        );
      }
      client = this.#clients.get(server)!;
    }
    const result = await client.callTool(tool, args, { signal: ctx?.signal });
    const formatted = formatCallToolResult(result);
    if (formatted.isError) {
      return errorResult(formatted.text || `${tool} reported an error`, "mcp_tool_error");
    }
    return formatted.text;
  }
}
