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
 * ```
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";

const dir = path.dirname(new URL(import.meta.url).pathname);
const filters = process.argv.slice(2);
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
  const r = spawnSync(process.execPath, ["run", "-A", path.join(dir, file)], { stdio: "inherit" });
  if (r.status !== 0) {
    failed++;
    console.error(`${file} failed (exit code ${r.status})`);
  }
}
process.exit(failed === 0 ? 0 : 1);
