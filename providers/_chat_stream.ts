/**
 * Normalises a Chat Completions stream (as yielded by the openai SDK) into {@link StreamChunk}s
 * (DESIGN §4, cases in `tests/fixtures/wire/chat-*`). Hand-written on purpose: this is where
 * OpenAI-compatible servers differ most.
 *
 * @module
 */
import { ProviderError, toProviderError } from "./errors.ts";
import { ThinkTagSplitter } from "./_think_tags.ts";
import type { StreamChunk, TokenUsage, ToolCall } from "./types.ts";

/** A record view of an unknown value. */
export function rec(v: unknown): Record<string, unknown> | undefined {
  return v && typeof v === "object" && !Array.isArray(v) ? v as Record<string, unknown> : undefined;
}

/** A finite number or undefined. */
function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

/** Builds a chunk. */
export function chunk(fields: Partial<StreamChunk>): StreamChunk {
  return {
    content: fields.content ?? null,
    reasoning: fields.reasoning ?? null,
    toolCalls: fields.toolCalls ?? null,
    usage: fields.usage ?? null,
    finishReason: fields.finishReason ?? null,
  };
}

/**
 * Reads a usage object in Chat (`prompt_tokens`…) or Responses (`input_tokens`…) shape,
 * including DeepSeek's `prompt_cache_hit_tokens`. `null` when it has no token counts.
 */
export function parseUsage(raw: unknown): TokenUsage | null {
  const u = rec(raw);
  if (!u) return null;
  const input = num(u.prompt_tokens) ?? num(u.input_tokens);
  const output = num(u.completion_tokens) ?? num(u.output_tokens);
  if (input === undefined && output === undefined) return null;
  const inTok = input ?? 0;
  const outTok = output ?? 0;
  const usage: TokenUsage = {
    inputTokens: inTok,
    outputTokens: outTok,
    totalTokens: num(u.total_tokens) ?? inTok + outTok,
  };
  const outDetails = rec(u.completion_tokens_details) ?? rec(u.output_tokens_details);
  const reasoning = num(outDetails?.reasoning_tokens) ?? num(u.reasoning_tokens);
  if (reasoning !== undefined) usage.reasoningTokens = reasoning;
  const inDetails = rec(u.prompt_tokens_details) ?? rec(u.input_tokens_details);
  const cached = num(inDetails?.cached_tokens) ?? num(u.prompt_cache_hit_tokens) ??
    num(u.cached_tokens);
  if (cached !== undefined) usage.cachedInputTokens = cached;
  return usage;
}

/** Wire finish reasons → the engine's four (plus tool_calls). */
export function mapFinishReason(raw: string): string {
  switch (raw) {
    case "stop":
    case "end_turn":
    case "stop_sequence":
    case "eos":
    case "eos_token":
      return "stop";
    case "length":
    case "max_tokens":
    case "max_output_tokens":
    case "model_length":
      return "length";
    case "content_filter":
    case "safety":
    case "recitation":
      return "content_filter";
    case "tool_calls":
    case "function_call":
    case "tool_use":
      return "tool_calls";
    default:
      return "stop";
  }
}

/** The error for a stream that ended without its terminal marker. */
export function incompleteStreamError(what: string): ProviderError {
  return new ProviderError(`Cannot finish the model response: the stream ended before ${what}`, {
    code: "stream_incomplete",
    retriable: true,
    network: true,
  });
}

/** A tool call being assembled. */
interface PendingCall {
  id: string;
  name: string;
  args: string;
  /** The wire `index` of the call's first fragment that had one. */
  index?: number;
}

