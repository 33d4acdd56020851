/**
 * `MockOpenAIServer`: a local OpenAI-compatible HTTP server on 127.0.0.1 that answers from a
 * script, in both the Responses and the Chat Completions wire formats (SSE when `stream: true`,
 * JSON otherwise). Hosts use it to test their integration with the real `openai` SDK, real HTTP
 * and real SSE (DESIGN §7); so do our own tests.
 *
 * Built on `node:http` (native in Deno and Node), so it runs in both.
 *
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** A tool call a scripted turn makes. */
export interface ScriptedToolCall {
  /** Call id. Default `call_<turn>_<n>`. */
  id?: string;
  /** Function name. */
  name: string;
  /** Arguments: a JSON text, or an object (sent as its JSON text). */
  arguments: string | Record<string, unknown>;
}

/** An HTTP error answer. */
export interface ScriptedHttpError {
  /** HTTP status (e.g. 401, 404, 429, 500). */
  status: number;
  /** Error message (`error.message` in the body). */
  message: string;
  /** `error.code`. */
  code?: string;
  /** `error.type`. */
  type?: string;
}

/** One scripted model answer; each request consumes one. */
export interface ScriptedTurn {
  /** Answer text; an array gives the deltas one by one. */
  text?: string | string[];
  /** Reasoning text (Chat: `reasoning_content`; Responses: reasoning summary); array = deltas. */
  reasoning?: string | string[];
  /** Tool calls, sent after the text. */
  toolCalls?: ScriptedToolCall[];
  /** Usage (tokens). Default: estimated from the sizes (chars / 4) and sent; `null`: never sent. */
  usage?: { inputTokens: number; outputTokens: number } | null;
  /** Finish reason when there are no tool calls. Default `"stop"`. */
  finishReason?: "stop" | "length" | "content_filter";
  /** Answer with this HTTP error instead. */
  httpError?: ScriptedHttpError;
  /**
   * After the deltas: an error event (Chat: a `data: {"error":…}` frame; Responses: `event:
   * error` then `response.failed`) or `"cut"` (the connection is destroyed, no terminal event).
   */
  errorAfterDeltas?: { message: string; code?: string } | "cut";
  /** Wait before the first delta (ms). */
  stallMs?: number;
  /** Send the headers, then nothing, until the client goes away. */
  stallForever?: boolean;
  /** Wait between deltas (ms). */
  delayPerDeltaMs?: number;
  /** Replay this exact SSE body (status 200, `text/event-stream`). */
  rawSse?: string;
  /** Send the deltas, then keep the connection open until the client goes away. */
  holdOpen?: boolean;
}

/** One request the server received. */
export interface RecordedRequest {
  /** HTTP method. */
  method: string;
  /** Request path (`/v1/chat/completions`, `/v1/responses`). */
  path: string;
  /** Parsed JSON body (`null` when it was not JSON). */
  body: Record<string, unknown> | null;
  /** Request headers (lower-case names). */
  headers: Record<string, string | string[] | undefined>;
  /** True when the client closed the connection before the answer was complete. */
  clientClosed: boolean;
}

/** The script: a list of turns, or a function choosing the turn for each request. */
export type TurnScript =
  | ScriptedTurn[]
  | ((request: RecordedRequest, index: number) => ScriptedTurn);

/** Options of {@link MockOpenAIServer}. */
export interface MockOpenAIServerOptions {
  /** The script. Default `[]` (every request gets a 500 "script exhausted"). */
  turns?: TurnScript;
  /** Serve `/v1/responses`. Default `true`; `false` answers 404 there (a Chat-only server). */
  responses?: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Deltas of a text option. */
function parts(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]).filter((s) => s !== "");
}

/** Splits a text into word-sized deltas (answer text given as one string). */
function words(v: string | string[] | undefined): string[] {
  if (Array.isArray(v)) return parts(v);
  if (v === undefined || v === "") return [];
  return v.match(/\S+\s*|\s+/g) ?? [v];
}

/** Arguments as the wire sends them. */
function argText(a: string | Record<string, unknown>): string {
  return typeof a === "string" ? a : JSON.stringify(a);
}

/**
 * A scripted OpenAI-compatible server on 127.0.0.1 (random port).
 *
 * @example
 * ```ts
 * import { MockOpenAIServer } from "@zqagent/core/testing";
 * const server = await new MockOpenAIServer({ turns: [{ text: "Hello!" }] }).start();
 * // new OpenAIProvider({ apiKey: "test", baseURL: server.baseURL }) …
 * await server.close();
 * ```
 */
export class MockOpenAIServer {
  /** Every request received, in order. */
  readonly requests: RecordedRequest[] = [];
  #turns: ScriptedTurn[] = [];
  #fn: ((request: RecordedRequest, index: number) => ScriptedTurn) | undefined;
  #responses: boolean;
  #server: Server | undefined;
  #sockets = new Set<Socket>();
  #port = 0;
  #served = 0;
  #closeWaiters = new Map<number, (() => void)[]>();

