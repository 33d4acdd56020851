/**
 * The OS sandbox for shell commands (manual §8.4, §8.6; DESIGN §5): the permission engine
 * decides whether a command runs, the sandbox limits what it can do once it runs.
 *
 * - **Linux**: bubblewrap (`bwrap`). The whole file system is mounted read-only, the workspace and
 *   `extraWritable` are bound writable, `/tmp` is a private tmpfs, and inside the writable roots
 *   every `.git/hooks`, `.git/config` and `.git` file (nested repositories too) and the engine's
 *   `.agent/` folder are bound read-only again (hooks and config run later outside the sandbox:
 *   research coding-engines.md §2.6). `hidePaths` and the user's credential folders (`~/.ssh`,
 *   `~/.aws`, …) are covered by an empty tmpfs (files by `/dev/null`), with the writable roots
 *   inside them bound back, so reads of other tenants' folders fail. Commands get a new session, a new PID namespace, no
 *   capabilities (`--cap-drop ALL`, which matters when the host runs as root), die with the
 *   engine, and have no network unless `network: true`. Whether bwrap can create namespaces
 *   (containers often forbid it) is probed once per program and cached, with the reason.
 * - **macOS**: `/usr/bin/sandbox-exec` with a generated profile that denies `file-write*` except
 *   in the workspace, the temp folders and `extraWritable`; paths are passed as `-D` parameters,
 *   never spliced into the profile text (research coding-engines.md §2.3).
 * - **Windows** and anything else: not enforced (`enforced: false`), path heuristics only.
 *
 * bubblewrap and sandbox-exec are the platforms' own tools for the job; no npm package wraps them
 * better than the few argument lists built here.
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { hasPermissionModel, mayRead, queryGrant } from "../_internal/deno_permissions.ts";
import { envString, isDeno } from "../_internal/env.ts";
import { which } from "../_internal/process.ts";
import { isInside } from "./path_guard.ts";

/** `"auto"` (use a sandbox when one works), `"off"`, `"required"` (fail without one). */
export type SandboxMode = "auto" | "off" | "required";

/** Sandbox options (manual §8.4: `sandbox: { mode, extraWritable, ... }`). */
export interface SandboxOptions {
  /** `"auto"` (default), `"off"` or `"required"` (fail at engine creation without a sandbox). */
  mode?: SandboxMode;
  /** Extra writable paths for sandboxed commands (absolute, or relative to the workspace). */
  extraWritable?: string[];
  /** Let sandboxed commands use the network. Default `false`. */
  network?: boolean;
  /**
   * Folders (or files) sandboxed commands must not see (bubblewrap only): each folder is
   * replaced by an empty tmpfs and each file by `/dev/null`. The workspace and `extraWritable`
   * paths inside a hidden folder are bound back, so they stay visible and writable. Absolute,
   * or relative to the workspace; missing paths are skipped when a command starts. A
   * multi-tenant host passes its data folder, so one tenant's commands cannot read another
   * tenant's workspace. Default `[]`.
   */
  hidePaths?: string[];
  /**
   * Also hide the engine user's credential folders and files ({@link homeSecretPaths}:
   * `~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.config/gcloud`, `~/.docker`, `~/.kube`, `~/.netrc`)
   * that exist and do not contain the workspace (bubblewrap only). Default `true`; set `false`
   * when commands need them (e.g. `git push` over SSH with `network: true`).
   */
  hideHomeSecrets?: boolean;
  /**
   * Deno only: run the file tools in a child `deno run` process whose `--allow-read` and
   * `--allow-write` cover only the workspace (DESIGN §5). Default `false`.
   */
  deno?: boolean;
}

/** What OS sandbox shell commands run in (manual §8.4; `engine.permissions.sandbox`). */
export interface SandboxStatus {
  /** The configured mode. */
  mode: SandboxMode;
  /** The sandbox in use: bubblewrap (Linux), `sandbox-exec` (macOS), or none. */
  kind: "bwrap" | "sandbox-exec" | "none";
  /** True only when commands really run confined (writes limited to the writable roots). */
  enforced: boolean;
  /** Why it is or is not enforced, for people. */
  reason?: string;
  /** True when sandboxed commands may use the network. */
  network?: boolean;
  /** Extra writable roots (absolute real paths), besides the workspace and temp folders. */
  extraWritable?: string[];
  /** Hidden paths from {@link SandboxOptions.hidePaths} (absolute real paths). */
  hidePaths?: string[];
  /** False when {@link SandboxOptions.hideHomeSecrets} is off; otherwise they are hidden. */
  hideHomeSecrets?: boolean;
  /** The sandbox program (`bwrap`'s path or name, `/usr/bin/sandbox-exec`). */
  program?: string;
  /** True when the file tools run in a child `deno run` process (Deno only). */
  deno?: boolean;
}

