/**
 * Shell tools (manual §7.1, §12.2): `run_shell`, `shell_task_output`, `shell_task_kill`.
 *
 * Commands run through the platform's shell (see `selectShell`: `$SHELL` if bash/zsh/sh, else
 * bash, else sh; Git Bash, pwsh, powershell or cmd on Windows) in their own process group, with
 * stdin closed and pagers disabled. A timeout or an interrupt (`ctx.signal`) kills the whole
 * process tree (manual §12.2: "run_shell mata el árbol de procesos hijos"). Background tasks
 * keep their output in a bounded ring buffer and are tracked by a {@link ShellTaskManager}.
 *
 * Built on `node:child_process` (through the package's private process helpers), which works
 * natively in Deno and Node; process-group signalling needs no library.
 *
 * @example Register the shell tools
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerShellTool } from "@zqagent/core/tools/shell";
 * const registry = new ToolRegistry();
 * const tasks = registerShellTool(registry, "/srv/workspace");
 * // later, when the session ends:
 * await tasks.killAll();
 * ```
 *
 * @module
 */
import { existsSync, statSync } from "node:fs";
import process from "node:process";
import { StringDecoder } from "node:string_decoder";
import { envAll } from "../_internal/env.ts";
import {
  killProcessTreeSync,
  type ProcessResult,
  selectShell,
  type ShellChoice,
  type SpawnedProcess,
  spawnProcess,
} from "../_internal/process.ts";
import { RiskClass, type ToolContext, type ToolRegistry } from "./registry.ts";
export type { ShellChoice } from "../_internal/process.ts";
import { abortError, boolArg, displayPath, intArg, resolveToolPath, stringArg } from "./_common.ts";

/** Default foreground timeout of `run_shell` in ms. */
export const DEFAULT_SHELL_TIMEOUT_MS = 120_000;
/** Largest `timeout_ms` `run_shell` accepts, in ms. */
export const MAX_SHELL_TIMEOUT_MS = 600_000;

/** A program invocation, as {@link CommandWrapper} receives and returns it. */
export interface WrappableCommand {
  /** Program to run. */
  program: string;
  /** Its arguments. */
  args: string[];
  /** Working directory. */
  cwd: string;
  /** Full environment. */
  env: Record<string, string>;
}

/**
 * Rewrites a command before it is spawned, e.g. to run it in the OS sandbox (manual §8.4:
 * `createDefaultEngine` passes one built on `wrapWithSandbox`).
 */
export type CommandWrapper = (command: WrappableCommand) => WrappableCommand;

/** Options of {@link registerShellTool}. */
export interface ShellToolOptions {
  /**
   * Wraps every command (foreground and background) before it is spawned, e.g. in the OS
   * sandbox. Default: none (commands run as they are).
   */
  wrapCommand?: CommandWrapper;
  /** Task manager to use (default: a new one, returned by {@link registerShellTool}). */
  manager?: ShellTaskManager;
  /** Default foreground timeout in ms (default 120,000). */
  defaultTimeoutMs?: number;
  /** Largest accepted `timeout_ms` in ms (default 600,000). */
  maxTimeoutMs?: number;
  /** Bytes of stdout and of stderr kept per foreground command (head + tail; default 1 MiB). */
  maxOutputBytes?: number;
  /** Ms between SIGTERM and SIGKILL when a timeout fires (default 2000). */
  killGraceMs?: number;
  /** Extra environment variables for every command (override the defaults; always passed). */
  env?: Record<string, string>;
  /**
   * Names of host environment variables to pass even though they look like credentials (see
   * {@link isSecretEnvName}); default none. Commands never see the host's keys otherwise.
   */
  passEnv?: string[];
  /** Shell to use instead of the automatic choice. */
  shell?: ShellChoice;
}

/** Options of {@link ShellTaskManager}. */
export interface ShellTaskManagerOptions {
  /** Chars of output kept per background task (a ring buffer; default 1,000,000). */
  maxBufferChars?: number;
  /** Ms between SIGTERM and SIGKILL when a task is killed (default 2000). */
  killGraceMs?: number;
}

/** How to start a background task. */
export interface ShellTaskStart {
  /** The command text (shown to people). */
  command: string;
  /** The shell to run it with. */
  shell: ShellChoice;
  /** Working directory. */
  cwd: string;
  /** Full environment. */
  env: Record<string, string>;
  /** Wraps the command before it is spawned (the OS sandbox). Default: none. */
  wrapCommand?: CommandWrapper;
}

