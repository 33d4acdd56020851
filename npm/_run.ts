/**
 * Process helpers for the npm build and its checks: run a command (output streamed or
 * captured), find the Node 22 binary (`npx -y node@22`, DESIGN §1), make sure the build-only
 * tools in `npm/tools/node_modules` are installed. Runtime-neutral (`node:child_process`).
 *
 * @module
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { isDeno } from "../_internal/env.ts";

/** The `npm/` folder. */
export const NPM_DIR: string = path.dirname(fileURLToPath(import.meta.url));
/** The project root (where `deno.json` is). */
export const ROOT: string = path.dirname(NPM_DIR);
/** Where the built package is written. */
export const DIST_DIR: string = path.join(NPM_DIR, "dist");
/**
 * The build-only tools' folder (`package.json`, `package-lock.json`, `node_modules`). A
 * subfolder, so Deno never takes that `package.json` for the config of npm/'s own files.
 */
export const TOOLS_DIR: string = path.join(NPM_DIR, "tools");

/** Options of {@link run}. */
export interface RunOptions {
  /** Working directory (default: the project root). */
  cwd?: string;
  /** Extra environment variables (merged over the parent's). */
  env?: Record<string, string>;
  /**
   * `true`: capture stdout and stderr instead of streaming them to ours; `"tee"`: both stream
   * and capture. Default false (stream only).
   */
  capture?: boolean | "tee";
  /**
   * Kill the command's whole process group (SIGKILL) after this many ms; the result's `code` is
   * then `null` and `timedOut` true. Default: no limit.
   */
  timeoutMs?: number;
}

/** How a command ended. */
export interface RunResult {
  /** Exit code (`null` when ended by a signal). */
  code: number | null;
  /** Captured stdout (empty unless `capture`). */
  stdout: string;
  /** Captured stderr (empty unless `capture`). */
  stderr: string;
  /** True when `timeoutMs` ran out and the command was killed. */
  timedOut: boolean;
}

/** Runs a command to its end; never rejects for a non-zero exit (check `code`). */
export function run(
  cmd: string,
  args: string[],
  options: RunOptions = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: options.cwd ?? ROOT,
      env: { ...process.env, ...options.env },
      stdio: options.capture ? ["ignore", "pipe", "pipe"] : ["ignore", "inherit", "inherit"],
      detached: options.timeoutMs !== undefined && process.platform !== "win32",
    });
    let stdout = "";
    let stderr = "";
    const tee = options.capture === "tee";
    child.stdout?.on("data", (d) => {
      stdout += d;
      if (tee) process.stdout.write(d);
    });
    child.stderr?.on("data", (d) => {
      stderr += d;
      if (tee) process.stderr.write(d);
    });
    let timedOut = false;
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => {
      timedOut = true;
      try {
        if (child.pid !== undefined && process.platform !== "win32") {
          process.kill(-child.pid, "SIGKILL");
        } else child.kill("SIGKILL");
      } catch { /* already gone */ }
    }, options.timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`Cannot run ${cmd}: ${error.message}`));
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: timedOut ? null : code, stdout, stderr, timedOut });
    });
  });
}

/** Runs a command and throws "Cannot <what>: exit code N" when it fails. */
export async function mustRun(
  what: string,
  cmd: string,
  args: string[],
  options: RunOptions = {},
): Promise<RunResult> {
  const result = await run(cmd, args, options);
  if (result.code !== 0) {
    const detail = options.capture === true ? `\n${result.stdout}${result.stderr}` : "";
    const how = result.timedOut
      ? `killed after ${options.timeoutMs} ms`
      : `exit code ${result.code}`;
    throw new Error(`Cannot ${what}: ${how}${detail}`);
  }
  return result;
}

let node22: Promise<string> | undefined;

/**
 * Absolute path of a Node 22 binary: `$NODE22` when set, else the one `npx -y node@22` fetches
 * from the npm registry (cached by npx after the first run).
 */
export function node22Binary(): Promise<string> {
  node22 ??= (async () => {
    if (process.env.NODE22) return process.env.NODE22;
    const r = await mustRun("find Node 22 (npx -y node@22)", "npx", [
      "-y",
      "node@22",
      "-p",
      "process.execPath",
    ], { capture: true, cwd: NPM_DIR });
    const bin = r.stdout.trim().split("\n").at(-1)!.trim();
    if (!existsSync(bin)) {
      throw new Error(`Cannot find Node 22: "${bin}" does not exist`);
    }
    return bin;
  })();
  return node22;
}

/**
 * The Deno binary: this process's own when running under Deno, else `deno` on the PATH.
 */
export function denoBinary(): string {
  return isDeno ? process.execPath : "deno";
}

/**
 * Installs the build-only tools (`npm/tools/package.json` devDependencies: tsdown, publint,
 * @arethetypeswrong/cli, typescript, @types/node) with `npm ci` when `npm/tools/node_modules` is
 * missing or older than `npm/tools/package-lock.json`.
 */
export async function ensureBuildTools(): Promise<void> {
  const marker = path.join(TOOLS_DIR, "node_modules", ".package-lock.json");
  const lock = path.join(TOOLS_DIR, "package-lock.json");
  if (
    existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs
  ) return;
  await mustRun("install the npm build tools (npm ci in npm/tools/)", "npm", [
    "ci",
    "--no-audit",
    "--no-fund",
    "--loglevel=error",
  ], { cwd: TOOLS_DIR });
}

/** The JS file of a build tool's command (`bin` in its package.json), to run with Node 22. */
export function toolBin(pkg: string, bin?: string): string {
  const dir = path.join(TOOLS_DIR, "node_modules", pkg);
  const json = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
  const rel = typeof json.bin === "string" ? json.bin : json.bin[bin ?? Object.keys(json.bin)[0]];
  return path.join(dir, rel);
}