/** Thrown by {@link resolveSandbox} in `"required"` mode when no sandbox can be enforced. */
export class SandboxUnavailableError extends Error {
  /** Always `"SandboxUnavailableError"`. */
  override name = "SandboxUnavailableError";
  /** The status that was found (not enforced). */
  readonly status: SandboxStatus;
  /** Creates the error. */
  constructor(message: string, status: SandboxStatus) {
    super(message);
    this.status = status;
  }
}

/** Where and how {@link resolveSandbox} looks (mostly for tests). */
export interface ResolveSandboxContext {
  /** Workspace root; relative `extraWritable` entries resolve against it. Default: the cwd. */
  workspace?: string;
  /** Platform to resolve for (default `process.platform`). */
  platform?: string;
  /** The bwrap program to use instead of looking it up on the PATH (Linux). */
  bwrapPath?: string;
}

/** A program invocation, before or after wrapping. */
export interface SandboxCommand {
  /** Program to run (absolute path or a name looked up on the PATH). */
  program: string;
  /** Its arguments. */
  args: string[];
  /** Working directory. */
  cwd: string;
  /** Full environment. */
  env: Record<string, string>;
}

/** Options of {@link wrapWithSandbox}. */
export interface WrapOptions {
  /** The workspace root: writable inside the sandbox (required). */
  workspace: string;
}

/** Options of {@link buildBwrapArgs}. */
export interface BwrapArgsOptions {
  /** The workspace root: bound writable (required). */
  workspace: string;
  /** Extra writable paths (absolute). Default none. */
  extraWritable?: string[];
  /** Keep the host network. Default `false` (`--unshare-net`). */
  network?: boolean;
  /** Working directory inside the sandbox (`--chdir`). Default: none given. */
  cwd?: string;
  /**
   * Paths re-bound read-only after the writable binds. Default: {@link sandboxProtectedPaths}
   * of the writable roots (scans for `.git` folders and files).
   */
  readOnly?: string[];
  /**
   * Folders bound onto themselves (writable) so they cannot be renamed or replaced. Default:
   * {@link sandboxProtectedPaths} of the writable roots; `[]` when `readOnly` is given.
   */
  pinned?: string[];
  /**
   * Existing folders and files to hide (absolute): a folder gets an empty `--tmpfs`, a file a
   * `--ro-bind /dev/null`; writable roots inside them are bound back. A path equal to a
   * writable root is ignored, and paths under `/tmp` outside the writable roots need nothing
   * (the sandbox's `/tmp` is private). Missing paths are skipped. Default none.
   */
  hidden?: string[];
}

/** Options of {@link buildMacProfile}. */
export interface MacProfileOptions {
  /** The workspace root: writable (required). */
  workspace: string;
  /** Extra writable paths (absolute). Default none. */
  extraWritable?: string[];
  /** Temp folders made writable. Default: `/private/tmp`, `/private/var/folders` and `$TMPDIR`. */
  tempDirs?: string[];
  /** Allow network access. Default `false`. */
  network?: boolean;
  /**
   * Paths inside the writable roots that stay read-only. Default: {@link sandboxProtectedPaths}
   * of the workspace and `extraWritable`.
   */
  readOnly?: string[];
  /**
   * Folders that may be written inside but not renamed, deleted or replaced themselves.
   * Default: {@link sandboxProtectedPaths}; `[]` when `readOnly` is given.
   */
  pinned?: string[];
}

/** A generated `sandbox-exec` profile and its parameters. */
export interface MacProfile {
  /** The profile text (SBPL); paths appear only as `(param "…")` references. */
  profile: string;
  /** Parameter values, passed as `-D NAME=value`. */
  params: Record<string, string>;
  /** The `sandbox-exec` arguments before the command: `-p <profile> -D NAME=value …`. */
  args: string[];
}

