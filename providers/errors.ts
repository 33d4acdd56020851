/**
 * Provider errors with the fields the engine needs to decide between retry, compaction and
 * giving up (DESIGN §4).
 *
 * @module
 */

/** Options of {@link ProviderError}. */
export interface ProviderErrorOptions {
  /** HTTP status, when the error came from an HTTP response. */
  status?: number;
  /** Provider error code (`"context_length_exceeded"`, `"stream_incomplete"`, …). */
  code?: string;
  /** True when the same request may succeed if sent again. Default `false`. */
  retriable?: boolean;
  /** True when the request exceeded the model's context window. Default `false`. */
  contextOverflow?: boolean;
  /** True for transient network failures (connection reset, timeout, cut stream). Default `false`. */
  network?: boolean;
  /** The underlying error. */
  cause?: unknown;
}

/** An error from a model provider, classified for the engine. */
export class ProviderError extends Error {
  /** `"ProviderError"`; `"AbortError"` for aborts (see {@link abortError}). */
  override name = "ProviderError";
  /** HTTP status, when known. */
  readonly status?: number;
  /** Provider error code, when known. */
  readonly code?: string;
  /** True when the same request may succeed if sent again. */
  readonly retriable: boolean;
  /** True when the request exceeded the model's context window. */
  readonly contextOverflow: boolean;
  /** True for transient network failures, which the engine retries (`NETWORK_RETRY_MAX`). */
  readonly network: boolean;

  /** Creates a classified provider error. */
  constructor(message: string, options: ProviderErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status;
    this.code = options.code;
    this.retriable = options.retriable ?? false;
    this.contextOverflow = options.contextOverflow ?? false;
    this.network = options.network ?? false;
  }
}

/**
 * Message patterns that mean "the request did not fit the model's context window", matched
 * case-insensitively. Collected from the providers' own error texts (see
 * `research/coding-engines.md` §8, after OpenCode's `provider/error.ts` and pi-mono's
 * `overflow.ts`).
 */
const OVERFLOW_PATTERNS: readonly RegExp[] = [
  /prompt is too long/i, // Anthropic (and Anthropic-compatible gateways)
  /input is too long for (the )?requested model/i, // Bedrock
  /exceeds? the context window/i, // OpenAI Responses
  /maximum context length/i, // OpenAI Chat, OpenRouter, DeepSeek, vLLM, Azure
  /input token count.*exceeds the maximum/i, // Gemini
  /maximum prompt length is/i, // xAI
  /reduce the length of the messages/i, // Groq, Azure
  /exceeds the limit of \d+/i, // GitHub Copilot
  /exceeds the available context size/i, // llama.cpp
  /greater than the context length/i, // LM Studio
  /context window exceeds limit/i, // MiniMax
  /exceeded model token limit/i, // Kimi, Moonshot
  /context[_ ]length[_ ]exceeded/i, // generic code in the message
  /context length is only \d+ tokens/i, // vLLM
  /input length.*exceeds.*context length/i, // vLLM
  /prompt.*(too long|exceeds).*(context|tokens)/i, // Ollama, generic
  /too many (input )?tokens/i, // Mistral, generic
  /request entity too large/i, // HTTP 413 text
];

/** Error codes that mean the context window was exceeded. */
const OVERFLOW_CODES = new Set(["context_length_exceeded", "string_above_max_length"]);

/** Error codes that must not be retried as they are (the request itself is wrong or unpaid). */
const FATAL_CODES = new Set([
  "insufficient_quota",
  "invalid_api_key",
  "invalid_request_error",
  "model_not_found",
  "context_length_exceeded",
  "billing_hard_limit_reached",
  "missing_api_key",
]);

/**
 * True when an error message reads like a context-window overflow from one of the major
 * providers (OpenAI, Anthropic-compatible, DeepSeek, vLLM, llama.cpp, Ollama, Azure, Gemini,
 * OpenRouter, xAI, Groq, Mistral, Moonshot, MiniMax).
 *
 * @param message An error message as the provider sent it.
 * @returns Whether it names a context overflow.
 */
export function isContextOverflowMessage(message: string): boolean {
  return OVERFLOW_PATTERNS.some((re) => re.test(message));
}

/**
 * True when `err` is an abort (the caller's `AbortSignal` fired): a DOM `AbortError`, the
 * openai SDK's `APIUserAbortError`, or a {@link ProviderError} with code `"aborted"`.
 *
 * @param err Anything that was thrown.
 */
export function isAbortError(err: unknown): boolean {
  if (!err || typeof err !== "object") return false;
  const e = err as { name?: unknown; code?: unknown; constructor?: { name?: string } };
  return e.name === "AbortError" || e.code === "aborted" || e.code === "ABORT_ERR" ||
    e.constructor?.name === "APIUserAbortError";
}