  /** Creates the server (not listening yet: call {@link MockOpenAIServer.start}). */
  constructor(options: MockOpenAIServerOptions = {}) {
    if (typeof options.turns === "function") this.#fn = options.turns;
    else this.#turns = [...(options.turns ?? [])];
    this.#responses = options.responses ?? true;
  }

  /** `http://127.0.0.1:<port>/v1`, for `baseURL`. */
  get baseURL(): string {
    return `http://127.0.0.1:${this.#port}/v1`;
  }

  /** The port (0 before {@link MockOpenAIServer.start}). */
  get port(): number {
    return this.#port;
  }

  /** Appends turns to the script (ignored when the script is a function). */
  enqueue(...turns: ScriptedTurn[]): void {
    this.#turns.push(...turns);
  }

  /** Starts listening on 127.0.0.1 on a random port; returns this server. */
  async start(): Promise<this> {
    // A client gone mid-request (aborted body, killed process) must not crash the host.
    const server = createServer((req, res) => {
      this.#handle(req, res).catch(() => res.destroy());
    });
    server.on("connection", (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on("close", () => this.#sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const addr = server.address();
    this.#port = typeof addr === "object" && addr ? addr.port : 0;
    this.#server = server;
    return this;
  }

  /**
   * Resolves when the client closes request number `index` (0-based) before its answer was
   * complete (an abort, a watchdog); at once if that already happened.
   */
  waitForClientClose(index: number): Promise<void> {
    if (this.requests[index]?.clientClosed) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.#closeWaiters.get(index) ?? [];
      list.push(resolve);
      this.#closeWaiters.set(index, list);
    });
  }

  /** Stops the server and destroys every open connection. */
  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #nextTurn(request: RecordedRequest, index: number): ScriptedTurn | undefined {
    if (this.#fn) return this.#fn(request, index);
    return this.#turns.shift();
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Uint8Array[] = [];
    for await (const c of req) chunks.push(c as Uint8Array);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: Record<string, unknown> | null = null;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      body = null;
    }
    const path = (req.url ?? "/").split("?")[0];
    const record: RecordedRequest = {
      method: req.method ?? "GET",
      path,
      body,
      headers: { ...req.headers },
      clientClosed: false,
    };
    const index = this.requests.length;
    this.requests.push(record);
    let finished = false;
    res.on("finish", () => (finished = true));
    res.on("close", () => {
      if (finished) return;
      record.clientClosed = true;
      for (const w of this.#closeWaiters.get(index) ?? []) w();
      this.#closeWaiters.delete(index);
    });

    const isChat = path.endsWith("/chat/completions");
    const isResponses = path.endsWith("/responses");
    if (req.method !== "POST" || (!isChat && !isResponses) || (isResponses && !this.#responses)) {
      return this.#json(res, 404, {
        error: { message: `Invalid URL (${req.method} ${path})`, type: "invalid_request_error" },
      });
    }
    const turn = this.#nextTurn(record, index);
    if (!turn) {
      return this.#json(res, 500, {
        error: {
          message: `MockOpenAIServer: the script has no turn left for request #${index + 1}`,
          type: "server_error",
          code: "script_exhausted",
        },
      });
    }
    const n = ++this.#served;
    if (turn.httpError) {
      const e = turn.httpError;
      return this.#json(res, e.status, {
        error: {
          message: e.message,
          type: e.type ?? "invalid_request_error",
          code: e.code ?? null,
        },
      });
    }
    if (turn.rawSse !== undefined) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.end(turn.rawSse);
      return;
    }
    const stream = body?.stream === true;
    if (!stream) {
      return this.#json(res, 200, isChat ? chatJson(turn, n, body) : responsesJson(turn, n, body));
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.flushHeaders();
    if (turn.stallForever) return; // the client's watchdog or abort ends it
    if (turn.stallMs) await sleep(turn.stallMs);
    const frames = isChat ? chatFrames(turn, n, body) : responsesFrames(turn, n, body);
    for (const frame of frames.deltas) {
      if (res.destroyed) return;
      res.write(frame);
      if (turn.delayPerDeltaMs) await sleep(turn.delayPerDeltaMs);
    }
    if (res.destroyed) return;
    if (turn.holdOpen) return;
    if (turn.errorAfterDeltas === "cut") {
      // Let the deltas reach the client, then drop the connection mid-body.
      await new Promise<void>((resolve) => res.write("", () => resolve()));
      res.socket?.destroy();
      return;
    }
    if (turn.errorAfterDeltas) {
      res.end(frames.error(turn.errorAfterDeltas));
      return;
    }
    res.end(frames.end);
  }

  #json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  }
}