const MAC_SANDBOX_EXEC = "/usr/bin/sandbox-exec";
const SCAN_MAX_DEPTH = 8;
const SCAN_MAX_DIRS = 20_000;
const SCAN_SKIP = new Set(["node_modules", ".agent"]);

/** Probe results per bwrap program: detection happens once per process (manual §8.4). */
const bwrapProbes = new Map<string, { ok: boolean; reason: string }>();
let macProbe: { ok: boolean; reason: string } | undefined;

function realOrResolved(p: string): string {
  const abs = path.resolve(p);
  try {
    return fs.realpathSync(abs);
  } catch {
    return abs;
  }
}

/**
 * Finds the sandbox this machine can enforce, once per program (the bwrap probe is cached for
 * the life of the process; a failing probe is not retried per command).
 *
 * - `mode: "off"`: no sandbox.
 * - Linux: `bwrap` on the PATH (or `context.bwrapPath`) that can create its namespaces;
 *   otherwise not enforced, with bwrap's own error as the reason.
 * - macOS: `/usr/bin/sandbox-exec`, probed once.
 * - Windows and others: not enforced (path heuristics only, not a security boundary).
 * - Under Deno, a sandbox program the process may not run (`--allow-run`) counts as missing.
 *
 * @param options The host's sandbox options (default `{ mode: "auto" }`).
 * @param context Workspace for relative `extraWritable`, platform and bwrap path overrides.
 * @returns The status; `enforced` says whether commands really run confined.
 * @throws {SandboxUnavailableError} In `"required"` mode when no sandbox can be enforced
 *   (or `deno: true` is asked for outside Deno).
 * @throws {TypeError} When `mode` is not auto, off or required, or `extraWritable` is not an
 *   array of strings.
 *
 * @example
 * ```ts
 * import { describeSandbox, resolveSandbox } from "@zqagent/core/permissions";
 * const status = resolveSandbox({ mode: "auto", extraWritable: ["/data/cache"] });
 * console.log(describeSandbox(status));
 * ```
 */
export function resolveSandbox(
  options: SandboxOptions = {},
  context: ResolveSandboxContext = {},
): SandboxStatus {
  const mode = options.mode ?? "auto";
  if (!["auto", "off", "required"].includes(mode)) {
    throw new TypeError(
      `Cannot resolve sandbox: mode ${JSON.stringify(mode)} is not auto, off or required`,
    );
  }
  const extra = options.extraWritable ?? [];
  if (!Array.isArray(extra) || extra.some((p) => typeof p !== "string" || p === "")) {
    throw new TypeError("Cannot resolve sandbox: extraWritable must be an array of paths");
  }
  const hide = options.hidePaths ?? [];
  if (!Array.isArray(hide) || hide.some((p) => typeof p !== "string" || p === "")) {
    throw new TypeError("Cannot resolve sandbox: hidePaths must be an array of paths");
  }
  const base = context.workspace ?? process.cwd();
  const common: CommonStatus = {
    mode,
    network: options.network === true,
    extraWritable: extra.map((p) => realOrResolved(path.resolve(base, p))),
    deno: options.deno === true && isDeno,
  };
  if (hide.length > 0) common.hidePaths = hide.map((p) => realOrResolved(path.resolve(base, p)));
  if (options.hideHomeSecrets === false) common.hideHomeSecrets = false;
  const platform = context.platform ?? process.platform;
  let status: SandboxStatus;
  if (mode === "off") {
    status = { ...common, kind: "none", enforced: false, reason: "The sandbox is off" };
  } else if (platform === "linux") {
    status = resolveLinux(common, context.bwrapPath);
  } else if (platform === "darwin") {
    status = resolveMac(common);
  } else if (platform === "win32") {
    status = {
      ...common,
      kind: "none",
      enforced: false,
      reason: "Windows has no process-level file-system sandbox: path heuristics only " +
        "(not a security boundary)",
    };
  } else {
    status = {
      ...common,
      kind: "none",
      enforced: false,
      reason: `No sandbox is supported on ${platform}`,
    };
  }
  if (options.deno === true && !isDeno) {
    const why = "sandbox.deno needs the Deno runtime (ignored under Node)";
    if (mode === "required") {
      throw new SandboxUnavailableError(`Cannot enforce the sandbox: ${why}`, status);
    }
    status.reason = `${status.reason}; ${why}`;
  }
  if (mode === "required" && !status.enforced) {
    throw new SandboxUnavailableError(
      `Cannot enforce the sandbox (mode "required"): ${status.reason}`,
      status,
    );
  }
  return status;
}

