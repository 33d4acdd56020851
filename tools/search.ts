/**
 * The `grep` tool (manual §7.1): regex search over files, with ripgrep (`rg`) when it is on the
 * PATH and a JavaScript fallback otherwise, giving the same results either way.
 *
 * Both paths produce a list of matches that is then sorted (by path, compared folder by folder,
 * then by line), cut and formatted by the same code, so the output format cannot drift. They
 * agree on what is searched: hidden files and folders and `.git` are skipped, `.gitignore` files
 * are honoured in and below the search root and in its parent folders (also outside a git
 * repository), `.ignore`/`.rgignore`/global git excludes are not, binary files (a NUL byte) are
 * skipped as a whole, symlinks are not followed, and CRLF counts as a line end. Only regular
 * files are read: named pipes, sockets and devices in the tree are skipped, and one named as the
 * search path is refused ("Cannot search x: it is not a regular file (a named pipe)"), since
 * opening a pipe waits for a writer forever. ripgrep would wait on a `.gitignore` that is a
 * pipe, so when the search root's or a parent folder's `.gitignore` is one, the JavaScript
 * search (which skips it) runs instead; one deeper in the tree costs the search its time limit.
 *
 * Libraries: ripgrep for speed (DESIGN §8: at most 1.2x ripgrep), the `ignore` npm package for
 * `.gitignore` semantics in the fallback (the same rules git uses; well kept, no dependencies).
 *
 * @example Register grep
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerSearchTool } from "@zqagent/core/tools/search";
 * registerSearchTool(new ToolRegistry(), "/srv/workspace");
 * ```
 *
 * @module
 */
import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import ignore, { type Ignore } from "ignore";
import { spawnProcess, which } from "../_internal/process.ts";
import { mayRead } from "../_internal/deno_permissions.ts";
import {
  readRegularFile,
  refuseSpecialFile,
  specialFileKind,
  statPath,
} from "../_internal/file_checks.ts";
import { RiskClass, type ToolContext, type ToolRegistry } from "./registry.ts";
import {
  abortError,
  boolArg,
  clipChars,
  displayPath,
  intArg,
  resolveToolPath,
  stringArg,
} from "./_common.ts";

/** Options of {@link registerSearchTool}. */
export interface SearchToolOptions {
  /**
   * Which engine to use: `"auto"` (ripgrep when on the PATH, else JavaScript; the default),
   * `"rg"` (ripgrep; fails when missing) or `"js"` (always the fallback).
   */
  engine?: "auto" | "rg" | "js";
  /** Path of the ripgrep binary (default: `rg` found on the PATH). */
  rgPath?: string;
  /** Timeout of one search in ms (default 30,000). */
  timeoutMs?: number;
  /** Most matching lines collected before giving up on completeness (default 20,000). */
  maxCollected?: number;
}

/** One line of grep output. */
interface GrepLine {
  /** Path relative to the workspace (or absolute when outside), `/`-separated. */
  file: string;
  /** 1-based line number. */
  line: number;
  /** The line's text without its line end. */
  text: string;
  /** True for a matching line, false for a context line. */
  match: boolean;
}

interface Collected {
  lines: GrepLine[];
  matches: number;
  incomplete: boolean;
}

interface SearchRequest {
  pattern: string;
  /** Absolute search root (file or directory). */
  root: string;
  rootIsDir: boolean;
  glob?: string;
  ignoreCase: boolean;
  context: number;
  workspace: string;
  maxCollected: number;
  timeoutMs: number;
  signal?: AbortSignal;
}

const MAX_LINE_CHARS = 500;

/**
 * Compares `/`-separated paths, given split at `/`, folder by folder (so `a/b` sorts before
 * `a.txt`).
 */
function compareParts(pa: string[], pb: string[]): number {
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    if (pa[i] !== pb[i]) {
      // A folder's entries come before a sibling file only when the names differ; plain order.
      return pa[i] < pb[i] ? -1 : 1;
    }
  }
  return pa.length - pb.length;
}

function stripEol(text: string): string {
  if (text.endsWith("\r\n")) return text.slice(0, -2);
  if (text.endsWith("\n")) return text.slice(0, -1);
  return text;
}

/** Expands one level of `{a,b}` braces (`*.{ts,tsx}` → `*.ts`, `*.tsx`). */
function expandBraces(glob: string): string[] {
  const m = /\{([^{}]*)\}/.exec(glob);
  if (!m) return [glob];
  const out: string[] = [];
  for (const alt of m[1].split(",")) {
    out.push(...expandBraces(glob.slice(0, m.index) + alt + glob.slice(m.index + m[0].length)));
  }
  return out;
}

