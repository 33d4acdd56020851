/**
 * Helpers shared by the provider tests (not exported from the package).
 *
 * @module
 */
import type { StreamChunk, TokenUsage, ToolCall } from "./types.ts";

/** Everything a stream produced. */
export interface Collected {
  /** Every chunk in order. */
  chunks: StreamChunk[];
  /** Concatenated answer text. */
  text: string;
  /** Concatenated reasoning. */
  reasoning: string;
  /** Tool calls of the final chunk (empty when none). */
  toolCalls: ToolCall[];
  /** Last usage seen. */
  usage: TokenUsage | null;
  /** Last finish reason seen. */
  finish: string | null;
  /** What the iteration threw, if anything. */
  error: unknown;
}

/** Reads a provider stream to its end, catching the error it may throw. */
export async function collect(stream: AsyncIterable<StreamChunk>): Promise<Collected> {
  const out: Collected = {
    chunks: [],
    text: "",
    reasoning: "",
    toolCalls: [],
    usage: null,
    finish: null,
    error: undefined,
  };
  try {
    for await (const c of stream) {
      out.chunks.push(c);
      if (c.content) out.text += c.content;
      if (c.reasoning) out.reasoning += c.reasoning;
      if (c.toolCalls) out.toolCalls = c.toolCalls;
      if (c.usage) out.usage = c.usage;
      if (c.finishReason) out.finish = c.finishReason;
    }
  } catch (err) {
    out.error = err;
  }
  return out;
}

/** Default per-request options for tests. */
export const OPTS = { reqId: "req-1", logTime: "2026-01-02T03:04:05.000Z" };

/** Builds an SSE body from Chat chunk payloads (adds `data: [DONE]` unless `done` is false). */
export function chatSse(payloads: unknown[], done = true): string {
  return payloads.map((p) => `data: ${JSON.stringify(p)}\n\n`).join("") +
    (done ? "data: [DONE]\n\n" : "");
}

/** A Chat chunk with one choice. */
export function chatChunk(
  delta: Record<string, unknown>,
  finish: string | null = null,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id: "chatcmpl-t",
    object: "chat.completion.chunk",
    created: 0,
    model: "m",
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...extra,
  };
}

/** Builds a Responses SSE body from `[type, data]` events. */
export function responsesSse(events: [string, Record<string, unknown>][]): string {
  return events.map(([type, data]) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
  )
    .join("");
}