type CommonStatus = Pick<
  SandboxStatus,
  "mode" | "network" | "extraWritable" | "deno" | "hidePaths" | "hideHomeSecrets"
>;

function resolveLinux(common: CommonStatus, override: string | undefined): SandboxStatus {
  let program: string | null = override ?? null;
  if (program === null) {
    try {
      program = which("bwrap");
    } catch {
      program = null;
    }
    // Under Deno without read access to the PATH folders, bwrap cannot be looked up; a run
    // grant for "bwrap" is enough to start it by name (the probe then tells whether it works).
    if (
      program === null && isDeno && !mayRead("/usr/bin") &&
      queryGrant({ name: "run", command: "bwrap" }) === "granted"
    ) {
      program = "bwrap";
    }
  }
  if (program === null) {
    return {
      ...common,
      kind: "none",
      enforced: false,
      reason: "bubblewrap (bwrap) is not installed",
    };
  }
  if (hasPermissionModel() && queryGrant({ name: "run", command: program }) !== "granted") {
    return {
      ...common,
      kind: "none",
      enforced: false,
      reason: `bubblewrap cannot be started: the process lacks --allow-run=${program}`,
    };
  }
  const probe = probeBwrap(program);
  if (!probe.ok) {
    return {
      ...common,
      kind: "none",
      enforced: false,
      program,
      reason: `bubblewrap cannot create its sandbox here: ${probe.reason}`,
    };
  }
  return {
    ...common,
    kind: "bwrap",
    enforced: true,
    program,
    reason: `Shell commands run in bubblewrap: read-only system, writable workspace, ` +
      `private /tmp, network ${common.network ? "allowed" : "off"}`,
  };
}

/** Runs bwrap once with the namespaces and mounts commands will use; cached per program. */
function probeBwrap(program: string): { ok: boolean; reason: string } {
  const cached = bwrapProbes.get(program);
  if (cached) return cached;
  const args = [
    "--new-session",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
    "--unshare-pid",
    "--unshare-net",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--",
    "true",
  ];
  let result: { ok: boolean; reason: string };
  try {
    const r = spawnSync(program, args, {
      stdio: ["ignore", "ignore", "pipe"],
      timeout: 10_000,
      env: { PATH: envString("PATH") ?? "/usr/local/bin:/usr/bin:/bin" },
    });
    if (r.error) {
      result = { ok: false, reason: r.error.message };
    } else if (r.status === 0) {
      result = { ok: true, reason: "" };
    } else {
      const err = (r.stderr?.toString() ?? "").trim().split("\n").slice(-2).join(" ");
      result = {
        ok: false,
        reason: err || `bwrap exited with ${r.status ?? r.signal}`,
      };
    }
  } catch (e) {
    result = { ok: false, reason: (e as Error).message };
  }
  bwrapProbes.set(program, result);
  return result;
}

function resolveMac(common: CommonStatus): SandboxStatus {
  if (!macProbe) {
    try {
      const r = spawnSync(MAC_SANDBOX_EXEC, ["-p", "(version 1)(allow default)", "/usr/bin/true"], {
        stdio: ["ignore", "ignore", "pipe"],
        timeout: 10_000,
      });
      macProbe = r.error
        ? { ok: false, reason: r.error.message }
        : r.status === 0
        ? { ok: true, reason: "" }
        : { ok: false, reason: (r.stderr?.toString() ?? "").trim() || `exit ${r.status}` };
    } catch (e) {
      macProbe = { ok: false, reason: (e as Error).message };
    }
  }
  if (!macProbe.ok) {
    return {
      ...common,
      kind: "none",
      enforced: false,
      reason: `sandbox-exec is not usable: ${macProbe.reason}`,
    };
  }
  return {
    ...common,
    kind: "sandbox-exec",
    enforced: true,
    program: MAC_SANDBOX_EXEC,
    reason: `Shell commands run under sandbox-exec: writes only in the workspace and temp ` +
      `folders, network ${common.network ? "allowed" : "off"}`,
  };
}