/** Translates the few Rust-regex spellings JavaScript lacks; returns the RegExp. */
function compileRegex(pattern: string, ignoreCase: boolean): RegExp {
  let source = pattern;
  let flags = ignoreCase ? "i" : "";
  if (source.startsWith("(?i)")) {
    source = source.slice(4);
    if (!flags.includes("i")) flags += "i";
  }
  try {
    return new RegExp(source, flags + "u");
  } catch {
    try {
      return new RegExp(source, flags);
    } catch (e) {
      throw new Error(
        `Cannot search: invalid pattern ${JSON.stringify(pattern)}: ${(e as Error).message}`,
      );
    }
  }
}

// ---------------------------------------------------------------------------------------------
// ripgrep

async function searchWithRg(rg: string, req: SearchRequest): Promise<Collected> {
  const args = [
    "--json",
    "--no-config",
    "--crlf",
    "--no-require-git",
    "--no-ignore-dot",
    "--no-ignore-global",
    "--no-ignore-exclude",
    "--no-follow",
    "--glob",
    "!.git",
  ];
  if (req.ignoreCase) args.push("--ignore-case");
  else args.push("--case-sensitive");
  if (req.context > 0) args.push("--context", String(req.context));
  if (req.glob) { for (const g of expandBraces(req.glob)) args.push("--glob", g); }
  args.push("--regexp", req.pattern, "--");
  const cwd = req.rootIsDir ? req.root : path.dirname(req.root);
  args.push(req.rootIsDir ? "." : path.basename(req.root));

  const files = new Map<string, GrepLine[]>();
  const binary = new Set<string>();
  let matches = 0;
  let incomplete = false;
  let pending = "";
  let tooMany = false;
  const stdoutDecoder = new TextDecoder();
  const decodeData = (d: { text?: string; bytes?: string }): string =>
    d.text ??
      new TextDecoder().decode(Uint8Array.from(atob(d.bytes ?? ""), (c) => c.charCodeAt(0)));
  const rel = (p: string): string => {
    const abs = path.resolve(cwd, p);
    return displayPath(req.workspace, abs);
  };
  const onLine = (raw: string): void => {
    if (raw === "") return;
    // Performance (bench/grep_bench.ts): rg writes begin/end/summary records around every file;
    // only matches, context lines and the end record of a binary file are needed, so the rest
    // is skipped without being parsed (most of the bytes on dense results).
    if (raw.startsWith('{"type":"begin"') || raw.startsWith('{"type":"summary"')) return;
    if (raw.startsWith('{"type":"end"') && raw.includes('"binary_offset":null')) return;
    let msg: {
      type: string;
      data: {
        path?: { text?: string; bytes?: string };
        lines?: { text?: string; bytes?: string };
        line_number?: number;
        binary_offset?: number | null;
      };
    };
    try {
      msg = JSON.parse(raw);
    } catch {
      return;
    }
    const p = msg.data.path ? rel(decodeData(msg.data.path)) : undefined;
    if (!p) return;
    if (msg.type === "match" || msg.type === "context") {
      const text = stripEol(decodeData(msg.data.lines ?? {}));
      const lineNo = msg.data.line_number ?? 0;
      // A multi-line match cannot happen without --multiline; take the first line.
      const first = text.split(/\r?\n/)[0];
      let list = files.get(p);
      if (!list) files.set(p, list = []);
      list.push({ file: p, line: lineNo, text: first, match: msg.type === "match" });
      if (msg.type === "match" && ++matches >= req.maxCollected) tooMany = true;
    } else if (msg.type === "end" && msg.data.binary_offset != null) {
      binary.add(p);
    }
  };

  const proc = spawnProcess(rg, args, {
    cwd,
    timeoutMs: req.timeoutMs,
    signal: req.signal,
    graceMs: 0,
    maxOutputBytes: 64 * 1024,
    onStdout: (chunk) => {
      if (tooMany) return;
      pending += stdoutDecoder.decode(chunk, { stream: true });
      // Performance (bench/grep_bench.ts): scan with an offset and cut the rest once per chunk,
      // not once per line (re-slicing per line made dense results several times slower).
      let start = 0;
      let nl = pending.indexOf("\n");
      while (nl >= 0) {
        onLine(pending.slice(start, nl));
        start = nl + 1;
        nl = pending.indexOf("\n", start);
      }
      pending = pending.slice(start);
      if (tooMany) {
        incomplete = true;
        void proc.kill({ graceMs: 0 });
      }
    },
  });
  const r = await proc.result;
  if (r.aborted) throw abortError("grep");
  if (!tooMany) onLine(pending);
  if (r.timedOut) incomplete = true;
  else if (!tooMany && r.exitCode === 2 && files.size === 0) {
    const msg = r.stderr.trim().split("\n").slice(-6).join("\n");
    throw new Error(`Cannot search: ripgrep failed: ${msg || `exit code ${r.exitCode}`}`);
  } else if (r.spawnError) {
    throw new Error(`Cannot search: ripgrep could not start: ${r.spawnError.message}`);
  }
  const lines: GrepLine[] = [];
  let kept = 0;
  for (const [file, list] of files) {
    if (binary.has(file)) continue;
    for (const l of list) {
      lines.push(l);
      if (l.match) kept++;
    }
  }
  return { lines, matches: kept, incomplete };
}

