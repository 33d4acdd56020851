/**
 * The JSON-lines protocol between the engine and the isolated file-tool process (private).
 *
 * @module
 */
import type { ToolAttachment } from "../tools/registry.ts";
import type { GrantedRoot } from "./_file_tool_guard.ts";

/**
 * The built-in tools that read or write workspace files in the engine's own process, and so run
 * in the child process instead (DESIGN §5): the file tools, the patch tools, `media` (for a
 * local file; a URL is fetched by the engine, the child has no network) and `grep` (when it
 * would search with its JavaScript code rather than ripgrep).
 */
export const ISOLATED_FILE_TOOLS: readonly string[] = [
  "read_file",
  "list_files",
  "write_file",
  "replace_in_file",
  "apply_patch",
  "apply_unified_diff",
  "media",
  "grep",
];

/** One request line: run `tool` with `args`. */
export interface FileToolRequest {
  /** Request id (positive), echoed in the reply. */
  id: number;
  /** Tool name. */
  tool: string;
  /** Parsed arguments. */
  args: Record<string, unknown>;
  /**
   * Which tool set answers: `"main"` (the engine's tools, one conflict guard) or `"readonly"`
   * (a subagent's read-only tools, with a guard of their own).
   */
  scope: "main" | "readonly";
  /** Directories granted to the calling engine (`request_directory`). */
  grants: GrantedRoot[];
  /**
   * Sizes (bytes) of the media already queued for the next model request, or absent when the
   * calling engine cannot take media (`media` then refuses, as in the engine's process).
   */
  attachments?: number[];
}

/** One reply line; id 0 is the child's "ready" line. */
export type FileToolReply =
  | {
    id: number;
    ok: true;
    result: string;
    /** Media the call queued for the next model request (`media`). */
    attachments?: ToolAttachment[];
  }
  | {
    id: number;
    ok: false;
    error: string;
    /** The error's class name (`FileConflictError`, `AbortError`, …). */
    name: string;
    /** The file of a `FileConflictError`. */
    path?: string;
  };
