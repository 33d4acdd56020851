/**
 * Pure text helpers of the patch tools (private): a line model that keeps each line's own ending
 * and the file's BOM, the `*** Begin Patch` parser, the four-pass line seeker and the chunk
 * applier. No file-system access here; `diff.ts` does the reading and writing.
 *
 * Rules follow the research notes on coding engines, §4 (Codex's `apply_patch`), with the fixes
 * listed in §4.6: `\r` is kept as data and ignored when matching, new lines get the file's own
 * line ending, the BOM and the trailing-newline state are kept.
 *
 * @module
 */

const BOM = "\uFEFF";

/** One line of a text file, without its terminator. */
export interface Line {
  /** The text, without `\r` or `\n`. */
  text: string;
  /** True when the line ended with `\r\n`; `null` when the file decides (new lines, a last line
   * that had no terminator). */
  cr: boolean | null;
}

/** A text file split into lines, with what is needed to write it back the same way. */
export interface TextFile {
  /** The file started with a UTF-8 BOM. */
  bom: boolean;
  /** The file's dominant line ending (CRLF when CRLF breaks outnumber lone LF ones). */
  eol: "\n" | "\r\n";
  /** The lines. */
  lines: Line[];
  /** The last line ended with a line break. */
  finalNewline: boolean;
}

/** Splits a decoded text into a {@link TextFile}. */
export function splitText(text: string): TextFile {
  const bom = text.startsWith(BOM);
  const body = bom ? text.slice(1) : text;
  if (body === "") return { bom, eol: "\n", lines: [], finalNewline: false };
  const raw = body.split("\n");
  const finalNewline = raw[raw.length - 1] === "";
  if (finalNewline) raw.pop();
  let crlf = 0;
  let lf = 0;
  const lines = raw.map((r, i): Line => {
    const last = i === raw.length - 1 && !finalNewline;
    const cr = r.endsWith("\r");
    if (!last) cr ? crlf++ : lf++;
    return { text: cr ? r.slice(0, -1) : r, cr: last && !cr ? null : cr };
  });
  return { bom, eol: crlf > lf ? "\r\n" : "\n", lines, finalNewline };
}

/** Joins a {@link TextFile} back into text with each line's own ending. */
export function joinText(file: TextFile): string {
  const useCr = file.eol === "\r\n";
  let out = file.bom ? BOM : "";
  const n = file.lines.length;
  for (let i = 0; i < n; i++) {
    const line = file.lines[i];
    const cr = line.cr ?? useCr;
    if (i < n - 1 || file.finalNewline) out += line.text + (cr ? "\r\n" : "\n");
    else out += line.text + (line.cr ? "\r" : "");
  }
  return out;
}

/** How a run of lines was found: the strictest pass that matched. */
export type SeekPass = "exact" | "trailing_space" | "trimmed" | "unicode";

/** Passes, strictest first (research notes §4.3). */
const PASSES: ReadonlyArray<[SeekPass, (s: string) => string]> = [
  ["exact", (s) => s],
  ["trailing_space", (s) => s.trimEnd()],
  ["trimmed", (s) => s.trim()],
  ["unicode", (s) => normalizeUnicode(s.trim())],
];

/**
 * Replaces Unicode look-alikes models write for ASCII (dashes, curly quotes, special spaces)
 * with the ASCII character (research notes §4.3, pass 4).
 */
export function normalizeUnicode(s: string): string {
  return s
    .replace(/[\u2010-\u2015\u2212\u2E3A\u2E3B\uFE58\uFE63\uFF0D]/g, "-")
    .replace(/[\u2018\u2019\u201A\u201B\u2032\uFF07]/g, "'")
    .replace(/[\u201C\u201D\u201E\u201F\u2033\uFF02]/g, '"')
    .replace(/[\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000]/g, " ")
    .replace(/\u2026/g, "...");
}

/**
 * Finds `pattern` in `lines` at or after `start` with the four passes (exact, trailing space,
 * trimmed, Unicode-normalised); with `eof`, a match ending at the last line is tried first.
 *
 * @returns The index and the pass that matched, or `null`.
 */