/** Text of a JSON-ish arguments fragment: objects are stringified. */
function argText(v: unknown): string {
  if (v === undefined || v === null) return "";
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** True when `text` is one complete JSON value. */
function isCompleteJson(text: string): boolean {
  if (text.trim() === "") return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Assembles tool calls from Chat Completions fragments. Rules (DESIGN §4): fragments are keyed by
 * `index` when present; a new non-empty `id` starts a new call even on a repeated index; a fragment
 * without index continues the last call; a fragment that names a different function, or names one
 * after complete arguments, starts a new call; object arguments are stringified; a fragment whose
 * complete JSON arguments follow complete JSON arguments replaces them (servers that resend the
 * whole call at the end).
 */
export class ToolCallAssembler {
  #calls: PendingCall[] = [];
  #byIndex = new Map<number, PendingCall>();
  #byId = new Map<string, PendingCall>();
  #last: PendingCall | undefined;

  /** Adds one `delta.tool_calls[]` element. */
  push(fragment: unknown): void {
    const f = rec(fragment);
    if (!f) return;
    const fn = rec(f.function) ?? {};
    const index = typeof f.index === "number" ? f.index : undefined;
    const id = typeof f.id === "string" ? f.id : "";
    const name = typeof fn.name === "string" ? fn.name : "";
    const args = fn.arguments === undefined ? f.arguments : fn.arguments;

    let call: PendingCall | undefined;
    if (id !== "") {
      call = this.#byId.get(id);
      // A repeated id at another index is another call (some servers reuse ids): never merge
      // two calls' names and arguments.
      if (call && index !== undefined && call.index !== undefined && call.index !== index) {
        call = undefined;
      }
      if (!call) call = this.#start(id);
    } else if (index !== undefined) {
      call = this.#byIndex.get(index);
    } else {
      call = this.#last;
    }
    if (
      call && id === "" && name !== "" && call.name !== "" &&
      (call.name !== name || isCompleteJson(call.args))
    ) {
      call = undefined; // a new, id-less call
    }
    if (!call) call = this.#start("");
    if (index !== undefined) {
      this.#byIndex.set(index, call);
      call.index ??= index;
    }
    this.#last = call;

    if (name !== "" && call.name === "") call.name = name;
    const text = argText(args);
    if (text !== "") {
      if (typeof args !== "string") call.args = text; // an object is always the whole arguments
      else if (isCompleteJson(call.args) && isCompleteJson(text)) call.args = text;
      else call.args += text;
    }
  }

  #start(id: string): PendingCall {
    const call: PendingCall = { id, name: "", args: "" };
    this.#calls.push(call);
    if (id !== "") this.#byId.set(id, call);
    return call;
  }

  /** True when any call was started. */
  get size(): number {
    return this.#calls.length;
  }

  /** The complete calls, in emission order; `""` arguments become `"{}"`; nameless calls dropped. */
  result(idPrefix: string): ToolCall[] {
    return this.#calls.filter((c) => c.name !== "").map((c, i) => ({
      id: c.id !== "" ? c.id : `${idPrefix}_${i}`,
      type: "function" as const,
      function: { name: c.name, arguments: c.args.trim() === "" ? "{}" : c.args },
    }));
  }
}

/** Text and reasoning of a `content` that is an array of parts (Mistral, some gateways). */
function splitParts(parts: unknown[]): { content: string; reasoning: string } {
  let content = "";
  let reasoning = "";
  for (const p of parts) {
    if (typeof p === "string") {
      content += p;
      continue;
    }
    const part = rec(p);
    if (!part) continue;
    const type = typeof part.type === "string" ? part.type : "text";
    if (type === "thinking" || type === "reasoning" || type === "reasoning_text") {
      const t = part.thinking ?? part.reasoning ?? part.text;
      if (typeof t === "string") reasoning += t;
      else if (Array.isArray(t)) reasoning += splitParts(t).content;
    } else if (type === "text" || type === "output_text") {
      if (typeof part.text === "string") content += part.text;
    }
  }
  return { content, reasoning };
}

/** Reasoning text of a delta's `reasoning` field (string, or `{text}` / `{content}`). */
function reasoningField(v: unknown): string {
  if (typeof v === "string") return v;
  const r = rec(v);
  if (r) {
    for (const k of ["text", "content", "summary"]) if (typeof r[k] === "string") return r[k];
  }
  return "";
}

const EMPTY: Record<string, unknown> = Object.freeze({});

/** Incremental normaliser for one Chat Completions stream. */
export class ChatStreamNormaliser {
  #calls = new ToolCallAssembler();
  #think = new ThinkTagSplitter();
  #usage: TokenUsage | null = null;
  #finish: string | null = null;
  #idPrefix: string;