/** A snapshot of a background task. */
export interface ShellTaskInfo {
  /** Task id (`"task_1"`, …). */
  id: string;
  /** The command text. */
  command: string;
  /** Process id (and group id on POSIX). */
  pid: number | undefined;
  /** `"running"`, `"exited"` or `"killed"`. */
  status: "running" | "exited" | "killed";
  /** Exit code once exited (`null` when ended by a signal). */
  exitCode: number | null;
  /** The signal that ended it, if any. */
  signal: string | null;
  /** Start time, epoch ms. */
  startedAt: number;
}

/** What {@link ShellTaskManager.read} returns. */
export interface ShellTaskRead extends ShellTaskInfo {
  /** Output (stdout and stderr interleaved) written since the previous read. */
  output: string;
  /** Chars of new output lost because the ring buffer overflowed before this read. */
  droppedChars: number;
}

interface TaskState {
  info: ShellTaskInfo;
  proc: SpawnedProcess;
  buffer: string;
  /** Absolute char offset of `buffer[0]` in the task's whole output. */
  bufferStart: number;
  cursor: number;
  waiters: Set<() => void>;
  done: Promise<ProcessResult>;
}

const liveManagers = new Set<ShellTaskManager>();
let exitHandlerInstalled = false;

function installExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on("exit", () => {
    for (const manager of liveManagers) manager.killAllSync();
  });
}

/**
 * Tracks the background tasks started through one `registerShellTool` registration. Output is
 * kept in a bounded ring buffer per task. Every task still running when the process exits is
 * killed (one `process.on("exit")` handler for all managers).
 */
export class ShellTaskManager {
  #tasks = new Map<string, TaskState>();
  #next = 1;
  #maxBufferChars: number;
  #killGraceMs: number;

  /** Creates an empty manager. */
  constructor(options: ShellTaskManagerOptions = {}) {
    this.#maxBufferChars = Math.max(1000, options.maxBufferChars ?? 1_000_000);
    this.#killGraceMs = options.killGraceMs ?? 2000;
  }

  /**
   * Starts a background task.
   *
   * @param start Command, shell, cwd and environment.
   * @returns The new task's snapshot (status `"running"`).
   * @throws {Error} "Cannot start background task: …" when the shell cannot be spawned.
   */
  start(start: ShellTaskStart): ShellTaskInfo {
    const id = `task_${this.#next++}`;
    const decoders = { out: new StringDecoder("utf8"), err: new StringDecoder("utf8") };
    const state = { buffer: "", bufferStart: 0, cursor: 0, waiters: new Set() } as TaskState;
    const append = (text: string): void => {
      if (text === "") return;
      state.buffer += text;
      const over = state.buffer.length - this.#maxBufferChars;
      if (over > 0) {
        let cut = over;
        const c = state.buffer.charCodeAt(cut);
        if (c >= 0xdc00 && c <= 0xdfff) cut++;
        state.buffer = state.buffer.slice(cut);
        state.bufferStart += cut;
      }
      for (const wake of state.waiters) wake();
    };
    const plain = {
      program: start.shell.path,
      args: [...start.shell.args, start.command],
      cwd: start.cwd,
      env: start.env,
    };
    const run = start.wrapCommand ? start.wrapCommand(plain) : plain;
    const proc = spawnProcess(run.program, run.args, {
      cwd: run.cwd,
      env: run.env,
      maxOutputBytes: 64 * 1024,
      onStdout: (chunk) => append(decoders.out.write(chunk as Uint8Array as Buffer)),
      onStderr: (chunk) => append(decoders.err.write(chunk as Uint8Array as Buffer)),
    });
    if (proc.pid === undefined) {
      throw new Error(`Cannot start background task: could not spawn ${start.shell.path}`);
    }
    const info: ShellTaskInfo = {
      id,
      command: start.command,
      pid: proc.pid,
      status: "running",
      exitCode: null,
      signal: null,
      startedAt: Date.now(),
    };
    const done = proc.result.then((r) => {
      append(decoders.out.end() + decoders.err.end());
      if (info.status === "running") info.status = "exited";
      info.exitCode = r.exitCode;
      info.signal = r.signal;
      if (this.#runningCount() === 0) liveManagers.delete(this);
      for (const wake of state.waiters) wake();
      return r;
    });
    state.info = info;
    state.proc = proc;
    state.done = done;
    // Background tasks must not keep the host process alive on their own.
    proc.child.unref();
    for (const s of [proc.child.stdout, proc.child.stderr]) {
      (s as unknown as { unref?: () => void } | null)?.unref?.();
    }
    this.#tasks.set(id, state);
    liveManagers.add(this);
    installExitHandler();
    return { ...info };
  }

  #runningCount(): number {
    let n = 0;
    for (const t of this.#tasks.values()) if (t.info.status === "running") n++;
    return n;
  }

  #get(id: string, what: string): TaskState {
    const state = this.#tasks.get(id);
    if (!state) throw new Error(`Cannot ${what} ${id}: no such task`);
    return state;
  }