// ---------------------------------------------------------------------------------------------
// JavaScript fallback

/** `.gitignore` rules of one folder, matched relative to that folder. */
interface IgnoreLayer {
  dir: string;
  ig: Ignore;
}

async function loadGitignore(dir: string): Promise<IgnoreLayer | null> {
  const file = path.join(dir, ".gitignore");
  if (!mayRead(file)) return null; // never make Deno prompt (DESIGN §5)
  try {
    // Never blocks on a `.gitignore` that is a named pipe: only a regular file is read.
    const text = new TextDecoder().decode(
      await readRegularFile(file, { verb: "read", shown: file }),
    );
    return { dir, ig: ignore().add(text) };
  } catch {
    return null;
  }
}

/**
 * A `.gitignore` ripgrep reads before it searches (in `startDir` or a parent folder) that is
 * not a regular file (ripgrep would wait forever opening a named pipe), with what it is.
 */
async function specialGitignoreAbove(
  startDir: string,
): Promise<{ file: string; kind: string } | undefined> {
  for (let d = startDir;; d = path.dirname(d)) {
    const file = path.join(d, ".gitignore");
    const st = mayRead(file) ? await stat(file).catch(() => null) : null;
    const kind = st && !st.isDirectory() ? specialFileKind(st) : undefined;
    if (kind) return { file, kind };
    if (path.dirname(d) === d) return undefined;
  }
}

function isIgnored(layers: IgnoreLayer[], abs: string, isDir: boolean): boolean {
  // Later (deeper) layers win, as in git; `ignore` reports `unignored` for negations.
  for (let i = layers.length - 1; i >= 0; i--) {
    const rel = path.relative(layers[i].dir, abs).split(path.sep).join("/");
    if (rel === "" || rel.startsWith("..")) continue;
    const res = layers[i].ig.test(isDir ? `${rel}/` : rel);
    if (res.ignored) return true;
    if (res.unignored) return false;
  }
  return false;
}

function makeGlobFilter(glob: string | undefined): (rel: string, isDir: boolean) => boolean {
  if (!glob) return () => true;
  const positives: string[] = [];
  const negatives: string[] = [];
  for (const g of expandBraces(glob)) {
    if (g.startsWith("!")) negatives.push(g.slice(1));
    else positives.push(g);
  }
  const pos = positives.length ? ignore().add(positives) : null;
  const neg = negatives.length ? ignore().add(negatives) : null;
  return (rel, isDir) => {
    const key = isDir ? `${rel}/` : rel;
    if (neg?.ignores(key)) return false;
    if (isDir) return true;
    return pos ? pos.ignores(key) : true;
  };
}