export function seekLines(
  lines: readonly string[],
  pattern: readonly string[],
  start: number,
  eof: boolean,
): { index: number; pass: SeekPass } | null {
  if (pattern.length === 0) return { index: start, pass: "exact" };
  if (pattern.length > lines.length) return null;
  for (const [pass, norm] of PASSES) {
    const want = pattern.map(norm);
    const matchesAt = (i: number): boolean => {
      for (let j = 0; j < want.length; j++) if (norm(lines[i + j]) !== want[j]) return false;
      return true;
    };
    if (eof) {
      const at = lines.length - pattern.length;
      if (at >= start && matchesAt(at)) return { index: at, pass };
    }
    for (let i = Math.max(0, start); i + pattern.length <= lines.length; i++) {
      if (matchesAt(i)) return { index: i, pass };
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// The `*** Begin Patch` envelope (research notes §4.1, §4.2)

/** One line of an update chunk. */
export interface ChunkLine {
  /** `" "` context, `"-"` removed, `"+"` added. */
  op: " " | "-" | "+";
  /** The text (without the op character and without `\r`). */
  text: string;
}

/** One `@@` chunk of an `*** Update File` section. */
export interface Chunk {
  /** `@@ <context>` lines that move the cursor before the chunk is sought. */
  contexts: string[];
  /** The chunk's lines. */
  lines: ChunkLine[];
  /** `*** End of File` followed the chunk: it must match at the end of the file. */
  eof: boolean;
}

/** One file operation of a patch. */
export type PatchOp =
  | { kind: "add"; path: string; lines: string[]; line: number }
  | { kind: "delete"; path: string; line: number }
  | { kind: "update"; path: string; moveTo?: string; chunks: Chunk[]; line: number };

/** A `@@ -1,3 +1,4 @@` header a model copied from unified diffs: no context. */
const UNIFIED_RANGE = /^-\d+(,\d+)?\s+\+\d+(,\d+)?\s*@@/;

/**
 * Parses a patch in the `*** Begin Patch` envelope. Lenient as Codex is: surrounding
 * whitespace, a heredoc wrapper (`<<'EOF'` … `EOF`) and whitespace-padded markers are
 * accepted; CRLF patch text is read as LF.
 *
 * @throws {Error} "Cannot parse patch: …" naming the line that is wrong.
 */
export function parsePatchEnvelope(patch: string): PatchOp[] {
  let lines = patch.trim().split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
  if (
    lines.length >= 4 && /^<<\s*['"]?EOF['"]?$/.test(lines[0].trim()) &&
    lines[lines.length - 1].trim().endsWith("EOF")
  ) {
    lines = lines.slice(1, -1);
  }
  const fail = (n: number, why: string): never => {
    throw new Error(`Cannot parse patch: line ${n}: ${why}`);
  };
  if (lines[0]?.trim() !== "*** Begin Patch") {
    fail(1, "the first line must be '*** Begin Patch'");
  }
  if (lines.length < 2 || lines[lines.length - 1].trim() !== "*** End Patch") {
    fail(lines.length, "the last line must be '*** End Patch'");
  }
  const ops: PatchOp[] = [];
  let i = 1;
  const end = lines.length - 1;
  const header = (line: string, prefix: string): string | null => {
    const t = line.trim();
    return t.startsWith(prefix) ? t.slice(prefix.length).trim() : null;
  };
  while (i < end) {
    const line = lines[i];
    const n = i + 1;
    if (line.trim() === "") {
      i++;
      continue;
    }
    let p: string | null;
    if ((p = header(line, "*** Add File:")) !== null) {
      if (p === "") fail(n, "'*** Add File:' needs a path");
      const body: string[] = [];
      i++;
      while (i < end && lines[i].startsWith("+")) body.push(lines[i++].slice(1));
      ops.push({ kind: "add", path: p, lines: body, line: n });
      continue;
    }
    if ((p = header(line, "*** Delete File:")) !== null) {
      if (p === "") fail(n, "'*** Delete File:' needs a path");
      ops.push({ kind: "delete", path: p, line: n });
      i++;
      continue;
    }
    if ((p = header(line, "*** Update File:")) !== null) {
      if (p === "") fail(n, "'*** Update File:' needs a path");
      i++;
      let moveTo: string | undefined;
      const move = i < end ? header(lines[i], "*** Move to:") : null;
      if (move !== null) {
        if (move === "") fail(i + 1, "'*** Move to:' needs a path");
        moveTo = move;
        i++;
      }
      const chunks: Chunk[] = [];
      let cur: Chunk | null = null;
      const close = (): void => {
        if (!cur) return;
        // Blank lines between a chunk and the next header are spacing, not context.
        while (
          cur.lines.length && cur.lines[cur.lines.length - 1].op === " " &&
          cur.lines[cur.lines.length - 1].text === ""
        ) cur.lines.pop();
        if (cur.lines.length > 0) chunks.push(cur);
        else if (cur.contexts.length > 0) {
          fail(i, `a '@@' chunk of ${p} has no lines`);
        }
        cur = null;
      };
      while (i < end) {
        const l = lines[i];
        const t = l.trim();
        if (t === "*** End of File") {
          if (!cur) fail(i + 1, "'*** End of File' must follow a chunk");
          cur!.eof = true;
          close();
          i++;
          continue;
        }
        if (t.startsWith("***")) break;
        if (t.startsWith("@@")) {
          const ctx = t.slice(2).trim();
          const useful = ctx !== "" && !UNIFIED_RANGE.test(ctx);
          if (cur && (cur as Chunk).lines.length === 0) {
            if (useful) (cur as Chunk).contexts.push(ctx);
          } else {
            close();
            cur = { contexts: useful ? [ctx] : [], lines: [], eof: false };
          }
          i++;
          continue;
        }
        const op = l === "" ? " " : l[0];
        if (op !== " " && op !== "-" && op !== "+") {
          fail(
            i + 1,
            `unexpected line in the update of ${p}: ${JSON.stringify(l.slice(0, 80))}; ` +
              "chunk lines start with ' ' (context), '-' (remove) or '+' (add)",
          );
        }
        if (!cur) cur = { contexts: [], lines: [], eof: false };
        (cur as Chunk).lines.push({ op: op as ChunkLine["op"], text: l.slice(1) });
        i++;
      }
      close();
      if (chunks.length === 0) fail(n, `the update of ${p} is empty (no chunk changes anything)`);
      ops.push({ kind: "update", path: p, moveTo, chunks, line: n });
      continue;
    }
    fail(
      n,
      `${JSON.stringify(line.slice(0, 80))} is not a valid hunk header; expected ` +
        "'*** Add File: <path>', '*** Delete File: <path>' or '*** Update File: <path>'",
    );
  }
  if (ops.length === 0) throw new Error("Cannot parse patch: it changes no file");
  return ops;
}

/** What applying the chunks of one update did. */
export interface ChunkResult {
  /** The updated file. */
  file: TextFile;
  /** Lines added. */
  added: number;
  /** Lines removed. */
  removed: number;
  /** The tolerant passes that were needed (empty when everything matched exactly). */
  passes: SeekPass[];
}

/**
 * Applies update chunks to a file in memory. Context lines keep the file's own text (a chunk
 * found with tolerance never rewrites the context's whitespace); added lines get the file's line
 * ending.
 *
 * @throws {Error} "chunk K of N …: …" when a context line or a chunk's lines are not found.
 */
export function applyChunks(file: TextFile, chunks: readonly Chunk[]): ChunkResult {
  const keys = file.lines.map((l) => l.text);
  const replacements: Array<{ at: number; remove: number; insert: Line[]; seq: number }> = [];
  const passes = new Set<SeekPass>();
  let cursor = 0;
  let added = 0;
  let removed = 0;
  const show = (ls: readonly string[]): string =>
    ls.slice(0, 12).map((l) => `  ${l}`).join("\n") + (ls.length > 12 ? "\n  …" : "");
  chunks.forEach((chunk, k) => {
    const where = `chunk ${k + 1} of ${chunks.length}`;
    let afterContext = false;
    for (const ctx of chunk.contexts) {
      const found = seekLines(keys, [ctx], cursor, false);
      if (!found) {
        throw new Error(`${where}: the '@@ ${ctx}' context line was not found`);
      }
      if (found.pass !== "exact") passes.add(found.pass);
      cursor = found.index + 1;
      afterContext = true;
    }
    const old = chunk.lines.filter((l) => l.op !== "+").map((l) => l.text);
    const neu = chunk.lines.filter((l) => l.op !== "-");
    added += chunk.lines.filter((l) => l.op === "+").length;
    removed += chunk.lines.filter((l) => l.op === "-").length;
    if (old.length === 0) {
      // A pure addition: after the @@ context line, else at the end of the file.
      const at = afterContext ? cursor : keys.length;
      replacements.push({
        at,
        remove: 0,
        insert: neu.map((l) => ({ text: l.text, cr: null })),
        seq: k,
      });
      cursor = at;
      return;
    }
    let ops = chunk.lines;
    let pattern = old;
    let found = seekLines(keys, pattern, cursor, chunk.eof);
    if (!found && pattern[pattern.length - 1] === "") {
      // A trailing empty context line stands for the final newline (Codex does the same).
      let cut = ops.length - 1;
      while (cut >= 0 && ops[cut].op === "+") cut--;
      if (cut >= 0 && ops[cut].text === "" && ops[cut].op === " ") {
        ops = [...ops.slice(0, cut), ...ops.slice(cut + 1)];
        pattern = pattern.slice(0, -1);
        found = seekLines(keys, pattern, cursor, chunk.eof);
      }
    }
    if (!found) {
      throw new Error(
        `${where}: these lines were not found${
          cursor > 0 ? ` after line ${cursor}` : ""
        } (tried exact, trailing-space, trimmed and Unicode-normalised matching):\n${
          show(pattern)
        }`,
      );
    }
    if (found.pass !== "exact") passes.add(found.pass);
    const insert: Line[] = [];
    let at = found.index;
    for (const l of ops) {
      if (l.op === " ") insert.push(file.lines[at++]);
      else if (l.op === "-") at++;
      else insert.push({ text: l.text, cr: null });
    }
    replacements.push({ at: found.index, remove: pattern.length, insert, seq: k });
    cursor = found.index + pattern.length;
  });
  // Bottom-up, so earlier indexes stay valid; at one index the later chunk goes in first.
  const lines = [...file.lines];
  for (const r of [...replacements].sort((a, b) => b.at - a.at || b.seq - a.seq)) {
    lines.splice(r.at, r.remove, ...r.insert);
  }
  // A line with `cr: null` (a new line, or an old last line without a terminator) takes the
  // file's line ending wherever it ends up, so a CRLF file never gets a lone LF.
  return {
    file: { ...file, lines, finalNewline: file.finalNewline || file.lines.length === 0 },
    added,
    removed,
    passes: [...passes],
  };
}
