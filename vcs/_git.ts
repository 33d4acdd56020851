/**
 * Private git runner of the VCS subsystem: a clean environment (no inherited `GIT_DIR`,
 * `GIT_INDEX_FILE`, config injection…), a fixed identity so commits work without user config,
 * and `-c` overrides that keep bytes exact and stop hooks such as fsmonitor from running.
 *
 * Every call goes through `spawnProcess` (`_internal/process.ts`), so no subsystem touches
 * `Deno.*` and the same code runs on Node.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import { envAll } from "../_internal/env.ts";
import { spawnProcess } from "../_internal/process.ts";
import { VcsError } from "./errors.ts";

/** Config overrides passed to every git call (see research notes, OpenCode/Gemini setup). */
export const GIT_CONFIG_ARGS: readonly string[] = [
  "-c",
  "core.fsmonitor=false",
  "-c",
  "core.autocrlf=false",
  "-c",
  "core.safecrlf=false",
  "-c",
  "core.quotepath=false",
  "-c",
  "core.splitIndex=false",
  "-c",
  "commit.gpgsign=false",
  "-c",
  "gc.auto=0",
];

/** Inherited variables that would redirect or reconfigure git; everything else `GIT_*` too. */
const KEEP_GIT_VARS = new Set([
  "GIT_EXEC_PATH",
  "GIT_CONFIG_GLOBAL",
  "GIT_CONFIG_SYSTEM",
  "GIT_CONFIG_NOSYSTEM",
  "GIT_CEILING_DIRECTORIES",
  "GIT_DISCOVERY_ACROSS_FILESYSTEM",
]);

/**
 * The environment of a git child: the process environment without inherited `GIT_*` variables
 * (except a few harmless ones), plus a fixed author/committer and `extra`.
 */
export function gitEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env = envAll();
  for (const key of Object.keys(env)) {
    if (key.startsWith("GIT_") && !KEEP_GIT_VARS.has(key)) delete env[key];
  }
  return {
    ...env,
    GIT_TERMINAL_PROMPT: "0",
    GIT_AUTHOR_NAME: "zqagent",
    GIT_AUTHOR_EMAIL: "agent@zqagent.invalid",
    GIT_COMMITTER_NAME: "zqagent",
    GIT_COMMITTER_EMAIL: "agent@zqagent.invalid",
    ...extra,
  };
}

/** Options of {@link Git.run}. */
export interface GitRunOptions {
  /** Text written to stdin. */
  stdin?: string;
  /** Extra environment variables for this call. */
  env?: Record<string, string>;
  /** Exit codes that count as success (default `[0]`). */
  okCodes?: number[];
}

/** Result of a git call. */
export interface GitResult {
  /** Exit code. */
  code: number;
  /** Standard output (UTF-8). */
  stdout: string;
  /** Raw standard output bytes (only when asked for). */
  bytes?: Uint8Array;
}

const MAX_TEXT_BYTES = 256 * 1024 * 1024;

/** Runs git for one repository (git dir + work tree + index file), from `cwd`. */
export class Git {
  readonly #bin: string;
  readonly #cwd: string;
  readonly #env: Record<string, string>;

  /**
   * @param bin The git executable.
   * @param options `cwd` (the workspace) and `env` (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE).
   */
  constructor(bin: string, options: { cwd: string; env: Record<string, string> }) {
    this.#bin = bin;
    this.#cwd = options.cwd;
    this.#env = gitEnv(options.env);
  }

  /**
   * Runs `git <args>`; resolves with its output.
   *
   * @throws {VcsError} `git_failed` when git exits with a code outside `okCodes` or cannot start.
   */
  async run(args: string[], options: GitRunOptions = {}): Promise<GitResult> {
    return await this.#exec(args, options, false);
  }

  /** Like {@link Git.run} but also returns stdout as raw bytes (for file contents). */
  async runBytes(args: string[], options: GitRunOptions = {}): Promise<GitResult> {
    return await this.#exec(args, options, true);
  }

  async #exec(args: string[], options: GitRunOptions, raw: boolean): Promise<GitResult> {
    const chunks: Uint8Array[] = [];
    const proc = spawnProcess(this.#bin, [...GIT_CONFIG_ARGS, ...args], {
      cwd: this.#cwd,
      env: options.env ? { ...this.#env, ...options.env } : this.#env,
      stdin: options.stdin,
      maxOutputBytes: raw ? 64 * 1024 : MAX_TEXT_BYTES,
      onStdout: raw ? (chunk) => chunks.push(chunk) : undefined,
    });
    const r = await proc.result;
    const ok = options.okCodes ?? [0];
    if (r.spawnError || r.exitCode === null || !ok.includes(r.exitCode)) {
      const why = r.spawnError?.message ?? (r.stderr.trim() || `exit code ${r.exitCode}`);
      throw new VcsError(`Cannot run git ${args[0]}: ${why}`, "git_failed");
    }
    if (!raw && r.truncated) {
      throw new VcsError(`Cannot run git ${args[0]}: its output exceeds 256 MiB`, "git_failed");
    }
    let bytes: Uint8Array | undefined;
    if (raw) {
      let size = 0;
      for (const c of chunks) size += c.byteLength;
      bytes = new Uint8Array(size);
      let at = 0;
      for (const c of chunks) {
        bytes.set(c, at);
        at += c.byteLength;
      }
    }
    return { code: r.exitCode, stdout: raw ? "" : r.stdout, bytes };
  }
}

/**
 * Runs git synchronously (only for the one-off repository detection of `resolveVcsPlan`, which
 * the manual calls without `await`). Returns `null` when git fails.
 */
export function gitSync(bin: string, args: string[], cwd: string): string | null {
  try {
    return execFileSync(bin, [...GIT_CONFIG_ARGS, ...args], {
      cwd,
      env: gitEnv(),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 30_000,
    });
  } catch {
    return null;
  }
}

/** Splits NUL-separated git output into its non-empty entries. */
export function splitNul(text: string): string[] {
  return text.split("\0").filter((s) => s !== "");
}