/**
 * One sentence for people saying which sandbox is active and whether it is enforced (manual
 * §8.4; hosts show it in settings or diagnostics).
 *
 * @param status A status from {@link resolveSandbox} (or `engine.permissions.sandbox`).
 * @returns E.g. `"bwrap sandbox enforced: …"` or `"No OS sandbox (not enforced): …"`.
 *
 * @example
 * ```ts
 * import { describeSandbox } from "@zqagent/core/permissions";
 * describeSandbox({ mode: "off", kind: "none", enforced: false, reason: "The sandbox is off" });
 * // "No OS sandbox (not enforced): The sandbox is off"
 * ```
 */
export function describeSandbox(status: SandboxStatus): string {
  const parts: string[] = [];
  if (status.enforced) {
    parts.push(`${status.kind} sandbox enforced (mode ${status.mode})`);
    parts.push(`network ${status.network ? "allowed" : "off"}`);
    if (status.extraWritable && status.extraWritable.length > 0) {
      parts.push(`extra writable: ${status.extraWritable.join(", ")}`);
    }
    if (status.kind === "bwrap" && status.hidePaths && status.hidePaths.length > 0) {
      parts.push(`hidden: ${status.hidePaths.join(", ")}`);
    }
  } else {
    parts.push(`No OS sandbox (not enforced, mode ${status.mode})`);
  }
  if (status.deno) parts.push("file tools run in a child deno process limited to the workspace");
  return `${parts.join("; ")}${status.reason ? `: ${status.reason}` : ""}`;
}

/** What {@link sandboxProtectedPaths} finds. */
export interface ProtectedPaths {
  /** Paths that stay read-only. */
  readOnly: string[];
  /**
   * Folders that stay writable inside but must not be renamed or replaced (git folders whose
   * `hooks` and `config` are read-only: renaming `.git` aside and creating a new one would
   * defeat that). bubblewrap binds them onto themselves, which makes them mount points.
   */
  pinned: string[];
}

/**
 * Paths inside `roots` that sandboxed commands must not change, because they run code or
 * change behaviour later outside the sandbox: for every git repository found (nested ones too,
 * up to 8 folders deep, skipping `node_modules`) its `hooks` folder and `config` file (or the
 * whole git folder when either is missing or a symlink), the `.git` file of worktrees and
 * submodules; and each root's `.agent` folder when it exists. Git folders themselves are
 * pinned (see {@link ProtectedPaths.pinned}).
 *
 * @param roots Writable roots (absolute real paths).
 * @returns Absolute paths, deduplicated, in a stable order.
 */
