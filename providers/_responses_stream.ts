/**
 * Normalises a Responses API event stream (as yielded by the openai SDK) into
 * {@link StreamChunk}s (DESIGN §4, cases in `tests/fixtures/wire/responses-*`). Deltas are routed
 * by `output_index` (servers such as Copilot rotate `item_id` on every event); `item_id` is only a
 * fallback. Hand-written on purpose.
 *
 * @module
 */
import { type ProviderError, toProviderError } from "./errors.ts";
import { chunk, incompleteStreamError, parseUsage, rec } from "./_chat_stream.ts";
import type { StreamChunk, TokenUsage, ToolCall } from "./types.ts";

const UNSET = Symbol("unset");

/** A function call being assembled. */
interface PendingCall {
  order: number;
  callId: string;
  name: string;
  args: string;
  /** Arguments from a `.done` event or a finished item: authoritative. */
  final: boolean;
}

/** Incremental normaliser for one Responses stream. */
export class ResponsesStreamNormaliser {
  #calls = new Map<string, PendingCall>();
  #deltaSeen = new Set<string>();
  #lastReasoningKey: string | undefined;
  #reasoningEmitted = false;
  #textEmitted = false;
  #usage: TokenUsage | null = null;
  #terminal: { finish: string } | undefined;
  #idPrefix: string;
  #seq = 0;
  /** Routing fields of the last text delta (see `push`); none yet. */
  #textPart: unknown[] = [UNSET];

  /** @param idPrefix Prefix for ids of calls the server sent without a `call_id`. */
  constructor(idPrefix: string) {
    this.#idPrefix = idPrefix;
  }

