/**
 * Git tools (manual §7.1, "Git"; risk class READ): `git_log`, `git_status`, `git_diff`.
 *
 * They run the real `git` program (through the package's process helpers: own process group,
 * bounded capture, timeout, interruption kills the tree) with the workspace as the working
 * directory, and never change anything: no optional locks (`GIT_OPTIONAL_LOCKS=0`, so even
 * `git status` leaves the index alone), no pager, no credential prompt, and repository settings
 * that could run programs on a read (`core.fsmonitor`, external diff drivers, text conversion
 * filters) are switched off, since these tools are auto-allowed. Output is bounded (default
 * 30,000 chars, head kept, the cut stated). Outside a repository each tool says so plainly.
 *
 * @example Register the git tools
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerGitTools } from "@zqagent/core/tools/git";
 * const registry = new ToolRegistry();
 * registerGitTools(registry, "/srv/workspace");
 * ```
 *
 * @module
 */
import path from "node:path";
import { envAll } from "../_internal/env.ts";
import { spawnProcess, which } from "../_internal/process.ts";
import { RiskClass, type ToolContext, type ToolMetadata, type ToolRegistry } from "./registry.ts";
import { abortError, boolArg, clipChars, intArg, resolveToolPath } from "./_common.ts";

/** Options of {@link registerGitTools}. */
export interface GitToolsOptions {
  /** Most chars of git output one result holds (default 30,000). */
  maxOutputChars?: number;
  /** Time limit of one git command in ms (default 30,000). */
  timeoutMs?: number;
  /** The git program (default: `git` found on the PATH). */
  gitPath?: string;
}

/** Default of {@link GitToolsOptions.maxOutputChars}. */
export const DEFAULT_GIT_OUTPUT_CHARS = 30_000;

const READ_META: ToolMetadata = {
  category: "git",
  riskLevel: "low",
  capabilities: ["read_git"],
  requiresApproval: false,
  riskClass: RiskClass.READ,
};

/** Settings that keep a read-only git command from running repository-configured programs. */
const SAFE_CONFIG = [
  "-c",
  "core.fsmonitor=false",
  "-c",
  "core.pager=cat",
  "-c",
  "core.quotePath=false",
  "-c",
  "diff.external=",
  "-c",
  "color.ui=false",
];

interface GitRun {
  stdout: string;
  stderr: string;
  exitCode: number | null;
}

class GitRunner {
  #workspace: string;
  #options: GitToolsOptions;

  constructor(workspace: string, options: GitToolsOptions) {
    this.#workspace = workspace;
    this.#options = options;
  }

  get workspace(): string {
    return this.#workspace;
  }

  async run(tool: string, args: string[], ctx?: ToolContext): Promise<GitRun> {
    const git = this.#options.gitPath ?? which("git");
    if (!git) throw new Error(`Cannot run ${tool}: git is not installed (not found on the PATH)`);
    const env = envAll();
    Object.assign(env, {
      GIT_OPTIONAL_LOCKS: "0",
      GIT_TERMINAL_PROMPT: "0",
      GIT_PAGER: "cat",
      PAGER: "cat",
      LC_ALL: "C",
      LANGUAGE: "C",
    });
    const child = spawnProcess(git, ["--no-pager", ...SAFE_CONFIG, ...args], {
      cwd: this.#workspace,
      env,
      timeoutMs: this.#options.timeoutMs ?? 30_000,
      signal: ctx?.signal,
      maxOutputBytes: 4 * 1024 * 1024,
    });
    const r = await child.result;
    if (r.aborted) throw abortError(tool);
    if (r.spawnError) {
      throw new Error(`Cannot run ${tool}: git could not start (${r.spawnError.message})`);
    }
    if (r.timedOut) {
      throw new Error(
        `Cannot run ${tool}: git took longer than ${
          this.#options.timeoutMs ?? 30_000
        } ms; narrow it with path`,
      );
    }
    if (/not a git repository/i.test(r.stderr)) {
      throw new Error(
        `Cannot run ${tool}: the workspace (${this.#workspace}) is not inside a git repository`,
      );
    }
    return { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode };
  }

  bound(text: string, hint: string): string {
    const max = this.#options.maxOutputChars ?? DEFAULT_GIT_OUTPUT_CHARS;
    if (text.length <= max) return text;
    const head = clipChars(text, max);
    const cut = head.lastIndexOf("\n") > max / 2 ? head.slice(0, head.lastIndexOf("\n")) : head;
    return `${cut}\n[output cut: ${cut.length} of ${text.length} chars shown; ${hint}]`;
  }

  fail(tool: string, r: GitRun): never {
    const why = r.stderr.trim().split("\n").slice(0, 5).join("\n") || `exit code ${r.exitCode}`;
    throw new Error(`Cannot run ${tool}: git failed: ${why}`);
  }

