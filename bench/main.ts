/**
 * Benchmark runner (`deno task bench`): runs every `bench/*_bench.ts` file, or only those whose
 * name contains one of the arguments, each in its own Deno process, one after another.
 *
 * A benchmark is a module that does its measurement when run and prints its results; its last
 * line of output should be one JSON object (`{"bench": name, …, "ratio": n}`) so results can be
 * collected. Add a benchmark by adding a file: nothing here needs editing.
 *
 * @example
 * ```sh
 * deno task bench            # all benchmarks
 * deno task bench vcs        # only bench/*vcs*_bench.ts
 * deno task bench --quick    # fewer repeats and smaller inputs (CI: checks they all run)
 * ```
 *
 * `--quick` sets `BENCH_QUICK=1` for every benchmark (and smaller `VCS_BENCH_*` sizes). At the
 * end, the JSON lines are collected into one Markdown table of goals and results.
 *
 * @module
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";

const dir = path.dirname(new URL(import.meta.url).pathname);
const quick = process.argv.includes("--quick");
const filters = process.argv.slice(2).filter((a) => a !== "--quick");
const env: Record<string, string | undefined> = { ...process.env };
if (quick) {
  env.BENCH_QUICK = "1";
  env.VCS_BENCH_FILES ??= "15000"; // its changed files reach folder d148
  env.VCS_BENCH_RUNS ??= "3";
}
/** The last JSON line of each benchmark, for the closing table. */
const results: { file: string; json: Record<string, unknown> | null }[] = [];
const files = fs.readdirSync(dir)
  .filter((f) => f.endsWith("_bench.ts"))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error(`No benchmark matches ${filters.join(", ") || "bench/*_bench.ts"}`);
  process.exit(1);
}
let failed = 0;
for (const file of files) {
  console.log(`\n=== ${file} ===`);
  // Output is shown as it comes and kept, to read the benchmark's last JSON line.
  const child = spawn(process.execPath, ["run", "-A", path.join(dir, file)], {
    stdio: ["ignore", "pipe", "inherit"],
    env,
  });
  let out = "";
  const decoder = new TextDecoder();
  child.stdout.on("data", (d: Uint8Array) => {
    process.stdout.write(d);
    out += decoder.decode(d, { stream: true });
  });
  const status = await new Promise<number | null>((resolve) => child.on("close", resolve));
  const last = out.trim().split("\n").reverse().find((l) => l.startsWith("{"));
  let json: Record<string, unknown> | null = null;
  try {
    json = last ? JSON.parse(last) : null;
  } catch {
    json = null;
  }
  results.push({ file, json });
  if (status !== 0) {
    failed++;
    console.error(`${file} failed (exit code ${status})`);
  }
}
console.log(`\n=== summary${quick ? " (--quick: small inputs, few repeats)" : ""} ===`);
console.log("| benchmark | goal | ratio | met |\n| --- | --- | --- | --- |");
for (const { file, json } of results) {
  const ratio = typeof json?.ratio === "number" ? json.ratio.toFixed(2) : "—";
  const met = json?.skipped
    ? `skipped: ${json.skipped}`
    : json?.met === undefined
    ? "—"
    : json.met
    ? "yes"
    : "no";
  console.log(`| ${json?.bench ?? file} | ${json?.goal ?? "—"} | ${ratio} | ${met} |`);
}
process.exit(failed === 0 ? 0 : 1);
