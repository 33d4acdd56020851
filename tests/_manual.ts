/**
 * Runs the manual's samples (tests/manual/*.ts) as modules, the way a host would run them: a
 * child process of this runtime (Deno, or Node 22 with `--experimental-transform-types`, as
 * npm/ci.ts runs the suite), a fresh temporary workspace as its current folder, and a local
 * MockOpenAIServer as the model behind `OPENAI_BASE_URL` / `OPENAI_API_KEY` / `OPENAI_MODEL`.
 *
 * @module
 */
import { spawn } from "node:child_process";
import process from "node:process";
import { MockOpenAIServer, type TurnScript } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "./_util.ts";

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
/** Under Node a sample runs with this process's TypeScript flags. */
const nodeFlags = process.execArgv.filter((a) => /^--(experimental|no-warnings)/.test(a));

/**
 * `false` when this runtime can run the TypeScript samples, else the reason to skip: Deno always
 * can; Node only with `--experimental-transform-types` (the samples use enums).
 */
export const sampleSkip: false | string =
  isDeno || nodeFlags.some((a) => a.includes("transform-types"))
    ? false
    : "the samples are TypeScript modules: run with Deno or node --experimental-transform-types";

/** Options of {@link runSample}. */
export interface SampleOptions {
  /** What the model answers (default: nothing; a request then gets a 500). */
  turns?: TurnScript;
  /** Files of the workspace (relative path → content). */
  files?: Record<string, string>;
  /** Called with the workspace before the sample starts (e.g. to make it a git repository). */
  prepare?: (workspace: string) => void;
  /** A workspace to use instead of a new one (not removed afterwards). */
  workspace?: string;
  /** Extra environment variables. */
  env?: Record<string, string>;
}

/** What a sample run produced. */
export interface SampleRun {
  /** Exit code (`null` when killed by a signal). */
  code: number | null;
  /** Standard output. */
  out: string;
  /** Standard error. */
  err: string;
  /** The model server the sample talked to (its `requests` are recorded). */
  server: MockOpenAIServer;
  /** The workspace the sample ran in. */
  workspace: string;
}

const cleanups: (() => Promise<void> | void)[] = [];

/** Closes the servers and removes the workspaces of the samples run so far (use in afterEach). */
export async function cleanUpSamples(): Promise<void> {
  for (const c of cleanups.splice(0).reverse()) await c();
}

/** Runs `tests/manual/<file>`; see the module doc. */
export async function runSample(file: string, options: SampleOptions = {}): Promise<SampleRun> {
  const workspace = options.workspace ?? tempWorkspace(options.files ?? {});
  if (!options.workspace) cleanups.push(() => removeDir(workspace));
  options.prepare?.(workspace);
  const server = new MockOpenAIServer({ turns: options.turns ?? [] });
  await server.start();
  cleanups.push(() => server.close());
  const path = new URL(`./manual/${file}`, import.meta.url).pathname;
  return await new Promise((resolve, reject) => {
    const args = isDeno ? ["run", "-A", path] : [...nodeFlags, path];
    const child = spawn(process.execPath, args, {
      cwd: workspace,
      env: {
        ...process.env,
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "sample-key",
        OPENAI_MODEL: "sample-model",
        NO_COLOR: "1",
        ...options.env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out, err, server, workspace }));
  });
}

/** The last line of a sample's output, parsed as JSON (samples end by printing their result). */
export function lastJson(out: string): Record<string, unknown> {
  return JSON.parse(out.trim().split("\n").at(-1) ?? "");
}
