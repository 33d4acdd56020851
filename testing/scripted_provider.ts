/**
 * `ScriptedProvider`: a {@link ProviderClient} that answers from a script without any HTTP, for
 * host tests that do not need the wire (use `MockOpenAIServer` when they do).
 *
 * @module
 */
import type {
  Message,
  ProviderClient,
  RequestOptions,
  StreamChunk,
  StreamOpts,
  ToolCall,
  ToolSchema,
} from "../providers/mod.ts";
import { ProviderError } from "../providers/mod.ts";
import type { ScriptedTurn } from "./mock_server.ts";

/** One call the provider received. */
export interface ScriptedCall {
  /** `"stream"` or `"chat"`. */
  kind: "stream" | "chat";
  /** The model id. */
  model: string;
  /** A copy of the messages sent. */
  messages: Message[];
  /** The tool schemas sent (empty for `chat`). */
  tools: ToolSchema[];
  /** The per-request options. */
  opts: StreamOpts;
}

/** The script: turns in order, or a function choosing the turn for each call. */
export type ProviderScript = ScriptedTurn[] | ((call: ScriptedCall, index: number) => ScriptedTurn);

function pieces(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  if (Array.isArray(v)) return v.filter((s) => s !== "");
  return v === "" ? [] : (v.match(/\S+\s*|\s+/g) ?? [v]);
}

function abortError(): ProviderError {
  const err = new ProviderError("Cannot finish the request: it was aborted", { code: "aborted" });
  Object.defineProperty(err, "name", { value: "AbortError" });
  return err;
}

function wait(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError());
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError());
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Answers each `stream()`/`chat()` call with the next {@link ScriptedTurn} (the same turn shape
 * as `MockOpenAIServer`): text and reasoning deltas, tool calls on the final chunk, usage,
 * finish reason, HTTP-like errors (`httpError` → `ProviderError` with `status`), mid-stream
 * errors (`errorAfterDeltas`), stalls; `opts.signal` aborts at once. `rawSse` is not supported
 * (it needs the wire).
 *
 * @example
 * ```ts
 * import { ScriptedProvider } from "@zqagent/core/testing";
 * const provider = new ScriptedProvider([
 *   { toolCalls: [{ name: "read_file", arguments: { path: "README.md" } }] },
 *   { text: "It is a small library." },
 * ]);
 * ```
 */
export class ScriptedProvider implements ProviderClient {
  /** Every call received, in order. */
  readonly calls: ScriptedCall[] = [];
  #script: ProviderScript;
  #next = 0;

  /** Creates the provider from a script. */
  constructor(script: ProviderScript) {
    this.#script = script;
  }

  /** Appends turns to a list script. @throws {TypeError} When the script is a function. */
  enqueue(...turns: ScriptedTurn[]): void {
    if (!Array.isArray(this.#script)) {
      throw new TypeError("Cannot enqueue turns: the script is a function");
    }
    this.#script.push(...turns);
  }

  #turn(call: ScriptedCall): ScriptedTurn {
    try {
      return this.#pick(call);
    } catch (err) {
      // Surface script problems as rejected promises, like a provider's errors.
      return { httpError: { status: 500, message: (err as Error).message } };
    }
  }

  #pick(call: ScriptedCall): ScriptedTurn {
    this.calls.push(call);
    const index = this.#next++;
    if (typeof this.#script === "function") return this.#script(call, index);
    const turn = this.#script[index];
    if (!turn) {
      throw new ProviderError(`Cannot answer: the script has no turn ${index + 1}`, {
        status: 500,
        code: "script_exhausted",
      });
    }
    return turn;
  }

  /** Streams the next scripted turn. */
  stream(
    model: string,
    messages: Message[],
    tools: ToolSchema[],
    opts: StreamOpts,
  ): Promise<AsyncIterable<StreamChunk>> {
    if (opts.signal?.aborted) return Promise.reject(abortError());
    const turn = this.#turn({
      kind: "stream",
      model,
      messages: structuredClone(messages),
      tools: structuredClone(tools),
      opts,
    });
    if (turn.httpError) {
      const e = turn.httpError;
      return Promise.reject(
        new ProviderError(e.message, {
          status: e.status,
          code: e.code,
          retriable: e.status === 429 || e.status >= 500,
        }),
      );
    }
    const signal = opts.signal;
    async function* chunks(): AsyncGenerator<StreamChunk> {
      const none = {
        content: null,
        reasoning: null,
        toolCalls: null,
        usage: null,
        finishReason: null,
      };
      if (turn.stallMs) await wait(turn.stallMs, signal);
      for (const r of pieces(turn.reasoning)) {
        if (turn.delayPerDeltaMs) await wait(turn.delayPerDeltaMs, signal);
        if (signal?.aborted) throw abortError();
        yield { ...none, reasoning: r };
      }
      for (const t of pieces(turn.text)) {
        if (turn.delayPerDeltaMs) await wait(turn.delayPerDeltaMs, signal);
        if (signal?.aborted) throw abortError();
        yield { ...none, content: t };
      }
      if (turn.errorAfterDeltas === "cut") {
        throw new ProviderError("Cannot read the model's response: the stream was cut", {
          code: "stream_incomplete",
          retriable: true,
          network: true,
        });
      }
      if (turn.errorAfterDeltas) {
        throw new ProviderError(turn.errorAfterDeltas.message, {
          code: turn.errorAfterDeltas.code,
          retriable: true,
        });
      }
      if (turn.holdOpen || turn.stallForever) {
        await new Promise<never>((_, reject) => {
          if (signal?.aborted) reject(abortError());
          signal?.addEventListener("abort", () => reject(abortError()), { once: true });
        });
      }
      const toolCalls: ToolCall[] = (turn.toolCalls ?? []).map((c, i) => ({
        id: c.id ?? `call_${index}_${i}`,
        type: "function",
        function: {
          name: c.name,
          arguments: typeof c.arguments === "string"
            ? (c.arguments === "" ? "{}" : c.arguments)
            : JSON.stringify(c.arguments),
        },
      }));
      const text = pieces(turn.text).join("");
      const usage = turn.usage === null ? null : {
        inputTokens: turn.usage?.inputTokens ?? Math.ceil(JSON.stringify(messages).length / 4),
        outputTokens: turn.usage?.outputTokens ?? Math.ceil(text.length / 4),
        totalTokens: 0,
      };
      if (usage) usage.totalTokens = usage.inputTokens + usage.outputTokens;
      yield {
        ...none,
        toolCalls: toolCalls.length ? toolCalls : null,
        usage,
        finishReason: toolCalls.length ? "tool_calls" : turn.finishReason ?? "stop",
      };
    }
    const index = this.#next - 1;
    return Promise.resolve(chunks());
  }

  /** Answers a non-streaming request with the next turn's text (`null` when it has none). */
  chat(
    model: string,
    messages: Message[],
    _options: RequestOptions,
    opts: StreamOpts,
    _params?: { maxTokens?: number },
  ): Promise<string | null> {
    const turn = this.#turn({
      kind: "chat",
      model,
      messages: structuredClone(messages),
      tools: [],
      opts,
    });
    if (turn.httpError) {
      return Promise.reject(
        new ProviderError(turn.httpError.message, { status: turn.httpError.status }),
      );
    }
    const text = pieces(turn.text).join("");
    return Promise.resolve(text === "" ? null : text);
  }
}
