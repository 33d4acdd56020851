/**
 * Patch tools (manual §7.1, "Parches"): `apply_patch` for the `*** Begin Patch` envelope and
 * `apply_unified_diff` for standard unified diffs.
 *
 * Both work in two phases. First every file the patch names is resolved, checked against the
 * workspace and the writable granted directories, checked with the engine's
 * {@link ConflictGuard}, read, and patched **in memory**; any failure there (a chunk whose lines
 * are not in the file, a path outside the workspace, a file someone else changed) refuses the
 * whole patch and no file is touched. Then the results are written, each file atomically (temp
 * file + rename); should the disk fail half-way, the files already written are put back. Each
 * file keeps its UTF-8 BOM, its line endings (new lines get the file's dominant ending, so a CRLF
 * file never gets mixed endings) and its trailing-newline state. The result lists per file what
 * changed and says when a chunk was found only with tolerance.
 *
 * Only regular files are patched: a named pipe, socket or device the patch names is refused
 * before it is opened, and so is a symlink loop ("too many levels of symbolic links").
 *
 * `apply_patch` follows Codex's format and its four-pass context seeking (exact, trailing
 * space, trimmed, Unicode punctuation normalised), with the fixes from the research notes on
 * coding engines §4.6. `apply_unified_diff` parses and applies with jsdiff (npm `diff`, the
 * well-kept standard JavaScript implementation of unified diffs, including Git's rename and
 * new/deleted-file headers), loaded lazily; the same tolerance passes are given to it through
 * its `compareLine` hook.
 *
 * A patch has no `path` argument for the permission engine to check, so these tools refuse
 * paths outside the workspace and the writable granted directories themselves (DESIGN §5).
 *
 * @example Register the patch tools with the engine's conflict guard
 * ```ts
 * import { ConflictGuard, ToolRegistry } from "@zqagent/core/tools";
 * import { registerDiffTools } from "@zqagent/core/tools/diff";
 * const registry = new ToolRegistry();
 * registerDiffTools(registry, "/srv/workspace", { conflictGuard: new ConflictGuard() });
 * ```
 *
 * @module
 */
import { mkdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import {
  isInside,
  isProtectedPath,
  PathResolutionError,
  resolveRoot,
  resolveWorkspacePath,
} from "../permissions/path_guard.ts";
import { fsErrorReason, readRegularFile, specialFileKind } from "../_internal/file_checks.ts";
import { ConflictGuard } from "./conflict_guard.ts";
import { RiskClass, type ToolContext, type ToolMetadata, type ToolRegistry } from "./registry.ts";
import { displayPath, stringArg, writeFileAtomic } from "./_common.ts";
import { formatOverLimit } from "../_internal/size.ts";
import {
  applyChunks,
  joinText,
  normalizeUnicode,
  parsePatchEnvelope,
  type SeekPass,
  splitText,
  type TextFile,
} from "./_patch_text.ts";

/** Options of {@link registerDiffTools}. */
export interface DiffToolsOptions {
  /**
   * The engine's conflict guard (manual §6.1 step 3): a patch touching a file that changed on
   * disk since the engine read it is refused. Default: a new guard for these tools only.
   */
  conflictGuard?: ConflictGuard;
  /**
   * Extra directories patches may write into, besides the workspace. Default: the writable
   * directories granted on the running engine's permission engine (`request_directory`).
   */
  writableRoots?: () => string[];
  /** Largest file a patch may change, in bytes (default 10 MiB). */
  maxFileBytes?: number;
}

const MIB = 1024 * 1024;

const WRITE_META: ToolMetadata = {
  category: "diff",
  riskLevel: "medium",
  capabilities: ["edit_files"],
  requiresApproval: true,
  riskClass: RiskClass.WRITE,
};

const PASS_NOTE: Record<SeekPass, string> = {
  exact: "exact",
  trailing_space: "ignoring trailing spaces",
  trimmed: "ignoring indentation",
  unicode: "ignoring indentation and Unicode punctuation",
};

function looksBinary(bytes: Uint8Array): boolean {
  const n = Math.min(bytes.byteLength, 8000);
  for (let i = 0; i < n; i++) if (bytes[i] === 0) return true;
  return false;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** One file a patch touches, as loaded, and its state after the operations so far. */
interface Entry {
  abs: string;
  shown: string;
  /** Bytes on disk before the patch, `null` when the file did not exist. */
  original: Uint8Array | null;
  mode?: number;
  /** The file now (in memory), `null` when it does not exist (deleted or never there). */
  state: TextFile | null;
}

/** Per-file line of the report. */
interface Change {
  code: "A" | "M" | "D" | "R";
  shown: string;
  to?: string;
  added: number;
  removed: number;
  notes: string[];
}

/** Files a patch touches, patched in memory, then written all together or not at all. */
class Changeset {
  #entries = new Map<string, Entry>();
  readonly changes: Change[] = [];

  constructor(
    readonly tool: string,
    readonly workspace: string,
    readonly roots: string[],
    readonly guard: ConflictGuard,
    readonly maxBytes: number,
  ) {}

  fail(why: string): never {
    throw new Error(`Cannot ${this.tool === "apply_patch" ? "apply patch" : "apply diff"}: ${why}`);
  }

  /** Resolves a path from the patch, checks it, and loads the file once. */
  async load(raw: string): Promise<Entry> {
    let abs: string;
    try {
      abs = resolveWorkspacePath(this.workspace, raw);
    } catch (e) {
      if (e instanceof PathResolutionError && e.code === "symlink_loop") {
        return this.fail(
          `${raw}: too many levels of symbolic links (a symlink loop); no file was changed`,
        );
      }
      return this.fail(`${JSON.stringify(raw)} is not a usable path (${(e as Error).message})`);
    }
    const shown = displayPath(this.workspace, abs);
    if (!this.roots.some((root) => isInside(root, abs))) {
      this.fail(
        `${raw} is outside the workspace${
          this.roots.length > 1 ? " and the writable granted directories" : ""
        }; no file was changed`,
      );
    }
    if (isProtectedPath(raw, this.workspace)) {
      this.fail(
        `${raw} is a git hook or git config, which runs commands later outside the sandbox; ` +
          "no file was changed",
      );
    }
    const known = this.#entries.get(abs);
    if (known) return known;
    let original: Uint8Array | null = null;
    let mode: number | undefined;
    try {
      const st = await stat(abs);
      if (st.isDirectory()) this.fail(`${shown} is a directory`);
      // A named pipe, socket or device is never opened: reading a pipe would never end.
      const kind = specialFileKind(st);
      if (kind) this.fail(`${shown} is not a regular file (${kind}); no file was changed`);
      if (st.size > this.maxBytes) {
        const over = formatOverLimit(st.size, this.maxBytes);
        this.fail(`${shown} is ${over.size}, over the ${over.limit} limit`);
      }
      mode = st.mode;
      original = await readRegularFile(abs, { verb: "read", shown });
    } catch (e) {
      // ENOTDIR: a parent is a file; the write will fail and say so.
      const code = (e as { code?: string }).code;
      if (code === undefined) throw e; // our own message
      if (code !== "ENOENT" && code !== "ENOTDIR") this.fail(`${shown}: ${fsErrorReason(e)}`);
    }
    let state: TextFile | null = null;
    if (original) {
      if (looksBinary(original)) this.fail(`${shown} is a binary file`);
      this.guard.check(abs, original, { shown, action: "patch" });
      state = splitText(new TextDecoder("utf-8", { ignoreBOM: true }).decode(original));
    }
    const entry: Entry = { abs, shown, original, mode, state };
    this.#entries.set(abs, entry);
    return entry;
  }

  /** Writes every changed file (atomically each); on a failure, restores those written. */
  async commit(): Promise<void> {
    const writes: Array<{ e: Entry; bytes: Uint8Array | null }> = [];
    for (const e of this.#entries.values()) {
      if (e.state === null) {
        if (e.original !== null) writes.push({ e, bytes: null });
        continue;
      }
      const bytes = new TextEncoder().encode(joinText(e.state));
      if (e.original === null || !sameBytes(e.original, bytes)) writes.push({ e, bytes });
    }
    // Writes before deletions, so a move never loses its source before the target exists.
    writes.sort((a, b) => Number(a.bytes === null) - Number(b.bytes === null));
    const done: typeof writes = [];
    try {
      for (const w of writes) {
        if (w.bytes === null) {
          await rm(w.e.abs);
        } else {
          await mkdir(path.dirname(w.e.abs), { recursive: true });
          await writeFileAtomic(w.e.abs, w.bytes, w.e.mode);
        }
        done.push(w);
      }
    } catch (e) {
      for (const w of done.reverse()) {
        try {
          if (w.e.original === null) await rm(w.e.abs, { force: true });
          else await writeFileAtomic(w.e.abs, w.e.original, w.e.mode);
        } catch {
          // best effort: the error below names the file that failed
        }
      }
      this.fail(
        `writing the files failed (${(e as Error).message}); the files already written were ` +
          "restored",
      );
    }
    for (const w of writes) {
      if (w.bytes === null) this.guard.forget(w.e.abs);
      else this.guard.noteWrite(w.e.abs, w.bytes);
    }
  }

  report(): string {
    if (this.changes.length === 0) return "The patch changed nothing.";
    const lines = this.changes.map((c) => {
      const counts = c.code === "D" ? ` (-${c.removed})` : ` (+${c.added} -${c.removed})`;
      const name = c.to ? `${c.shown} -> ${c.to}` : c.shown;
      return `${c.code} ${name}${counts}${c.notes.length ? `; ${c.notes.join("; ")}` : ""}`;
    });
    const n = this.changes.length;
    return `Applied ${this.tool === "apply_patch" ? "patch" : "diff"} to ${n} file${
      n === 1 ? "" : "s"
    } (A added, M modified, D deleted, R moved):\n${lines.join("\n")}`;
  }
}

/** The workspace plus the writable roots, resolved. */
function rootsFor(workspace: string, options: DiffToolsOptions, ctx?: ToolContext): string[] {
  const roots = [resolveRoot(workspace)];
  let extra: string[] = [];
  if (options.writableRoots) {
    extra = options.writableRoots();
  } else {
    const permissions = (ctx?.engine as { permissions?: unknown } | undefined)?.permissions as
      | { grantedDirectories?: () => Array<{ path: string; writable: boolean }> }
      | undefined;
    if (typeof permissions?.grantedDirectories === "function") {
      extra = permissions.grantedDirectories().filter((d) => d.writable).map((d) => d.path);
    }
  }
  for (const dir of extra) {
    try {
      roots.push(resolveRoot(dir));
    } catch {
      // an unusable root grants nothing
    }
  }
  return roots;
}

function countLines(file: TextFile | null): number {
  return file ? file.lines.length : 0;
}

// ---------------------------------------------------------------------------------------------
// apply_patch

async function applyPatchTool(
  workspace: string,
  args: Record<string, unknown>,
  options: DiffToolsOptions,
  guard: ConflictGuard,
  ctx?: ToolContext,
): Promise<string> {
  const text = stringArg(args, "patch", "apply_patch");
  let ops;
  try {
    ops = parsePatchEnvelope(text);
  } catch (e) {
    throw new Error(`${(e as Error).message}; no file was changed`);
  }
  const roots = rootsFor(workspace, options, ctx);
  const set = new Changeset(
    "apply_patch",
    roots[0],
    roots,
    guard,
    options.maxFileBytes ?? 10 * MIB,
  );
  for (const op of ops) {
    const entry = await set.load(op.path);
    const where = `${op.path} (patch line ${op.line})`;
    if (op.kind === "add") {
      const replaced = entry.state !== null;
      const file: TextFile = {
        bom: false,
        eol: "\n",
        lines: op.lines.map((t) => ({ text: t, cr: null })),
        finalNewline: op.lines.length > 0,
      };
      set.changes.push({
        code: replaced ? "M" : "A",
        shown: entry.shown,
        added: op.lines.length,
        removed: countLines(entry.state),
        notes: replaced ? ["the file existed and was replaced"] : [],
      });
      entry.state = file;
      continue;
    }
    if (entry.state === null) {
      return set.fail(
        `${where}: cannot ${op.kind} ${entry.shown}: no such file; no file was changed`,
      );
    }
    if (op.kind === "delete") {
      set.changes.push({
        code: "D",
        shown: entry.shown,
        added: 0,
        removed: countLines(entry.state),
        notes: [],
      });
      entry.state = null;
      continue;
    }
    let result;
    try {
      result = applyChunks(entry.state, op.chunks);
    } catch (e) {
      return set.fail(`${where}: ${(e as Error).message}\nNo file was changed.`);
    }
    const notes = result.passes.map((p) => `context found ${PASS_NOTE[p]}`);
    if (op.moveTo !== undefined) {
      const dest = await set.load(op.moveTo);
      if (dest.abs !== entry.abs) {
        if (dest.state !== null) notes.push("the destination existed and was replaced");
        dest.state = result.file;
        dest.mode ??= entry.mode;
        entry.state = null;
        set.changes.push({
          code: "R",
          shown: entry.shown,
          to: dest.shown,
          added: result.added,
          removed: result.removed,
          notes,
        });
        continue;
      }
    }
    entry.state = result.file;
    set.changes.push({
      code: "M",
      shown: entry.shown,
      added: result.added,
      removed: result.removed,
      notes,
    });
  }
  await set.commit();
  return set.report();
}

// ---------------------------------------------------------------------------------------------
// apply_unified_diff

type Jsdiff = typeof import("diff");
let jsdiff: Promise<Jsdiff> | undefined;
function loadJsdiff(): Promise<Jsdiff> {
  return (jsdiff ??= import("diff"));
}

type StructuredPatch = ReturnType<Jsdiff["parsePatch"]>[number];

/** Strips Git's `a/` and `b/` prefixes; `null` for `/dev/null`. */
function diffName(name: string | undefined, prefix: string, strip: boolean): string | null {
  if (name === undefined || name === "" || name === "/dev/null") return null;
  return strip && name.startsWith(prefix) ? name.slice(prefix.length) : name;
}

const COMPARE_PASSES: ReadonlyArray<[SeekPass, (s: string) => string]> = [
  ["exact", (s) => s],
  ["trailing_space", (s) => s.trimEnd()],
  ["trimmed", (s) => s.trim()],
  ["unicode", (s) => normalizeUnicode(s.trim())],
];

const stripCr = (s: string): string => (s.endsWith("\r") ? s.slice(0, -1) : s);

/**
 * Applies one file's hunks to `source` (BOM already removed). Lines keep their own `\r`; added
 * lines get `\r` when the file is CRLF. Tries the tolerance passes in order.
 */
function applyFilePatch(
  lib: Jsdiff,
  source: string,
  patch: StructuredPatch,
  crlf: boolean,
): { text: string; pass: SeekPass } | { failedHunk: number } {
  const hunks = patch.hunks.map((h) => ({
    ...h,
    lines: h.lines.map((l) => {
      if (l.startsWith("\\")) return l;
      const t = stripCr(l);
      return t.startsWith("+") && crlf ? `${t}\r` : t;
    }),
  }));
  const attempt = (count: number, norm: (s: string) => string): string | false =>
    lib.applyPatch(source, { ...patch, hunks: hunks.slice(0, count) }, {
      autoConvertLineEndings: false,
      compareLine: (_n, line, _op, content) =>
        line !== undefined && norm(stripCr(line)) === norm(stripCr(content)),
    });
  for (const [pass, norm] of COMPARE_PASSES) {
    const out = attempt(hunks.length, norm);
    if (out !== false) return { text: out, pass };
  }
  // Name the first hunk that cannot be placed, even with the most tolerant pass.
  const loosest = COMPARE_PASSES[COMPARE_PASSES.length - 1][1];
  for (let k = 1; k <= hunks.length; k++) {
    if (attempt(k, loosest) === false) return { failedHunk: k };
  }
  return { failedHunk: hunks.length };
}

async function applyUnifiedDiffTool(
  workspace: string,
  args: Record<string, unknown>,
  options: DiffToolsOptions,
  guard: ConflictGuard,
  ctx?: ToolContext,
): Promise<string> {
  const text = stringArg(args, "diff", "apply_unified_diff");
  const lib = await loadJsdiff();
  let patches: StructuredPatch[];
  try {
    patches = lib.parsePatch(text.replace(/\r\n/g, "\n"));
  } catch (e) {
    throw new Error(
      `Cannot apply diff: it is not a valid unified diff (${(e as Error).message}); no file ` +
        "was changed",
    );
  }
  patches = patches.filter((p) =>
    p.hunks.length > 0 || p.isRename || p.isCreate || p.isDelete || p.isBinary
  );
  if (patches.length === 0) {
    throw new Error(
      "Cannot apply diff: it contains no hunks (expected '--- a/x', '+++ b/x', '@@')",
    );
  }
  const roots = rootsFor(workspace, options, ctx);
  const set = new Changeset(
    "apply_unified_diff",
    roots[0],
    roots,
    guard,
    options.maxFileBytes ?? 10 * MIB,
  );
  for (const [index, p] of patches.entries()) {
    const prefixed = (name: string | undefined, prefix: string): boolean =>
      name === undefined || name === "/dev/null" || name.startsWith(prefix);
    const strip = p.isGit === true ||
      (prefixed(p.oldFileName, "a/") && prefixed(p.newFileName, "b/"));
    const oldName = diffName(p.oldFileName, "a/", strip);
    const newName = diffName(p.newFileName, "b/", strip);
    const label = newName ?? oldName ?? `file ${index + 1}`;
    if (p.isBinary) set.fail(`${label}: binary patches are not supported; no file was changed`);
    if (oldName === null && newName === null) {
      set.fail(`file ${index + 1} of the diff names no file; no file was changed`);
    }
    const creating = oldName === null || (p.isCreate === true && !p.isCopy);
    const deleting = newName === null || p.isDelete === true;
    const source = await set.load((creating ? newName : oldName)!);
    if (creating && source.state !== null) {
      set.fail(`${source.shown} already exists, but the diff creates it; no file was changed`);
    }
    if (!creating && source.state === null) {
      set.fail(`${source.shown}: no such file; no file was changed`);
    }
    const before: TextFile = source.state ??
      { bom: false, eol: "\n", lines: [], finalNewline: false };
    const crlf = before.eol === "\r\n";
    const body = joinText({ ...before, bom: false });
    const applied = applyFilePatch(lib, body, p, crlf);
    if ("failedHunk" in applied) {
      const h = p.hunks[applied.failedHunk - 1];
      return set.fail(
        `${source.shown}: hunk ${applied.failedHunk} of ${p.hunks.length} (@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@) does not match the file (tried exact, trailing-space, trimmed and Unicode-normalised matching); no file was changed`,
      );
    }
    let out = applied.text;
    if (crlf && !/(^|[^\r])\n/.test(body)) {
      // A pure CRLF file stays pure CRLF (a line that had no terminator may have gained one).
      out = out.replace(/\r?\n/g, "\r\n");
      if (!body.endsWith("\r") && out.endsWith("\r")) out = out.slice(0, -1);
    }
    const after = splitText((before.bom ? "\uFEFF" : "") + out);
    let added = 0;
    let removed = 0;
    for (const h of p.hunks) {
      for (const l of h.lines) {
        if (l.startsWith("+")) added++;
        else if (l.startsWith("-")) removed++;
      }
    }
    const notes = applied.pass === "exact" ? [] : [`context found ${PASS_NOTE[applied.pass]}`];
    if (deleting) {
      if (after.lines.some((l) => l.text !== "")) {
        set.fail(
          `${source.shown}: the diff deletes the file but leaves lines in it; no file was changed`,
        );
      }
      source.state = null;
      set.changes.push({ code: "D", shown: source.shown, added, removed, notes });
      continue;
    }
    if (!creating && newName !== null && oldName !== null && newName !== oldName) {
      const dest = await set.load(newName);
      if (dest.abs !== source.abs) {
        if (dest.state !== null && !p.isCopy) {
          notes.push("the destination existed and was replaced");
        }
        dest.state = after;
        dest.mode ??= source.mode;
        if (!p.isCopy) source.state = null;
        set.changes.push({
          code: p.isCopy ? "A" : "R",
          shown: p.isCopy ? dest.shown : source.shown,
          to: p.isCopy ? undefined : dest.shown,
          added,
          removed,
          notes,
        });
        continue;
      }
    }
    source.state = after;
    set.changes.push({ code: creating ? "A" : "M", shown: source.shown, added, removed, notes });
  }
  await set.commit();
  return set.report();
}

// ---------------------------------------------------------------------------------------------
// registration

/**
 * Registers `apply_patch` and `apply_unified_diff` (manual §7.1, "Parches"; risk class WRITE,
 * approval required).
 *
 * @param registry The registry to add the tools to.
 * @param workspace Workspace root; paths in patches resolve against it and must stay inside it
 *   (or inside a writable granted directory).
 * @param options The conflict guard to share with the file tools, extra writable roots, and the
 *   largest file a patch may change (bytes).
 *
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerDiffTools } from "@zqagent/core/tools/diff";
 * const registry = new ToolRegistry();
 * registerDiffTools(registry, "/srv/workspace");
 * const result = await registry.get("apply_patch")!.func({
 *   patch: "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch",
 * });
 * ```
 */
export function registerDiffTools(
  registry: ToolRegistry,
  workspace: string,
  options: DiffToolsOptions = {},
): void {
  const root = path.resolve(workspace);
  const guard = options.conflictGuard ?? new ConflictGuard();
  registry.register(
    (args, ctx) => applyPatchTool(root, args, options, guard, ctx),
    WRITE_META,
    {
      type: "function",
      function: {
        name: "apply_patch",
        description: "Apply a patch in the '*** Begin Patch' format to one or more files. " +
          "Sections: '*** Add File: <path>' (every line starts with +), '*** Delete File: " +
          "<path>', '*** Update File: <path>' (optionally followed by '*** Move to: <path>') " +
          "with chunks: an '@@ <line near the change>' header, then lines starting with ' ' " +
          "(context, about 3 lines before and after), '-' (remove) or '+' (add). End with " +
          "'*** End Patch'. Paths are workspace-relative. Every chunk of every file is checked " +
          "before anything is written: if one does not match, no file changes. Line endings " +
          "and BOM are kept. The result lists each file changed.",
        parameters: {
          type: "object",
          properties: {
            patch: {
              type: "string",
              description: "The whole patch, from '*** Begin Patch' to '*** End Patch'",
            },
          },
          required: ["patch"],
        },
      },
    },
  );
  registry.register(
    (args, ctx) => applyUnifiedDiffTool(root, args, options, guard, ctx),
    WRITE_META,
    {
      type: "function",
      function: {
        name: "apply_unified_diff",
        description: "Apply a standard unified diff (as 'diff -u' or 'git diff' prints it; " +
          "'--- a/path', '+++ b/path', '@@ -l,n +l,n @@' hunks) to one or more files. " +
          "/dev/null creates or deletes a file; Git rename headers move it. All or nothing: " +
          "if one hunk does not match, no file changes. Line endings and BOM are kept.",
        parameters: {
          type: "object",
          properties: {
            diff: { type: "string", description: "The unified diff text" },
          },
          required: ["diff"],
        },
      },
    },
  );
}
