/**
 * Helpers of the examples' tests (not part of the package): run an example as a real process
 * (Deno, or Node 22 with --experimental-transform-types) with its provider pointed at a local
 * MockOpenAIServer.
 *
 * @module
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import process from "node:process";
import { fileURLToPath } from "node:url";

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const nodeFlags = process.execArgv.filter((a) => /^--(experimental|no-warnings)/.test(a));

/** A skip reason when examples (TypeScript) cannot be run as processes here, else false. */
export const skipExamples: string | false = isDeno ||
    nodeFlags.some((a) => a.includes("transform-types"))
  ? false
  : "the examples are TypeScript: run with Deno or node --experimental-transform-types";

/** Absolute path of an example file. */
export function examplePath(rel: string): string {
  return fileURLToPath(new URL(`./${rel}`, import.meta.url));
}

/** Spawns an example with this runtime, the model env pointing at `baseURL`. */
export function spawnExample(
  rel: string,
  opts: { cwd: string; baseURL: string; args?: string[]; env?: Record<string, string> },
): ChildProcessWithoutNullStreams {
  const file = examplePath(rel);
  const args = isDeno ? ["run", "-A", file] : [...nodeFlags, file];
  return spawn(process.execPath, [...args, ...(opts.args ?? [])], {
    cwd: opts.cwd,
    env: {
      ...process.env,
      OPENAI_BASE_URL: opts.baseURL,
      OPENAI_API_KEY: "example-key",
      OPENAI_MODEL: "example-model",
      NO_COLOR: "1",
      ...opts.env,
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
}

/** Writes `input` to the child's stdin (then closes it) and collects its output and exit code. */
export function finish(
  child: ChildProcessWithoutNullStreams,
  input = "",
): Promise<{ code: number | null; out: string; err: string }> {
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  child.stdin.end(input);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out, err }));
  });
}