/** Frames of one streamed answer. */
interface Frames {
  deltas: string[];
  end: string;
  error: (e: { message: string; code?: string }) => string;
}

function usageOf(
  turn: ScriptedTurn,
  body: Record<string, unknown> | null,
): { inputTokens: number; outputTokens: number } | null {
  if (turn.usage === null) return null;
  if (turn.usage) return turn.usage;
  const input = JSON.stringify(body?.messages ?? body?.input ?? "").length;
  const output = parts(turn.text).join("").length + parts(turn.reasoning).join("").length +
    (turn.toolCalls ?? []).reduce((n, c) => n + c.name.length + argText(c.arguments).length, 0);
  return { inputTokens: Math.ceil(input / 4), outputTokens: Math.max(1, Math.ceil(output / 4)) };
}

function callId(c: ScriptedToolCall, turn: number, i: number): string {
  return c.id ?? `call_${turn}_${i}`;
}

const sse = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
const ev = (type: string, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

function chatFrames(turn: ScriptedTurn, n: number, body: Record<string, unknown> | null): Frames {
  const model = String(body?.model ?? "mock-model");
  const base = { id: `chatcmpl-mock${n}`, object: "chat.completion.chunk", created: 0, model };
  const delta = (d: Record<string, unknown>, finish: string | null = null) =>
    sse({ ...base, choices: [{ index: 0, delta: d, finish_reason: finish }] });
  const deltas = [delta({ role: "assistant", content: "" })];
  for (const r of parts(turn.reasoning)) deltas.push(delta({ reasoning_content: r }));
  for (const t of words(turn.text)) deltas.push(delta({ content: t }));
  (turn.toolCalls ?? []).forEach((c, i) => {
    deltas.push(delta({
      tool_calls: [{
        index: i,
        id: callId(c, n, i),
        type: "function",
        function: { name: c.name, arguments: "" },
      }],
    }));
    deltas.push(
      delta({ tool_calls: [{ index: i, function: { arguments: argText(c.arguments) } }] }),
    );
  });
  const finish = turn.toolCalls?.length ? "tool_calls" : turn.finishReason ?? "stop";
  const usage = usageOf(turn, body);
  let end = delta({}, finish);
  if (usage) {
    end += sse({
      ...base,
      choices: [],
      usage: {
        prompt_tokens: usage.inputTokens,
        completion_tokens: usage.outputTokens,
        total_tokens: usage.inputTokens + usage.outputTokens,
      },
    });
  }
  end += "data: [DONE]\n\n";
  return {
    deltas,
    end,
    error: (e) =>
      sse({ error: { message: e.message, code: e.code ?? null, type: "server_error" } }),
  };
}

function responseObject(
  n: number,
  model: string,
  status: string,
  output: unknown[],
  usage: { inputTokens: number; outputTokens: number } | null,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id: `resp_mock${n}`,
    object: "response",
    created_at: 0,
    status,
    model,
    output,
    error: null,
    incomplete_details: null,
    usage: usage
      ? {
        input_tokens: usage.inputTokens,
        output_tokens: usage.outputTokens,
        total_tokens: usage.inputTokens + usage.outputTokens,
      }
      : null,
    ...extra,
  };
}

function responseOutput(turn: ScriptedTurn, n: number): unknown[] {
  const output: unknown[] = [];
  const reasoning = parts(turn.reasoning).join("");
  if (reasoning) {
    output.push({
      id: `rs_mock${n}`,
      type: "reasoning",
      summary: [{ type: "summary_text", text: reasoning }],
    });
  }
  const text = parts(turn.text).join("");
  if (text) {
    output.push({
      id: `msg_mock${n}`,
      type: "message",
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text, annotations: [] }],
    });
  }
  (turn.toolCalls ?? []).forEach((c, i) =>
    output.push({
      id: `fc_mock${n}_${i}`,
      type: "function_call",
      status: "completed",
      call_id: callId(c, n, i),
      name: c.name,
      arguments: argText(c.arguments),
    })
  );
  return output;
}

function terminal(turn: ScriptedTurn): { type: string; status: string; details: unknown } {
  if (!turn.toolCalls?.length && turn.finishReason && turn.finishReason !== "stop") {
    return {
      type: "response.incomplete",
      status: "incomplete",
      details: {
        reason: turn.finishReason === "length" ? "max_output_tokens" : "content_filter",
      },
    };
  }
  return { type: "response.completed", status: "completed", details: null };
}

