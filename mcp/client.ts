/**
 * `McpClient`: one connection to one MCP server over stdio, streamable HTTP (with the legacy SSE
 * fallback on HTTP 404/405 only), SSE, or an in-process built-in server (manual §15). Built on
 * the official `@modelcontextprotocol/sdk` (loaded lazily), which handles framing, the
 * initialize handshake, progress, cancellation and Windows `.cmd` spawning (cross-spawn).
 *
 * @module
 */
import type { ChildProcess } from "node:child_process";
import process from "node:process";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { envAll, envNumber } from "../_internal/env.ts";
import type { McpServerConfig } from "./config.ts";
import { expandVars, resolveStdioLaunch, type StdioLaunch } from "./_launch.ts";
import type { McpCallResult } from "./result.ts";

/** Default per-call timeout in ms (manual §20.2: `MCP_CALL_TIMEOUT_MS`, 300 s). */
export const DEFAULT_MCP_CALL_TIMEOUT_MS = 300_000;
/** Default timeout of connect + initialize + the tool listing, in ms. */
export const DEFAULT_MCP_CONNECT_TIMEOUT_MS = 30_000;
/** Characters of a server's stderr kept for diagnostics. */
const STDERR_KEEP_CHARS = 4096;
/** Most `tools/list` pages read from one server. */
const MAX_LIST_PAGES = 100;

/** Lifecycle state of one server. */
export type McpServerState =
  | "idle"
  | "connecting"
  | "connected"
  | "disconnected"
  | "failed"
  | "disabled"
  | "closed";

/** A tool as a server lists it. */
export interface McpToolInfo {
  /** The server's own name for the tool (sent back on calls). */
  name: string;
  /** Optional display title. */
  title?: string;
  /** Description. */
  description?: string;
  /** JSON schema of the arguments, as listed (not normalised). */
  inputSchema: Record<string, unknown>;
  /** Untrusted hints (`readOnlyHint`, `destructiveHint`, …). */
  annotations?: Record<string, unknown>;
}

/** Where a server's process or session runs, for diagnostics. */
export type McpTransportKind = "stdio" | "http" | "sse" | "builtin";

/** Context the built-in presets need (manual §15.1 `builtin`, §18.4). */
export interface McpBuiltinContext {
  /** Workspace root: relative paths given to built-in tools resolve against it. */
  workspace: string;
  /** Environment the presets use (PATH to find programs); default `process.env`. */
  env?: Record<string, string | undefined>;
  /**
   * The session's model, for the multimodal fallback of the OCR preset (manual §15.6). Without it
   * the third fallback level is unavailable.
   */
  llm?: {
    /** API key (default env `OPENAI_API_KEY`). */
    apiKey?: string;
    /** Base URL of an OpenAI-compatible endpoint (default env `OPENAI_BASE_URL`). */
    baseURL?: string;
    /** A model that reads images. */
    model?: string;
  };
  /**
   * OCR engines to try, in order (default `["vision", "tesseract", "llm"]`; `vision` is macOS
   * only).
   */
  ocrEngines?: ("vision" | "tesseract" | "llm")[];
}

/** An in-process MCP server (an SDK `Server`/`McpServer`'s `connect` is all that is used). */
export interface McpInProcessServer {
  /** Connects the server to a transport. */
  connect(transport: Transport): Promise<void>;
  /** Closes the server. */
  close(): Promise<void>;
}

/** Receives diagnostics (never written to stdout by the engine). */
export type McpLogger = (
  level: "debug" | "info" | "warn" | "error",
  message: string,
  data?: Record<string, unknown>,
) => void;

