/**
 * Tool names of MCP tools (manual §15.3): `mcp__<server>__<tool>`, only `[A-Za-z0-9_-]`, at most
 * 64 characters (the OpenAI limit, also Anthropic's tool-search limit), with a deterministic hash
 * suffix when a name is cut or collides (cases tool-name-over-64, sanitized-name-collision).
 *
 * @module
 */
import { createHash } from "node:crypto";

/** Longest registered tool name, in characters (OpenAI: `^[a-zA-Z0-9_-]{1,64}$`). */
export const MAX_TOOL_NAME_CHARS = 64;

/** Server segments longer than this are shortened first when a full name is too long. */
const SERVER_SEGMENT_BUDGET = 24;

function hash8(text: string): string {
  return createHash("sha1").update(text).digest("hex").slice(0, 8);
}

/**
 * Replaces every character outside `[A-Za-z0-9_-]` by `_`; an empty result becomes `_`.
 *
 * @param segment A server or tool name as the server wrote it.
 * @returns The cleaned segment.
 */
export function sanitizeNameSegment(segment: string): string {
  const out = segment.replace(/[^A-Za-z0-9_-]/g, "_");
  return out === "" ? "_" : out;
}

/**
 * The preferred registered name of one MCP tool, before collisions are resolved.
 *
 * Names of at most 64 characters stay as they are. A longer one first gets its server segment
 * shortened (15 characters, `_`, 8 hex digits of the raw server name) when that segment is over 24
 * characters, so tool names stay readable; if still too long, it keeps its first 55 characters
 * and ends with `_` and 8 hex digits of SHA-1 of the raw `server` + NUL + `tool`. Same input, same
 * name, on every run and platform.
 *
 * @param server The server's configured name.
 * @param tool The tool's name as the server lists it.
 * @returns A name matching `^mcp__[A-Za-z0-9_-]+$`, at most 64 characters.
 * @example
 * ```ts
 * import { mcpToolName } from "@zqagent/core/mcp";
 * mcpToolName("github", "create_issue"); // "mcp__github__create_issue"
 * ```
 */
export function mcpToolName(server: string, tool: string): string {
  let s = sanitizeNameSegment(server);
  const t = sanitizeNameSegment(tool);
  let name = `mcp__${s}__${t}`;
  if (name.length <= MAX_TOOL_NAME_CHARS) return name;
  if (s.length > SERVER_SEGMENT_BUDGET) {
    s = `${s.slice(0, SERVER_SEGMENT_BUDGET - 9)}_${hash8(server)}`;
    name = `mcp__${s}__${t}`;
    if (name.length <= MAX_TOOL_NAME_CHARS) return name;
  }
  return suffixed(name, `${server}\0${tool}`);
}

function suffixed(name: string, key: string): string {
  return `${name.slice(0, MAX_TOOL_NAME_CHARS - 9)}_${hash8(key)}`;
}

/** One tool to name: its server, its raw name, and a stable sort key. */
export interface ToolNameRequest {
  /** Server name. */
  server: string;
  /** Raw tool name. */
  tool: string;
}

/**
 * Names a set of tools at once (research §3.2): in the given order (config order, then the
 * server's list order), the first tool wanting a name keeps it; a later one, or one whose name is
 * taken by a tool outside MCP (`isTaken`), gets a hash suffix. Never two tools on one name.
 *
 * @param requests Tools in their stable order.
 * @param isTaken True for a name already used by a tool this naming must not overwrite.
 * @returns Registered names, in the order of `requests`.
 */
export function assignToolNames(
  requests: readonly ToolNameRequest[],
  isTaken: (name: string) => boolean = () => false,
): string[] {
  const used = new Set<string>();
  return requests.map(({ server, tool }) => {
    let name = mcpToolName(server, tool);
    for (let n = 0; used.has(name) || isTaken(name); n++) {
      name = suffixed(
        mcpToolName(server, tool),
        n === 0 ? `${server}\0${tool}` : `${server}\0${tool}\0${n}`,
      );
    }
    used.add(name);
    return name;
  });
}
