/**
 * The child side of the isolated file tools (DESIGN §5, "Deno permission layer"): started by
 * `isolateFileTools` as `deno run --no-prompt --no-config --allow-read=<ws> --allow-write=<ws>
 * <this module> <ws>`, it runs the built-in file tools and answers one JSON request per stdin
 * line with one JSON reply per stdout line.
 *
 * Deno's permission checks do not follow symlinks (research deno-first.md §4.4), so before each
 * call the child resolves every path argument to its real path (the target's, or its nearest
 * existing parent's) and refuses anything outside the real workspace itself.
 *
 * Runtime-neutral code (`node:` modules only); it is only ever started by the Deno binary.
 *
 * @module
 */
import { realpathSync } from "node:fs";
import path from "node:path";
import process from "node:process";
import { createInterface } from "node:readline";
import { registerFileTools } from "../tools/fs.ts";
import { ToolRegistry } from "../tools/registry.ts";
import { pathFromFileUrl } from "./path_guard.ts";
import {
  FILE_TOOL_PATH_KEYS,
  type FileToolReply,
  type FileToolRequest,
} from "./_file_tool_protocol.ts";

/** The real path of `p`, or of its nearest existing parent with the missing tail appended. */
function realPathOf(p: string): string {
  const rest: string[] = [];
  let cur = p;
  for (;;) {
    try {
      const real = realpathSync(cur);
      return path.join(real, ...rest.reverse());
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") throw e;
      const parent = path.dirname(cur);
      if (parent === cur) return p;
      rest.push(path.basename(cur));
      cur = parent;
    }
  }
}

function inside(root: string, target: string): boolean {
  const rel = path.relative(root, target);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

/** Refuses a call whose path arguments resolve outside the real workspace. */
function guard(root: string, tool: string, args: Record<string, unknown>): void {
  const raw: string[] = [];
  for (const key of FILE_TOOL_PATH_KEYS) {
    const v = args[key];
    if (typeof v === "string" && v !== "") raw.push(v);
  }
  if (Array.isArray(args.paths)) {
    for (const v of args.paths) if (typeof v === "string") raw.push(v);
  }
  for (const given of raw) {
    // A `file:` URL names the path the file tool will touch (tools/_common.ts converts it too).
    const p = pathFromFileUrl(given);
    if (p.includes("\0")) throw new Error(`Cannot run ${tool}: the path contains a NUL character`);
    if (p === "~" || p.startsWith("~/") || p.startsWith("~")) {
      throw new Error(`Cannot run ${tool} on ${p}: outside the workspace (isolated file tools)`);
    }
    const lexical = path.resolve(root, p);
    let real = lexical;
    if (inside(root, lexical)) {
      try {
        real = realPathOf(lexical);
      } catch {
        real = "an unreadable path"; // e.g. NotCapable: Deno's grant refused it
      }
    }
    if (!inside(root, lexical) || !inside(root, real)) {
      throw new Error(
        `Cannot run ${tool} on ${p}: it resolves to ${real}, outside the workspace ` +
          "(refused by the isolated file-tool process)",
      );
    }
  }
}

async function main(): Promise<void> {
  const given = process.argv[2];
  if (!given) {
    process.stderr.write("Cannot start the file-tool process: no workspace argument\n");
    process.exit(2);
  }
  const root = realpathSync(given);
  const registry = new ToolRegistry();
  registerFileTools(registry, root);
  const write = (reply: FileToolReply): void => {
    process.stdout.write(JSON.stringify(reply) + "\n");
  };
  write({ id: 0, ok: true, result: "ready" });
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === "") continue;
    let req: FileToolRequest;
    try {
      req = JSON.parse(line);
    } catch {
      continue;
    }
    const id = req.id;
    // Calls run concurrently, as the engine runs read-only calls together.
    void (async () => {
      try {
        const spec = registry.get(req.tool);
        if (!spec) throw new Error(`Cannot run ${req.tool}: not an isolated file tool`);
        const args = req.args && typeof req.args === "object" ? req.args : {};
        guard(root, req.tool, args);
        const result = await spec.func(args);
        write({
          id,
          ok: true,
          result: typeof result === "string" ? result : JSON.stringify(result),
        });
      } catch (e) {
        const err = e as Error;
        write({ id, ok: false, error: err?.message ?? String(e), name: err?.name ?? "Error" });
      }
    })();
  }
}

if (import.meta.main) await main();
