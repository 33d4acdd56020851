/**
 * Benchmark-only dependencies (the peer libraries the turn benchmark compares against).
 *
 * They must never enter the package's import map (`deno.json` "imports"), so the contenders run
 * with a generated config, `bench/.deps/deno.json` (gitignored): the root import map plus the
 * peers, with its own `node_modules/` and lockfile next to it. Deno installs the peers from npm
 * on first use, like any other npm import.
 *
 * @module
 */
import fs from "node:fs";
import path from "node:path";

/** The peer libraries and the versions benchmarked (npm). */
export const PEERS: Record<string, string> = {
  "ai": "npm:ai@^7.0.173",
  "@ai-sdk/openai-compatible": "npm:@ai-sdk/openai-compatible@^3.0.92",
  "@openai/agents": "npm:@openai/agents@^0.20.0",
};

const benchDir = path.dirname(new URL(import.meta.url).pathname);

/** The project root (the folder holding `deno.json`). */
export const ROOT: string = path.dirname(benchDir);

/**
 * Writes `bench/.deps/deno.json` (root imports + {@link PEERS}) when it is missing or stale.
 *
 * @returns Its absolute path, for `deno run --config`.
 */
export function benchConfig(): string {
  const root = JSON.parse(fs.readFileSync(path.join(ROOT, "deno.json"), "utf8"));
  const config = {
    imports: { ...root.imports, ...PEERS },
    nodeModulesDir: "auto",
    compilerOptions: root.compilerOptions ?? {},
  };
  const dir = path.join(benchDir, ".deps");
  const file = path.join(dir, "deno.json");
  const text = JSON.stringify(config, null, 2) + "\n";
  fs.mkdirSync(dir, { recursive: true });
  if (!fs.existsSync(file) || fs.readFileSync(file, "utf8") !== text) fs.writeFileSync(file, text);
  return file;
}
