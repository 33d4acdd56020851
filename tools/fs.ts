/**
 * File tools (manual §7.1, §7.3): `read_file`, `list_files`, `write_file`, `replace_in_file`.
 *
 * Paths are workspace-relative or absolute (or `file:` URLs, converted to their path the same
 * way the permission engine converts them; other URLs are refused) and resolved with
 * `node:path`; the permission engine decides what is allowed, so these tools do not re-check it. Writes are atomic (temp file +
 * rename) and keep a file's UTF-8 BOM and CRLF line endings. `replace_in_file` follows the
 * research notes on edit tools (exact match first; a tolerant match only when it is unique;
 * ambiguity fails; the result names the strategy that matched). A {@link ConflictGuard} remembers
 * what `read_file` saw, and `write_file`/`replace_in_file` refuse to overwrite a file that
 * changed on disk since (another engine or the user edited it).
 *
 * Only regular files are opened: a named pipe, a socket or a device is refused before it is
 * opened ("Cannot read x: it is not a regular file (a named pipe)"; opening a pipe would wait
 * for a writer forever), and `list_files` leaves such entries out. A symlink loop is named as
 * one ("too many levels of symbolic links (a symlink loop)"). An empty `path` of `read_file`,
 * `write_file` or `replace_in_file` is refused ("Cannot read: path is empty") rather than taken
 * as the workspace folder; `list_files`, whose `path` is optional, lists the workspace for it.
 *
 * Built on `node:fs` only: the jobs here are small enough that a library would not pay for itself.
 *
 * @example Register the file tools
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerFileTools } from "@zqagent/core/tools/fs";
 * const registry = new ToolRegistry();
 * registerFileTools(registry, "/srv/workspace");
 * ```
 *
 * @module
 */
import { mkdir, readdir, realpath } from "node:fs/promises";
import path from "node:path";
import { isProtectedPath } from "../permissions/path_guard.ts";
import { formatOverLimit } from "../_internal/size.ts";
import {
  type FileLabel,
  fsError,
  openRegularFile,
  readRegularFile,
  refuseSpecialFile,
  specialFileKind,
  statPath,
} from "../_internal/file_checks.ts";
import { RiskClass, type ToolMetadata, type ToolRegistry } from "./registry.ts";
import { ConflictGuard } from "./conflict_guard.ts";
import {
  boolArg,
  clipChars,
  displayPath,
  intArg,
  resolveToolPath,
  stringArg,
  writeFileAtomic,
} from "./_common.ts";

/** Options of {@link registerFileTools}. */
export interface FileToolsOptions {
  /** Register only `read_file` and `list_files` (default false). */
  readOnly?: boolean;
  /** Largest file `read_file` opens, in bytes (default 10 MiB). */
  maxReadBytes?: number;
  /** Most chars one `read_file` result holds (default 100,000). */
  maxReadChars?: number;
  /** Largest file `replace_in_file` edits, in bytes (default 10 MiB). */
  maxEditBytes?: number;
  /**
   * Remembers what `read_file` saw so `write_file` and `replace_in_file` refuse to overwrite a
   * file someone else changed since (manual §6.1 step 3). Pass the engine's guard so the patch
   * tools share it; default: a new guard for these tools only.
   */
  conflictGuard?: ConflictGuard;
}

const MIB = 1024 * 1024;
const DEFAULT_LIMIT_LINES = 2000;
const MAX_LINE_CHARS = 2000;
const SKIP_NAMES = new Set([".git", "node_modules"]);
const BOM = "\uFEFF";

const READ_META: ToolMetadata = {
  category: "fs",
  riskLevel: "low",
  capabilities: ["read_files"],
  requiresApproval: false,
  riskClass: RiskClass.READ,
};
const WRITE_META: ToolMetadata = {
  category: "fs",
  riskLevel: "medium",
  capabilities: ["write_files"],
  requiresApproval: true,
  riskClass: RiskClass.WRITE,
};

/** "file is X, over the Y" — exact bytes when rounding would make X and Y read the same. */
function overLimit(size: number, limit: number): string {
  const shown = formatOverLimit(size, limit);
  return `file is ${shown.size}, over the ${shown.limit}`;
}