  /** The routing key of an event: its `output_index`, else its `item_id`. */
  #key(ev: Record<string, unknown>): string {
    if (typeof ev.output_index === "number") return `#${ev.output_index}`;
    return typeof ev.item_id === "string" ? `id:${ev.item_id}` : "#?";
  }

  #call(key: string, order?: number): PendingCall {
    let call = this.#calls.get(key);
    if (!call) {
      call = { order: order ?? 1e9 + this.#seq++, callId: "", name: "", args: "", final: false };
      this.#calls.set(key, call);
    }
    return call;
  }

  #fillFromItem(key: string, item: Record<string, unknown>, order?: number, final = false): void {
    const call = this.#call(key, order);
    if (typeof item.call_id === "string" && item.call_id !== "") call.callId = item.call_id;
    if (typeof item.name === "string" && item.name !== "") call.name = item.name;
    const args = item.arguments;
    if (typeof args === "string" && args !== "") {
      if (final || call.args === "") call.args = args;
      if (final) call.final = true;
    } else if (args && typeof args === "object") {
      call.args = JSON.stringify(args);
      call.final = true;
    }
  }

  #reasoning(key: string, text: string, emit: (chunk: StreamChunk) => void): void {
    if (text === "") return;
    let reasoning = text;
    if (this.#lastReasoningKey !== undefined && this.#lastReasoningKey !== key) {
      reasoning = "\n\n" + reasoning;
    }
    this.#lastReasoningKey = key;
    this.#reasoningEmitted = true;
    emit(chunk({ reasoning }));
  }

  /** The content part of an event (`key:index`), which `.done` events match their deltas by. */
  #sub(ev: Record<string, unknown>): string {
    return `${this.#key(ev)}:${ev.content_index ?? ev.summary_index ?? 0}`;
  }

  /**
   * Feeds one parsed event; passes each chunk to deliver now to `emit`, in order.
   *
   * @throws {ProviderError} On `error` events the SDK did not throw itself and on
   *   `response.failed` (classified: overflow messages set `contextOverflow`).
   */
  push(payload: unknown, emit: (chunk: StreamChunk) => void): void {
    const ev = rec(payload);
    if (!ev || this.#terminal) return;
    const type = typeof ev.type === "string" ? ev.type : "";
    switch (type) {
      case "response.output_text.delta":
      case "response.refusal.delta": {
        if (typeof ev.delta !== "string" || ev.delta === "") return;
        // Performance: the part's key is built and recorded once per part, not per delta.
        const part = this.#textPart;
        if (
          ev.output_index !== part[0] || ev.item_id !== part[1] ||
          ev.content_index !== part[2] || ev.summary_index !== part[3]
        ) {
          this.#textPart = [ev.output_index, ev.item_id, ev.content_index, ev.summary_index];
          this.#deltaSeen.add(`t${this.#sub(ev)}`);
        }
        this.#textEmitted = true;
        emit({
          content: ev.delta,
          reasoning: null,
          toolCalls: null,
          usage: null,
          finishReason: null,
        });
        return;
      }
      case "response.output_text.done": {
        const sub = this.#sub(ev);
        if (this.#deltaSeen.has(`t${sub}`) || typeof ev.text !== "string" || ev.text === "") {
          return;
        }
        this.#deltaSeen.add(`t${sub}`);
        this.#textEmitted = true;
        emit(chunk({ content: ev.text }));
        return;
      }
      case "response.reasoning_summary_text.delta":
      case "response.reasoning_text.delta":
      case "response.reasoning.delta": {
        const kind = type.includes("summary") ? "s" : "r";
        const text = typeof ev.delta === "string" ? ev.delta : "";
        const key = `${kind}${this.#sub(ev)}`;
        if (text !== "") this.#deltaSeen.add(key);
        this.#reasoning(key, text, emit);
        return;
      }
      case "response.reasoning_summary_text.done":
      case "response.reasoning_text.done": {
        const kind = type.includes("summary") ? "s" : "r";
        const key = `${kind}${this.#sub(ev)}`;
        if (this.#deltaSeen.has(key) || typeof ev.text !== "string") return;
        this.#deltaSeen.add(key);
        this.#reasoning(key, ev.text, emit);
        return;
      }
      case "response.output_item.added":
      case "response.output_item.done": {
        const item = rec(ev.item);
        if (item?.type === "function_call") {
          const order = typeof ev.output_index === "number" ? ev.output_index : undefined;
          this.#fillFromItem(this.#key(ev), item, order, type.endsWith(".done"));
        }
        return;
      }
      case "response.function_call_arguments.delta": {
        const call = this.#call(
          this.#key(ev),
          typeof ev.output_index === "number" ? ev.output_index : undefined,
        );
        if (!call.final && typeof ev.delta === "string") call.args += ev.delta;
        return;
      }
      case "response.function_call_arguments.done": {
        const call = this.#call(
          this.#key(ev),
          typeof ev.output_index === "number" ? ev.output_index : undefined,
        );
        if (typeof ev.arguments === "string") {
          call.args = ev.arguments;
          call.final = true;
        }
        if (typeof ev.name === "string" && ev.name !== "" && call.name === "") call.name = ev.name;
        return;
      }
      case "response.completed":
      case "response.done":
      case "response.incomplete":
        this.#finishWith(type, rec(ev.response) ?? {}, emit);
        return;
      case "response.failed": {
        const response = rec(ev.response) ?? {};
        const error = rec(response.error) ?? { message: "the response failed" };
        throw toProviderError({ error });
      }
      case "error":
        throw toProviderError({ error: rec(ev.error) ?? ev });
      default:
        return;
    }
  }

  #finishWith(
    type: string,
    response: Record<string, unknown>,
    emit: (chunk: StreamChunk) => void,
  ): void {
    const usage = parseUsage(response.usage);
    if (usage) this.#usage = usage;
    const output = Array.isArray(response.output) ? response.output : [];
    let text = "";
    let reasoning = "";
    const matched = new Set<string>();
    output.forEach((raw, i) => {
      const item = rec(raw);
      if (!item) return;
      if (item.type === "function_call") {
        const callId = typeof item.call_id === "string" ? item.call_id : "";
        // The call streamed at this output index is this item; otherwise the streamed call with
        // the same call_id that no other final item took (a server that repeats a call_id must
        // not get two calls merged into one).
        const known = this.#calls.has(`#${i}`) ? undefined : [...this.#calls.entries()].find((
          [key, c],
        ) => callId !== "" && c.callId === callId && !matched.has(key));
        matched.add(known ? known[0] : `#${i}`);
        this.#fillFromItem(known ? known[0] : `#${i}`, item, i, false);
      } else if (item.type === "message" && Array.isArray(item.content)) {
        for (const part of item.content) {
          const p = rec(part);
          if (p && typeof p.text === "string") text += p.text;
        }
      } else if (item.type === "reasoning" && Array.isArray(item.summary)) {
        reasoning += item.summary.map((s) => rec(s)?.text).filter((t) => typeof t === "string")
          .join("\n\n");
      }
    });
    // Servers that send only the final response (no deltas): deliver its text now.
    if (!this.#reasoningEmitted && reasoning !== "") emit(chunk({ reasoning }));
    if (!this.#textEmitted && text !== "") emit(chunk({ content: text }));

    let finish = "stop";
    if (type === "response.incomplete" || response.status === "incomplete") {
      const reason = rec(response.incomplete_details)?.reason;
      finish = reason === "content_filter" ? "content_filter" : "length";
    } else if (response.status === "failed") {
      throw toProviderError({ error: rec(response.error) ?? { message: "the response failed" } });
    }
    const toolCalls = this.#toolCalls();
    if (toolCalls.length) finish = "tool_calls";
    this.#terminal = { finish };
    emit(chunk({
      toolCalls: toolCalls.length ? toolCalls : null,
      usage: this.#usage,
      finishReason: finish,
    }));
  }

  #toolCalls(): ToolCall[] {
    return [...this.#calls.values()]
      .filter((c) => c.name !== "")
      .sort((a, b) => a.order - b.order)
      .map((c, i) => ({
        id: c.callId !== "" ? c.callId : `${this.#idPrefix}_${i}`,
        type: "function" as const,
        function: { name: c.name, arguments: c.args.trim() === "" ? "{}" : c.args },
      }));
  }

  /**
   * Ends the stream. Returns the error to throw when no terminal event (`response.completed`,
   * `response.incomplete`, `response.failed`) arrived.
   */
  finish(): { chunks: StreamChunk[]; error?: ProviderError } {
    if (this.#terminal) return { chunks: [] };
    return { chunks: [], error: incompleteStreamError("its terminal event was received") };
  }
}
