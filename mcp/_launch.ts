/**
 * Turns a normalised config into what is actually started: `${VAR}` expansion, command splitting
 * (case command-string-split), the child environment (case env-default-merge) and program
 * resolution for error messages (case windows-npx-spawn). Pure functions over explicit inputs so
 * they can be tested for any platform.
 *
 * @module
 */
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { McpConfigError, type McpServerConfig, splitCommandLine } from "./config.ts";

/** Inputs of the launch builder. */
export interface LaunchContext {
  /** The parent environment used for expansion and the child's base environment. */
  env: Record<string, string | undefined>;
  /** Workspace root (`${workspaceFolder}`, default cwd). */
  workspace: string;
  /** Platform rules (default `process.platform`). */
  platform?: string;
  /** Tells whether a path is an existing file (default: `fs.statSync`). */
  isFile?: (p: string) => boolean;
}

/** What a stdio server is started with. */
export interface StdioLaunch {
  /** Program. */
  command: string;
  /** Arguments. */
  args: string[];
  /** Complete child environment. */
  env: Record<string, string>;
  /** Working directory. */
  cwd: string;
  /** The program found on PATH (with PATHEXT on win32), when found. */
  resolved?: string;
  /** True when a whitespace-holding string command was split into words. */
  split: boolean;
  /** Tolerated problems (unset variables, shell operators). */
  warnings: string[];
}

/** The SDK's safe defaults (`getDefaultEnvironment`, SDK 1.32). */
const POSIX_SAFE = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];
const WIN_SAFE = [
  "APPDATA",
  "HOMEDRIVE",
  "HOMEPATH",
  "LOCALAPPDATA",
  "PATH",
  "PROCESSOR_ARCHITECTURE",
  "SYSTEMDRIVE",
  "SYSTEMROOT",
  "TEMP",
  "USERNAME",
  "USERPROFILE",
  "PROGRAMFILES",
];
/** Proxy and CA variables, so children that download packages work behind proxies. */
const NETWORK_VARS = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "all_proxy",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
  "DENO_CERT",
  "NPM_CONFIG_REGISTRY",
  "npm_config_registry",
];

/**
 * Expands `${VAR}`, `${env:VAR}`, `${VAR:-default}` and `${workspaceFolder}` in one string. An
 * unset variable expands to "" and adds a warning naming it. Bare `$VAR` is left as written.
 *
 * @throws {McpConfigError} For `${input:id}` (VS Code prompts cannot be answered by a library).
 */
export function expandVars(
  text: string,
  ctx: Pick<LaunchContext, "env" | "workspace">,
  warnings: string[],
  where: string,
): string {
  return text.replace(/\$\{([^}]*)\}/g, (whole, inner: string) => {
    if (inner === "workspaceFolder") return ctx.workspace;
    if (inner === "userHome") return ctx.env.HOME ?? ctx.env.USERPROFILE ?? "";
    if (inner.startsWith("input:")) {
      throw new McpConfigError(
        `Cannot start ${where}: ${whole} asks for an interactive input, which an embedded ` +
          "engine cannot prompt for; put the value in an environment variable",
      );
    }
    let name = inner.startsWith("env:") ? inner.slice(4) : inner;
    let fallback: string | undefined;
    const dash = name.indexOf(":-");
    if (dash >= 0) {
      fallback = name.slice(dash + 2);
      name = name.slice(0, dash);
    }
    const value = ctx.env[name];
    if (value !== undefined && value !== "") return value;
    if (fallback !== undefined) return fallback;
    warnings.push(`${where}: environment variable ${name} is not set; expanded to ""`);
    return "";
  });
}

function defaultIsFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/**
 * Finds a program on PATH (and PATHEXT on win32). Returns the path, or undefined.
 */
