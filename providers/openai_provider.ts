/**
 * `OpenAIProvider`: the {@link ProviderClient} for any OpenAI-compatible endpoint (manual §10.1,
 * DESIGN §4), on the official `openai` SDK (HTTP, SSE parsing, retries of 429/5xx; DESIGN §1
 * "libraries over hand-written code"). What the SDK does not do is ours: choosing between the
 * Responses API and Chat Completions, the stream normalisers, the idle watchdog, audit logs.
 *
 * @module
 */
import type OpenAI from "openai";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { envNumber, envString } from "../_internal/env.ts";
import { createSocksFetch } from "../_internal/socks_fetch.ts";
import { abortError, isAbortError, ProviderError, toProviderError } from "./errors.ts";
import { isDeepSeek, supportsReasoningEffort } from "./models.ts";
import { ChatStreamNormaliser } from "./_chat_stream.ts";
import { ResponsesStreamNormaliser } from "./_responses_stream.ts";
import { SdkStreamReader } from "./_sdk_stream.ts";
import { ThinkTagSplitter } from "./_think_tags.ts";
import { directStream } from "../_internal/direct_stream.ts";
import { contentText, toChatMessages, toResponsesInput, toResponsesTools } from "./_convert.ts";
import type {
  Message,
  ProviderClient,
  RequestOptions,
  StreamChunk,
  StreamOpts,
  ToolSchema,
} from "./types.ts";

/** The `openai` module, loaded by the first request (see `OpenAIProvider.#sdk`). */
let sdkModule: Promise<typeof import("openai")> | undefined;

/** Which OpenAI API a provider uses: `auto` tries Responses first (manual §10.1). */
export type ApiMode = "auto" | "responses" | "chat";

/** Default idle watchdog: a stream that sends nothing for this long fails (ms). */
export const DEFAULT_STREAM_IDLE_MS = 120_000;

/** Options of {@link OpenAIProvider}; every field is optional and falls back to its env var. */
export interface OpenAIProviderOptions {
  /** API key. Default env `OPENAI_API_KEY`. Missing → requests throw `missing_api_key`. */
  apiKey?: string;
  /** Any OpenAI-compatible endpoint. Default env `OPENAI_BASE_URL`, else the SDK's OpenAI URL. */
  baseURL?: string;
  /**
   * `"auto"` (default): Responses first, Chat Completions on "endpoint not supported" (remembered
   * per model) or "incompatible parameters" (this request only). `"responses"` / `"chat"` force
   * one API. Env `OPENAI_FORCE_API_MODE=responses|chat` applies when this is unset or `"auto"`.
   */
  apiMode?: ApiMode;
  /** Retries of 429/5xx/connection errors by the SDK. Default env `OPENAI_MAX_RETRIES`, else 2. */
  maxRetries?: number;
  /** Timeout until response headers, per attempt (ms). Default env `OPENAI_TIMEOUT_MS`, else 600,000. */
  timeoutMs?: number;
  /**
   * Idle watchdog: a stream with no event for this long is aborted and fails with code
   * `"stream_idle_timeout"` (retriable, network) (ms). Time the consumer spends not reading does
   * not count. The silence is noticed within an eighth of this limit after it is reached (the
   * watchdog ticks eight times per period instead of reading the clock per event). Default env
   * `OPENAI_STREAM_IDLE_MS`, else 120,000. `0` turns it off.
   */
  streamIdleMs?: number;
  /** Reasoning effort when `StreamOpts` has none. Default env `OPENAI_REASONING_EFFORT`. */
  reasoningEffort?: "low" | "medium" | "high";
  /**
   * Audit folder: each request writes `<logDir>/<YYYY-MM-DD>/<reqId>.<api>.request.json` and
   * `…response.json` (messages included: mind data-protection rules, manual §10.1). Off by default.
   */
  logDir?: string;
  /** SOCKS5 proxy URL (`socks5://host:port`). Default env `SOCKS5_PROXY`. Ignored when `fetch` is set. */
  socksProxy?: string;
  /** A custom `fetch` for every request (tests, proxies); same signature as the global one. */
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  /** Extra headers on every request. */
  defaultHeaders?: Record<string, string>;
}

