/**
 * Model providers: the {@link ProviderClient} contract the engine streams through, and
 * `OpenAIProvider` for any OpenAI-compatible endpoint (manual §10).
 *
 * @example Stream one answer from an OpenAI-compatible endpoint
 * ```ts
 * import { OpenAIProvider } from "@zqagent/core/providers";
 *
 * const provider = new OpenAIProvider({ apiKey: "sk-…", baseURL: "https://api.example.com/v1" });
 * const stream = await provider.stream(
 *   "gpt-4o-mini",
 *   [{ role: "user", content: "Say hi" }],
 *   [],
 *   { reqId: "r1", logTime: new Date().toISOString() },
 * );
 * for await (const chunk of stream) if (chunk.content) console.log(chunk.content);
 * ```
 *
 * @module
 */
export type {
  AudioContentPart,
  ContentPart,
  ImageContentPart,
  Message,
  ProviderClient,
  RequestOptions,
  StreamChunk,
  StreamOpts,
  TextContentPart,
  TokenUsage,
  ToolCall,
  ToolSchema,
  VideoContentPart,
} from "./types.ts";
export { ProviderError, type ProviderErrorOptions } from "./errors.ts";
export { abortError, isAbortError, isContextOverflowMessage, toProviderError } from "./errors.ts";
export {
  type ApiMode,
  DEFAULT_STREAM_IDLE_MS,
  OpenAIProvider,
  type OpenAIProviderOptions,
} from "./openai_provider.ts";
export {
  contextWindowFor,
  DEFAULT_CONTEXT_WINDOW,
  isDeepSeek,
  supportsReasoningEffort,
} from "./models.ts";
