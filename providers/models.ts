/**
 * Model capability table: context windows and which knobs a model takes (manual §10.1, §10.3,
 * §14.3). Matching is by family prefix of the lower-cased model name, after any gateway prefix
 * such as `openai/` or `accounts/fireworks/models/`.
 *
 * @module
 */

/** Context window used for a model none of the known families match (tokens). */
export const DEFAULT_CONTEXT_WINDOW = 128_000;

/**
 * Known families, most specific first: `[pattern, context window in tokens]`. Sources: the
 * providers' model pages (OpenAI, DeepSeek, Qwen/DashScope, Anthropic, Google, Meta, Mistral,
 * Moonshot, Zhipu, xAI).
 */
const CONTEXT_WINDOWS: readonly (readonly [RegExp, number])[] = [
  [/^gpt-5/, 400_000],
  [/^gpt-4\.1/, 1_047_576],
  [/^gpt-4o/, 128_000],
  [/^gpt-4-turbo/, 128_000],
  [/^gpt-4-32k/, 32_768],
  [/^gpt-4(-|$)/, 8_192],
  [/^gpt-3\.5-turbo/, 16_385],
  [/^gpt-oss/, 131_072],
  [/^codex-mini/, 200_000],
  [/^o1-mini/, 128_000],
  [/^o1-preview/, 128_000],
  [/^o[134](-|$)/, 200_000],
  [/^deepseek-(chat|reasoner)/, 128_000],
  [/^deepseek-(v3|r1)/, 128_000],
  [/^deepseek/, 128_000],
  [/^qwen-long/, 10_000_000],
  [/^qwen3-coder/, 262_144],
  [/^qwen-(plus|flash|turbo)/, 1_000_000],
  [/^qwen3/, 131_072],
  [/^qwen2\.5-(7b|14b)-instruct-1m/, 1_000_000],
  [/^(qwen|qwq)/, 131_072],
  [/^claude/, 200_000],
  [/^gemini-1\.5-pro/, 2_097_152],
  [/^gemini/, 1_048_576],
  [/^llama-?4/, 1_048_576],
  [/^(meta-)?llama-?3\.[123]/, 131_072],
  [/^(meta-)?llama-?3/, 8_192],
  [/^(codestral|devstral)/, 256_000],
  [/^(mistral|magistral|ministral|pixtral|open-mistral)/, 128_000],
  [/^kimi-k2/, 262_144],
  [/^(kimi|moonshot)/, 131_072],
  [/^glm-4\.[56]/, 131_072],
  [/^glm/, 128_000],
  [/^grok-4/, 256_000],
  [/^grok/, 131_072],
];

/** Families known NOT to take a reasoning effort. */
const NO_REASONING_EFFORT: readonly RegExp[] = [
  /^gpt-4/,
  /^gpt-3\.5/,
  /^gpt-5(\.\d+)?-chat/,
  /^chatgpt/,
  /^o1-(mini|preview)/,
  /^claude/,
  /^(meta-)?llama/,
  /^(mistral|codestral|devstral|ministral|pixtral|open-mistral)/,
  /^qwen/,
  /^glm/,
  /^kimi/,
  /^moonshot/,
];

/** The model name without a gateway prefix, lower-cased (`openai/gpt-4o` → `gpt-4o`). */
function baseName(model: string): string {
  const lower = model.trim().toLowerCase();
  const slash = lower.lastIndexOf("/");
  return slash >= 0 ? lower.slice(slash + 1) : lower;
}

/**
 * The context window of a model in tokens, from its family (manual §14.3: `CONTEXT_WINDOW`
 * overrides this in the engine).
 *
 * @param model A model name, with or without a gateway prefix (`openrouter/…`).
 * @returns The window in tokens; {@link DEFAULT_CONTEXT_WINDOW} (128,000) when unknown.
 * @example
 * ```ts
 * import { contextWindowFor } from "@zqagent/core/providers";
 * contextWindowFor("gpt-4.1-mini"); // 1_047_576
 * ```
 */
export function contextWindowFor(model: string): number {
  const name = baseName(model);
  for (const [re, window] of CONTEXT_WINDOWS) if (re.test(name)) return window;
  return DEFAULT_CONTEXT_WINDOW;
}

/**
 * True when the model or endpoint is DeepSeek: the model name or the base URL contains
 * "deepseek" (manual §10.1).
 *
 * @param model A model name.
 * @param baseURL The endpoint, when known.
 */
export function isDeepSeek(model: string, baseURL?: string): boolean {
  return /deepseek/i.test(model) || (baseURL !== undefined && /deepseek/i.test(baseURL));
}

/**
 * True when a reasoning effort (`low` / `medium` / `high`) may be sent for this model (manual
 * §10.3): never to DeepSeek (it has an on/off thinking switch, not levels), never to families
 * known not to take it (gpt-4o, gpt-4.1, Claude via compatible gateways, Llama, Mistral, Qwen…);
 * yes for OpenAI reasoning models (o-series, gpt-5, gpt-oss) and for unknown models, where an
 * incompatible-parameter answer makes the provider retry without it.
 *
 * @param model A model name.
 * @param baseURL The endpoint, when known.
 */
export function supportsReasoningEffort(model: string, baseURL?: string): boolean {
  if (isDeepSeek(model, baseURL)) return false;
  const name = baseName(model);
  return !NO_REASONING_EFFORT.some((re) => re.test(name));
}