async function searchWithJs(req: SearchRequest): Promise<Collected> {
  const re = compileRegex(req.pattern, req.ignoreCase);
  const globOk = makeGlobFilter(req.glob);
  const lines: GrepLine[] = [];
  let matches = 0;
  let incomplete = false;
  const deadline = Date.now() + req.timeoutMs;

  // .gitignore files of the parent folders apply too (ripgrep does the same).
  const layers: IgnoreLayer[] = [];
  const startDir = req.rootIsDir ? req.root : path.dirname(req.root);
  const parents: string[] = [];
  for (let d = path.dirname(startDir);; d = path.dirname(d)) {
    parents.unshift(d);
    if (path.dirname(d) === d) break;
  }
  for (const d of parents) {
    const layer = await loadGitignore(d);
    if (layer) layers.push(layer);
  }

  const searchFile = async (abs: string): Promise<void> => {
    let bytes: Uint8Array;
    try {
      // Regular files only: a pipe swapped in after the directory listing is never waited on.
      bytes = await readRegularFile(abs, { verb: "search", shown: abs });
    } catch {
      return;
    }
    if (bytes.includes(0)) return;
    const text = new TextDecoder().decode(bytes);
    const fileLines = text.split("\n");
    if (fileLines[fileLines.length - 1] === "") fileLines.pop();
    const hits: number[] = [];
    for (let i = 0; i < fileLines.length; i++) {
      let l = fileLines[i];
      if (l.endsWith("\r")) l = l.slice(0, -1);
      fileLines[i] = l;
      re.lastIndex = 0;
      if (re.test(l)) hits.push(i);
    }
    if (hits.length === 0) return;
    const shown = displayPath(req.workspace, abs);
    const isHit = new Set(hits);
    const include = new Set<number>();
    for (const h of hits) {
      for (
        let k = Math.max(0, h - req.context);
        k <= Math.min(fileLines.length - 1, h + req.context);
        k++
      ) {
        include.add(k);
      }
    }
    for (const k of [...include].sort((a, b) => a - b)) {
      lines.push({ file: shown, line: k + 1, text: fileLines[k], match: isHit.has(k) });
    }
    matches += hits.length;
  };

  const walk = async (dir: string, rel: string, inherited: IgnoreLayer[]): Promise<void> => {
    if (req.signal?.aborted) throw abortError("grep");
    if (matches >= req.maxCollected || Date.now() > deadline) {
      incomplete = true;
      return;
    }
    const own = await loadGitignore(dir);
    const active = own ? [...inherited, own] : inherited;
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (entry.name.startsWith(".")) continue; // hidden, .git included
      const abs = path.join(dir, entry.name);
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (isIgnored(active, abs, true) || !globOk(childRel, true)) continue;
        await walk(abs, childRel, active);
      } else if (entry.isFile()) {
        if (isIgnored(active, abs, false) || !globOk(childRel, false)) continue;
        await searchFile(abs);
        if (matches >= req.maxCollected) {
          incomplete = true;
          return;
        }
      }
    }
  };

  if (req.rootIsDir) await walk(req.root, "", layers);
  else await searchFile(req.root); // an explicitly named file is searched even if ignored
  return { lines, matches, incomplete };
}

// ---------------------------------------------------------------------------------------------
// formatting

function format(
  collected: Collected,
  maxResults: number,
  context: number,
  pattern: string,
  where: string,
): string {
  // Performance (bench/grep_bench.ts): each path's order is computed once, not split again in
  // every comparison of the sort.
  const files = [...new Set(collected.lines.map((l) => l.file))]
    .map((f) => ({ f, parts: f.split("/") }))
    .sort((a, b) => compareParts(a.parts, b.parts));
  const rank = new Map(files.map((x, i) => [x.f, i]));
  const lines = collected.lines.slice().sort((a, b) =>
    rank.get(a.file)! - rank.get(b.file)! || a.line - b.line
  );
  if (collected.matches === 0) {
    return `No matches for ${JSON.stringify(pattern)} in ${where}` +
      (collected.incomplete ? " (search stopped early: time limit)" : "");
  }
  // Keep the first `maxResults` matches and the context lines around them.
  const keptMatches = lines.filter((l) => l.match).slice(0, maxResults);
  const keep = new Set<GrepLine>(keptMatches);
  if (context > 0) {
    const byFile = new Map<string, number[]>();
    for (const m of keptMatches) {
      const a = byFile.get(m.file) ?? [];
      a.push(m.line);
      byFile.set(m.file, a);
    }
    for (const l of lines) {
      if (l.match) continue;
      const hits = byFile.get(l.file);
      if (hits?.some((h) => Math.abs(h - l.line) <= context)) keep.add(l);
    }
  }
  const out: string[] = [];
  const fileCount = new Set(lines.filter((l) => l.match).map((l) => l.file)).size;
  out.push(
    `${collected.matches} matching line${collected.matches === 1 ? "" : "s"} in ${fileCount} ` +
      `file${fileCount === 1 ? "" : "s"}` +
      (keptMatches.length < collected.matches ? ` (showing the first ${keptMatches.length})` : "") +
      (collected.incomplete ? " (search stopped early; narrow path, glob or pattern)" : ""),
  );
  let prev: GrepLine | undefined;
  for (const l of lines) {
    if (!keep.has(l)) continue;
    if (context > 0 && prev && (prev.file !== l.file || l.line !== prev.line + 1)) out.push("--");
    const text = l.text.length > MAX_LINE_CHARS
      ? `${clipChars(l.text, MAX_LINE_CHARS)}… [${l.text.length} chars]`
      : l.text;
    out.push(`${l.file}${l.match ? ":" : "-"}${l.line}${l.match ? ":" : "-"}${text}`);
    prev = l;
  }
  return out.join("\n");
}