/**
 * The error a provider throws when its request was aborted through `StreamOpts.signal`.
 * It is a {@link ProviderError} with code `"aborted"` and `name` `"AbortError"`, so both
 * `instanceof ProviderError` and the usual `err.name === "AbortError"` checks recognise it.
 *
 * @param cause The abort reason, when known.
 */
export function abortError(cause?: unknown): ProviderError {
  const err = new ProviderError("Cannot finish the model request: it was aborted", {
    code: "aborted",
    cause,
  });
  err.name = "AbortError";
  return err;
}

/** A record view of an unknown value (no checks beyond "is an object"). */
function rec(v: unknown): Record<string, unknown> | undefined {
  return v && typeof v === "object" ? v as Record<string, unknown> : undefined;
}

/** The first string among `values`. */
function str(...values: unknown[]): string | undefined {
  for (const v of values) if (typeof v === "string" && v !== "") return v;
  return undefined;
}

/**
 * Classifies anything thrown while talking to a model into a {@link ProviderError} (DESIGN §4,
 * manual §9.4):
 *
 * - HTTP 401/403 → not retriable; 408/409/429/5xx → retriable (the openai SDK has already
 *   retried these `maxRetries` times);
 * - network failures (the SDK's `APIConnectionError` / `APIConnectionTimeoutError`,
 *   `ECONNRESET`, `ECONNREFUSED`, "fetch failed", "terminated", the idle watchdog) →
 *   retriable with `network: true`;
 * - error payloads that arrived inside a stream (no HTTP status) → retriable unless their code
 *   names a fatal condition (`insufficient_quota`, `invalid_api_key`, …);
 * - context overflow from status 413, code `context_length_exceeded`, or the message patterns
 *   of {@link isContextOverflowMessage} → `contextOverflow: true` (not retriable as is: the
 *   engine compacts first);
 * - aborts stay aborts: the result has code `"aborted"` and name `"AbortError"`.
 *
 * A `ProviderError` passes through unchanged.
 *
 * @param err Anything that was thrown (openai SDK `APIError`, `TypeError`, a stream payload…).
 * @returns The classified error; `cause` holds `err`.
 */
export function toProviderError(err: unknown): ProviderError {
  if (err instanceof ProviderError) return err;
  if (isAbortError(err)) return abortError(err);
  const e = rec(err) ?? {};
  const body = rec(e.error);
  const nested = rec(body?.error);
  const rawStatus = typeof e.status === "number" ? e.status : undefined;
  const codeValue = e.code ?? body?.code ?? nested?.code;
  const numericCode = typeof codeValue === "number" ? codeValue : undefined;
  const status = rawStatus ??
    (numericCode !== undefined && numericCode >= 400 && numericCode < 600
      ? numericCode
      : undefined);
  const code = typeof codeValue === "string" && codeValue !== ""
    ? codeValue
    : str(e.type, body?.type, nested?.type);
  const providerMessage = str(body?.message, nested?.message, e.message) ??
    (typeof err === "string" ? err : String(err));
  const message = providerMessage.startsWith("Cannot ")
    ? providerMessage
    : `Cannot get a model response: ${providerMessage}`;

  const ctorName = (e.constructor as { name?: string } | undefined)?.name ?? "";
  const causeCode = str(rec(e.cause)?.code, e.code);
  const networkText = `${providerMessage} ${str(rec(e.cause)?.message) ?? ""}`;
  const network = rawStatus === undefined && (
    ctorName === "APIConnectionError" || ctorName === "APIConnectionTimeoutError" ||
    (causeCode !== undefined &&
      /^(ECONNRESET|ECONNREFUSED|ECONNABORTED|EPIPE|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|UND_ERR_\w+)$/
        .test(causeCode)) ||
    /fetch failed|network|socket hang up|terminated|connection (reset|closed|error|lost)|error sending request|error reading a body|body from connection|unexpected end|incomplete (chunked|body)|timed? ?out|premature close|other side closed/i
      .test(networkText)
  );

  const contextOverflow = status === 413 || (code !== undefined && OVERFLOW_CODES.has(code)) ||
    isContextOverflowMessage(providerMessage);

  let retriable: boolean;
  if (contextOverflow) retriable = false;
  else if (status !== undefined) {
    retriable = status === 408 || status === 409 || status === 429 || status >= 500;
  } else if (network) retriable = true;
  else retriable = code === undefined || !FATAL_CODES.has(code);

  return new ProviderError(message, {
    status,
    code: code ?? (network ? "network_error" : undefined),
    retriable,
    contextOverflow,
    network,
    cause: err,
  });
}
