/**
 * Runs the built-in tools that read or write workspace files in a child `deno run` process whose
 * permissions cover only the workspace (DESIGN §5, `sandbox: { deno: true }`), so even a bug in
 * the path guard cannot read or write outside it. The child speaks JSON lines over stdio, runs the
 * tools' own code, and resolves real paths itself, because Deno's permission checks do not
 * follow symlinks (research deno-first.md §4.3–4.4).
 *
 * The child is started with `--no-prompt --no-config --no-lock --allow-read=<real ws>
 * --allow-write=<real ws> --allow-env` and a cleared environment (only what Deno needs to find
 * its cache), lazily on the first call, and again after it dies. When the engine is granted a
 * directory outside the workspace (`request_directory`), the next call starts a new child whose
 * grants include it (writable grants only in `--allow-write`); the old one ends when its calls
 * are answered. From source the child is `_file_tool_child.ts` (npm packages come from the
 * `node_modules` folder above it); the npm build ships it bundled as `_file_tool_child.mjs`.
 * Under Node nothing is isolated.
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import path from "node:path";
import process from "node:process";
import { createInterface } from "node:readline";
import { denoExecPath } from "../_internal/deno_permissions.ts";
import { envString } from "../_internal/env.ts";
import { which } from "../_internal/process.ts";
import { FileConflictError } from "../tools/conflict_guard.ts";
import type { ToolContext, ToolFunc, ToolRegistry } from "../tools/registry.ts";
import { checkToolPath, type GrantedRoot, pathArguments, within } from "./_file_tool_guard.ts";
import {
  type FileToolReply,
  type FileToolRequest,
  ISOLATED_FILE_TOOLS,
} from "./_file_tool_protocol.ts";
import { urlScheme } from "./path_guard.ts";

/** Options of {@link isolateFileTools}. */
export interface IsolateFileToolsOptions {
  /** The Deno binary for the child. Default: the one running this process. */
  denoPath?: string;
  /**
   * Where `grep` runs: `"auto"` (default) keeps it in this process when ripgrep is on the PATH
   * (ripgrep is a subprocess, which Deno's permissions cannot confine; the search root is still
   * checked as the child checks paths) and sends it to the child otherwise, where its
   * JavaScript search reads the files; `"js"` always sends it to the child (for a `grep`
   * registered with `engine: "js"`).
   */
  grepEngine?: "auto" | "js";
}

/** Options of {@link FileToolIsolation.route}. */
export interface RouteFileToolsOptions {
  /**
   * Route only `read_file`, `list_files` and `grep`, to a read-only tool set with a conflict
   * guard of its own (a subagent's registry: its reads do not count as the engine's). Default
   * false.
   */
  readOnly?: boolean;
}

/** A running isolation: close it when the engine is done. */
export interface FileToolIsolation {
  /** The tools of the registry given to {@link isolateFileTools} routed to the child process. */
  readonly tools: readonly string[];
  /** The current child's pid while it runs, else `undefined`. */
  readonly pid: number | undefined;
  /**
   * Routes the file tools of another registry (e.g. an `explore` subagent's) to the same child
   * process.
   *
   * @param registry A registry with some of the built-in file tools.
   * @param options `readOnly` for a subagent's read-only tools.
   * @returns The names routed.
   */
  route(registry: ToolRegistry, options?: RouteFileToolsOptions): readonly string[];
  /** Stops the child processes (pending calls fail); resolves when they have exited. */
  close(): Promise<void>;
}

interface Pending {
  resolve: (reply: Extract<FileToolReply, { ok: true }>) => void;
  reject: (error: Error) => void;
}

/** How to start a child. */
interface Launch {
  deno: string;
  runner: string;
  fromSource: boolean;
  workspace: string;
}

/** The tools a read-only (subagent) tool set has. */
const READONLY_TOOLS: ReadonlySet<string> = new Set(["read_file", "list_files", "grep"]);

const live = new Set<ChildProcess>();
let exitHook = false;

/** Directories granted to the engine running the call, real paths, usable as Deno flags. */
function grantsOf(ctx: ToolContext | undefined): GrantedRoot[] {
  const permissions = (ctx?.engine as {
    permissions?: { grantedDirectories?: () => Array<{ path: string; writable: boolean }> };
  } | undefined)?.permissions;
  let list: Array<{ path: string; writable: boolean }> = [];
  try {
    list = permissions?.grantedDirectories?.() ?? [];
  } catch {
    return [];
  }
  const out: GrantedRoot[] = [];
  for (const g of list) {
    if (typeof g?.path !== "string" || !path.isAbsolute(g.path)) continue;
    let real: string;
    try {
      real = realpathSync(g.path);
    } catch {
      continue; // a missing directory grants nothing to read or write
    }
    // Deno's --allow-read takes a comma-separated list: such a path cannot be granted.
    if (!real.includes(",")) out.push({ path: real, writable: g.writable === true });
  }
  return out;
}