/**
 * Registers the `grep` tool: `{pattern, path?, glob?, ignore_case?, max_results?, context?}`
 * (manual §7.1). Output lines are `path:line:text` for matches and `path-line-text` for context
 * lines (`--` between groups), sorted by path then line, at most `max_results` matches (default
 * 100, at most 1,000), lines cut at 500 chars.
 *
 * @param registry The registry to add the tool to.
 * @param workspace Workspace root: the default search root; relative paths resolve against it.
 * @param options Engine choice (`"auto"`, `"rg"`, `"js"`), ripgrep path, timeout (ms).
 *
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerSearchTool } from "@zqagent/core/tools/search";
 * registerSearchTool(new ToolRegistry(), "/srv/workspace", { engine: "js" });
 * ```
 */
export function registerSearchTool(
  registry: ToolRegistry,
  workspace: string,
  options: SearchToolOptions = {},
): void {
  const root = path.resolve(workspace);
  const mode = options.engine ?? "auto";
  let rgPath: string | null | undefined = options.rgPath;
  const findRg = (): string | null => {
    if (mode === "js") return null;
    rgPath ??= which("rg");
    if (!rgPath && mode === "rg") throw new Error("Cannot search: ripgrep (rg) is not on the PATH");
    return rgPath;
  };

  const grep = async (args: Record<string, unknown>, ctx?: ToolContext): Promise<string> => {
    const pattern = stringArg(args, "pattern", "grep");
    if (pattern === "") throw new Error("Cannot search: pattern is empty");
    const abs = resolveToolPath(root, args.path);
    const where = displayPath(root, abs);
    const label = { verb: "search", shown: where };
    const st = await statPath(abs, label);
    if (!st) throw new Error(`Cannot search ${where}: no such file or directory`);
    refuseSpecialFile(st, label);
    const glob = args.glob === undefined || args.glob === null || args.glob === ""
      ? undefined
      : stringArg(args, "glob", "grep");
    const context = intArg(args, "context", 0, 0, 10);
    const maxResults = intArg(args, "max_results", 100, 1, 1000);
    const req: SearchRequest = {
      pattern,
      root: abs,
      rootIsDir: st.isDirectory(),
      glob,
      ignoreCase: boolArg(args, "ignore_case", false),
      context,
      workspace: root,
      maxCollected: options.maxCollected ?? 20_000,
      timeoutMs: options.timeoutMs ?? 30_000,
      signal: ctx?.signal,
    };
    if (req.signal?.aborted) throw abortError("grep");
    let rg = findRg();
    if (rg) {
      const special = await specialGitignoreAbove(
        req.rootIsDir ? req.root : path.dirname(req.root),
      );
      if (special && mode === "rg") {
        throw new Error(
          `Cannot search ${where}: ${special.file} is not a regular file (${special.kind}), ` +
            "and ripgrep would wait on it forever",
        );
      }
      if (special) rg = null; // the JavaScript search skips it
    }
    if (!rg) compileRegex(pattern, req.ignoreCase); // fail early on a bad pattern
    const collected = rg ? await searchWithRg(rg, req) : await searchWithJs(req);
    return format(collected, maxResults, context, pattern, where);
  };

  registry.register(
    grep,
    {
      category: "search",
      riskLevel: "low",
      capabilities: ["search_files"],
      requiresApproval: false,
      riskClass: RiskClass.READ,
    },
    {
      type: "function",
      function: {
        name: "grep",
        description: "Search file contents with a regular expression (ripgrep syntax). " +
          "Skips hidden files, .git, binary files and what .gitignore excludes. Output: " +
          "path:line:text per matching line, sorted by path and line.",
        parameters: {
          type: "object",
          properties: {
            pattern: { type: "string", description: "Regular expression" },
            path: {
              type: "string",
              description: "File or folder to search (default: the workspace root)",
            },
            glob: {
              type: "string",
              description: "Only files matching this glob, e.g. *.ts or src/**/*.{ts,tsx}; " +
                "!pattern excludes",
            },
            ignore_case: { type: "boolean", description: "Case-insensitive (default false)" },
            max_results: {
              type: "integer",
              description: "Most matching lines to show (default 100, max 1000)",
            },
            context: {
              type: "integer",
              description: "Lines of context around each match (default 0, max 10)",
            },
          },
          required: ["pattern"],
        },
      },
    },
  );
}