export function findProgram(
  command: string,
  env: Record<string, string | undefined>,
  platform: string,
  isFile: (p: string) => boolean = defaultIsFile,
): string | undefined {
  const win = platform === "win32";
  const p = win ? path.win32 : path.posix;
  const exts = win
    ? (env.PATHEXT ?? ".COM;.EXE;.BAT;.CMD").split(";").filter(Boolean).map((e) => e.toLowerCase())
    : [""];
  const candidates = (base: string) =>
    win && !exts.includes(p.extname(base).toLowerCase())
      ? [base, ...exts.map((e) => base + e)]
      : [base];
  if (command.includes("/") || (win && command.includes("\\"))) {
    return candidates(command).find(isFile);
  }
  const dirs = (env.PATH ?? env.Path ?? "").split(win ? ";" : ":").filter(Boolean);
  for (const dir of dirs) {
    const found = candidates(p.join(dir, command)).find(isFile);
    if (found) return found;
  }
  return undefined;
}

/** The child environment: base (safe list + network variables, or everything), then `env`. */
export function childEnv(
  config: McpServerConfig,
  ctx: LaunchContext,
  warnings: string[],
  inheritAll = false,
): Record<string, string> {
  const platform = ctx.platform ?? process.platform;
  const out: Record<string, string> = {};
  const keys = config.inheritEnv ?? inheritAll
    ? Object.keys(ctx.env)
    : [...(platform === "win32" ? WIN_SAFE : POSIX_SAFE), ...NETWORK_VARS];
  for (const k of keys) {
    const v = ctx.env[k];
    if (typeof v === "string" && !v.startsWith("()")) out[k] = v;
  }
  for (const [k, v] of Object.entries(config.env ?? {})) {
    out[k] = expandVars(v, ctx, warnings, `MCP server "${config.name}" env.${k}`);
  }
  return out;
}

/**
 * Builds the launch of a stdio server (rules of case command-string-split):
 * - array `command`: the first element is the program, the rest go before `args`;
 * - string `command` without whitespace: the program;
 * - string with whitespace: unsplit when the whole (expanded) string is an existing file or `args`
 *   is non-empty; otherwise split with {@link splitCommandLine};
 * - expansion runs per word after splitting, so values with spaces stay one argument.
 *
 * @throws {McpConfigError} When the config is not stdio, has no command, or the command cannot be
 *   split or expanded.
 */
export function resolveStdioLaunch(
  config: McpServerConfig,
  ctx: LaunchContext,
  inheritAll = false,
): StdioLaunch {
  const platform = ctx.platform ?? process.platform;
  const isFile = ctx.isFile ?? defaultIsFile;
  const warnings: string[] = [];
  const where = `MCP server "${config.name}"`;
  if (config.type !== "stdio" || config.command === undefined) {
    throw new McpConfigError(`Cannot start ${where}: it is not a stdio server with a command`);
  }
  const expand = (s: string) => expandVars(s, ctx, warnings, where);
  let words: string[];
  let split = false;
  const extra = config.args ?? [];
  if (Array.isArray(config.command)) {
    words = config.command.map(expand);
  } else if (!/\s/.test(config.command.trim())) {
    words = [expand(config.command.trim())];
  } else {
    const whole = expand(config.command.trim());
    if (isFile(whole) || extra.length > 0) {
      words = [whole];
      if (extra.length > 0 && !isFile(whole) && !findProgram(whole, ctx.env, platform, isFile)) {
        warnings.push(
          `${where}: command ${JSON.stringify(whole)} holds spaces and is not an existing file; ` +
            "it is used unsplit because args are given",
        );
      }
    } else {
      words = splitCommandLine(config.command.trim(), { platform }).map(expand);
      split = true;
    }
  }
  if (words.length === 0 || words[0] === "") {
    throw new McpConfigError(`Cannot start ${where}: the command is empty`);
  }
  if (
    typeof config.command === "string" && /(^|\s)(&&|\|\||[|;<>])(\s|$)|\$\(/.test(config.command)
  ) {
    warnings.push(
      `${where}: the command holds shell operators, but no shell is run; they are passed as ` +
        "arguments",
    );
  }
  const args = [...words.slice(1), ...extra.map(expand)];
  const cwd = config.cwd ? path.resolve(ctx.workspace, expand(config.cwd)) : ctx.workspace;
  const env = childEnv(config, ctx, warnings, inheritAll);
  const resolved = findProgram(words[0], { ...ctx.env, ...env }, platform, isFile);
  return { command: words[0], args, env, cwd, resolved, split, warnings };
}