  /** Snapshot of one task, or `undefined` when unknown. */
  get(id: string): ShellTaskInfo | undefined {
    const s = this.#tasks.get(id);
    return s ? { ...s.info } : undefined;
  }

  /** Snapshots of every task, in start order. */
  list(): ShellTaskInfo[] {
    return [...this.#tasks.values()].map((s) => ({ ...s.info }));
  }

  /**
   * Reads the output written since the previous read, and the status.
   *
   * @param id Task id.
   * @param options `waitMs`: when there is no new output and the task runs, wait up to this
   *   many ms for output or exit (default 0); `signal` ends the wait early.
   * @throws {Error} "Cannot read task …: no such task".
   */
  async read(
    id: string,
    options: { waitMs?: number; signal?: AbortSignal } = {},
  ): Promise<ShellTaskRead> {
    const state = this.#get(id, "read task");
    const waitMs = options.waitMs ?? 0;
    const hasNew = (): boolean => state.bufferStart + state.buffer.length > state.cursor;
    if (waitMs > 0 && !hasNew() && state.info.status === "running" && !options.signal?.aborted) {
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          state.waiters.delete(wake);
          options.signal?.removeEventListener("abort", wake);
          resolve();
        };
        const timer = setTimeout(wake, waitMs);
        state.waiters.add(wake);
        options.signal?.addEventListener("abort", wake, { once: true });
      });
    }
    const from = Math.max(state.cursor, state.bufferStart);
    const droppedChars = from - state.cursor;
    const output = state.buffer.slice(from - state.bufferStart);
    state.cursor = state.bufferStart + state.buffer.length;
    return { ...state.info, output, droppedChars };
  }

  /**
   * Stops a task and its whole process tree (SIGTERM, then SIGKILL after the grace period).
   *
   * @param id Task id.
   * @returns The task's final snapshot.
   * @throws {Error} "Cannot kill task …: no such task".
   */
  async kill(id: string): Promise<ShellTaskInfo> {
    const state = this.#get(id, "kill task");
    if (state.info.status === "running") {
      state.info.status = "killed";
      // Re-reference the child so the event loop stays alive until its exit is seen.
      state.proc.child.ref();
      for (const s of [state.proc.child.stdout, state.proc.child.stderr]) {
        (s as unknown as { ref?: () => void } | null)?.ref?.();
      }
      await state.proc.kill({ graceMs: this.#killGraceMs });
      await state.done;
    }
    return { ...state.info };
  }

  /** Kills every running task (and its process tree); resolves when all are gone. */
  async killAll(): Promise<void> {
    const running = [...this.#tasks.values()].filter((s) => s.info.status === "running");
    await Promise.all(running.map((s) => this.kill(s.info.id)));
  }

  /** Sends SIGKILL to every running task's process group at once (for exit handlers). */
  killAllSync(): void {
    for (const s of this.#tasks.values()) {
      if (s.info.status === "running") {
        s.info.status = "killed";
        killProcessTreeSync(s.proc.child);
      }
    }
  }
}

/** The environment commands run with: the host's, pagers off, no prompts, plus overrides. */
/**
 * True for an environment variable that looks like a credential: a name with a part such as
 * `API_KEY`, `ACCESS_KEY`, `SECRET`, `TOKEN`, `PASSWORD`, `CREDENTIALS` or `PRIVATE_KEY`, the
 * database URLs (`DATABASE_URL`, `*_DSN`, `PGPASSWORD`), or any value holding a URL with a password
 * (`scheme://user:pass@host`). Such variables are not passed to shell commands (manual §8.6: the
 * model must never see the host's keys; an approved `env` would print them).
 */
export function isSecretEnvName(name: string, value = ""): boolean {
  return SECRET_NAME.test(name) || SECRET_EXACT.test(name) || URL_WITH_PASSWORD.test(value);
}

const SECRET_NAME =
  /(^|_)(API_?KEY|ACCESS_?KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE_?KEY)(_|$)/i;
const SECRET_EXACT = /^(DATABASE_URL|PGPASSWORD|[A-Z0-9_]*_DSN)$/i;
const URL_WITH_PASSWORD = /^[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:[^/\s@]+@/i;

function commandEnv(
  extra: Record<string, string> | undefined,
  passEnv: readonly string[] = [],
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(envAll())) {
    if (!isSecretEnvName(name, value) || passEnv.includes(name)) env[name] = value;
  }
  return {
    ...env,
    GIT_PAGER: "cat",
    PAGER: "cat",
    GIT_TERMINAL_PROMPT: "0",
    ...extra,
  };
}

function formatResult(r: ProcessResult, timeoutMs: number): string {
  const lines = [
    `exit_code: ${r.exitCode === null ? "null" : r.exitCode}${
      r.signal ? ` (killed by ${r.signal})` : ""
    }`,
    `timed_out: ${r.timedOut}${r.timedOut ? ` (after ${timeoutMs} ms; process tree killed)` : ""}`,
    `duration_ms: ${r.durationMs}`,
  ];
  if (r.truncated) lines.push("note: output was longer than the capture limit; middle dropped");
  lines.push(`stdout:\n${r.stdout}`);
  if (r.stderr !== "") lines.push(`stderr:\n${r.stderr}`);
  return lines.join("\n");
}

function resolveCwd(workspace: string, raw: unknown): string {
  const cwd = resolveToolPath(workspace, raw, "cwd");
  let ok = false;
  try {
    ok = statSync(cwd).isDirectory();
  } catch {
    ok = false;
  }
  if (!ok) {
    throw new Error(`Cannot run command: cwd ${displayPath(workspace, cwd)} is not a directory`);
  }
  return cwd;
}

/**
 * Registers `run_shell`, `shell_task_output` and `shell_task_kill` (manual §7.1).
 *
 * `run_shell {command, cwd?, timeout_ms?, background?}` runs in the foreground with a timeout
 * (default 120,000 ms, at most 600,000 ms) and returns exit code, stdout, stderr, `timed_out`
 * and `duration_ms`; on `ctx.signal` it kills the whole process tree at once and throws an
 * Error named `"AbortError"`. With `background: true` it returns a task id at once.
 *
 * @param registry The registry to add the tools to.
 * @param workspace Workspace root: the default cwd, and what a relative `cwd` resolves against.
 * @param options Timeouts (ms), capture size (bytes), environment, shell, task manager.
 * @returns The {@link ShellTaskManager} tracking this registration's background tasks.
 *
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerShellTool } from "@zqagent/core/tools/shell";
 * const tasks = registerShellTool(new ToolRegistry(), "/srv/workspace", { defaultTimeoutMs: 60_000 });
 * await tasks.killAll();
 * ```
 */
export function registerShellTool(
  registry: ToolRegistry,
  workspace: string,
  options: ShellToolOptions = {},
): ShellTaskManager {
  const manager = options.manager ?? new ShellTaskManager({ killGraceMs: options.killGraceMs });
  const defaultTimeout = options.defaultTimeoutMs ?? DEFAULT_SHELL_TIMEOUT_MS;
  const maxTimeout = options.maxTimeoutMs ?? MAX_SHELL_TIMEOUT_MS;
  let shell = options.shell;
  const getShell = (): ShellChoice =>
    shell ??= selectShell(process.platform, envAll(), (file) => {
      try {
        return existsSync(file);
      } catch {
        return false; // not readable under Deno's permissions: never prompt (issue 8)
      }
    });

  const runShell = async (args: Record<string, unknown>, ctx?: ToolContext): Promise<string> => {
    const command = stringArg(args, "command", "run_shell");
    if (command.trim() === "") throw new Error("Cannot run command: command is empty");
    const cwd = resolveCwd(workspace, args.cwd);
    const env = commandEnv(options.env, options.passEnv);
    const chosen = getShell();
    if (boolArg(args, "background", false)) {
      const info = manager.start({
        command,
        shell: chosen,
        cwd,
        env,
        wrapCommand: options.wrapCommand,
      });
      return `Started background task ${info.id} (pid ${info.pid}). Read its output with ` +
        `shell_task_output {"task_id": "${info.id}"}; stop it with shell_task_kill.`;
    }
    if (ctx?.signal?.aborted) throw abortError("run_shell");
    const timeoutMs = intArg(args, "timeout_ms", defaultTimeout, 1, maxTimeout);
    const plain = { program: chosen.path, args: [...chosen.args, command], cwd, env };
    const run = options.wrapCommand ? options.wrapCommand(plain) : plain;
    const proc = spawnProcess(run.program, run.args, {
      cwd: run.cwd,
      env: run.env,
      timeoutMs,
      signal: ctx?.signal,
      graceMs: options.killGraceMs,
      maxOutputBytes: options.maxOutputBytes,
    });
    const r = await proc.result;
    // A foreground command may leave processes behind (`cmd &`): they share its process group,
    // so reap the group now rather than leave orphans (long-running work uses background: true).
    killProcessTreeSync(proc.child);
    if (r.aborted) throw abortError("run_shell");
    if (r.spawnError && r.exitCode === null && !r.timedOut) {
      throw new Error(`Cannot run command: ${r.spawnError.message}`);
    }
    return formatResult(r, timeoutMs);
  };

  registry.register(
    runShell,
    {
      category: "shell",
      riskLevel: "high",
      capabilities: ["execute_commands"],
      requiresApproval: true,
      riskClass: RiskClass.EXEC,
    },
    {
      type: "function",
      function: {
        name: "run_shell",
        description: "Run a shell command in the workspace (non-interactive: stdin is closed, " +
          "pagers are off). Returns exit_code, stdout, stderr, timed_out and duration_ms. Use " +
          "background=true for servers and watchers, then shell_task_output to read them.",
        parameters: {
          type: "object",
          properties: {
            command: { type: "string", description: "The command line" },
            cwd: {
              type: "string",
              description: "Working directory, workspace-relative or absolute (default: root)",
            },
            timeout_ms: {
              type: "integer",
              description: `Timeout in ms (default ${defaultTimeout}, max ${maxTimeout})`,
            },
            background: {
              type: "boolean",
              description: "Start as a background task and return its task_id (default false)",
            },
          },
          required: ["command"],
        },
      },
    },
  );

  const taskMeta = {
    category: "shell",
    riskLevel: "low" as const,
    capabilities: ["background_tasks"],
    requiresApproval: false,
    riskClass: RiskClass.READ,
  };

  registry.register(
    async (args, ctx) => {
      const id = stringArg(args, "task_id", "shell_task_output");
      const waitMs = intArg(args, "wait_ms", 0, 0, 30_000);
      const r = await manager.read(id, { waitMs, signal: ctx?.signal });
      const status = r.status === "running"
        ? "running"
        : `${r.status} (exit_code: ${r.exitCode === null ? "null" : r.exitCode}${
          r.signal ? `, signal: ${r.signal}` : ""
        })`;
      const dropped = r.droppedChars > 0
        ? `\n[${r.droppedChars} chars of output were dropped: the buffer is bounded]`
        : "";
      return `task_id: ${r.id}\nstatus: ${status}${dropped}\noutput:\n${r.output}`;
    },
    taskMeta,
    {
      type: "function",
      function: {
        name: "shell_task_output",
        description: "Read the new output (since the last read) and the status of a background " +
          "task started with run_shell background=true.",
        parameters: {
          type: "object",
          properties: {
            task_id: { type: "string", description: "The task id run_shell returned" },
            wait_ms: {
              type: "integer",
              description: "Wait up to this many ms for new output (default 0, max 30000)",
            },
          },
          required: ["task_id"],
        },
      },
    },
  );

  registry.register(
    async (args) => {
      const id = stringArg(args, "task_id", "shell_task_kill");
      const before = manager.get(id);
      const info = await manager.kill(id);
      if (before && before.status !== "running") {
        return `Task ${id} had already ${before.status === "killed" ? "been killed" : "exited"} ` +
          `(exit_code: ${info.exitCode === null ? "null" : info.exitCode})`;
      }
      return `Stopped task ${id} and its process tree${info.signal ? ` (${info.signal})` : ""}`;
    },
    { ...taskMeta, capabilities: ["stop_background_tasks"] },
    {
      type: "function",
      function: {
        name: "shell_task_kill",
        description: "Stop a background task (and every process it started).",
        parameters: {
          type: "object",
          properties: { task_id: { type: "string", description: "The task id" } },
          required: ["task_id"],
        },
      },
    },
  );

  return manager;
}
