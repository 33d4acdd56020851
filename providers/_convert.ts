/**
 * Converts the engine's Chat-shaped messages and tool schemas to what each OpenAI API takes
 * (DESIGN §4: messages stay in Chat Completions shape; providers convert).
 *
 * @module
 */
import type { ContentPart, Message, ToolCall, ToolSchema } from "./types.ts";

/** One Responses API input item (message, function_call, function_call_output). */
export type ResponsesInputItem = Record<string, unknown>;

/** Plain text of a message content (image parts dropped). */
export function contentText(content: Message["content"]): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content.filter((p): p is Extract<ContentPart, { type: "text" }> => p.type === "text")
    .map((p) => p.text).join("");
}

/** Responses content parts of a user/system message. */
function inputParts(content: Message["content"]): string | Record<string, unknown>[] {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content.map((p) =>
    p.type === "image_url"
      ? { type: "input_image", image_url: p.image_url.url, detail: p.image_url.detail ?? "auto" }
      : p.type === "text"
      ? { type: "input_text", text: p.text }
      : { ...p } // audio / video parts (media tool) go as they are
  );
}

/** `""` arguments are not JSON; replay them as `"{}"`. */
function args(call: ToolCall): string {
  const a = call.function.arguments;
  return typeof a === "string" && a.trim() !== "" ? a : "{}";
}

/**
 * Chat messages → Responses `instructions` + `input` items:
 * leading `system` messages become `instructions`; later ones stay `system` messages; user image
 * parts become `input_image`; assistant tool calls become `function_call` items (keyed by
 * `call_id`); `tool` messages become `function_call_output` items, and images in a tool result
 * follow as a user message (function outputs carry text). `reasoning_content` is dropped: the
 * Responses API replays reasoning only as encrypted items, which Chat-shaped history cannot hold.
 */
export function toResponsesInput(
  messages: Message[],
): { instructions?: string; input: ResponsesInputItem[] } {
  const instructions: string[] = [];
  const input: ResponsesInputItem[] = [];
  let leading = true;
  for (const m of messages) {
    if (m.role === "system" && leading) {
      const text = contentText(m.content);
      if (text !== "") instructions.push(text);
      continue;
    }
    leading = false;
    switch (m.role) {
      case "system":
      case "user":
        input.push({ role: m.role, content: inputParts(m.content) });
        break;
      case "assistant": {
        const text = contentText(m.content);
        if (text !== "") input.push({ role: "assistant", content: text });
        for (const call of m.tool_calls ?? []) {
          input.push({
            type: "function_call",
            call_id: call.id,
            name: call.function.name,
            arguments: args(call),
          });
        }
        break;
      }
      case "tool": {
        input.push({
          type: "function_call_output",
          call_id: m.tool_call_id ?? "",
          output: contentText(m.content),
        });
        if (Array.isArray(m.content) && m.content.some((p) => p.type === "image_url")) {
          input.push({
            role: "user",
            content: m.content.filter((p) => p.type === "image_url").map((p) => ({
              type: "input_image",
              image_url: (p as Extract<ContentPart, { type: "image_url" }>).image_url.url,
              detail: "auto",
            })),
          });
        }
        break;
      }
    }
  }
  return instructions.length ? { instructions: instructions.join("\n\n"), input } : { input };
}

/** Chat tool schemas → Responses function tools (`strict` off unless the schema asks). */
export function toResponsesTools(tools: ToolSchema[]): Record<string, unknown>[] {
  return tools.map((t) => ({
    type: "function",
    name: t.function.name,
    description: t.function.description ?? "",
    parameters: t.function.parameters ?? { type: "object", properties: {} },
    strict: t.function.strict ?? false,
  }));
}

/** Options of {@link toChatMessages}. */
export interface ChatMessageOptions {
  /** Send `reasoning_content` back on assistant messages that carry tool calls (DeepSeek needs it). */
  keepReasoning: boolean;
  /** Keep `name` on `tool` messages (the official OpenAI API rejects unknown message fields). */
  keepToolName: boolean;
}

/**
 * Chat messages as the wire takes them: only the known fields (hosts may attach their own, and
 * strict servers reject unknown ones); `""` tool arguments become `"{}"`; `reasoning_content`
 * only where {@link ChatMessageOptions.keepReasoning} says so (DeepSeek thinking mode answers 400
 * "Missing reasoning_content" without it, on the assistant message that carried a tool call).
 */
export function toChatMessages(
  messages: Message[],
  options: ChatMessageOptions,
): Record<string, unknown>[] {
  return messages.map((m) => {
    const out: Record<string, unknown> = { role: m.role, content: m.content ?? null };
    if (m.role === "assistant") {
      if (m.tool_calls?.length) {
        out.tool_calls = m.tool_calls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.function.name, arguments: args(c) },
        }));
        if (options.keepReasoning && typeof m.reasoning_content === "string") {
          out.reasoning_content = m.reasoning_content;
        }
      } else if (out.content === null) out.content = "";
    }
    if (m.role === "tool") {
      out.tool_call_id = m.tool_call_id ?? "";
      if (Array.isArray(m.content)) out.content = contentText(m.content);
      if (options.keepToolName && m.name) out.name = m.name;
    } else if ((m.role === "user" || m.role === "system") && m.name) out.name = m.name;
    return out;
  });
}
