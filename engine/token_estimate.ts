/**
 * Token estimates for context accounting (manual §14, DESIGN §1, §6).
 *
 * Counts use a real BPE tokenizer, `gpt-tokenizer` with the `o200k_base` encoding of OpenAI's
 * current models: a maintained, dependency-free pure-JS tokenizer that runs unchanged in Deno and
 * Node. Its encoding table is a few MB of JavaScript, so it is loaded lazily with `import()` on the
 * first count (about 0.2 s once per process). For models of other vendors the counts are an
 * estimate, which is why the engine marks them `estimated` and prefers the provider's own usage
 * figures where it has them.
 *
 * Images in messages are not tokenized from their base64 bytes: each counts as
 * {@link IMAGE_TOKENS}, the cost OpenAI documents for a high-detail 512×512 tile set.
 *
 * @module
 */
import type { Message } from "../providers/mod.ts";

/** Tokens counted for one image part (OpenAI's "high" detail estimate for a typical image). */
export const IMAGE_TOKENS = 765;

/** Per-message framing overhead in tokens (role markers), as in OpenAI's counting guide. */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** A synchronous token counter for plain text. */
export type TextTokenCounter = (text: string) => number;

let counter: TextTokenCounter | undefined;
let loading: Promise<TextTokenCounter> | undefined;

/** Rough fallback when the tokenizer module cannot be loaded: about 3.5 characters a token. */
function fallbackCount(text: string): number {
  return Math.ceil(text.length / 3.5);
}

/** Longest run of non-space (or space) characters given to the tokenizer in one piece. */
const MAX_RUN_CHARS = 256;
const LONG_RUN = new RegExp(`\\S{${MAX_RUN_CHARS + 1},}|\\s{${MAX_RUN_CHARS + 1},}`, "g");

/**
 * Counts `text`, cutting runs of more than {@link MAX_RUN_CHARS} non-space (or space) characters
 * into slices first. BPE merging inside one pre-tokenizer piece costs time that grows with the
 * square of its length (a 200,000-character run of one letter took 18 s and blocked the event
 * loop), so a long run is counted slice by slice: linear time, and within a token or so per slice
 * of the exact count. Slices never split a surrogate pair.
 */
export function countBounded(count: TextTokenCounter, text: string): number {
  let total = 0;
  let last = 0;
  LONG_RUN.lastIndex = 0;
  for (let m = LONG_RUN.exec(text); m; m = LONG_RUN.exec(text)) {
    if (m.index > last) total += count(text.slice(last, m.index));
    const end = m.index + m[0].length;
    for (let i = m.index; i < end;) {
      let cut = Math.min(i + MAX_RUN_CHARS, end);
      const code = text.charCodeAt(cut - 1);
      if (cut < end && code >= 0xd800 && code <= 0xdbff) cut--; // keep surrogate pairs whole
      total += count(text.slice(i, cut));
      i = cut;
    }
    last = end;
  }
  if (last < text.length) total += count(text.slice(last));
  return total;
}

/**
 * Loads the tokenizer once (lazily) and returns a synchronous counter.
 *
 * @returns A function counting the tokens of a text. When `gpt-tokenizer` cannot be loaded at
 *   all, a characters/3.5 estimate is returned instead, so accounting never fails a turn.
 */
export function loadTokenCounter(): Promise<TextTokenCounter> {
  if (counter) return Promise.resolve(counter);
  loading ??= import("gpt-tokenizer/encoding/o200k_base").then(
    (m) => {
      const count = m.countTokens as (text: string) => number;
      counter = (text: string) => (text ? countBounded(count, text) : 0);
      return counter;
    },
    () => {
      counter = fallbackCount;
      return counter;
    },
  );
  return loading;
}

/**
 * Counts the tokens of a text with the real tokenizer (loaded on first use).
 *
 * @param text Any text.
 * @returns Its token count (o200k_base).
 * @example
 * ```ts
 * import { estimateTokens } from "@zqagent/core/engine";
 * const n = await estimateTokens("Hello, world"); // 4
 * ```
 */
export async function estimateTokens(text: string): Promise<number> {
  return (await loadTokenCounter())(text);
}

const cache = new WeakMap<Message, number>();

/**
 * Tokens of one message as sent to a model: its text, tool-call names and arguments, the
 * framing overhead, and {@link IMAGE_TOKENS} per image. Counts are cached per message object.
 *
 * @param message A message in Chat Completions shape.
 * @param count A counter from {@link loadTokenCounter}.
 * @returns Its estimated tokens.
 */
export function messageTokens(message: Message, count: TextTokenCounter): number {
  const hit = cache.get(message);
  if (hit !== undefined) return hit;
  let n = MESSAGE_OVERHEAD_TOKENS;
  const c = message.content;
  if (typeof c === "string") n += count(c);
  else if (Array.isArray(c)) {
    for (const part of c) {
      if (part.type === "text") n += count(part.text);
      else if (part.type === "image_url") n += IMAGE_TOKENS;
    }
  }
  for (const call of message.tool_calls ?? []) {
    n += count(call.function.name) + count(call.function.arguments ?? "") + 3;
  }
  if (message.name) n += 1;
  cache.set(message, n);
  return n;
}

/**
 * Tokens of a list of messages (see {@link messageTokens}).
 *
 * @param messages The messages.
 * @param count A counter from {@link loadTokenCounter}.
 */
export function messagesTokens(messages: readonly Message[], count: TextTokenCounter): number {
  let n = 3; // reply priming
  for (const m of messages) n += messageTokens(m, count);
  return n;
}