export function sandboxProtectedPaths(roots: readonly string[]): ProtectedPaths {
  const out = new Set<string>();
  const pinned = new Set<string>();
  const protectGitDir = (gitDir: string): void => {
    const hooks = path.join(gitDir, "hooks");
    const config = path.join(gitDir, "config");
    const usable = (p: string): boolean => {
      try {
        return !fs.lstatSync(p).isSymbolicLink();
      } catch {
        return false;
      }
    };
    if (usable(hooks) && usable(config)) {
      pinned.add(gitDir);
      out.add(hooks);
      out.add(config);
    } else {
      out.add(gitDir);
    }
    try {
      const common = fs.readFileSync(path.join(gitDir, "commondir"), "utf8").trim();
      if (common) {
        const commonDir = path.resolve(gitDir, common);
        if (commonDir !== gitDir) protectGitDir(commonDir);
      }
    } catch {
      // not a worktree git dir
    }
  };
  for (const root of roots) {
    const agent = path.join(root, ".agent");
    try {
      if (fs.lstatSync(agent).isDirectory()) out.add(agent);
    } catch {
      // no .agent folder
    }
    let dirs = 0;
    const walk = (dir: string, depth: number): void => {
      if (dirs++ > SCAN_MAX_DIRS) return;
      let entries: fs.Dirent[];
      try {
        entries = fs.readdirSync(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const entry of entries) {
        const full = path.join(dir, entry.name);
        if (entry.name === ".git") {
          if (entry.isDirectory()) {
            protectGitDir(full);
          } else if (entry.isFile()) {
            out.add(full);
            try {
              const m = /^gitdir:\s*(.+)$/m.exec(fs.readFileSync(full, "utf8"));
              if (m) protectGitDir(path.resolve(dir, m[1].trim()));
            } catch {
              // unreadable .git file: it is protected itself
            }
          } else if (entry.isSymbolicLink()) {
            out.add(full);
          }
          continue;
        }
        if (entry.isDirectory() && !SCAN_SKIP.has(entry.name) && depth < SCAN_MAX_DEPTH) {
          walk(full, depth + 1);
        }
      }
    };
    walk(root, 0);
  }
  // Only paths that exist can be bound; keep those inside a writable root (others are
  // read-only already).
  const keep = (list: Iterable<string>): string[] =>
    [...list].filter((p) => {
      try {
        fs.lstatSync(p);
      } catch {
        return false;
      }
      return roots.some((r) => p === r || p.startsWith(r.endsWith(path.sep) ? r : r + path.sep));
    }).sort();
  const readOnly = keep(out);
  return {
    readOnly,
    pinned: keep(pinned).filter((p) => !readOnly.includes(p)),
  };
}

/**
 * The bubblewrap arguments (before `--` and the command) for a command confined to the
 * workspace (manual §8.4, research coding-engines.md §2.1/§2.6). Order matters: later mounts
 * win, so the read-only re-binds come after the writable binds.
 *
 * `--new-session --die-with-parent --cap-drop ALL --unshare-pid [--unshare-net] --ro-bind / /
 * --dev /dev --proc /proc --tmpfs /tmp [--tmpfs <hidden> | --ro-bind /dev/null <hidden>]…
 * --bind <ws> <ws> [--bind <extra> <extra>]… [--ro-bind <protected> <protected>]…
 * [hidden paths inside the writable roots]… [--chdir <cwd>]`
 *
 * @param options Workspace, extra writable paths, network, cwd, read-only and hidden paths.
 * @returns The argument list.
 *
 * @example
 * ```ts
 * import { buildBwrapArgs } from "@zqagent/core/permissions";
 * const args = buildBwrapArgs({ workspace: "/srv/ws", readOnly: ["/srv/ws/.git/hooks"] });
 * // ["--new-session", "--die-with-parent", …, "--bind", "/srv/ws", "/srv/ws", …]
 * ```
 */
export function buildBwrapArgs(options: BwrapArgsOptions): string[] {
  const workspace = path.resolve(options.workspace);
  const extra = (options.extraWritable ?? []).map((p) => path.resolve(p));
  const roots = [workspace, ...extra.filter((p) => p !== workspace)];
  const args = [
    "--new-session",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
    "--unshare-pid",
  ];
  if (!options.network) args.push("--unshare-net");
  args.push("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp");
  // Hidden paths: shallow ones first (a tmpfs over a folder, /dev/null over a file). Those
  // outside the writable roots go before the roots are bound (so roots inside them come back);
  // those inside a root go last, so nothing bound later reveals them again.
  const hidden = [...new Set((options.hidden ?? []).map((p) => path.resolve(p)))]
    .filter((p) => !roots.includes(p))
    .sort((a, b) => a.length - b.length || (a < b ? -1 : 1));
  const inRoot = (p: string): boolean => roots.some((r) => isInside(r, p));
  const hide = (p: string): void => {
    let dir: boolean;
    try {
      if (!mayRead(p)) return; // Deno: never touch a path the process may not read
      dir = fs.statSync(p).isDirectory();
    } catch {
      return; // missing: nothing to hide (and bwrap could not mount over it)
    }
    if (dir) args.push("--tmpfs", p);
    else args.push("--ro-bind", "/dev/null", p);
  };
  for (const p of hidden) if (!inRoot(p) && !isInside("/tmp", p)) hide(p);
  for (const root of roots) args.push("--bind", root, root);
  const found = options.readOnly ? undefined : sandboxProtectedPaths(roots);
  const readOnly = options.readOnly ?? found!.readOnly;
  const pinned = options.pinned ?? found?.pinned ?? [];
  for (const p of pinned) args.push("--bind", p, p);
  for (const p of readOnly) args.push("--ro-bind", p, p);
  for (const p of hidden) if (inRoot(p)) hide(p);
  if (options.cwd) args.push("--chdir", path.resolve(options.cwd));
  return args;
}

/** An SBPL string literal (only for fixed text, never for host paths). */
function sbplString(text: string): string {
  return `"${text.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/**
 * Builds the `sandbox-exec` profile for a command confined to the workspace (manual §8.4:
 * "restringe file-write* al espacio de trabajo + directorio temporal"). Reads stay allowed, as
 * on Linux; `file-write*` is denied except under the writable roots minus their read-only
 * paths (`.git/hooks`, `.git/config`, `.agent`), and the network is denied (except Unix
 * sockets) unless allowed. Every path is a parameter: `WRITABLE_ROOT_<i>` and
 * `WRITABLE_ROOT_<i>_RO_<j>` (research coding-engines.md §2.3).
 *
 * @param options Workspace, extra writable paths, temp folders, network, read-only paths.
 * @returns The profile, its parameters and the `sandbox-exec` arguments.
 *
 * @example
 * ```ts
 * import { buildMacProfile } from "@zqagent/core/permissions";
 * const { args } = buildMacProfile({ workspace: "/Users/me/project", readOnly: [] });
 * // spawn("/usr/bin/sandbox-exec", [...args, "/bin/bash", "-c", "make"])
 * ```
 */
export function buildMacProfile(options: MacProfileOptions): MacProfile {
  const workspace = path.resolve(options.workspace);
  const tempDirs = options.tempDirs ?? defaultMacTempDirs();
  const roots: string[] = [];
  for (const p of [workspace, ...(options.extraWritable ?? []), ...tempDirs]) {
    const abs = path.resolve(p);
    if (!roots.includes(abs)) roots.push(abs);
  }
  const found = options.readOnly ? undefined : sandboxProtectedPaths([
    workspace,
    ...(options.extraWritable ?? []).map((p) => path.resolve(p)),
  ]);
  const readOnly = options.readOnly ?? found!.readOnly;
  const pinned = options.pinned ?? found?.pinned ?? [];
  const params: Record<string, string> = {};
  const lines = [
    "(version 1)",
    "(allow default)",
    "(deny file-write*)",
    "(allow file-write*",
    `  (literal ${sbplString("/dev/null")})`,
    `  (literal ${sbplString("/dev/zero")})`,
    `  (literal ${sbplString("/dev/dtracehelper")})`,
    `  (regex #"^/dev/tty")`,
    `  (regex #"^/dev/fd/"))`,
  ];
  roots.forEach((root, i) => {
    const name = `WRITABLE_ROOT_${i}`;
    params[name] = root;
    const under = (p: string): boolean =>
      p === root || p.startsWith(root.endsWith("/") ? root : `${root}/`);
    const excluded = readOnly.filter(under);
    const pins = pinned.filter(under);
    if (excluded.length === 0 && pins.length === 0) {
      lines.push(`(allow file-write* (subpath (param ${sbplString(name)})))`);
      return;
    }
    const clauses = [`(subpath (param ${sbplString(name)}))`];
    excluded.forEach((p, j) => {
      const ro = `${name}_RO_${j}`;
      params[ro] = p;
      // `literal` as well as `subpath`: creating the path itself must be denied too.
      clauses.push(`(require-not (literal (param ${sbplString(ro)})))`);
      clauses.push(`(require-not (subpath (param ${sbplString(ro)})))`);
    });
    pins.forEach((p, j) => {
      const pin = `${name}_PIN_${j}`;
      params[pin] = p;
      // The folder itself may not be renamed, removed or replaced; its contents may change.
      clauses.push(`(require-not (literal (param ${sbplString(pin)})))`);
    });
    lines.push(`(allow file-write* (require-all ${clauses.join(" ")}))`);
  });
  if (!options.network) {
    lines.push("(deny network*)");
    lines.push("(allow network* (remote unix-socket))");
  }
  const profile = lines.join("\n") + "\n";
  const args = ["-p", profile];
  for (const [k, v] of Object.entries(params)) args.push("-D", `${k}=${v}`);
  return { profile, params, args };
}

function defaultMacTempDirs(): string[] {
  const dirs = ["/private/tmp", "/private/var/folders"];
  const tmp = process.env.TMPDIR;
  if (tmp) {
    const real = realOrResolved(tmp);
    if (!dirs.some((d) => real === d || real.startsWith(`${d}/`))) dirs.push(real);
  }
  return dirs;
}

/**
 * Wraps a command so it runs in the sandbox `status` describes (manual §8.4). When the
 * sandbox is not enforced the command comes back unchanged. With bubblewrap the program
 * becomes bwrap (arguments from {@link buildBwrapArgs}, `TMPDIR=/tmp`), with sandbox-exec it
 * becomes `/usr/bin/sandbox-exec` (profile from {@link buildMacProfile}). Creates the
 * workspace's `.agent` folder when missing, so it can be bound read-only.
 *
 * @param status From {@link resolveSandbox}.
 * @param command The program, arguments, cwd and environment to run.
 * @param options `workspace`: the writable root.
 * @returns The command to spawn instead.
 *
 * @example
 * ```ts
 * import { resolveSandbox, wrapWithSandbox } from "@zqagent/core/permissions";
 * const status = resolveSandbox({ mode: "auto" }, { workspace: "/srv/ws" });
 * const run = wrapWithSandbox(status, {
 *   program: "/bin/bash",
 *   args: ["-c", "make test"],
 *   cwd: "/srv/ws",
 *   env: { PATH: "/usr/bin:/bin" },
 * }, { workspace: "/srv/ws" });
 * // spawn(run.program, run.args, { cwd: run.cwd, env: run.env })
 * ```
 */
export function wrapWithSandbox(
  status: SandboxStatus,
  command: SandboxCommand,
  options: WrapOptions,
): SandboxCommand {
  const copy: SandboxCommand = {
    program: command.program,
    args: [...command.args],
    cwd: command.cwd,
    env: { ...command.env },
  };
  if (!status.enforced || status.kind === "none") return copy;
  const workspace = realOrResolved(options.workspace);
  try {
    fs.mkdirSync(path.join(workspace, ".agent"), { recursive: true });
  } catch {
    // a read-only or missing workspace: nothing to protect there
  }
  // A missing extra path cannot be bound (bwrap would refuse to start); it stays unwritable.
  const extraWritable = (status.extraWritable ?? []).filter((p) => fs.existsSync(p));
  if (status.kind === "bwrap") {
    // The user's credentials are hidden unless they are the workspace or above it.
    const secrets = status.hideHomeSecrets === false
      ? []
      : homeSecretPaths().filter((p) => !isInside(p, workspace));
    const args = buildBwrapArgs({
      workspace,
      extraWritable,
      network: status.network,
      cwd: command.cwd,
      hidden: [...(status.hidePaths ?? []), ...secrets],
    });
    const env: Record<string, string> = { ...copy.env, TMPDIR: "/tmp" };
    delete env.TMP;
    delete env.TEMP;
    return {
      program: status.program ?? "bwrap",
      args: [...args, "--", command.program, ...command.args],
      cwd: command.cwd,
      env,
    };
  }
  const profile = buildMacProfile({
    workspace,
    extraWritable,
    network: status.network,
  });
  return {
    program: status.program ?? MAC_SANDBOX_EXEC,
    args: [...profile.args, command.program, ...command.args],
    cwd: command.cwd,
    env: copy.env,
  };
}

/** Credential folders and files under the home folder, hidden from sandboxed commands. */
const HOME_SECRETS = [".ssh", ".aws", ".gnupg", ".config/gcloud", ".docker", ".kube", ".netrc"];

/**
 * The engine user's credential folders and files that exist: `~/.ssh`, `~/.aws`, `~/.gnupg`,
 * `~/.config/gcloud`, `~/.docker`, `~/.kube` and `~/.netrc` (real paths). Sandboxed commands
 * do not see them unless {@link SandboxOptions.hideHomeSecrets} is `false`.
 *
 * @param home The home folder. Default: `$HOME`, else the OS's home folder of the user.
 * @returns Absolute real paths of those that exist, in the order above.
 *
 * @example
 * ```ts
 * import { homeSecretPaths } from "@zqagent/core/permissions";
 * homeSecretPaths("/home/me"); // e.g. ["/home/me/.ssh", "/home/me/.netrc"]
 * ```
 */
export function homeSecretPaths(home?: string): string[] {
  let dir = home;
  if (dir === undefined) {
    try {
      dir = envString("HOME") ?? os.homedir();
    } catch {
      return [];
    }
  }
  const out: string[] = [];
  for (const name of HOME_SECRETS) {
    const p = path.join(dir, name);
    try {
      if (!mayRead(p)) continue;
      fs.lstatSync(p);
    } catch {
      continue;
    }
    out.push(realOrResolved(p));
  }
  return out;
}

/** Forgets cached probe results (tests only). */
export function _resetSandboxProbes(): void {
  bwrapProbes.clear();
  macProbe = undefined;
}
