/**
 * The tool-result budget (manual §7.2, DESIGN §5): what the model may see of a large tool
 * result, with the full text saved to a file.
 *
 * Head and tail are kept (the research notes' lesson from head-only truncation: test summaries
 * and compiler errors are at the end), cut on line boundaries when one is near and never inside
 * a UTF-16 surrogate pair (so never inside a UTF-8 character either).
 *
 * @module
 */
import { writeFileAtomicSync } from "../_internal/atomic_write.ts";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { envNumber, envString } from "../_internal/env.ts";

/** Default characters the model may see of one tool result (`TOOL_RESULT_MAX_CHARS`). */
export const DEFAULT_TOOL_RESULT_MAX_CHARS = 20_000;
/** Default size in chars above which the full result is saved (`TOOL_RESULT_SAVE_THRESHOLD`). */
export const DEFAULT_TOOL_RESULT_SAVE_THRESHOLD = 20_000;

/** Options of {@link budgetToolResult}. */
export interface BudgetOptions {
  /**
   * Workspace root; the default save folder is `<workspace>/.agent/tool-results` (DESIGN §6).
   * Needed unless `dir` or `TOOL_RESULT_DIR` is set.
   */
  workspace?: string;
  /** Folder for saved results; wins over `TOOL_RESULT_DIR`. Created when missing. */
  dir?: string;
  /** The tool call id; the saved file is named from it (unsafe characters replaced). */
  toolCallId?: string;
  /** The tool name; used as a prefix of the saved file name. */
  toolName?: string;
  /** Characters the model may see; wins over `TOOL_RESULT_MAX_CHARS` (default 20,000). */
  maxChars?: number;
  /**
   * Results longer than this many chars are saved in full; wins over
   * `TOOL_RESULT_SAVE_THRESHOLD` (default 20,000).
   */
  saveThreshold?: number;
  /** Share of the visible budget given to the head (0–1, default 0.5; the rest is the tail). */
  headRatio?: number;
}

/** What {@link budgetToolResult} gives back. */
export interface BudgetedResult {
  /** The text for the model (the input unchanged when it fits). */
  text: string;
  /** True when the middle of the text was cut out. */
  truncated: boolean;
  /** Length of the full text in chars (UTF-16 code units). */
  totalChars: number;
  /** Size of the full text in UTF-8 bytes. */
  totalBytes: number;
  /** Where the full text was saved, when it was over the save threshold. */
  savedPath?: string;
}

/**
 * Fits a tool result into the model's budget (manual §7.2, "presupuesto de resultados").
 *
 * Above the save threshold the full text is written (atomically: temp file + rename) to
 * `<dir>/<tool>_<toolCallId>.txt`, mode 0600 (folders created for it: 0700); above `maxChars` the model gets the head and the tail with a
 * note in the middle giving the total size (chars and bytes), what was omitted and the saved path.
 *
 * @param text The tool's full result.
 * @param options Budget sizes (chars), the save folder and the tool call id.
 * @returns The text for the model, whether it was cut, the total size and the saved path.
 * @throws {Error} "Cannot save tool result: …" when the result must be saved but no folder is
 *   known (no `dir`, no `TOOL_RESULT_DIR`, no `workspace`) or the folder cannot be written.
 *
 * @example Cut a long result
 * ```ts
 * import { budgetToolResult } from "@zqagent/core/tools";
 * const r = budgetToolResult("x".repeat(50_000), { workspace: "/tmp/ws", toolCallId: "call_1" });
 * console.log(r.truncated, r.savedPath);
 * ```
 */