/** One child process and the paths its Deno flags grant. */
class FileToolChild {
  readonly read: ReadonlySet<string>;
  readonly write: ReadonlySet<string>;
  #launch: Launch;
  #proc: ChildProcess | undefined;
  #ready: Promise<void> | undefined;
  #pending = new Map<number, Pending>();
  #nextId = 1;
  #stderrTail = "";
  #retired = false;

  constructor(launch: Launch, read: ReadonlySet<string>, write: ReadonlySet<string>) {
    this.#launch = launch;
    this.read = read;
    this.write = write;
  }

  get pid(): number | undefined {
    return this.#proc?.pid;
  }

  /** True when this child's flags already grant every path of `read` and `write`. */
  covers(read: Iterable<string>, write: Iterable<string>): boolean {
    for (const p of read) if (!this.read.has(p)) return false;
    for (const p of write) if (!this.write.has(p)) return false;
    return true;
  }

  #setRef(on: boolean): void {
    const proc = this.#proc;
    if (!proc) return;
    const streams = [proc.stdout, proc.stdin, proc.stderr] as unknown as Array<
      { ref?: () => void; unref?: () => void } | null
    >;
    if (on) {
      proc.ref();
      for (const s of streams) s?.ref?.();
    } else {
      proc.unref();
      for (const s of streams) s?.unref?.();
    }
  }

  #start(): Promise<void> {
    const { deno, runner, fromSource, workspace } = this.#launch;
    const env: Record<string, string> = { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" };
    for (const name of ["DENO_DIR", "HOME", "XDG_CACHE_HOME", "DENO_CERT", "SystemRoot"]) {
      const v = envString(name);
      if (v !== undefined) env[name] = v;
    }
    const proc = spawn(deno, [
      "run",
      "--no-prompt",
      "--no-config",
      "--no-lock",
      "--quiet",
      // From source, npm packages (diff, ignore, file-type) come from the node_modules folder
      // above the source; the npm build's child has them bundled in.
      ...(fromSource ? ["--node-modules-dir=manual"] : []),
      // `file-type` (media) lists the environment when it loads; the environment is cleared.
      "--allow-env",
      `--allow-read=${[...this.read].join(",")}`,
      `--allow-write=${[...this.write].join(",")}`,
      runner,
      workspace,
    ], { cwd: workspace, env, stdio: ["pipe", "pipe", "pipe"], windowsHide: true });
    this.#proc = proc;
    live.add(proc);
    if (!exitHook) {
      exitHook = true;
      process.on("exit", () => {
        for (const c of live) c.kill("SIGKILL");
      });
    }
    this.#stderrTail = "";
    proc.stderr?.on("data", (d: Uint8Array) => {
      this.#stderrTail = (this.#stderrTail + new TextDecoder().decode(d)).slice(-2000);
    });
    proc.stdin?.on("error", () => {/* the child died; reported on exit */});
    return new Promise<void>((resolve, reject) => {
      const lines = createInterface({ input: proc.stdout!, crlfDelay: Infinity });
      lines.on("line", (line) => {
        let reply: FileToolReply;
        try {
          reply = JSON.parse(line);
        } catch {
          return;
        }
        if (reply.id === 0) {
          resolve();
          return;
        }
        const waiter = this.#pending.get(reply.id);
        if (!waiter) return;
        this.#settled(reply.id);
        if (reply.ok) {
          waiter.resolve(reply);
        } else if (reply.name === "FileConflictError" && reply.path !== undefined) {
          waiter.reject(new FileConflictError(reply.error, reply.path));
        } else {
          const err = new Error(reply.error);
          if (reply.name && reply.name !== "Error") err.name = reply.name;
          waiter.reject(err);
        }
      });
      const onGone = (why: string): void => {
        live.delete(proc);
        if (this.#proc === proc) {
          this.#proc = undefined;
          this.#ready = undefined;
        }
        const tail = this.#stderrTail.trim();
        const err = new Error(
          `Cannot run the file tool: the isolated file-tool process ${why}` +
            (tail ? ` (${tail.split("\n").slice(-3).join(" ")})` : ""),
        );
        reject(err);
        for (const [id, waiter] of this.#pending) {
          this.#pending.delete(id);
          waiter.reject(err);
        }
      };
      proc.on("error", (e) => onGone(`could not start: ${e.message}`));
      proc.on("exit", (code, signal) => onGone(`exited (${signal ?? `code ${code}`})`));
    });
  }

  /** Forgets a pending call; lets the process idle (or end, once retired) when none is left. */
  #settled(id: number): void {
    this.#pending.delete(id);
    if (this.#pending.size > 0) return;
    this.#setRef(false);
    if (this.#retired) void this.kill();
  }

  /**
   * Sends one call and waits for its reply.
   *
   * @throws {Error} The tool's error; "Cannot run the file tool: …" when the process died;
   *   an `AbortError` when `signal` aborts first (the child is told to stop the call).
   */
  async request(
    req: Omit<FileToolRequest, "id">,
    signal: AbortSignal | undefined,
  ): Promise<Extract<FileToolReply, { ok: true }>> {
    if (!this.#ready) this.#ready = this.#start();
    this.#setRef(true);
    try {
      await this.#ready;
    } catch (e) {
      if (this.#pending.size === 0) this.#setRef(false);
      throw e;
    }
    const proc = this.#proc;
    if (!proc?.stdin) {
      throw new Error(`Cannot run ${req.tool}: the isolated file-tool process is gone`);
    }
    const id = this.#nextId++;
    const result = new Promise<Extract<FileToolReply, { ok: true }>>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      const onAbort = (): void => {
        if (!this.#pending.has(id)) return;
        this.#settled(id);
        proc.stdin?.write(JSON.stringify({ id, cancel: true }) + "\n");
        const err = new Error(`Cannot finish ${req.tool}: interrupted`);
        err.name = "AbortError";
        reject(err);
      };
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
    proc.stdin.write(JSON.stringify({ id, ...req }) + "\n");
    return await result;
  }

  /** Ends the process once its pending calls are answered (a newer child took over). */
  retire(): void {
    this.#retired = true;
    if (this.#pending.size === 0) void this.kill();
  }

  /** Kills the process; resolves when it has exited. */
  kill(): Promise<void> {
    const proc = this.#proc;
    if (!proc) return Promise.resolve();
    this.#setRef(true); // keep the event loop alive until the exit is seen
    return new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      proc.once("exit", () => resolve());
      proc.kill("SIGKILL");
    });
  }
}

/**
 * Routes the built-in tools of `registry` that touch workspace files — `read_file`,
 * `list_files`, `write_file`, `replace_in_file`, `apply_patch`, `apply_unified_diff`, `media`
 * for a local file, and `grep` when it would not use ripgrep (see
 * {@link IsolateFileToolsOptions.grepEngine}) — to a child `deno run` process limited to
 * `workspace` and the directories granted to the calling engine (Deno only). The tools keep
 * their names, schemas, metadata and results; only where their code runs changes. Other tools
 * are untouched. The child runs the tools with their default options and one conflict guard
 * shared by the file and patch tools, as `createDefaultEngine` registers them; a new child (a
 * crash, a new granted directory) starts with an empty guard.
 *
 * @param registry A registry where the built-in tools are registered.
 * @param workspace The workspace root; its real path is the child's only grant besides granted
 *   directories.
 * @param options The Deno binary to use; where `grep` runs.
 * @returns A handle with `route()` (for a subagent's registry) and `close()`.
 * @throws {Error} "Cannot isolate file tools: …" outside Deno (no Deno binary), when the
 *   workspace does not exist, or when its path holds a comma (Deno's flags cannot name it).
 *
 * @example
 * ```ts
 * import { isolateFileTools } from "@zqagent/core/permissions";
 * import { registerFileTools, ToolRegistry } from "@zqagent/core/tools";
 * const registry = new ToolRegistry();
 * registerFileTools(registry, "/srv/ws");
 * const isolation = isolateFileTools(registry, "/srv/ws");
 * // … run the engine …
 * await isolation.close();
 * ```
 */
export function isolateFileTools(
  registry: ToolRegistry,
  workspace: string,
  options: IsolateFileToolsOptions = {},
): FileToolIsolation {
  const deno = options.denoPath ?? denoExecPath();
  if (!deno) {
    throw new Error("Cannot isolate file tools: they need the Deno runtime (sandbox.deno)");
  }
  const given = path.resolve(workspace);
  let root: string;
  try {
    root = realpathSync(given);
  } catch (e) {
    throw new Error(`Cannot isolate file tools: workspace ${workspace}: ${(e as Error).message}`);
  }
  if (root.includes(",") || given.includes(",")) {
    throw new Error(
      `Cannot isolate file tools: the workspace path ${given} holds a comma, which Deno's ` +
        "--allow-read cannot name",
    );
  }
  // The npm build rewrites this name to the bundled `./_file_tool_child.mjs` (npm/build.ts).
  const runner = new URL("./_file_tool_child.ts", import.meta.url);
  const launch: Launch = {
    deno,
    runner: runner.href,
    fromSource: runner.pathname.endsWith(".ts"),
    workspace: given,
  };
  // Both spellings of the workspace: Deno matches allow-list entries as written.
  const base = new Set([root, given]);
  let current: FileToolChild | undefined;
  const older = new Set<FileToolChild>();

  const childFor = (grants: readonly GrantedRoot[]): FileToolChild => {
    const outside = grants.filter((g) => !within(root, g.path));
    const read = outside.map((g) => g.path);
    const write = outside.filter((g) => g.writable).map((g) => g.path);
    if (current?.covers(read, write)) return current;
    for (const c of older) if (c.pid === undefined) older.delete(c); // retired and ended
    const next = new FileToolChild(
      launch,
      new Set([...(current?.read ?? base), ...read]),
      new Set([...(current?.write ?? base), ...write]),
    );
    if (current) {
      older.add(current);
      current.retire();
    }
    current = next;
    return next;
  };

  const call = async (
    tool: string,
    args: Record<string, unknown>,
    ctx: ToolContext | undefined,
    scope: FileToolRequest["scope"],
  ): Promise<string> => {
    const grants = grantsOf(ctx);
    const reply = await childFor(grants).request({
      tool,
      args,
      scope,
      grants,
      ...(ctx?.attachments ? { attachments: ctx.attachments.map((a) => a.size) } : {}),
    }, ctx?.signal);
    if (reply.attachments?.length) ctx?.attachments?.push(...reply.attachments);
    return reply.result;
  };

  let ripgrep: string | null | undefined = options.grepEngine === "js" ? null : undefined;
  const hasRipgrep = (): boolean => {
    if (ripgrep === undefined) {
      try {
        ripgrep = which("rg"); // as registerSearchTool's "auto" finds it
      } catch {
        ripgrep = null;
      }
    }
    return ripgrep !== null;
  };
  /** A `media` call the child serves: a local file (a path, or a `file:` URL). */
  const isLocalMedia = (args: Record<string, unknown>): boolean => {
    const p = typeof args.path === "string" ? args.path.trim() : "";
    const u = typeof args.url === "string" ? args.url.trim() : "";
    return p !== "" || urlScheme(u) === "file";
  };

  const route = (target: ToolRegistry, opts: RouteFileToolsOptions = {}): string[] => {
    const scope: FileToolRequest["scope"] = opts.readOnly ? "readonly" : "main";
    const routed: string[] = [];
    for (const name of ISOLATED_FILE_TOOLS) {
      const spec = target.get(name);
      if (!spec || (opts.readOnly && !READONLY_TOOLS.has(name))) continue;
      const original = spec.func;
      const viaChild: ToolFunc = (args, ctx) => call(name, args, ctx, scope);
      let func = viaChild;
      if (name === "media") {
        func = (args, ctx) => isLocalMedia(args) ? viaChild(args, ctx) : original(args, ctx);
      } else if (name === "grep") {
        func = async (args, ctx) => {
          if (!hasRipgrep()) return await viaChild(args, ctx);
          // ripgrep stays here (a subprocess Deno cannot confine); its root is checked as the
          // child checks paths, and it never follows links below it (--no-follow).
          const check = {
            workspace: given,
            realRoot: root,
            grants: grantsOf(ctx),
            write: false,
            refusedBy: "the file-tool isolation, before ripgrep",
          };
          for (const p of pathArguments(args)) checkToolPath(name, p, check);
          return await original(args, ctx);
        };
      }
      spec.func = func;
      routed.push(name);
    }
    return routed;
  };

  const tools = route(registry);
  return {
    tools,
    get pid() {
      return current?.pid;
    },
    route,
    async close(): Promise<void> {
      const all = [...older, ...(current ? [current] : [])];
      older.clear();
      current = undefined;
      await Promise.all(all.map((c) => c.kill()));
    },
  };
}