/** Options of {@link McpClient}. */
export interface McpClientOptions {
  /** Workspace root: default cwd of stdio servers and `${workspaceFolder}` (default cwd). */
  workspace?: string;
  /** Parent environment for `${VAR}` expansion and the children's base (default `process.env`). */
  env?: Record<string, string | undefined>;
  /** Pass the whole parent environment to stdio children (default false; see `inheritEnv`). */
  inheritEnv?: boolean;
  /** Timeout of connect + initialize and of each `tools/list` page, ms (default 30,000). */
  connectTimeoutMs?: number;
  /** Per-call timeout in ms (default: config `timeoutMs`, env `MCP_CALL_TIMEOUT_MS`, 300,000). */
  callTimeoutMs?: number;
  /** Creates the in-process server of a `builtin` config. */
  builtinServer?: (name: string) => McpInProcessServer | Promise<McpInProcessServer>;
  /** Called when the server announces `notifications/tools/list_changed`. */
  onToolsChanged?: () => void;
  /** Called when the connection ends without {@link McpClient.close} (a crash, a dropped session). */
  onDisconnect?: (reason: string) => void;
  /** Diagnostics sink (default: none). */
  log?: McpLogger;
}

/** Options of one call. */
export interface McpCallOptions {
  /** Aborting cancels the call (`notifications/cancelled` is sent) and rejects with an AbortError. */
  signal?: AbortSignal;
  /** Timeout in ms, reset by every progress notification. */
  timeoutMs?: number;
  /** Receives progress notifications. */
  onProgress?: (progress: { progress: number; total?: number; message?: string }) => void;
}

/** Thrown when a server cannot be reached or a call cannot complete. */
export class McpServerError extends Error {
  /** Error name. */
  override name = "McpServerError";
  /**
   * Creates the error.
   *
   * @param message What failed and why.
   * @param server The server's name.
   * @param code `connect_failed`, `not_connected`, `server_exited`, `timeout`, `protocol`.
   */
  constructor(
    message: string,
    readonly server: string,
    readonly code: "connect_failed" | "not_connected" | "server_exited" | "timeout" | "protocol",
  ) {
    super(message);
  }
}

// Children started by any client: killed if the host exits without closeAll() (no orphans).
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;
function trackChild(child: ChildProcess): void {
  liveChildren.add(child);
  child.once("exit", () => liveChildren.delete(child));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once("exit", () => {
      for (const c of liveChildren) {
        try {
          c.kill("SIGKILL");
        } catch {
          // already gone
        }
      }
    });
  }
}

