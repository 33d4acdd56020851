/**
 * Runtime-neutral process helpers on `node:child_process` (works natively in Deno and Node):
 * spawning a command in its own process group with bounded output capture, a timeout and an
 * abort signal; killing a whole process tree; finding programs on the PATH; choosing the shell
 * for `run_shell` (manual §7.1, §12.2: "run_shell mata el árbol de procesos hijos").
 *
 * Private to the package (DESIGN §2: `_internal/` is not exported).
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants as fsConstants, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import process from "node:process";

const IS_WINDOWS = process.platform === "win32";

/** Options of {@link spawnProcess}. */
export interface SpawnProcessOptions {
  /** Working directory (default: the current directory). */
  cwd?: string;
  /** Full environment of the child (default: the parent's environment). */
  env?: Record<string, string>;
  /** Text written to the child's stdin, which is then closed. Default: stdin is `/dev/null`. */
  stdin?: string;
  /**
   * Bytes kept per stream (stdout, stderr); beyond it the head and the tail are kept and the
   * middle is dropped and counted. Default 1 MiB.
   */
  maxOutputBytes?: number;
  /** Kill the process tree after this many ms (SIGTERM, then SIGKILL after `graceMs`). */
  timeoutMs?: number;
  /** Aborting kills the process tree at once (SIGKILL) and ends the result with `aborted`. */
  signal?: AbortSignal;
  /** Grace period in ms between SIGTERM and SIGKILL on timeout (default 2000). */
  graceMs?: number;
  /** Called with every raw stdout chunk (for live/background consumers). */
  onStdout?: (chunk: Uint8Array) => void;
  /** Called with every raw stderr chunk. */
  onStderr?: (chunk: Uint8Array) => void;
}

/** How a process ended, with its captured output. */
export interface ProcessResult {
  /** Exit code, or `null` when the process was ended by a signal (or could not start). */
  exitCode: number | null;
  /** Signal that ended the process (`"SIGTERM"`, `"SIGKILL"`, …), or `null`. */
  signal: string | null;
  /** Captured stdout (UTF-8; head and tail when over the byte cap). */
  stdout: string;
  /** Captured stderr (UTF-8; head and tail when over the byte cap). */
  stderr: string;
  /** Total bytes the child wrote to stdout. */
  stdoutBytes: number;
  /** Total bytes the child wrote to stderr. */
  stderrBytes: number;
  /** True when part of stdout or stderr was dropped because of the byte cap. */
  truncated: boolean;
  /** True when the timeout fired and the tree was killed. */
  timedOut: boolean;
  /** True when `signal` aborted and the tree was killed. */
  aborted: boolean;
  /** Wall-clock duration in ms. */
  durationMs: number;
  /** Set when the process could not be started (e.g. ENOENT). */
  spawnError?: Error;
}

/** A running child started by {@link spawnProcess}. */
export interface SpawnedProcess {
  /** The underlying child process. */
  child: ChildProcess;
  /** Process id (also the process-group id on POSIX), `undefined` if spawning failed. */
  pid: number | undefined;
  /** Settles (never rejects) when the child has exited and its output is collected. */
  result: Promise<ProcessResult>;
  /** Kills the whole tree (see {@link killProcessTree}); resolves when it is gone. */
  kill(options?: KillTreeOptions): Promise<void>;
}

/** Options of {@link killProcessTree}. */
export interface KillTreeOptions {
  /** Ms to wait after SIGTERM before SIGKILL; `0` sends SIGKILL at once. Default 2000. */
  graceMs?: number;
}

/** Keeps the first and last bytes of a stream, counting the dropped middle. */
class ByteCapture {
  #head: Uint8Array[] = [];
  #headBytes = 0;
  #tail: Uint8Array[] = [];
  #tailBytes = 0;
  #headCap: number;
  #tailCap: number;
  total = 0;

  constructor(maxBytes: number) {
    this.#headCap = Math.floor(maxBytes / 2);
    this.#tailCap = maxBytes - this.#headCap;
  }