function responsesFrames(
  turn: ScriptedTurn,
  n: number,
  body: Record<string, unknown> | null,
): Frames {
  const model = String(body?.model ?? "mock-model");
  const usage = usageOf(turn, body);
  const output = responseOutput(turn, n);
  const deltas = [
    ev("response.created", { response: responseObject(n, model, "in_progress", [], null) }),
  ];
  let idx = 0;
  const reasoning = parts(turn.reasoning);
  if (reasoning.length) {
    const item = output[idx] as Record<string, unknown>;
    deltas.push(ev("response.output_item.added", {
      output_index: idx,
      item: { ...item, summary: [] },
    }));
    for (const r of reasoning) {
      deltas.push(ev("response.reasoning_summary_text.delta", {
        item_id: item.id,
        output_index: idx,
        summary_index: 0,
        delta: r,
      }));
    }
    deltas.push(ev("response.output_item.done", { output_index: idx, item }));
    idx++;
  }
  const text = words(turn.text);
  if (text.length) {
    const item = output[idx] as Record<string, unknown>;
    deltas.push(ev("response.output_item.added", {
      output_index: idx,
      item: { ...item, status: "in_progress", content: [] },
    }));
    for (const t of text) {
      deltas.push(ev("response.output_text.delta", {
        item_id: item.id,
        output_index: idx,
        content_index: 0,
        delta: t,
      }));
    }
    deltas.push(ev("response.output_item.done", { output_index: idx, item }));
    idx++;
  }
  for (const _ of turn.toolCalls ?? []) {
    const item = output[idx] as Record<string, unknown>;
    deltas.push(ev("response.output_item.added", {
      output_index: idx,
      item: { ...item, status: "in_progress", arguments: "" },
    }));
    deltas.push(ev("response.function_call_arguments.delta", {
      item_id: item.id,
      output_index: idx,
      delta: item.arguments,
    }));
    deltas.push(ev("response.function_call_arguments.done", {
      item_id: item.id,
      output_index: idx,
      arguments: item.arguments,
    }));
    deltas.push(ev("response.output_item.done", { output_index: idx, item }));
    idx++;
  }
  const t = terminal(turn);
  const end = ev(t.type, {
    response: responseObject(n, model, t.status, output, usage, { incomplete_details: t.details }),
  });
  return {
    deltas,
    end,
    error: (e) =>
      ev("error", { error: { message: e.message, code: e.code ?? null, type: "server_error" } }) +
      ev("response.failed", {
        response: responseObject(n, model, "failed", [], null, {
          error: { message: e.message, code: e.code ?? "server_error" },
        }),
      }),
  };
}

function chatJson(turn: ScriptedTurn, n: number, body: Record<string, unknown> | null): unknown {
  const usage = usageOf(turn, body);
  const calls = (turn.toolCalls ?? []).map((c, i) => ({
    id: callId(c, n, i),
    type: "function",
    function: { name: c.name, arguments: argText(c.arguments) },
  }));
  const message: Record<string, unknown> = {
    role: "assistant",
    content: parts(turn.text).join("") || null,
  };
  const reasoning = parts(turn.reasoning).join("");
  if (reasoning) message.reasoning_content = reasoning;
  if (calls.length) message.tool_calls = calls;
  return {
    id: `chatcmpl-mock${n}`,
    object: "chat.completion",
    created: 0,
    model: String(body?.model ?? "mock-model"),
    choices: [{
      index: 0,
      message,
      finish_reason: calls.length ? "tool_calls" : turn.finishReason ?? "stop",
    }],
    usage: usage
      ? {
        prompt_tokens: usage.inputTokens,
        completion_tokens: usage.outputTokens,
        total_tokens: usage.inputTokens + usage.outputTokens,
      }
      : undefined,
  };
}

function responsesJson(
  turn: ScriptedTurn,
  n: number,
  body: Record<string, unknown> | null,
): unknown {
  const t = terminal(turn);
  return responseObject(
    n,
    String(body?.model ?? "mock-model"),
    t.status,
    responseOutput(turn, n),
    usageOf(turn, body),
    { incomplete_details: t.details },
  );
}

/**
 * A plain text answer turn.
 *
 * @param text The answer; an array gives the deltas.
 */
export function textTurn(text: string | string[]): ScriptedTurn {
  return { text };
}

/**
 * A turn with one tool call (optionally after some text).
 *
 * @param name Function name.
 * @param args Arguments (object or JSON text). Default `{}`.
 * @param options `id` of the call, `text` before it.
 */
export function toolCallTurn(
  name: string,
  args: string | Record<string, unknown> = {},
  options: { id?: string; text?: string } = {},
): ScriptedTurn {
  return { text: options.text, toolCalls: [{ id: options.id, name, arguments: args }] };
}

/**
 * A turn answered with an HTTP error.
 *
 * @param status HTTP status.
 * @param message `error.message`.
 * @param code `error.code`.
 */
export function httpErrorTurn(status: number, message: string, code?: string): ScriptedTurn {
  return { httpError: { status, message, code } };
}