type Sdk = {
  Client: typeof import("@modelcontextprotocol/sdk/client/index.js").Client;
  StdioClientTransport:
    typeof import("@modelcontextprotocol/sdk/client/stdio.js").StdioClientTransport;
  StreamableHTTPClientTransport:
    typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js").StreamableHTTPClientTransport;
  StreamableHTTPError:
    typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js").StreamableHTTPError;
  SSEClientTransport: typeof import("@modelcontextprotocol/sdk/client/sse.js").SSEClientTransport;
  InMemoryTransport: typeof import("@modelcontextprotocol/sdk/inMemory.js").InMemoryTransport;
  types: typeof import("@modelcontextprotocol/sdk/types.js");
};
let sdkPromise: Promise<Sdk> | undefined;
function loadSdk(): Promise<Sdk> {
  sdkPromise ??= (async () => {
    const [client, stdio, http, sse, mem, types] = await Promise.all([
      import("@modelcontextprotocol/sdk/client/index.js"),
      import("@modelcontextprotocol/sdk/client/stdio.js"),
      import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
      import("@modelcontextprotocol/sdk/client/sse.js"),
      import("@modelcontextprotocol/sdk/inMemory.js"),
      import("@modelcontextprotocol/sdk/types.js"),
    ]);
    return {
      Client: client.Client,
      StdioClientTransport: stdio.StdioClientTransport,
      StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
      StreamableHTTPError: http.StreamableHTTPError,
      SSEClientTransport: sse.SSEClientTransport,
      InMemoryTransport: mem.InMemoryTransport,
      types,
    };
  })();
  return sdkPromise;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function abortError(reason: unknown): Error {
  const err = new Error(`Cannot finish the MCP call: ${message(reason ?? "aborted")}`);
  err.name = "AbortError";
  return err;
}

/**
 * One connection to one MCP server. {@link McpManager} drives these; hosts may use one directly.
 *
 * @example List and call the tools of one server
 * ```ts
 * import { McpClient } from "@zqagent/core/mcp";
 * const client = new McpClient(
 *   { name: "memory", type: "stdio", command: ["npx", "-y", "@modelcontextprotocol/server-memory"], enabled: true },
 *   { workspace: "." },
 * );
 * await client.connect();
 * const tools = await client.listTools();
 * const result = await client.callTool("read_graph", {});
 * await client.close();
 * ```
 */
export class McpClient {
  /** The server's config. */
  readonly config: McpServerConfig;
  #opts: McpClientOptions;
  #client: Client | undefined;
  #transport: Transport | undefined;
  #builtin: McpInProcessServer | undefined;
  #child: ChildProcess | undefined;
  #state: McpServerState = "idle";
  #error: string | undefined;
  #stderr = "";
  #exit: { code: number | null; signal: string | null } | undefined;
  #kind: McpTransportKind | undefined;
  #tools: McpToolInfo[] = [];
  #instructions: string | undefined;
  #warnings: string[] = [];
  #closing = false;
  #generation = 0;

  /**
   * Creates a client (synchronous; nothing starts before {@link McpClient.connect}).
   *
   * @param config The server's normalised config.
   * @param options Workspace, environment, timeouts, callbacks.
   */
  constructor(config: McpServerConfig, options: McpClientOptions = {}) {
    this.config = config;
    this.#opts = options;
    if (!config.enabled) this.#state = "disabled";
  }

  /** The server's name. */
  get name(): string {
    return this.config.name;
  }

  /** Current state. */
  get state(): McpServerState {
    return this.#state;
  }

  /** The last connection or crash error, if any. */
  get error(): string | undefined {
    return this.#error;
  }

  /** The last ~4 KB the server wrote to stderr (stdio only). */
  get stderr(): string {
    return this.#stderr;
  }

  /** Process id of a running stdio server. */
  get pid(): number | undefined {
    return this.#child?.pid ?? undefined;
  }

  /** The transport in use once connected (`http` or `sse` for URLs after the fallback). */
  get transportKind(): McpTransportKind | undefined {
    return this.#kind;
  }

  /** Tools from the last listing. */
  get tools(): McpToolInfo[] {
    return this.#tools;
  }

  /** The server's `instructions`, if it sent any. */
  get instructions(): string | undefined {
    return this.#instructions;
  }

  /** Problems noticed while launching or listing (unset variables, skipped tools). */
  get warnings(): string[] {
    return this.#warnings;
  }

  #log(level: "debug" | "info" | "warn" | "error", text: string, data?: Record<string, unknown>) {
    try {
      this.#opts.log?.(level, `[mcp:${this.name}] ${text}`, data);
    } catch {
      // a logger must never break a connection
    }
  }

  #stderrTail(): string {
    const tail = this.#stderr.trim().split("\n").slice(-5).join("\n").trim();
    return tail ? `; stderr: ${tail}` : "";
  }

  /**
   * Connects (a new SDK client and transport every time) and lists the tools.
   *
   * @throws {McpServerError} `connect_failed`, naming the command or URL, the cause (ENOENT with
   *   the PATH searched, an exit with its stderr tail, an HTTP status) — the state is then
   *   `failed`.
   */
  async connect(): Promise<void> {
    if (!this.config.enabled) {
      throw new McpServerError(
        `Cannot connect MCP server "${this.name}": it is disabled`,
        this.name,
        "connect_failed",
      );
    }
    await this.#teardown();
    this.#closing = false;
    this.#state = "connecting";
    this.#error = undefined;
    this.#exit = undefined;
    this.#warnings = [];
    const generation = ++this.#generation;
    const sdk = await loadSdk();
    const timeout = this.#opts.connectTimeoutMs ?? DEFAULT_MCP_CONNECT_TIMEOUT_MS;
    let launch: StdioLaunch | undefined;
    try {
      if (this.config.type === "stdio") {
        launch = this.#launch();
        await this.#connectWith(sdk, this.#stdioTransport(sdk, launch), "stdio", timeout);
      } else if (this.config.type === "builtin") {
        if (!this.#opts.builtinServer) throw new Error("no built-in server factory was given");
        const server = await this.#opts.builtinServer(this.name);
        const [clientSide, serverSide] = sdk.InMemoryTransport.createLinkedPair();
        await server.connect(serverSide);
        this.#builtin = server;
        await this.#connectWith(sdk, clientSide, "builtin", timeout);
      } else {
        const url = new URL(this.#expand(this.config.url ?? ""));
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(this.config.headers ?? {})) {
          headers[k] = this.#expand(v);
        }
        if (this.config.type === "sse") {
          await this.#connectWith(
            sdk,
            new sdk.SSEClientTransport(url, { requestInit: { headers } }),
            "sse",
            timeout,
          );
        } else {
          try {
            await this.#connectWith(
              sdk,
              new sdk.StreamableHTTPClientTransport(url, { requestInit: { headers } }),
              "http",
              timeout,
            );
          } catch (err) {
            const code = (err as { code?: number }).code;
            if (!(err instanceof sdk.StreamableHTTPError) || (code !== 404 && code !== 405)) {
              throw err;
            }
            this.#log("info", `streamable HTTP answered ${code}; trying the legacy SSE transport`);
            await this.#teardown();
            await this.#connectWith(
              sdk,
              new sdk.SSEClientTransport(url, { requestInit: { headers } }),
              "sse",
              timeout,
            );
          }
        }
      }
      if (generation !== this.#generation) throw new Error("superseded by a newer connection");
      await this.listTools();
      this.#state = "connected";
      this.#log("info", `connected over ${this.#kind}; ${this.#tools.length} tools`);
    } catch (err) {
      const reason = this.#describeConnectError(err, launch);
      await this.#teardown();
      this.#state = "failed";
      this.#error = reason;
      throw new McpServerError(
        `Cannot connect MCP server "${this.name}": ${reason}`,
        this.name,
        "connect_failed",
      );
    }
  }

  #expand(text: string): string {
    return expandVars(
      text,
      { env: this.#opts.env ?? envAll(), workspace: this.#opts.workspace ?? process.cwd() },
      this.#warnings,
      `MCP server "${this.name}"`,
    );
  }

  #launch(): StdioLaunch {
    const launch = resolveStdioLaunch(this.config, {
      env: this.#opts.env ?? envAll(),
      workspace: this.#opts.workspace ?? process.cwd(),
    }, this.#opts.inheritEnv ?? false);
    this.#warnings.push(...launch.warnings);
    for (const w of launch.warnings) this.#log("warn", w);
    return launch;
  }

  #stdioTransport(sdk: Sdk, launch: StdioLaunch): Transport {
    const transport = new sdk.StdioClientTransport({
      command: launch.command,
      args: launch.args,
      env: launch.env,
      cwd: launch.cwd,
      stderr: "pipe",
    });
    // The stream exists before start(): no early output is lost; always drained.
    transport.stderr?.on("data", (chunk: Uint8Array | string) => {
      this.#stderr = (this.#stderr + String(chunk)).slice(-STDERR_KEEP_CHARS);
    });
    return transport;
  }

  async #connectWith(
    sdk: Sdk,
    transport: Transport,
    kind: McpTransportKind,
    timeout: number,
  ): Promise<void> {
    const client = new sdk.Client(
      { name: "zqagent", version: "0.1.0" },
      { capabilities: {} },
    );
    this.#client = client;
    this.#transport = transport;
    this.#kind = kind;
    const generation = this.#generation;
    // Non-JSON lines on stdout and similar noise are reported here; they are not fatal.
    client.onerror = (err: Error) => this.#log("debug", `transport error: ${message(err)}`);
    client.onclose = () => {
      if (generation !== this.#generation || this.#closing) return;
      if (this.#state === "connected") {
        const exit = this.#exit;
        const how = exit
          ? `the server exited (${exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`})`
          : "the connection closed";
        this.#state = "disconnected";
        this.#error = how + this.#stderrTail();
        this.#log("warn", this.#error);
        this.#opts.onDisconnect?.(this.#error);
      }
    };
    client.setNotificationHandler(sdk.types.ToolListChangedNotificationSchema, () => {
      this.#opts.onToolsChanged?.();
    });
    client.setNotificationHandler(
      sdk.types.LoggingMessageNotificationSchema,
      (n: { params: { data?: unknown } }) => {
        this.#log("debug", `server log: ${JSON.stringify(n.params.data)}`);
      },
    );
    await client.connect(transport, { timeout });
    const child = (transport as unknown as { _process?: ChildProcess })._process;
    if (child) {
      this.#child = child;
      trackChild(child);
      child.once("exit", (code, signal) => {
        this.#exit = { code, signal };
      });
      if (child.exitCode !== null) this.#exit = { code: child.exitCode, signal: null };
    }
    this.#instructions = client.getInstructions();
  }

  #describeConnectError(err: unknown, launch: StdioLaunch | undefined): string {
    let reason = message(err);
    const code = (err as { code?: unknown }).code;
    if (launch && (code === "ENOENT" || /ENOENT/.test(reason))) {
      reason = `cannot start ${JSON.stringify(launch.command)}: ENOENT, not found on PATH ` +
        `(${launch.env.PATH ?? "PATH is not set"}); give an absolute path`;
      if (launch.split) {
        reason += `; the command was split on spaces into ${JSON.stringify(launch.command)} ` +
          "and arguments: quote a program path with spaces, or use the array form";
      }
    } else if (launch?.resolved) {
      reason += ` (program ${launch.resolved})`;
    }
    if (this.#exit) {
      reason += ` (the server exited with ${
        this.#exit.signal ? `signal ${this.#exit.signal}` : `code ${this.#exit.code}`
      })`;
    }
    return reason + this.#stderrTail();
  }

  /**
   * Lists every tool, following `nextCursor` over all pages (with a guard against a repeated
   * cursor and a cap of 100 pages). Duplicate names keep the first; tools that require MCP tasks
   * (`execution.taskSupport: "required"`) are skipped with a warning.
   *
   * @throws {McpServerError} `not_connected` when there is no connection.
   */
  async listTools(): Promise<McpToolInfo[]> {
    const client = this.#requireClient();
    const tools: McpToolInfo[] = [];
    const seen = new Set<string>();
    const cursors = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const result = await client.listTools(cursor ? { cursor } : undefined, {
        timeout: this.#opts.connectTimeoutMs ?? DEFAULT_MCP_CONNECT_TIMEOUT_MS,
      });
      for (const tool of result.tools) {
        if (seen.has(tool.name)) {
          this.#warnings.push(`tool ${tool.name} is listed twice; the first is used`);
          continue;
        }
        seen.add(tool.name);
        const exec = (tool as { execution?: { taskSupport?: string } }).execution;
        if (exec?.taskSupport === "required") {
          this.#warnings.push(
            `tool ${tool.name} requires MCP tasks, which are not supported; skipped`,
          );
          continue;
        }
        tools.push({
          name: tool.name,
          ...(tool.title ? { title: tool.title } : {}),
          ...(tool.description ? { description: tool.description } : {}),
          inputSchema: tool.inputSchema as Record<string, unknown>,
          ...(tool.annotations ? { annotations: tool.annotations as Record<string, unknown> } : {}),
        });
      }
      const next = result.nextCursor;
      if (!next) break;
      if (cursors.has(next)) {
        this.#warnings.push(`tools/list repeated cursor ${JSON.stringify(next)}; stopped`);
        break;
      }
      cursors.add(next);
      cursor = next;
    }
    this.#tools = tools;
    return tools;
  }

  #requireClient(): Client {
    if (!this.#client || (this.#state !== "connected" && this.#state !== "connecting")) {
      const why = this.#state === "disconnected" && this.#error ? ` (${this.#error})` : "";
      throw new McpServerError(
        `Cannot use MCP server "${this.name}": it is not connected${why}`,
        this.name,
        "not_connected",
      );
    }
    return this.#client;
  }

  /**
   * Calls one tool by the server's own name. The timeout is reset by every progress
   * notification; aborting `signal` cancels the call on the server.
   *
   * @param name The tool's raw name.
   * @param args Arguments, passed unchanged.
   * @param options Signal, timeout, progress callback.
   * @returns The raw result (`content`, `structuredContent`, `isError`); `outputSchema` is not
   *   enforced, so a server that deviates from its own schema still answers.
   * @throws {McpServerError} `not_connected`, `server_exited` (with exit code and stderr tail),
   *   `timeout`, `protocol` (a JSON-RPC error from the server).
   * @throws {Error} named `AbortError` when `signal` aborts.
   */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    options: McpCallOptions = {},
  ): Promise<McpCallResult> {
    const client = this.#requireClient();
    const sdk = await loadSdk();
    const timeout = options.timeoutMs ?? this.#opts.callTimeoutMs ?? this.config.timeoutMs ??
      envNumber("MCP_CALL_TIMEOUT_MS", DEFAULT_MCP_CALL_TIMEOUT_MS);
    if (options.signal?.aborted) throw abortError(options.signal.reason);
    try {
      return await client.request(
        { method: "tools/call", params: { name, arguments: args } },
        sdk.types.CallToolResultSchema,
        {
          timeout,
          resetTimeoutOnProgress: true,
          // progress tokens are only sent when onprogress is set (research §1.5)
          onprogress: (p: { progress: number; total?: number; message?: string }) =>
            options.onProgress?.(p),
          ...(options.signal ? { signal: options.signal } : {}),
        },
      ) as McpCallResult;
    } catch (err) {
      if (options.signal?.aborted) throw abortError(options.signal.reason);
      const code = (err as { code?: unknown }).code;
      const where = `Cannot call ${name} on MCP server "${this.name}"`;
      if (code === sdk.types.ErrorCode.ConnectionClosed || this.#state === "disconnected") {
        await new Promise((r) => setTimeout(r, 20)); // let the exit status arrive
        if (this.#state === "connected") {
          this.#state = "disconnected";
          this.#error = "the connection closed" + this.#stderrTail();
        }
        const exit = this.#exit;
        const how = exit
          ? `the server exited (${exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`})`
          : "the connection closed";
        throw new McpServerError(
          `${where}: ${how} during the call${this.#stderrTail()}`,
          this.name,
          "server_exited",
        );
      }
      if (code === sdk.types.ErrorCode.RequestTimeout) {
        throw new McpServerError(
          `${where}: no answer within ${timeout} ms (MCP_CALL_TIMEOUT_MS)`,
          this.name,
          "timeout",
        );
      }
      if (typeof code !== "number" && this.#kind !== "stdio" && this.#kind !== "builtin") {
        // A network failure on HTTP: the session is gone; the next use reconnects.
        this.#state = "disconnected";
        this.#error = message(err);
        throw new McpServerError(`${where}: ${message(err)}`, this.name, "server_exited");
      }
      throw new McpServerError(`${where}: ${message(err)}`, this.name, "protocol");
    }
  }

  async #teardown(): Promise<void> {
    const client = this.#client;
    const transport = this.#transport;
    const builtin = this.#builtin;
    this.#client = undefined;
    this.#transport = undefined;
    this.#builtin = undefined;
    this.#child = undefined;
    if (transport && "terminateSession" in transport) {
      try {
        await (transport as { terminateSession(): Promise<void> }).terminateSession();
      } catch {
        // the session may already be gone
      }
    }
    try {
      await client?.close();
    } catch {
      // closing a dead connection is fine
    }
    if (!client) {
      try {
        await transport?.close();
      } catch {
        // idem
      }
    }
    try {
      await builtin?.close();
    } catch {
      // idem
    }
  }

  /**
   * Closes the connection; a stdio server gets end-of-input, then SIGTERM after 2 s and SIGKILL
   * after 2 more (the SDK's sequence). Idempotent.
   */
  async close(): Promise<void> {
    this.#closing = true;
    this.#generation++;
    await this.#teardown();
    if (this.#state !== "disabled") this.#state = "closed";
  }
}
