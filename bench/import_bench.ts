/**
 * Cold import of `@zqagent/core` against `openai` alone (DESIGN §8: goal <= 1.5x).
 *
 * Each sample is a fresh Deno process (`_import_probe.ts`) that times `await import()` of the
 * package's `mod.ts` or of `openai`; the two alternate so background load hits both alike. The
 * module cache is warm (one unmeasured run of each first): this is the start-up a host pays on
 * every process start, not the one-time download and transpile. Also reported: the whole
 * process wall time (spawn to exit) of each, and of an empty run.
 *
 * Env: `BENCH_QUICK=1` (fewer samples), `IMPORT_BENCH_RUNS`.
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import process from "node:process";
import { ROOT } from "./_deps.ts";
import { fmt, machine, QUICK, summarize, table } from "./_stats.ts";

const RUNS = Number(process.env.IMPORT_BENCH_RUNS ?? (QUICK ? 5 : 21));
const probe = path.join(ROOT, "bench", "_import_probe.ts");

function sample(which: string): { importMs: number; processMs: number } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ["run", "-A", probe, which], {
    cwd: ROOT,
    encoding: "utf8",
  });
  const processMs = performance.now() - t0;
  const line = r.stdout.split("\n").find((l) => l.startsWith("@@"));
  if (r.status !== 0 || !line) {
    throw new Error(`Cannot time the import of ${which}: ${r.stderr || `exit code ${r.status}`}`);
  }
  return { importMs: Number(line.slice(2)), processMs };
}

const names = ["openai", "core", "none"];
for (const n of names) sample(n); // fills the module cache
const got = new Map(names.map((n) => [n, [] as { importMs: number; processMs: number }[]]));
for (let i = 0; i < RUNS; i++) {
  for (const n of i % 2 ? [...names].reverse() : names) got.get(n)!.push(sample(n));
}
const imp = (n: string) => summarize(got.get(n)!.map((s) => s.importMs));
const proc = (n: string) => summarize(got.get(n)!.map((s) => s.processMs));
const ratio = imp("core").median / imp("openai").median;
const procRatio = proc("core").median / proc("openai").median;
console.log(machine());
console.log(table(["module", "import() ms, median (IQR)", "process ms, median (IQR)"], [
  ["openai", fmt(imp("openai")), fmt(proc("openai"))],
  ["@zqagent/core (mod.ts)", fmt(imp("core")), fmt(proc("core"))],
  ["(empty run)", "—", fmt(proc("none"))],
]));
console.log(`core / openai: import() ${ratio.toFixed(2)}, whole process ${procRatio.toFixed(2)}`);
console.log(JSON.stringify({
  bench: "import",
  ratio: +ratio.toFixed(3),
  goal: "import of @zqagent/core <= 1.5x openai alone",
  met: ratio <= 1.5,
  importMs: { openai: +imp("openai").median.toFixed(1), core: +imp("core").median.toFixed(1) },
  processRatio: +procRatio.toFixed(3),
}));
