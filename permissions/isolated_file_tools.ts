/**
 * Runs the built-in file tools in a child `deno run` process whose permissions cover only the
 * workspace (DESIGN §5, `sandbox: { deno: true }`), so even a bug in the path guard cannot read
 * or write outside it. The child speaks JSON lines over stdio and resolves real paths itself,
 * because Deno's permission checks do not follow symlinks (research deno-first.md §4.3–4.4).
 *
 * The child is started with `--no-prompt --no-config --no-lock --allow-read=<real ws>
 * --allow-write=<real ws>` and a cleared environment (only what Deno needs to find its cache),
 * lazily on the first call, and again after it dies. Under Node nothing is isolated.
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import process from "node:process";
import { createInterface } from "node:readline";
import { denoExecPath } from "../_internal/deno_permissions.ts";
import { envString } from "../_internal/env.ts";
import type { ToolContext, ToolRegistry } from "../tools/mod.ts";
import { type FileToolReply, ISOLATED_FILE_TOOLS } from "./_file_tool_protocol.ts";

/** Options of {@link isolateFileTools}. */
export interface IsolateFileToolsOptions {
  /** The Deno binary for the child. Default: the one running this process. */
  denoPath?: string;
}

/** A running isolation: close it when the engine is done. */
export interface FileToolIsolation {
  /** The tools routed to the child process. */
  readonly tools: readonly string[];
  /** The child's pid while it runs, else `undefined`. */
  readonly pid: number | undefined;
  /** Stops the child process (pending calls fail); resolves when it has exited. */
  close(): Promise<void>;
}

interface Pending {
  resolve: (value: string) => void;
  reject: (error: Error) => void;
}

const live = new Set<ChildProcess>();
let exitHook = false;

/**
 * Routes `read_file`, `list_files`, `write_file` and `replace_in_file` of `registry` to a child
 * `deno run` process limited to `workspace` (Deno only). The tools keep their names, schemas and
 * metadata; only their implementation moves. Other tools are untouched.
 *
 * @param registry A registry where the file tools are registered.
 * @param workspace The workspace root; its real path is the child's only grant.
 * @param options The Deno binary to use.
 * @returns A handle with `close()`.
 * @throws {Error} "Cannot isolate file tools: …" outside Deno (no Deno binary), or when the
 *   workspace does not exist.
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
  let root: string;
  try {
    root = realpathSync(workspace);
  } catch (e) {
    throw new Error(`Cannot isolate file tools: workspace ${workspace}: ${(e as Error).message}`);
  }
  const runner = new URL("./_file_tool_child.ts", import.meta.url).href;
  let child: ChildProcess | undefined;
  let ready: Promise<void> | undefined;
  let nextId = 1;
  const pending = new Map<number, Pending>();
  let stderrTail = "";

  const setRef = (on: boolean): void => {
    if (!child) return;
    const streams = [child.stdout, child.stdin, child.stderr] as unknown as Array<
      { ref?: () => void; unref?: () => void } | null
    >;
    if (on) {
      child.ref();
      for (const s of streams) s?.ref?.();
    } else {
      child.unref();
      for (const s of streams) s?.unref?.();
    }
  };

  const start = (): Promise<void> => {
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
      `--allow-read=${root}`,
      `--allow-write=${root}`,
      runner,
      root,
    ], { cwd: root, env, stdio: ["pipe", "pipe", "pipe"], windowsHide: true });
    child = proc;
    live.add(proc);
    if (!exitHook) {
      exitHook = true;
      process.on("exit", () => {
        for (const c of live) c.kill("SIGKILL");
      });
    }
    stderrTail = "";
    proc.stderr?.on("data", (d: Uint8Array) => {
      stderrTail = (stderrTail + new TextDecoder().decode(d)).slice(-2000);
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
        const waiter = pending.get(reply.id);
        if (!waiter) return;
        pending.delete(reply.id);
        if (pending.size === 0) setRef(false);
        if (reply.ok) {
          waiter.resolve(reply.result);
        } else {
          const err = new Error(reply.error);
          if (reply.name && reply.name !== "Error") err.name = reply.name;
          waiter.reject(err);
        }
      });
      const onGone = (why: string): void => {
        live.delete(proc);
        if (child === proc) {
          child = undefined;
          ready = undefined;
        }
        const err = new Error(
          `Cannot run the file tool: the isolated file-tool process ${why}` +
            (stderrTail.trim() ? ` (${stderrTail.trim().split("\n").slice(-3).join(" ")})` : ""),
        );
        reject(err);
        for (const [id, waiter] of pending) {
          pending.delete(id);
          waiter.reject(err);
        }
      };
      proc.on("error", (e) => onGone(`could not start: ${e.message}`));
      proc.on("exit", (code, signal) => onGone(`exited (${signal ?? `code ${code}`})`));
    });
  };

  const call = async (tool: string, args: Record<string, unknown>, ctx?: ToolContext) => {
    if (!ready) ready = start();
    setRef(true);
    try {
      await ready;
    } catch (e) {
      if (pending.size === 0) setRef(false);
      throw e;
    }
    const proc = child;
    if (!proc?.stdin) throw new Error(`Cannot run ${tool}: the isolated file-tool process is gone`);
    const id = nextId++;
    const result = new Promise<string>((resolve, reject) => {
      pending.set(id, { resolve, reject });
      const onAbort = (): void => {
        if (!pending.delete(id)) return;
        if (pending.size === 0) setRef(false);
        const err = new Error(`Cannot finish ${tool}: interrupted`);
        err.name = "AbortError";
        reject(err);
      };
      if (ctx?.signal?.aborted) onAbort();
      else ctx?.signal?.addEventListener("abort", onAbort, { once: true });
    });
    proc.stdin.write(JSON.stringify({ id, tool, args }) + "\n");
    return await result;
  };

  const routed: string[] = [];
  for (const name of ISOLATED_FILE_TOOLS) {
    const spec = registry.get(name);
    if (!spec) continue;
    spec.func = (args: Record<string, unknown>, ctx?: ToolContext) => call(name, args, ctx);
    routed.push(name);
  }

  return {
    tools: routed,
    get pid() {
      return child?.pid;
    },
    close(): Promise<void> {
      const proc = child;
      if (!proc) return Promise.resolve();
      setRef(true); // keep the event loop alive until the exit is seen
      return new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once("exit", () => resolve());
        proc.kill("SIGKILL");
      });
    },
  };
}
