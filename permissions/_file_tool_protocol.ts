/**
 * The JSON-lines protocol between the engine and the isolated file-tool process (private).
 *
 * @module
 */

/** The file tools that run in the child process (those `registerFileTools` registers). */
export const ISOLATED_FILE_TOOLS: readonly string[] = [
  "read_file",
  "list_files",
  "write_file",
  "replace_in_file",
];

/** Argument names holding paths, checked by the child (DESIGN §5). */
export const FILE_TOOL_PATH_KEYS: readonly string[] = [
  "path",
  "destination",
  "to",
  "from",
  "source",
];

/** One request line: run `tool` with `args`. */
export interface FileToolRequest {
  /** Request id (positive), echoed in the reply. */
  id: number;
  /** Tool name. */
  tool: string;
  /** Parsed arguments. */
  args: Record<string, unknown>;
}

/** One reply line; id 0 is the child's "ready" line. */
export type FileToolReply =
  | { id: number; ok: true; result: string }
  | { id: number; ok: false; error: string; name: string };