type Api = "responses" | "chat";
type SdkRequestOptions = {
  signal?: AbortSignal;
  timeout?: number;
  headers?: Record<string, string>;
};
type AnyStream = AsyncIterable<unknown>;

/** "endpoint not supported" answers: the API is absent on this server. */
const ENDPOINT_TEXT =
  /invalid url|unknown (url|endpoint|route|path)|no route|not found|not implemented|unsupported endpoint|endpoint.*not supported/i;
/** "incompatible parameters" answers: a field this gateway does not take. */
const PARAM_TEXT =
  /unsupported|unrecogni[sz]ed|not supported|unknown (parameter|field|argument|name)|extra (inputs|fields)|not permitted|additional propert|invalid (parameter|field|type for)|no such (parameter|field)|unexpected (keyword|field|parameter)/i;

/** How the Responses attempt failed, when it calls for Chat Completions. */
function fallbackKind(err: unknown): "endpoint" | "params" | null {
  const e = err as { status?: unknown; message?: unknown };
  const status = typeof e?.status === "number" ? e.status : undefined;
  const message = typeof e?.message === "string" ? e.message : "";
  if (status === 404 || status === 405 || status === 501) return "endpoint";
  if (status === 400 || status === 422) {
    if (ENDPOINT_TEXT.test(message) && !PARAM_TEXT.test(message)) return "endpoint";
    if (PARAM_TEXT.test(message)) return "params";
  }
  return null;
}

/** True for a 400/422 that names a parameter the server does not take. */
function isIncompatibleParams(err: unknown): boolean {
  return fallbackKind(err) === "params";
}

/** `YYYY-MM-DD` of an ISO time (UTC), today when it does not parse. */
function dateFolder(logTime: string): string {
  const d = new Date(logTime);
  return (Number.isNaN(d.getTime()) ? new Date() : d).toISOString().slice(0, 10);
}

/** A file-name-safe form of a request id. */
function safeName(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 120) || "request";
}

/**
 * The provider for OpenAI and OpenAI-compatible endpoints (manual §10.1).
 *
 * The constructor never throws; a missing key surfaces on the first request as a
 * {@link ProviderError} with code `"missing_api_key"`.
 *
 * @example Stream one answer
 * ```ts
 * import { OpenAIProvider } from "@zqagent/core/providers";
 * const provider = new OpenAIProvider({ apiKey: "sk-…", baseURL: "http://127.0.0.1:8000/v1" });
 * const stream = await provider.stream("gpt-4.1-mini", [{ role: "user", content: "hi" }], [], {
 *   reqId: "r1",
 *   logTime: new Date().toISOString(),
 * });
 * for await (const chunk of stream) if (chunk.content) console.log(chunk.content);
 * ```
 */
export class OpenAIProvider implements ProviderClient {
  #apiKey: string | undefined;
  #baseURL: string | undefined;
  #mode: ApiMode;
  #maxRetries: number;
  #timeoutMs: number;
  #idleMs: number;
  #effort: "low" | "medium" | "high" | undefined;
  #logDir: string | undefined;
  #fetch: ((input: string | URL | Request, init?: RequestInit) => Promise<Response>) | undefined;
  #headers: Record<string, string> | undefined;
  #client: OpenAI | undefined;
  #chatOnly = new Set<string>();

  /** Creates a provider; reads env vars for options not given. Never throws. */
  constructor(options: OpenAIProviderOptions = {}) {
    this.#apiKey = options.apiKey ?? envString("OPENAI_API_KEY");
    this.#baseURL = options.baseURL ?? envString("OPENAI_BASE_URL");
    const forced = envString("OPENAI_FORCE_API_MODE")?.toLowerCase();
    this.#mode = options.apiMode && options.apiMode !== "auto"
      ? options.apiMode
      : forced === "responses" || forced === "chat"
      ? forced
      : "auto";
    this.#maxRetries = options.maxRetries ?? envNumber("OPENAI_MAX_RETRIES", 2);
    this.#timeoutMs = options.timeoutMs ?? envNumber("OPENAI_TIMEOUT_MS", 600_000);
    this.#idleMs = options.streamIdleMs ??
      envNumber("OPENAI_STREAM_IDLE_MS", DEFAULT_STREAM_IDLE_MS);
    const effort = options.reasoningEffort ?? envString("OPENAI_REASONING_EFFORT")?.toLowerCase();
    this.#effort = effort === "low" || effort === "medium" || effort === "high"
      ? effort
      : undefined;
    this.#logDir = options.logDir;
    const proxy = options.socksProxy ?? envString("SOCKS5_PROXY");
    this.#fetch = options.fetch ?? (proxy ? createSocksFetch(proxy) : undefined);
    this.#headers = options.defaultHeaders;
  }