/**
 * A required `path` argument, refused when empty (an empty path would otherwise resolve to the
 * workspace folder and give a puzzling "it is a directory").
 */
function pathArg(args: Record<string, unknown>, tool: string, verb: string): string {
  const raw = stringArg(args, "path", tool);
  if (raw.trim() === "") throw new Error(`Cannot ${verb}: path is empty`);
  return raw;
}

/** `realpath`, its failure named for the model. */
async function realPathOf(abs: string, label: FileLabel): Promise<string> {
  try {
    return await realpath(abs);
  } catch (err) {
    throw fsError(err, label);
  }
}

function looksBinary(bytes: Uint8Array): boolean {
  const n = Math.min(bytes.byteLength, 8000);
  for (let i = 0; i < n; i++) if (bytes[i] === 0) return true;
  return false;
}

/** Line-ending style of a text: CRLF when CRLF line breaks outnumber lone LF ones. */
function detectEol(text: string): "\r\n" | "\n" {
  let crlf = 0;
  let lf = 0;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) {
    if (i > 0 && text[i - 1] === "\r") crlf++;
    else lf++;
  }
  return crlf > lf ? "\r\n" : "\n";
}

function toEol(text: string, eol: "\r\n" | "\n"): string {
  const lf = text.replace(/\r\n/g, "\n");
  return eol === "\n" ? lf : lf.replace(/\n/g, "\r\n");
}

async function readTextForEdit(
  abs: string,
  shown: string,
  maxBytes: number,
  tool: string,
): Promise<{ text: string; bytes: Uint8Array; mode: number }> {
  const label = { verb: "edit", shown };
  const st = await statPath(abs, label);
  if (!st) throw new Error(`Cannot run ${tool} on ${shown}: no such file`);
  if (st.isDirectory()) throw new Error(`Cannot run ${tool} on ${shown}: it is a directory`);
  refuseSpecialFile(st, label);
  if (st.size > maxBytes) {
    throw new Error(
      `Cannot run ${tool} on ${shown}: ${overLimit(st.size, maxBytes)} limit`,
    );
  }
  const bytes = await readRegularFile(abs, label);
  if (looksBinary(bytes)) throw new Error(`Cannot run ${tool} on ${shown}: it is a binary file`);
  return {
    text: new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes),
    bytes,
    mode: st.mode,
  };
}

// ---------------------------------------------------------------------------------------------
// read_file

async function readFileTool(
  workspace: string,
  args: Record<string, unknown>,
  options: FileToolsOptions,
  guard: ConflictGuard,
): Promise<string> {
  const abs = resolveToolPath(workspace, pathArg(args, "read_file", "read"), { verb: "read" });
  const shown = displayPath(workspace, abs);
  const label = { verb: "read", shown };
  const offset = intArg(args, "offset", 1, 1, Number.MAX_SAFE_INTEGER);
  const limit = intArg(args, "limit", DEFAULT_LIMIT_LINES, 1, 100_000);
  const maxBytes = options.maxReadBytes ?? 10 * MIB;
  const maxChars = options.maxReadChars ?? 100_000;

  const st = await statPath(abs, label);
  if (!st) throw new Error(`Cannot read ${shown}: no such file`);
  if (st.isDirectory()) throw new Error(`Cannot read ${shown}: it is a directory; use list_files`);
  refuseSpecialFile(st, label);
  if (st.size > maxBytes) {
    throw new Error(
      `Cannot read ${shown}: ${overLimit(st.size, maxBytes)} read limit; use grep to find ` +
        "the part you need",
    );
  }
  // Sniff the first bytes before reading everything (through one handle, checked regular).
  const fh = await openRegularFile(abs, label);
  let bytes: Uint8Array;
  try {
    const probe = new Uint8Array(8000);
    const { bytesRead } = await fh.read(probe, 0, probe.byteLength, 0);
    if (looksBinary(probe.subarray(0, bytesRead))) {
      throw new Error(`Cannot read ${shown}: it looks like a binary file (it contains NUL bytes)`);
    }
    bytes = await fh.readFile();
  } finally {
    await fh.close();
  }
  guard.noteRead(abs, bytes);
  let text = new TextDecoder().decode(bytes);
  if (text.startsWith(BOM)) text = text.slice(1);
  if (text === "") return `(${shown} is empty)`;

  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const total = lines.length;
  if (offset > total) {
    throw new Error(`Cannot read ${shown}: offset ${offset} is past the end (${total} lines)`);
  }
  const out: string[] = [];
  let chars = 0;
  let last = offset - 1;
  const end = Math.min(total, offset - 1 + limit);
  for (let i = offset - 1; i < end; i++) {
    let line = lines[i];
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (line.length > MAX_LINE_CHARS) {
      line = `${clipChars(line, MAX_LINE_CHARS)}… [line cut: ${line.length} chars]`;
    }
    const entry = `${String(i + 1).padStart(6)}\t${line}`;
    if (out.length > 0 && chars + entry.length + 1 > maxChars) break;
    out.push(entry);
    chars += entry.length + 1;
    last = i + 1;
  }
  if (offset > 1 || last < total) {
    out.push(
      last < total
        ? `[lines ${offset}-${last} of ${total}; use offset=${last + 1} to read more]`
        : `[lines ${offset}-${last} of ${total}]`,
    );
  }
  return out.join("\n");
}

