/**
 * Model providers: the {@link ProviderClient} contract the engine streams through, and
 * `OpenAIProvider` for any OpenAI-compatible endpoint (manual §10).
 *
 * @module
 */
export type {
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