  /** The API mode in force (`"auto"` unless forced by option or `OPENAI_FORCE_API_MODE`). */
  get apiMode(): ApiMode {
    return this.#mode;
  }

  /** The endpoint, when one was configured. */
  get baseURL(): string | undefined {
    return this.#baseURL;
  }

  /** The API the next request for `model` will try first. */
  apiFor(model: string): "responses" | "chat" {
    if (this.#mode !== "auto") return this.#mode;
    return this.#chatOnly.has(model) ? "chat" : "responses";
  }

  /**
   * The SDK client, created on first use. Performance (bench/import_bench.ts): the `openai`
   * module is loaded by the first request, not when the package is imported, so importing
   * `@zqagent/core` does not pay for it (DESIGN §1: heavy modules load lazily).
   *
   * @throws {ProviderError} `missing_api_key`.
   */
  async #sdk(): Promise<OpenAI> {
    if (!this.#apiKey) {
      throw new ProviderError(
        "Cannot call the model: OPENAI_API_KEY is not set (pass apiKey or a custom provider)",
        { code: "missing_api_key" },
      );
    }
    const { default: OpenAISdk } = await (sdkModule ??= import("openai"));
    this.#client ??= new OpenAISdk({
      apiKey: this.#apiKey,
      baseURL: this.#baseURL,
      maxRetries: this.#maxRetries,
      timeout: this.#timeoutMs,
      fetch: this.#fetch as never,
      defaultHeaders: this.#headers,
      // A library must not write to its host's console; `OPENAI_LOG` turns the SDK's logs back on.
      ...(envString("OPENAI_LOG") ? {} : { logLevel: "off" as const }),
    });
    return this.#client;
  }

  #isOfficialOpenAI(): boolean {
    return this.#baseURL === undefined || /\/\/api\.openai\.com(\/|$)/.test(this.#baseURL);
  }

  #effortFor(model: string, opts: StreamOpts): "low" | "medium" | "high" | undefined {
    const effort = opts.reasoningEffort ?? this.#effort;
    return effort && supportsReasoningEffort(model, this.#baseURL) ? effort : undefined;
  }

  #responsesBody(
    model: string,
    messages: Message[],
    tools: ToolSchema[],
    opts: StreamOpts,
  ): Record<string, unknown> {
    const { instructions, input } = toResponsesInput(messages);
    let wireTools = toResponsesTools(tools);
    if (isDeepSeek(model, this.#baseURL)) {
      // Manual §10.1: DeepSeek's Responses path gets the server-side search tool instead.
      wireTools = wireTools.filter((t) => t.name !== "web_search");
      wireTools.push({ type: "web_search" });
    }
    const body: Record<string, unknown> = { model, input, store: false };
    if (instructions !== undefined) body.instructions = instructions;
    if (wireTools.length) body.tools = wireTools;
    const effort = this.#effortFor(model, opts);
    if (effort) body.reasoning = { effort };
    return body;
  }

  #chatBody(model: string, messages: Message[], tools: ToolSchema[], opts: StreamOpts) {
    const official = this.#isOfficialOpenAI();
    const body: Record<string, unknown> = {
      model,
      messages: toChatMessages(messages, { keepReasoning: !official, keepToolName: !official }),
    };
    if (tools.length) body.tools = tools;
    const effort = this.#effortFor(model, opts);
    if (effort) body.reasoning_effort = effort;
    return body;
  }

  async #log(opts: StreamOpts, name: string, data: unknown): Promise<void> {
    if (!this.#logDir) return;
    try {
      const dir = join(this.#logDir, dateFolder(opts.logTime));
      await mkdir(dir, { recursive: true });
      await writeFile(
        join(dir, `${safeName(opts.reqId)}.${name}.json`),
        JSON.stringify(data, null, 2),
      );
    } catch {
      // Audit logging is best-effort: it never fails a request.
    }
  }

  /** Sends a Chat request; on "incompatible parameters" retries once without optional fields. */
  async #createChat(
    body: Record<string, unknown>,
    reqOpts: SdkRequestOptions,
    opts: StreamOpts,
  ): Promise<unknown> {
    const client = await this.#sdk();
    const create = (b: Record<string, unknown>) =>
      client.chat.completions.create(b as never, reqOpts as never) as Promise<unknown>;
    try {
      await this.#log(opts, "chat.request", body);
      return await create(body);
    } catch (err) {
      const optional = [
        "stream_options",
        "reasoning_effort",
        "temperature",
        "max_completion_tokens",
      ];
      if (!isIncompatibleParams(err) || !optional.some((k) => k in body)) throw err;
      const stripped = { ...body };
      for (const k of optional) delete stripped[k];
      await this.#log(opts, "chat.request", stripped);
      return await create(stripped);
    }
  }

  /**
   * Opens the request on the right API (fallback rules of manual §10.1) and returns the SDK's
   * stream or response with the API that answered.
   */
  async #open(
    model: string,
    bodies: { responses: () => Record<string, unknown>; chat: () => Record<string, unknown> },
    reqOpts: SdkRequestOptions,
    opts: StreamOpts,
  ): Promise<{ api: Api; result: unknown }> {
    const client = await this.#sdk();
    if (this.apiFor(model) === "responses") {
      const body = bodies.responses();
      try {
        await this.#log(opts, "responses.request", body);
        return {
          api: "responses",
          result: await client.responses.create(body as never, reqOpts as never),
        };
      } catch (err) {
        if (opts.signal?.aborted || isAbortError(err)) throw abortError(err);
        const kind = this.#mode === "auto" ? fallbackKind(err) : null;
        if (kind === null) throw toProviderError(err);
        if (kind === "endpoint") this.#chatOnly.add(model);
      }
    }
    try {
      return { api: "chat", result: await this.#createChat(bodies.chat(), reqOpts, opts) };
    } catch (err) {
      if (opts.signal?.aborted || isAbortError(err)) throw abortError(err);
      throw toProviderError(err);
    }
  }

  /**
   * Streams one model response (manual §10.2). The HTTP request is sent before this resolves,
   * so HTTP errors (401, 429 after the SDK's retries, 5xx…) reject here; errors inside the stream
   * are thrown by the iterator after the text that preceded them has been delivered.
   *
   * @param model Model name.
   * @param messages Conversation in Chat Completions shape.
   * @param tools Function tools the model may call.
   * @param opts Request id, log time, abort signal, reasoning effort.
   * @returns A `ReadableStream` (async-iterable, `highWaterMark: 0`) of normalised chunks; the
   *   last chunk of a successful stream has `finishReason`, `toolCalls` and `usage`.
   * @throws {ProviderError} `missing_api_key`; classified HTTP/network errors; `aborted`
   *   (name `AbortError`) when `opts.signal` fires; `stream_incomplete` when the stream ends
   *   without its terminal marker; `stream_idle_timeout` from the idle watchdog.
   */
  async stream(
    model: string,
    messages: Message[],
    tools: ToolSchema[],
    opts: StreamOpts,
  ): Promise<AsyncIterable<StreamChunk>> {
    await this.#sdk();
    if (opts.signal?.aborted) throw abortError(opts.signal.reason);
    const controller = new AbortController();
    const onAbort = () => controller.abort(opts.signal?.reason);
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    const detach = () => opts.signal?.removeEventListener("abort", onAbort);
    let api: Api;
    let sdkStream: AnyStream;
    try {
      const opened = await this.#open(
        model,
        {
          responses: () => ({ ...this.#responsesBody(model, messages, tools, opts), stream: true }),
          chat: () => ({
            ...this.#chatBody(model, messages, tools, opts),
            stream: true,
            stream_options: { include_usage: true },
          }),
        },
        { signal: controller.signal },
        opts,
      );
      api = opened.api;
      sdkStream = opened.result as AnyStream;
    } catch (err) {
      detach();
      throw err;
    }
    const prefix = `call_${safeName(opts.reqId)}`;
    // Performance (bench/turn_bench.ts): a ReadableStream whose `for await` reads the SDK stream
    // through the reader directly, skipping the stream machinery per chunk
    // (_internal/direct_stream.ts, _sdk_stream.ts).
    return directStream<StreamChunk>(
      new SdkStreamReader(sdkStream, {
        normaliser: api === "chat"
          ? new ChatStreamNormaliser(prefix)
          : new ResponsesStreamNormaliser(prefix),
        controller,
        signal: opts.signal,
        idleMs: this.#idleMs,
        transcript: this.#logDir !== undefined,
        onClose: (transcript) => {
          detach();
          return this.#log(opts, `${api}.response`, transcript);
        },
      }),
    );
  }

  /**
   * One non-streaming completion (session names, summaries; manual §10.2). Same API choice and
   * fallbacks as {@link OpenAIProvider.stream}.
   *
   * @param model Model name.
   * @param messages Conversation in Chat Completions shape.
   * @param options Temperature, per-request timeout (ms), extra headers.
   * @param opts Request id, log time, abort signal, reasoning effort.
   * @param params `maxTokens`: output cap (tokens; at least 16 on the Responses API).
   * @returns The answer text (`<think>` blocks removed), or `null` when it is empty.
   * @throws {ProviderError} As {@link OpenAIProvider.stream}.
   */
  async chat(
    model: string,
    messages: Message[],
    options: RequestOptions,
    opts: StreamOpts,
    params?: { maxTokens?: number },
  ): Promise<string | null> {
    await this.#sdk();
    if (opts.signal?.aborted) throw abortError(opts.signal.reason);
    const reqOpts: SdkRequestOptions = { signal: opts.signal };
    if (options.timeoutMs !== undefined) reqOpts.timeout = options.timeoutMs;
    if (options.headers) reqOpts.headers = options.headers;
    const maxTokens = params?.maxTokens;
    const { api, result } = await this.#open(
      model,
      {
        responses: () => {
          const body = this.#responsesBody(model, messages, [], opts);
          if (options.temperature !== undefined) body.temperature = options.temperature;
          if (maxTokens !== undefined) body.max_output_tokens = Math.max(16, maxTokens);
          return body;
        },
        chat: () => {
          const body = this.#chatBody(model, messages, [], opts);
          if (options.temperature !== undefined) body.temperature = options.temperature;
          if (maxTokens !== undefined) {
            body[this.#isOfficialOpenAI() ? "max_completion_tokens" : "max_tokens"] = maxTokens;
          }
          return body;
        },
      },
      reqOpts,
      opts,
    );
    let text = "";
    const r = (result ?? {}) as Record<string, unknown>;
    if (api === "responses") {
      for (const item of Array.isArray(r.output) ? r.output : []) {
        const it = item as { type?: string; content?: unknown };
        if (it.type !== "message" || !Array.isArray(it.content)) continue;
        for (const part of it.content as { type?: string; text?: unknown }[]) {
          if (typeof part.text === "string" && part.type !== "refusal") text += part.text;
        }
      }
    } else {
      const choice = (Array.isArray(r.choices) ? r.choices[0] : undefined) as
        | { message?: { content?: unknown } }
        | undefined;
      const content = choice?.message?.content;
      text = typeof content === "string"
        ? content
        : Array.isArray(content)
        ? contentText(content as Message["content"])
        : "";
      const splitter = new ThinkTagSplitter();
      const a = splitter.push(text);
      const b = splitter.flush();
      text = a.content + b.content;
    }
    await this.#log(opts, `${api}.response`, r);
    text = text.trim();
    return text === "" ? null : text;
  }
}