// ---------------------------------------------------------------------------------------------
// list_files

async function listFilesTool(workspace: string, args: Record<string, unknown>): Promise<string> {
  const abs = resolveToolPath(workspace, args.path, { verb: "list" });
  const shown = displayPath(workspace, abs);
  const recursive = boolArg(args, "recursive", false);
  const maxEntries = intArg(args, "max_entries", 500, 1, 5000);
  const st = await statPath(abs, { verb: "list", shown });
  if (!st) throw new Error(`Cannot list ${shown}: no such directory`);
  if (!st.isDirectory()) {
    const kind = specialFileKind(st);
    throw new Error(
      kind
        ? `Cannot list ${shown}: it is not a directory (${kind})`
        : `Cannot list ${shown}: it is a file; use read_file`,
    );
  }

  const out: string[] = [];
  let stopped = false;
  const walk = async (dir: string, prefix: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (e) {
      if (prefix === "") throw e;
      out.push(`${prefix}[unreadable: ${(e as { code?: string }).code ?? "error"}]`);
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (SKIP_NAMES.has(entry.name)) continue;
      if (out.length >= maxEntries) {
        stopped = true;
        return;
      }
      const rel = prefix + entry.name;
      if (entry.isDirectory()) {
        out.push(`${rel}/`);
        if (recursive) {
          await walk(path.join(dir, entry.name), `${rel}/`);
          if (stopped) return;
        }
      } else if (entry.isSymbolicLink()) {
        out.push(`${rel}@`);
      } else if (entry.isFile()) {
        out.push(rel);
      }
      // Anything else (a named pipe, a socket, a device) is left out: no tool can read it.
    }
  };
  await walk(abs, "");
  if (out.length === 0) return `(${shown} is empty)`;
  if (stopped) {
    out.push(
      `[stopped at ${maxEntries} entries; list a subfolder${
        recursive ? " or turn off recursive" : ""
      } to see more]`,
    );
  }
  return out.join("\n");
}

/**
 * Refuses git hooks and git config (they run later outside the sandbox), also when the
 * permission engine is not in front of the tool (permissions `isProtectedPath`).
 */