  /** @param idPrefix Prefix for ids of calls the server sent without one. */
  constructor(idPrefix: string) {
    this.#idPrefix = idPrefix;
  }

  /**
   * Feeds one parsed SSE payload; passes the chunk to deliver now, if any, to `emit`.
   *
   * @throws {ProviderError} When the payload is an error object (vLLM `{object:"error"}`, an
   *   `error` key, or a no-choices chunk with a message and code).
   */
  push(payload: unknown, emit: (chunk: StreamChunk) => void): void {
    const p = rec(payload);
    if (!p) return;
    const choices = p.choices;
    const hasChoices = Array.isArray(choices);
    if (
      p.object === "error" || p.error !== undefined && p.error !== null ||
      (!hasChoices && typeof p.message === "string" && p.code !== undefined)
    ) {
      throw toProviderError(rec(p.error) ? { error: p.error } : { error: p });
    }
    if (p.usage !== undefined && p.usage !== null) {
      const usage = parseUsage(p.usage);
      if (usage) this.#usage = usage; // cumulative or final: the latest wins
    }
    if (!hasChoices || choices.length === 0) return;
    // The choice with index 0 (or without index), else the first one.
    let choice = choices.length === 1 ? rec(choices[0]) : undefined;
    if (!choice) {
      choice = rec(choices.find((c) => rec(c)?.index === 0 || rec(c)?.index === undefined)) ??
        rec(choices[0]);
      if (!choice) return;
    }
    const delta = rec(choice.delta) ?? rec(choice.message) ?? EMPTY;
    let content = "";
    let reasoning = "";
    if (delta.reasoning_content !== undefined || delta.reasoning !== undefined) {
      reasoning = reasoningField(delta.reasoning_content) || reasoningField(delta.reasoning);
    }
    const text = delta.content;
    if (typeof text === "string") {
      if (this.#think.passthrough) content = text; // past any leading <think> block
      else {
        const split = this.#think.push(text);
        content = split.content;
        reasoning += split.reasoning;
      }
    } else if (Array.isArray(text)) {
      const split = splitParts(text);
      content = split.content;
      reasoning += split.reasoning;
    }
    if (content !== "" || reasoning !== "") {
      emit({
        content: content || null,
        reasoning: reasoning || null,
        toolCalls: null,
        usage: null,
        finishReason: null,
      });
    }
    if (delta.tool_calls !== undefined || delta.function_call !== undefined) {
      if (Array.isArray(delta.tool_calls)) {
        for (const f of delta.tool_calls) this.#calls.push(f);
      } else if (rec(delta.function_call)) {
        this.#calls.push({ index: 0, function: delta.function_call });
      }
    }
    const finish = choice.finish_reason;
    if (typeof finish === "string" && finish !== "") {
      if (finish === "error") {
        throw new ProviderError(
          "Cannot finish the model response: the server ended it with an error",
          {
            code: "stream_error",
            retriable: true,
          },
        );
      }
      this.#finish = finish;
    }
  }

  /**
   * Ends the stream: releases held-back text and builds the final chunk. When no finish_reason
   * was seen, `error` is a {@link ProviderError} with code `"stream_incomplete"` and `chunks`
   * holds only the released text (no tool call comes from a cut stream).
   */
  finish(): { chunks: StreamChunk[]; error?: ProviderError } {
    const chunks: StreamChunk[] = [];
    const rest = this.#think.flush();
    if (rest.content !== "" || rest.reasoning !== "") {
      chunks.push(chunk({ content: rest.content || null, reasoning: rest.reasoning || null }));
    }
    if (this.#finish === null) {
      return { chunks, error: incompleteStreamError("a finish_reason was received") };
    }
    const toolCalls = this.#calls.result(this.#idPrefix);
    const mapped = mapFinishReason(this.#finish);
    chunks.push(chunk({
      toolCalls: toolCalls.length ? toolCalls : null,
      usage: this.#usage,
      finishReason: toolCalls.length ? "tool_calls" : mapped === "tool_calls" ? "stop" : mapped,
    }));
    return { chunks };
  }
}
