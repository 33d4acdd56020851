/**
 * The `grep` tool against ripgrep on the same generated tree (DESIGN §8: goal <= 1.2x `rg`).
 *
 * Generates a tree of 20,000 source files (100 folders × 200 files, about 1 KB each) and times,
 * alternating, (a) the `grep` tool as the engine calls it (`registerSearchTool`, which runs `rg
 * --json` and formats the result for the model) and (b) `rg -n` run directly with the same
 * pattern, both as wall time including process start. Two patterns: a sparse one (1% of the
 * files match) and a dense one (one match in every file; the tool stops collecting at its cap
 * and shows the model 100 lines). The tool's pure-JS fallback (no `rg`) is timed once for
 * reference.
 *
 * Env: `BENCH_QUICK=1` (3,000 files, fewer runs), `GREP_BENCH_FILES`, `GREP_BENCH_RUNS`.
 *
 * @module
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { registerSearchTool, ToolRegistry } from "../tools/mod.ts";
import { which } from "../_internal/process.ts";
import { fmt, machine, QUICK, summarize, table } from "./_stats.ts";

const FILES = Number(process.env.GREP_BENCH_FILES ?? (QUICK ? 3000 : 20_000));
const RUNS = Number(process.env.GREP_BENCH_RUNS ?? (QUICK ? 3 : 11));
const PER_DIR = 200;

const rg = which("rg");
if (!rg) {
  console.log("ripgrep (rg) is not on the PATH: nothing to compare against");
  console.log(JSON.stringify({ bench: "grep", skipped: "rg missing", goal: "grep <= 1.2x rg" }));
  process.exit(0);
}

function body(i: number): string {
  const lines = [`// file ${i}`, `export const value${i} = ${i};`];
  for (let k = 0; k < 28; k++) {
    lines.push(`function helper_${i}_${k}(x: number) { return x * ${k}; }`);
  }
  if (i % 100 === 7) lines.push(`const marker = "needle_${i}";`);
  return lines.join("\n") + "\n";
}

function rgTime(cwd: string, pattern: string): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    execFile(rg!, ["-n", "--no-config", pattern, "."], { cwd, maxBuffer: 1 << 28 }, (err) => {
      // exit code 1 = no match; anything else is a failure
      if (err && (err as { code?: number }).code !== 1) reject(err);
      else resolve(performance.now() - t0);
    });
  });
}

const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-grep-bench-")));
try {
  const t0 = performance.now();
  for (let i = 0; i < FILES; i++) {
    const d = path.join(ws, "src", `d${Math.floor(i / PER_DIR)}`);
    if (i % PER_DIR === 0) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(d, `f${i % PER_DIR}.ts`), body(i));
  }
  console.log(`generated ${FILES} files in ${(performance.now() - t0).toFixed(0)} ms`);
  const tools = new ToolRegistry();
  registerSearchTool(tools, ws, { engine: "rg" });
  const grep = tools.get("grep")!.func;
  const js = new ToolRegistry();
  registerSearchTool(js, ws, { engine: "js" });
  const grepJs = js.get("grep")!.func;
  const ctx = { signal: new AbortController().signal };
  const toolTime = async (f: typeof grep, pattern: string): Promise<number> => {
    const t = performance.now();
    const out = await f({ pattern, path: "." }, ctx);
    if (typeof out !== "string" || !out.includes("f")) {
      throw new Error("Cannot benchmark grep: no result");
    }
    return performance.now() - t;
  };
  const patterns = { sparse: "needle_[0-9]+", dense: "export const value" };
  const rows: string[][] = [];
  const ratios: Record<string, number> = {};
  for (const [kind, pattern] of Object.entries(patterns)) {
    await rgTime(ws, pattern); // warm the file-system cache
    await toolTime(grep, pattern);
    const a: number[] = [];
    const b: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      if (r % 2) {
        a.push(await toolTime(grep, pattern));
        b.push(await rgTime(ws, pattern));
      } else {
        b.push(await rgTime(ws, pattern));
        a.push(await toolTime(grep, pattern));
      }
    }
    const ta = summarize(a);
    const tb = summarize(b);
    ratios[kind] = ta.median / tb.median;
    rows.push([kind, fmt(ta), fmt(tb), ratios[kind].toFixed(2)]);
  }
  const jsMs = await toolTime(grepJs, patterns.sparse);
  console.log(machine() + `, ripgrep at ${rg}`);
  console.log(table(["pattern", "grep tool ms (IQR)", "rg -n ms (IQR)", "tool / rg"], rows));
  console.log(`pure-JS fallback, sparse pattern: ${jsMs.toFixed(0)} ms (one run)`);
  const worst = Math.max(...Object.values(ratios));
  console.log(JSON.stringify({
    bench: "grep",
    ratio: +worst.toFixed(3),
    goal: "grep tool <= 1.2x rg",
    met: worst <= 1.2,
    files: FILES,
    ratios: Object.fromEntries(Object.entries(ratios).map(([k, v]) => [k, +v.toFixed(3)])),
    jsFallbackMs: +jsMs.toFixed(0),
  }));
} finally {
  fs.rmSync(ws, { recursive: true, force: true });
}