function refuseProtected(workspace: string, abs: string, shown: string, verb: string): void {
  if (isProtectedPath(abs, workspace)) {
    throw new Error(
      `Cannot ${verb} ${shown}: git hooks and git config run commands later, outside the sandbox`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// write_file

async function writeFileTool(
  workspace: string,
  args: Record<string, unknown>,
  guard: ConflictGuard,
): Promise<string> {
  let abs = resolveToolPath(workspace, pathArg(args, "write_file", "write"), { verb: "write" });
  const shown = displayPath(workspace, abs);
  const label = { verb: "write", shown };
  refuseProtected(workspace, abs, shown, "write");
  let content = stringArg(args, "content", "write_file");
  const st = await statPath(abs, label);
  const notes: string[] = [];
  let mode: number | undefined;
  if (st) {
    if (st.isDirectory()) throw new Error(`Cannot write ${shown}: it is a directory`);
    refuseSpecialFile(st, label); // reading the old content of a pipe would never end
    abs = await realPathOf(abs, label); // write through a symlink, never replace it
    mode = st.mode;
    const old = await readRegularFile(abs, label);
    guard.check(abs, old, { shown });
    if (!looksBinary(old)) {
      const oldText = new TextDecoder("utf-8", { ignoreBOM: true }).decode(old);
      if (oldText.startsWith(BOM) && !content.startsWith(BOM)) {
        content = BOM + content;
        notes.push("kept the UTF-8 BOM");
      }
      if (detectEol(oldText) === "\r\n" && !content.includes("\r\n") && content.includes("\n")) {
        content = toEol(content, "\r\n");
        notes.push("kept CRLF line endings");
      }
    }
  } else {
    await mkdir(path.dirname(abs), { recursive: true });
  }
  const bytes = new TextEncoder().encode(content);
  await writeFileAtomic(abs, bytes, mode);
  guard.noteWrite(abs, bytes);
  const lines = content === "" ? 0 : content.split("\n").length - (content.endsWith("\n") ? 1 : 0);
  return `${st ? "Replaced" : "Created"} ${shown} (${bytes.byteLength} bytes, ${lines} lines${
    notes.length ? `; ${notes.join(", ")}` : ""
  })`;
}

// ---------------------------------------------------------------------------------------------
// replace_in_file

/** How `replace_in_file` found the text. */
type MatchStrategy = "exact" | "line_endings" | "whitespace";

function countOccurrences(haystack: string, needle: string): number {
  let n = 0;
  for (let i = haystack.indexOf(needle); i >= 0; i = haystack.indexOf(needle, i + needle.length)) {
    n++;
  }
  return n;
}

function normalizeWs(line: string): string {
  return line.trim().replace(/\s+/g, " ");
}

function leadingWs(line: string): string {
  return /^[ \t]*/.exec(line)![0];
}

/**
 * Line-window match ignoring leading/trailing whitespace and runs of inner whitespace. Returns
 * the [start, end) line indexes of every candidate.
 */
function whitespaceCandidates(fileLines: string[], oldLines: string[]): Array<[number, number]> {
  const want = oldLines.map(normalizeWs);
  const have = fileLines.map(normalizeWs);
  const out: Array<[number, number]> = [];
  for (let i = 0; i + want.length <= have.length; i++) {
    let ok = true;
    for (let j = 0; j < want.length; j++) {
      if (have[i + j] !== want[j]) {
        ok = false;
        break;
      }
    }
    if (ok) out.push([i, i + want.length]);
  }
  return out;
}

async function replaceInFileTool(
  workspace: string,
  args: Record<string, unknown>,
  options: FileToolsOptions,
  guard: ConflictGuard,
): Promise<string> {
  const tool = "replace_in_file";
  let abs = resolveToolPath(workspace, pathArg(args, tool, "edit"), { verb: "edit" });
  const shown = displayPath(workspace, abs);
  refuseProtected(workspace, abs, shown, "edit");
  const oldText = stringArg(args, "old_text", tool);
  const newText = stringArg(args, "new_text", tool);
  const replaceAll = boolArg(args, "replace_all", false);
  if (oldText === "") throw new Error(`Cannot edit ${shown}: old_text is empty`);
  if (oldText === newText) throw new Error(`Cannot edit ${shown}: old_text and new_text are equal`);

  const { text: raw, bytes: before, mode } = await readTextForEdit(
    abs,
    shown,
    options.maxEditBytes ?? 10 * MIB,
    tool,
  );
  abs = await realPathOf(abs, { verb: "edit", shown });
  guard.check(abs, before, { shown, action: "edit" });
  const hasBom = raw.startsWith(BOM);
  const body = hasBom ? raw.slice(1) : raw;
  const eol = detectEol(body);
  const replacement = eol === "\r\n" ? toEol(newText, "\r\n") : newText;

  const ambiguous = (n: number, strategy: MatchStrategy): Error =>
    new Error(
      `Cannot edit ${shown}: old_text matches ${n} places (${strategy} match); include more ` +
        `surrounding lines to make it unique${
          strategy === "whitespace" ? "" : ", or set replace_all to change every one"
        }`,
    );

  let result: string | undefined;
  let strategy: MatchStrategy | undefined;
  let count = 0;

  // 1. Exact, then 2. the same text with the file's line endings.
  const needles: Array<[string, MatchStrategy]> = [[oldText, "exact"]];
  if (eol === "\r\n" && oldText.includes("\n")) {
    const crlf = toEol(oldText, "\r\n");
    if (crlf !== oldText) needles.push([crlf, "line_endings"]);
  } else if (oldText.includes("\r\n")) {
    needles.push([oldText.replace(/\r\n/g, "\n"), "line_endings"]);
  }
  for (const [needle, name] of needles) {
    const n = countOccurrences(body, needle);
    if (n === 0) continue;
    if (n > 1 && !replaceAll) throw ambiguous(n, name);
    const rep = name === "line_endings" && eol === "\n"
      ? newText.replace(/\r\n/g, "\n")
      : replacement;
    result = replaceAll ? body.split(needle).join(rep) : body.replace(needle, () => rep);
    strategy = name;
    count = n;
    break;
  }

  // 3. Whitespace-tolerant line match, only when exactly one candidate exists.
  if (result === undefined) {
    const oldLines = oldText.replace(/\r\n/g, "\n").split("\n");
    if (oldLines.length > 1 && oldLines[oldLines.length - 1] === "") oldLines.pop();
    if (oldLines.some((l) => l.trim() !== "")) {
      const fileLines = body.split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
      const candidates = whitespaceCandidates(fileLines, oldLines);
      if (candidates.length > 1) throw ambiguous(candidates.length, "whitespace");
      if (candidates.length === 1) {
        const [start, end] = candidates[0];
        // Re-indent: swap old_text's first-line indentation for the file's.
        const fromIndent = leadingWs(oldLines[0]);
        const toIndent = leadingWs(fileLines[start]);
        let newLines = newText.replace(/\r\n/g, "\n").split("\n");
        if (oldText.endsWith("\n") && newLines[newLines.length - 1] === "") newLines.pop();
        if (fromIndent !== toIndent) {
          newLines = newLines.map((l) =>
            l.startsWith(fromIndent) && l.trim() !== "" ? toIndent + l.slice(fromIndent.length) : l
          );
        }
        const rawLines = body.split("\n");
        const lastHadCr = rawLines[end - 1]?.endsWith("\r") ?? false;
        const joined = newLines.join(eol);
        const before = rawLines.slice(0, start);
        const after = rawLines.slice(end);
        const middle = newText === "" ? [] : [joined + (lastHadCr ? "\r" : "")];
        result = [...before, ...middle, ...after].join("\n");
        strategy = "whitespace";
        count = 1;
      }
    }
  }

  if (result === undefined || strategy === undefined) {
    throw new Error(
      `Cannot edit ${shown}: old_text was not found (tried exact, line-ending and ` +
        `whitespace-tolerant matching); read the file again and copy the text exactly`,
    );
  }
  const written = new TextEncoder().encode((hasBom ? BOM : "") + result);
  await writeFileAtomic(abs, written, mode);
  guard.noteWrite(abs, written);
  const plural = count === 1 ? "occurrence" : "occurrences";
  const extra = strategy === "exact"
    ? ""
    : strategy === "line_endings"
    ? " (old_text matched after adapting line endings)"
    : " (old_text matched ignoring whitespace differences; check the indentation)";
  return `Replaced ${count} ${plural} in ${shown}; strategy: ${strategy}${extra}`;
}

// ---------------------------------------------------------------------------------------------
// registration

function registerReadTools(
  registry: ToolRegistry,
  workspace: string,
  options: FileToolsOptions,
  guard: ConflictGuard,
): void {
  registry.register(
    (args) => readFileTool(workspace, args, options, guard),
    READ_META,
    {
      type: "function",
      function: {
        name: "read_file",
        description: "Read a text file. Returns numbered lines (number, tab, text). Use offset " +
          "and limit to page through long files. Binary and very large files are refused.",
        parameters: {
          type: "object",
          properties: {
            path: { type: "string", description: "File path, workspace-relative or absolute" },
            offset: { type: "integer", description: "First line to read, 1-based (default 1)" },
            limit: { type: "integer", description: "Number of lines to read (default 2000)" },
          },
          required: ["path"],
        },
      },
    },
  );
  registry.register(
    (args) => listFilesTool(workspace, args),
    { ...READ_META, capabilities: ["list_files"] },
    {
      type: "function",
      function: {
        name: "list_files",
        description: "List a directory (folders end with /, symlinks with @). Skips .git, " +
          "node_modules and special files (named pipes, sockets, devices).",
        parameters: {
          type: "object",
          properties: {
            path: { type: "string", description: "Directory (default: the workspace root)" },
            recursive: { type: "boolean", description: "List subfolders too (default false)" },
            max_entries: { type: "integer", description: "Most entries to list (default 500)" },
          },
        },
      },
    },
  );
}

/**
 * Registers `read_file`, `list_files`, `write_file` and `replace_in_file` (manual §7.1).
 *
 * @param registry The registry to add the tools to.
 * @param workspace Workspace root; relative `path` arguments resolve against it.
 * @param options Size limits (bytes, chars) and `readOnly`.
 *
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerFileTools } from "@zqagent/core/tools/fs";
 * registerFileTools(new ToolRegistry(), "/srv/workspace", { maxReadBytes: 1024 * 1024 });
 * ```
 */
export function registerFileTools(
  registry: ToolRegistry,
  workspace: string,
  options: FileToolsOptions = {},
): void {
  const root = path.resolve(workspace);
  const guard = options.conflictGuard ?? new ConflictGuard();
  registerReadTools(registry, root, options, guard);
  if (options.readOnly) return;
  registry.register(
    (args) => writeFileTool(root, args, guard),
    WRITE_META,
    {
      type: "function",
      function: {
        name: "write_file",
        description: "Create or overwrite a file with the given content (parent folders are " +
          "created). An existing file keeps its UTF-8 BOM and CRLF line endings.",
        parameters: {
          type: "object",
          properties: {
            path: { type: "string", description: "File path, workspace-relative or absolute" },
            content: { type: "string", description: "The complete new content" },
          },
          required: ["path", "content"],
        },
      },
    },
  );
  registry.register(
    (args) => replaceInFileTool(root, args, options, guard),
    { ...WRITE_META, capabilities: ["edit_files"] },
    {
      type: "function",
      function: {
        name: "replace_in_file",
        description: "Replace old_text with new_text in a file. old_text must match exactly " +
          "one place (copy it from read_file output without the line numbers) unless " +
          "replace_all is true. Line endings and whitespace differences are tolerated only " +
          "when the match is unique. The result names the strategy that matched.",
        parameters: {
          type: "object",
          properties: {
            path: { type: "string", description: "File path, workspace-relative or absolute" },
            old_text: { type: "string", description: "The text to replace" },
            new_text: { type: "string", description: "The replacement text" },
            replace_all: {
              type: "boolean",
              description: "Replace every exact occurrence (default false)",
            },
          },
          required: ["path", "old_text", "new_text"],
        },
      },
    },
  );
}

/**
 * Registers only `read_file` and `list_files` (manual §7.3), for subagents and read-only setups.
 *
 * @param registry The registry to add the tools to.
 * @param workspace Workspace root; relative `path` arguments resolve against it.
 *
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerReadOnlyFileTools } from "@zqagent/core/tools/fs";
 * registerReadOnlyFileTools(new ToolRegistry(), "/srv/workspace");
 * ```
 */
export function registerReadOnlyFileTools(registry: ToolRegistry, workspace: string): void {
  registerFileTools(registry, workspace, { readOnly: true });
}