export function budgetToolResult(text: string, options: BudgetOptions = {}): BudgetedResult {
  const maxChars = Math.max(
    200,
    Math.floor(
      options.maxChars ?? envNumber("TOOL_RESULT_MAX_CHARS", DEFAULT_TOOL_RESULT_MAX_CHARS),
    ),
  );
  const saveThreshold = options.saveThreshold ??
    envNumber("TOOL_RESULT_SAVE_THRESHOLD", DEFAULT_TOOL_RESULT_SAVE_THRESHOLD);
  const totalChars = text.length;
  const totalBytes = new TextEncoder().encode(text).byteLength;

  let savedPath: string | undefined;
  if (totalChars > saveThreshold) savedPath = saveFull(text, options);

  if (totalChars <= maxChars) return { text, truncated: false, totalChars, totalBytes, savedPath };

  const where = savedPath
    ? `full output saved to ${savedPath} (read it with read_file offset/limit, or grep it)`
    : "full output not saved";
  // Reserve room for the note (its numbers are at most as long as these placeholders).
  const noteFor = (head: number, tail: number): string =>
    `\n\n[... truncated: showing the first ${head} and last ${tail} of ${totalChars} chars ` +
    `(${totalBytes} bytes); ${totalChars - head - tail} chars omitted; ${where} ...]\n\n`;
  const room = Math.max(100, maxChars - noteFor(totalChars, totalChars).length);
  const ratio = Math.min(1, Math.max(0, options.headRatio ?? 0.5));
  const headBudget = Math.floor(room * ratio);
  const tailBudget = room - headBudget;

  const headEnd = cutHeadEnd(text, headBudget);
  const tailStart = cutTailStart(text, totalChars - tailBudget);
  const head = text.slice(0, headEnd);
  const tail = text.slice(tailStart);
  return {
    text: head + noteFor(head.length, tail.length) + tail,
    truncated: true,
    totalChars,
    totalBytes,
    savedPath,
  };
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** End index for the head: at most `budget`, after a newline when one is in the last fifth. */
function cutHeadEnd(text: string, budget: number): number {
  let end = Math.max(0, Math.min(budget, text.length));
  const nl = text.lastIndexOf("\n", end - 1);
  if (nl >= 0 && nl + 1 >= end - Math.floor(budget / 5)) end = nl + 1;
  if (end > 0 && end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) end--;
  return end;
}

/** Start index for the tail: at least `start`, after a newline when one is in the first fifth. */
function cutTailStart(text: string, start: number): number {
  let at = Math.max(0, Math.min(start, text.length));
  const budget = text.length - at;
  const nl = text.indexOf("\n", at);
  if (at > 0 && text[at - 1] !== "\n" && nl >= 0 && nl + 1 <= at + Math.floor(budget / 5)) {
    at = nl + 1;
  }
  if (at > 0 && at < text.length && isLowSurrogate(text.charCodeAt(at))) at++;
  return at;
}

/** A file-name-safe form of an id: `[A-Za-z0-9_.-]` only, at most 100 chars, never `.`/`..`. */
function safeName(raw: string): string {
  const cleaned = raw.replace(/[^A-Za-z0-9_.-]/g, "_").replace(/^\.+/, "_").slice(0, 100);
  return cleaned === "" ? "_" : cleaned;
}

function saveFull(text: string, options: BudgetOptions): string {
  const dir = options.dir ?? envString("TOOL_RESULT_DIR") ??
    (options.workspace ? path.join(options.workspace, ".agent", "tool-results") : undefined);
  if (!dir) {
    throw new Error(
      "Cannot save tool result: no folder given (set options.dir, options.workspace or TOOL_RESULT_DIR)",
    );
  }
  const id = safeName(options.toolCallId ?? randomUUID());
  const name = options.toolName ? `${safeName(options.toolName)}_${id}.txt` : `${id}.txt`;
  const target = path.join(path.resolve(dir), name);
  try {
    // Private to the owner: tool output may hold secrets (files read, env printed).
    writeFileAtomicSync(target, text, { mkdir: true, mode: 0o600, dirMode: 0o700 });
  } catch (e) {
    throw new Error(`Cannot save tool result to ${target}: ${(e as Error).message}`, { cause: e });
  }
  return target;
}