  /** `-- <path>` when a path was given (resolved against the workspace). */
  pathspec(args: Record<string, unknown>): string[] {
    if (args.path === undefined || args.path === null || args.path === "") return [];
    const abs = resolveToolPath(this.#workspace, args.path);
    const rel = path.relative(this.#workspace, abs);
    return ["--", rel === "" ? "." : rel];
  }
}

/** A revision argument the model may pass: never an option, no control characters. */
function revisionArg(args: Record<string, unknown>, name: string, tool: string): string[] {
  const v = args[name];
  if (v === undefined || v === null || v === "") return [];
  if (typeof v !== "string") throw new Error(`Cannot run ${tool}: ${name} must be a string`);
  // deno-lint-ignore no-control-regex
  if (v.startsWith("-") || /[\s\0-\x1f]/.test(v) || v.length > 200) {
    throw new Error(
      `Cannot run ${tool}: ${name} ${JSON.stringify(v.slice(0, 60))} is not a revision ` +
        "(it must not start with '-' or contain spaces)",
    );
  }
  return [v];
}

async function gitStatus(
  git: GitRunner,
  args: Record<string, unknown>,
  ctx?: ToolContext,
): Promise<string> {
  const tool = "git_status";
  const r = await git.run(
    tool,
    ["status", "--short", "--branch", "--untracked-files=normal", ...git.pathspec(args)],
    ctx,
  );
  if (r.exitCode !== 0) git.fail(tool, r);
  const lines = r.stdout.replace(/\n$/, "").split("\n");
  const branch = lines[0]?.startsWith("## ") ? lines.shift()!.slice(3) : "";
  const body = lines.filter((l) => l !== "");
  const head = branch ? `Branch: ${branch}` : "";
  if (body.length === 0) return `${head}${head ? "\n" : ""}Working tree clean.`;
  return git.bound(
    `${head}${head ? "\n" : ""}${body.join("\n")}\n` +
      "(XY codes: first column staged, second unstaged; M modified, A added, D deleted, " +
      "R renamed, ?? untracked)",
    "pass path to see one folder",
  );
}

async function gitLog(
  git: GitRunner,
  args: Record<string, unknown>,
  ctx?: ToolContext,
): Promise<string> {
  const tool = "git_log";
  const count = intArg(args, "max_count", 20, 1, 500);
  const rev = revisionArg(args, "ref", tool);
  const r = await git.run(
    tool,
    [
      "log",
      `--max-count=${count}`,
      "--date=short",
      "--format=%h %ad %an: %s",
      ...rev,
      ...git.pathspec(args),
    ],
    ctx,
  );
  if (r.exitCode !== 0) {
    if (/does not have any commits yet|bad default revision 'HEAD'/i.test(r.stderr)) {
      return "No commits yet.";
    }
    git.fail(tool, r);
  }
  const out = r.stdout.trimEnd();
  if (out === "") return "No commits match.";
  return git.bound(out, "lower max_count or pass path");
}

async function gitDiff(
  git: GitRunner,
  args: Record<string, unknown>,
  ctx?: ToolContext,
): Promise<string> {
  const tool = "git_diff";
  const staged = boolArg(args, "staged", false);
  const stat = boolArg(args, "stat", false);
  const rev = revisionArg(args, "ref", tool);
  const r = await git.run(
    tool,
    [
      "diff",
      "--no-ext-diff",
      "--no-textconv",
      "--no-color",
      ...(staged ? ["--cached"] : []),
      ...(stat ? ["--stat"] : []),
      ...rev,
      ...git.pathspec(args),
    ],
    ctx,
  );
  if (r.exitCode !== 0) git.fail(tool, r);
  const out = r.stdout.trimEnd();
  if (out === "") {
    return rev.length
      ? `No differences against ${rev[0]}.`
      : staged
      ? "No staged changes."
      : "No unstaged changes (pass staged=true for staged ones).";
  }
  return git.bound(out, "pass path to see one file, or stat=true for a summary");
}

/**
 * Registers `git_log`, `git_status` and `git_diff` (manual §7.1; risk class READ, no approval).
 *
 * @param registry The registry to add the tools to.
 * @param workspace Workspace root; git runs there and `path` arguments resolve against it.
 * @param options Output bound (chars), time limit (ms) and the git program.
 *
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerGitTools } from "@zqagent/core/tools/git";
 * const registry = new ToolRegistry();
 * registerGitTools(registry, "/srv/workspace", { maxOutputChars: 10_000 });
 * const status = await registry.get("git_status")!.func({});
 * ```
 */
export function registerGitTools(
  registry: ToolRegistry,
  workspace: string,
  options: GitToolsOptions = {},
): void {
  const git = new GitRunner(path.resolve(workspace), options);
  const pathProp = {
    type: "string",
    description: "Limit to this file or folder (workspace-relative)",
  };
  registry.register(
    (args, ctx) => gitStatus(git, args, ctx),
    { ...READ_META, capabilities: ["git_status"] },
    {
      type: "function",
      function: {
        name: "git_status",
        description: "Show the branch and the changed, staged and untracked files of the " +
          "workspace's git repository (read-only).",
        parameters: { type: "object", properties: { path: pathProp } },
      },
    },
  );
  registry.register(
    (args, ctx) => gitLog(git, args, ctx),
    { ...READ_META, capabilities: ["git_log"] },
    {
      type: "function",
      function: {
        name: "git_log",
        description: "Show recent commits (hash, date, author: subject), newest first " +
          "(read-only).",
        parameters: {
          type: "object",
          properties: {
            max_count: { type: "integer", description: "Most commits to show (default 20)" },
            ref: { type: "string", description: "Branch, tag or commit to start from" },
            path: pathProp,
          },
        },
      },
    },
  );
  registry.register(
    (args, ctx) => gitDiff(git, args, ctx),
    { ...READ_META, capabilities: ["git_diff"] },
    {
      type: "function",
      function: {
        name: "git_diff",
        description: "Show changes as a unified diff (read-only): unstaged changes by default, " +
          "staged ones with staged=true, or the working tree against a ref.",
        parameters: {
          type: "object",
          properties: {
            staged: { type: "boolean", description: "Show staged changes (default false)" },
            ref: { type: "string", description: "Compare against this commit, branch or tag" },
            stat: { type: "boolean", description: "Only a per-file summary (default false)" },
            path: pathProp,
          },
        },
      },
    },
  );
}
