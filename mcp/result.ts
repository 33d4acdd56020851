/**
 * Turns an MCP `tools/call` result into the text the model reads (research §1.6): text as is;
 * images and audio as a caption; embedded resources as their text (blobs as a caption); resource
 * links as "Resource link: <title> at <uri>"; `structuredContent` as JSON when no text block
 * carries it; unknown blocks dropped.
 *
 * @module
 */

/** A content block of a tool result (the fields this module reads). */
interface Block {
  type?: string;
  text?: string;
  data?: string;
  mimeType?: string;
  uri?: string;
  name?: string;
  title?: string;
  description?: string;
  resource?: { uri?: string; mimeType?: string; text?: string; blob?: string };
}

/** The fields of an MCP `CallToolResult` this module reads. */
export interface McpCallResult {
  /** Content blocks. */
  content?: unknown[];
  /** Structured result (JSON object). */
  structuredContent?: unknown;
  /** True when the tool reported a failure. */
  isError?: boolean;
  /** Legacy result shape (protocol 2024-10-07). */
  toolResult?: unknown;
}

/** The model-facing form of a result. */
export interface FormattedResult {
  /** Text for the model. */
  text: string;
  /** True when the server flagged the result as an error. */
  isError: boolean;
}

function base64Bytes(data: string): number {
  const clean = data.replace(/=+$/, "");
  return Math.floor(clean.length * 3 / 4);
}

/**
 * Formats a tool result for the model.
 *
 * @param result The server's result.
 * @returns The text and the error flag.
 */
export function formatCallToolResult(result: McpCallResult): FormattedResult {
  const parts: string[] = [];
  let hasText = false;
  for (const raw of result.content ?? []) {
    const b = (raw ?? {}) as Block;
    switch (b.type) {
      case "text":
        if (typeof b.text === "string") {
          parts.push(b.text);
          hasText = true;
        }
        break;
      case "image":
      case "audio":
        parts.push(
          `[${b.type}: ${b.mimeType ?? "unknown type"}, ${base64Bytes(b.data ?? "")} bytes]`,
        );
        break;
      case "resource": {
        const r = b.resource ?? {};
        if (typeof r.text === "string") {
          parts.push(`Resource ${r.uri ?? ""}${r.mimeType ? ` (${r.mimeType})` : ""}:\n${r.text}`);
          hasText = true;
        } else {
          parts.push(
            `[resource ${r.uri ?? ""}: ${r.mimeType ?? "binary"}, ${
              base64Bytes(r.blob ?? "")
            } bytes]`,
          );
        }
        break;
      }
      case "resource_link":
        parts.push(
          `Resource link: ${b.title ?? b.name ?? b.uri} at ${b.uri}` +
            (b.description ? ` (${b.description})` : ""),
        );
        break;
      default:
        break;
    }
  }
  if (result.structuredContent !== undefined && result.structuredContent !== null && !hasText) {
    parts.push(JSON.stringify(result.structuredContent));
  }
  if (parts.length === 0 && result.toolResult !== undefined) {
    parts.push(
      typeof result.toolResult === "string" ? result.toolResult : JSON.stringify(result.toolResult),
    );
  }
  return { text: parts.join("\n"), isError: result.isError === true };
}