  push(chunk: Uint8Array): void {
    this.total += chunk.byteLength;
    let rest = chunk;
    if (this.#headBytes < this.#headCap) {
      const take = Math.min(this.#headCap - this.#headBytes, rest.byteLength);
      this.#head.push(rest.subarray(0, take));
      this.#headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.byteLength === 0) return;
    this.#tail.push(rest);
    this.#tailBytes += rest.byteLength;
    while (this.#tailBytes - (this.#tail[0]?.byteLength ?? 0) >= this.#tailCap) {
      this.#tailBytes -= this.#tail.shift()!.byteLength;
    }
  }

  get truncated(): boolean {
    return this.total > this.#headBytes + Math.min(this.#tailBytes, this.#tailCap);
  }

  text(): string {
    const head = concat(this.#head);
    let tail = concat(this.#tail);
    if (tail.byteLength > this.#tailCap) tail = tail.subarray(tail.byteLength - this.#tailCap);
    const dropped = this.total - head.byteLength - tail.byteLength;
    if (dropped <= 0) return new TextDecoder().decode(concat([head, tail]));
    const headEnd = utf8BoundaryBefore(head, head.byteLength);
    const tailStart = utf8BoundaryAfter(tail, 0);
    const omitted = dropped + (head.byteLength - headEnd) + tailStart;
    return new TextDecoder().decode(head.subarray(0, headEnd)) +
      `\n[... ${omitted} bytes omitted ...]\n` +
      new TextDecoder().decode(tail.subarray(tailStart));
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  let size = 0;
  for (const p of parts) size += p.byteLength;
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** Largest index <= `end` that does not fall inside a UTF-8 multi-byte sequence. */
export function utf8BoundaryBefore(bytes: Uint8Array, end: number): number {
  let i = Math.min(end, bytes.byteLength);
  // Step back over continuation bytes (10xxxxxx) to the lead byte, then check completeness.
  let back = 0;
  while (i - back - 1 >= 0 && back < 4 && (bytes[i - back - 1] & 0xc0) === 0x80) back++;
  const lead = i - back - 1;
  if (lead < 0) return i;
  const b = bytes[lead];
  const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
  if (need === 1) return i;
  if (back + 1 < need) i = lead;
  return i;
}

/** Smallest index >= `start` that begins a UTF-8 character (skips continuation bytes). */
export function utf8BoundaryAfter(bytes: Uint8Array, start: number): number {
  let i = start;
  while (i < bytes.byteLength && (bytes[i] & 0xc0) === 0x80) i++;
  return i;
}

/**
 * Starts `command` with `args` (no shell) in its own process group (`detached: true` on POSIX,
 * so the whole tree can be signalled), capturing stdout and stderr up to a byte cap.
 *
 * @param command Program to run (a path or a name looked up on the PATH).
 * @param args Arguments, passed as they are.
 * @param options Working directory, environment, stdin, byte cap, timeout (ms), abort signal.
 * @returns The running child; its `result` promise never rejects (a spawn failure is reported
 *   through `spawnError` with `exitCode: null`).
 */
export function spawnProcess(
  command: string,
  args: string[],
  options: SpawnProcessOptions = {},
): SpawnedProcess {
  const started = Date.now();
  const maxBytes = options.maxOutputBytes ?? 1024 * 1024;
  const out = new ByteCapture(maxBytes);
  const err = new ByteCapture(maxBytes);
  let timedOut = false;
  let aborted = false;
  let spawnError: Error | undefined;

  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    detached: !IS_WINDOWS,
    windowsHide: true,
    stdio: [options.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });

  const killer = (opts?: KillTreeOptions): Promise<void> => killProcessTree(child, opts);

  const result = new Promise<ProcessResult>((resolve) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let settled = false;
    let exitInfo: { code: number | null; signal: string | null } | null = null;
    let drainTimer: ReturnType<typeof setTimeout> | undefined;
    let killing: Promise<void> | undefined;

    const onAbort = (): void => {
      if (exitInfo || settled) return;
      aborted = true;
      killing = killer({ graceMs: 0 });
    };

    const finish = (): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      if (drainTimer) clearTimeout(drainTimer);
      options.signal?.removeEventListener("abort", onAbort);
      const done = (): void =>
        resolve({
          exitCode: exitInfo?.code ?? null,
          signal: exitInfo?.signal ?? null,
          stdout: out.text(),
          stderr: err.text(),
          stdoutBytes: out.total,
          stderrBytes: err.total,
          truncated: out.truncated || err.truncated,
          timedOut,
          aborted,
          durationMs: Date.now() - started,
          spawnError,
        });
      if (killing) killing.then(done, done);
      else done();
    };

    child.stdout?.on("data", (chunk: Uint8Array) => {
      out.push(chunk);
      options.onStdout?.(chunk);
    });
    child.stderr?.on("data", (chunk: Uint8Array) => {
      err.push(chunk);
      options.onStderr?.(chunk);
    });
    child.on("error", (e: Error) => {
      spawnError = e;
      if (child.pid === undefined) finish();
    });
    child.on("exit", (code, signal) => {
      exitInfo = { code, signal };
      // A grandchild may keep the pipes open after the child exits; give the streams a short
      // moment to drain, then stop waiting for them (the grandchild is not ours to wait for).
      drainTimer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish();
      }, 250);
    });
    child.on("close", (code, signal) => {
      exitInfo ??= { code, signal };
      finish();
    });

    if (options.stdin !== undefined && child.stdin) {
      child.stdin.on("error", () => {/* child closed stdin early: ignore */});
      child.stdin.end(options.stdin);
    }
    if (options.timeoutMs !== undefined && options.timeoutMs > 0) {
      timer = setTimeout(() => {
        if (exitInfo || settled) return;
        timedOut = true;
        killing = killer({ graceMs: options.graceMs ?? 2000 });
      }, options.timeoutMs);
    }
    if (options.signal) {
      if (options.signal.aborted) onAbort();
      else options.signal.addEventListener("abort", onAbort, { once: true });
    }
  });

  return { child, pid: child.pid, result, kill: killer };
}

/**
 * True while a process group has a member that is not a zombie. On Linux this reads `/proc`
 * (a zombie left for a non-reaping PID 1 in a container must not count as alive); elsewhere it
 * uses `kill(-pgid, 0)`.
 */
function groupAlive(pid: number): boolean {
  if (process.platform === "linux") {
    try {
      for (const name of readdirSync("/proc")) {
        if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
        let stat: string;
        try {
          stat = readFileSync(`/proc/${name}/stat`, "utf8");
        } catch {
          continue; // exited meanwhile
        }
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        // fields[0] = state, fields[2] = process group id
        if (Number(fields[2]) === pid && fields[0] !== "Z" && fields[0] !== "X") return true;
      }
      return false;
    } catch {
      // no /proc: fall through
    }
  }
  try {
    process.kill(-pid, 0);
    return true;
  } catch (e) {
    return (e as { code?: string }).code === "EPERM";
  }
}

function signalGroup(pid: number, sig: "SIGTERM" | "SIGKILL"): void {
  try {
    process.kill(-pid, sig);
  } catch {
    // ESRCH: the group is already gone.
  }
}

/**
 * Kills a child and every process in its process group: SIGTERM to the group, then SIGKILL
 * after `graceMs` if anything is still alive. On Windows runs `taskkill /T /F /PID <pid>`.
 * The child must have been started in its own group (as {@link spawnProcess} does).
 *
 * @param child The child process (its pid is the group id).
 * @param options `graceMs`: ms between SIGTERM and SIGKILL (default 2000; `0` = SIGKILL at once).
 * @returns Resolves when the group is gone (or after SIGKILL was sent and the group stopped
 *   responding); never rejects.
 */
export async function killProcessTree(
  child: ChildProcess,
  options: KillTreeOptions = {},
): Promise<void> {
  const pid = child.pid;
  if (pid === undefined) return;
  if (IS_WINDOWS) {
    await new Promise<void>((resolve) => {
      const k = spawn("taskkill", ["/T", "/F", "/PID", String(pid)], {
        stdio: "ignore",
        windowsHide: true,
      });
      k.on("error", () => resolve());
      k.on("close", () => resolve());
    });
    return;
  }
  const graceMs = options.graceMs ?? 2000;
  if (graceMs <= 0) {
    signalGroup(pid, "SIGKILL");
  } else {
    signalGroup(pid, "SIGTERM");
    const deadline = Date.now() + graceMs;
    while (groupAlive(pid) && Date.now() < deadline) await sleep(25);
    if (groupAlive(pid)) signalGroup(pid, "SIGKILL");
  }
  // Wait (bounded) until the kernel has removed every member of the group.
  for (let i = 0; i < 200 && groupAlive(pid); i++) await sleep(10);
}

/**
 * Synchronous, best-effort SIGKILL of a child's process group (for `process.on("exit")`
 * handlers, where nothing asynchronous runs).
 *
 * @param child The child process.
 */
export function killProcessTreeSync(child: ChildProcess): void {
  const pid = child.pid;
  if (pid === undefined) return;
  if (IS_WINDOWS) {
    try {
      child.kill();
    } catch {
      // already gone
    }
    return;
  }
  signalGroup(pid, "SIGKILL");
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function isExecutable(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    if (!IS_WINDOWS) accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Finds a program on the PATH (honouring `PATHEXT` on Windows).
 *
 * @param name Program name (`"rg"`) or a path containing a separator (checked as it is).
 * @param env Environment to read `PATH`/`PATHEXT` from (default: the process environment).
 * @returns The absolute path of the first executable match, or `null`.
 */
export function which(
  name: string,
  env: Record<string, string | undefined> = process.env,
): string | null {
  if (name.includes("/") || (IS_WINDOWS && name.includes("\\"))) {
    return isExecutable(name) ? path.resolve(name) : null;
  }
  const pathVar = env.PATH ?? env.Path ?? "";
  const exts = IS_WINDOWS ? ["", ...(env.PATHEXT ?? ".EXE;.CMD;.BAT;.COM").split(";")] : [""];
  for (const dir of pathVar.split(path.delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      if (isExecutable(candidate)) return candidate;
    }
  }
  return null;
}

/** The shell `run_shell` uses, and how to pass it a command. */
export interface ShellChoice {
  /** Path of the shell executable. */
  path: string;
  /** Which shell family it is. */
  kind: "bash" | "zsh" | "sh" | "pwsh" | "powershell" | "cmd";
  /** Arguments placed before the command text (e.g. `["-c"]`). */
  args: string[];
}

const POSIX_SHELLS = new Set(["bash", "zsh", "sh"]);

/**
 * Picks the shell for `run_shell` (pure: no file-system access except through `exists`).
 *
 * POSIX: `$SHELL` when it is bash, zsh or sh and exists, else `/bin/bash`, else `/bin/sh`.
 * Windows: Git Bash when present (Program Files, Program Files (x86), per-user install or
 * `bash.exe` from Git on the PATH), else `pwsh`, else `powershell`, else `cmd.exe` from
 * `ComSpec` (default `C:\Windows\System32\cmd.exe`).
 *
 * @param platform `process.platform` value (`"linux"`, `"darwin"`, `"win32"`, …).
 * @param env Environment variables (`SHELL`, `PATH`/`Path`, `ProgramFiles`, `ComSpec`, …).
 * @param exists Tells whether a file exists (inject `fs.existsSync`, or a fake in tests).
 * @returns The chosen shell.
 */
export function selectShell(
  platform: string,
  env: Record<string, string | undefined>,
  exists: (file: string) => boolean,
): ShellChoice {
  if (platform !== "win32") {
    const shell = env.SHELL;
    if (shell && path.posix.isAbsolute(shell)) {
      const kind = path.posix.basename(shell);
      if (POSIX_SHELLS.has(kind) && exists(shell)) {
        return { path: shell, kind: kind as ShellChoice["kind"], args: ["-c"] };
      }
    }
    if (exists("/bin/bash")) return { path: "/bin/bash", kind: "bash", args: ["-c"] };
    return { path: "/bin/sh", kind: "sh", args: ["-c"] };
  }
  const win = path.win32;
  const gitBash: string[] = [];
  for (const base of [env.ProgramFiles, env["ProgramFiles(x86)"], env.ProgramW6432]) {
    if (base) gitBash.push(win.join(base, "Git", "bin", "bash.exe"));
  }
  if (env.LOCALAPPDATA) {
    gitBash.push(win.join(env.LOCALAPPDATA, "Programs", "Git", "bin", "bash.exe"));
  }
  for (const candidate of gitBash) {
    if (exists(candidate)) return { path: candidate, kind: "bash", args: ["-c"] };
  }
  const dirs = (env.PATH ?? env.Path ?? "").split(";").filter(Boolean);
  const onPath = (exe: string): string | null => {
    for (const dir of dirs) {
      const candidate = win.join(dir, exe);
      if (exists(candidate)) return candidate;
    }
    return null;
  };
  // bash.exe on the PATH counts only when it belongs to Git (System32\bash.exe is WSL).
  const pathBash = onPath("bash.exe");
  if (pathBash && /\\git\\/i.test(pathBash)) return { path: pathBash, kind: "bash", args: ["-c"] };
  const psArgs = ["-NoProfile", "-NonInteractive", "-Command"];
  const pwsh = onPath("pwsh.exe");
  if (pwsh) return { path: pwsh, kind: "pwsh", args: psArgs };
  const powershell = onPath("powershell.exe");
  if (powershell) return { path: powershell, kind: "powershell", args: psArgs };
  return {
    path: env.ComSpec ?? env.COMSPEC ?? "C:\\Windows\\System32\\cmd.exe",
    kind: "cmd",
    args: ["/d", "/s", "/c"],
  };
}
