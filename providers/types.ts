/**
 * The provider contract the engine depends on (manual §10.2, DESIGN §4).
 *
 * Messages are kept in Chat Completions shape; providers that speak another wire format convert.
 *
 * @module
 */

/** A complete tool call proposed by the model. `arguments` is a JSON text (`"{}"` when empty). */
export interface ToolCall {
  /** The call id (Chat: `tool_calls[].id`; Responses: `call_id`). */
  id: string;
  /** Always `"function"`. */
  type: "function";
  /** The function name and its JSON-encoded arguments. */
  function: { name: string; arguments: string };
}

/** Token usage of one model response (tokens). */
export interface TokenUsage {
  /** Prompt tokens. */
  inputTokens: number;
  /** Completion tokens (reasoning included). */
  outputTokens: number;
  /** Input + output tokens. */
  totalTokens: number;
  /** Reasoning tokens, when the server reports them. */
  reasoningTokens?: number;
  /** Prompt tokens served from the provider's cache, when reported. */
  cachedInputTokens?: number;
}

/**
 * One normalised piece of a streamed model response (manual §10.2).
 *
 * `toolCalls` is set only on the final chunk, with the complete list. The last chunk of a
 * successful stream always has `finishReason` set.
 */
export interface StreamChunk {
  /** Answer-text delta. */
  content: string | null;
  /** Reasoning delta. */
  reasoning: string | null;
  /** Only on the final chunk: the complete list of tool calls. */
  toolCalls: ToolCall[] | null;
  /** Usage, when the server sent it (usually on the last chunk). */
  usage: TokenUsage | null;
  /** `"stop" | "tool_calls" | "length" | "content_filter"` on the final chunk, else `null`. */
  finishReason: string | null;
}

/** Per-request options passed by the engine to {@link ProviderClient.stream}. */
export interface StreamOpts {
  /** Request id, used in events and audit file names. */
  reqId: string;
  /** Timestamp (ISO 8601) of the request, used for audit logs. */
  logTime: string;
  /** Aborts the request and ends the stream at once. */
  signal?: AbortSignal;
  /** Reasoning effort for models that take it (ignored for DeepSeek). */
  reasoningEffort?: "low" | "medium" | "high";
}

/** Options for a non-streaming {@link ProviderClient.chat} request. */
export interface RequestOptions {
  /** Sampling temperature. */
  temperature?: number;
  /** Request timeout in milliseconds. */
  timeoutMs?: number;
  /** Extra HTTP headers. */
  headers?: Record<string, string>;
}

/** A text part of a multi-part message. */
export interface TextContentPart {
  /** Part kind. */
  type: "text";
  /** The text. */
  text: string;
}

/** An image part of a multi-part message (`url` may be a `data:` URL). */
export interface ImageContentPart {
  /** Part kind. */
  type: "image_url";
  /** The image location. */
  image_url: { url: string; detail?: "auto" | "low" | "high" };
}

/** An audio part (Chat Completions `input_audio`: base64 data and its format, e.g. `"mp3"`). */
export interface AudioContentPart {
  /** Part kind. */
  type: "input_audio";
  /** Base64 audio bytes and the format name. */
  input_audio: { data: string; format: string };
}

/** A video part (`video_url`, as Qwen-VL / vLLM-style OpenAI-compatible servers take it). */
export interface VideoContentPart {
  /** Part kind. */
  type: "video_url";
  /** The video location (may be a `data:` URL). */
  video_url: { url: string };
}

/** A part of a multi-part message. */
export type ContentPart = TextContentPart | ImageContentPart | AudioContentPart | VideoContentPart;

/** One message of a conversation, in Chat Completions shape. */
export interface Message {
  /** Who wrote it. */
  role: "system" | "user" | "assistant" | "tool";
  /** Text, content parts, or `null` (an assistant message with only tool calls). */
  content: string | ContentPart[] | null;
  /** Tool calls of an assistant message. */
  tool_calls?: ToolCall[];
  /** The call a `tool` message answers. */
  tool_call_id?: string;
  /** Optional author name (tool name on `tool` messages). */
  name?: string;
  /** Reasoning text of an assistant message, passed back where an endpoint requires it. */
  reasoning_content?: string;
  /** Extra fields hosts and the engine may attach (e.g. stored attachment refs, notice flags). */
  [key: string]: unknown;
}

/** A function tool schema as the model sees it (Chat Completions shape). */
export interface ToolSchema {
  /** Always `"function"`. */
  type: "function";
  /** Name, description and JSON Schema of the parameters. */
  function: {
    name: string;
    description?: string;
    parameters?: Record<string, unknown>;
    strict?: boolean;
  };
}

/**
 * What the engine needs from a model provider (manual §10.2).
 *
 * `stream` may return any async iterable, an async generator included. On `opts.signal` abort it
 * must stop reading at once and end or throw.
 */
export interface ProviderClient {
  /** Streams one model response. */
  stream(
    model: string,
    messages: Message[],
    tools: ToolSchema[],
    opts: StreamOpts,
  ): Promise<AsyncIterable<StreamChunk>>;
  /** One non-streaming completion (session naming, summaries). `null` when it produced nothing. */
  chat(
    model: string,
    messages: Message[],
    options: RequestOptions,
    opts: StreamOpts,
    params?: { maxTokens?: number },
  ): Promise<string | null>;
}
