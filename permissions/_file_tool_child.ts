/**
 * The child side of the isolated file tools (DESIGN §5, "Deno permission layer"): started by
 * `isolateFileTools` as `deno run --no-prompt --no-config --allow-read=<ws> --allow-write=<ws>
 * <this module> <ws>`, it runs the built-in tools that touch files — their own code, registered
 * here as the engine registers them — and answers one JSON request per stdin line with one JSON
 * reply per stdout line (`_file_tool_protocol.ts`).
 *
 * Deno's permission checks do not follow symlinks (research deno-first.md §4.4), so before each
 * call every path the call will touch — its path arguments, and the files a patch names — is
 * resolved to its real path and refused unless it is inside the workspace or a directory granted
 * to the calling engine (`_file_tool_guard.ts`).
 *
 * Tool modules are loaded on first use, so a call to `read_file` never waits for (or fails on)
 * the patch library. The npm build bundles this module with everything it loads into one file
 * (`_file_tool_child.mjs`, npm/build.ts). Runtime-neutral code (`node:` modules only); it is only
 * ever started by the Deno binary.
 *
 * @module
 */
import { realpathSync } from "node:fs";
import path from "node:path";
import process from "node:process";
import { createInterface } from "node:readline";
import {
  RiskClass,
  type ToolAttachment,
  type ToolContext,
  ToolRegistry,
} from "../tools/registry.ts";
import { ConflictGuard } from "../tools/conflict_guard.ts";
import { parsePatchEnvelope } from "../tools/_patch_text.ts";
import { checkToolPath, type GrantedRoot, pathArguments } from "./_file_tool_guard.ts";
import type { FileToolReply, FileToolRequest } from "./_file_tool_protocol.ts";

/** The tool modules the child loads, each on its first call. */
type Family = "fs" | "diff" | "media" | "search";

const FAMILY: Record<string, Family> = {
  read_file: "fs",
  list_files: "fs",
  write_file: "fs",
  replace_in_file: "fs",
  apply_patch: "diff",
  apply_unified_diff: "diff",
  media: "media",
  grep: "search",
};

/** Families a subagent's read-only tool set may use. */
const READONLY_FAMILIES: ReadonlySet<Family> = new Set(["fs", "search"]);

/** One tool set: the engine's (`main`) or the subagents' (`readonly`), with its own guard. */
interface Scope {
  registry: ToolRegistry;
  guard: ConflictGuard;
  loaded: Map<Family, Promise<void>>;
  readOnly: boolean;
}

/** Registers a family's tools into `scope`, as `createDefaultEngine` registers them. */
async function load(scope: Scope, family: Family, workspace: string): Promise<void> {
  const { registry, guard: conflictGuard, readOnly } = scope;
  switch (family) {
    case "fs": {
      const { registerFileTools } = await import("../tools/fs.ts");
      registerFileTools(registry, workspace, { conflictGuard, readOnly });
      return;
    }
    case "diff": {
      const { registerDiffTools } = await import("../tools/diff.ts");
      registerDiffTools(registry, workspace, { conflictGuard });
      return;
    }
    case "media": {
      const { registerMediaTool } = await import("../tools/media.ts");
      registerMediaTool(registry, workspace, {
        env: {},
        fetch: () => {
          throw new Error("Cannot attach a URL here: the engine fetches URLs itself");
        },
      });
      return;
    }
    case "search": {
      const { registerSearchTool } = await import("../tools/search.ts");
      // The engine keeps ripgrep searches in its own process; only the JavaScript search,
      // which reads the files itself, comes here.
      registerSearchTool(registry, workspace, { engine: "js" });
      return;
    }
  }
}

/** The files a patch names (both spellings of a git `a/`/`b/` name), or none when unparsable. */
async function patchPaths(tool: string, args: Record<string, unknown>): Promise<string[]> {
  if (tool === "apply_patch" && typeof args.patch === "string") {
    try {
      return parsePatchEnvelope(args.patch).flatMap((op) =>
        op.kind === "update" && op.moveTo !== undefined ? [op.path, op.moveTo] : [op.path]
      );
    } catch {
      return []; // the tool parses the same text and refuses it before touching a file
    }
  }
  if (tool === "apply_unified_diff" && typeof args.diff === "string") {
    const { parsePatch } = await import("diff");
    let patches;
    try {
      patches = parsePatch(args.diff.replace(/\r\n/g, "\n"));
    } catch {
      return [];
    }
    const out: string[] = [];
    for (const p of patches) {
      for (const name of [p.oldFileName, p.newFileName]) {
        if (!name || name === "/dev/null") continue;
        out.push(name);
        if (/^[ab]\//.test(name)) out.push(name.slice(2));
      }
    }
    return out;
  }
  return [];
}

/** A placeholder for media already queued in the engine: only its size counts here. */
function queued(size: number): ToolAttachment {
  return { name: "", mimeType: "", size, path: "", part: {} };
}

async function main(): Promise<void> {
  const given = process.argv[2];
  if (!given) {
    process.stderr.write("Cannot start the file-tool process: no workspace argument\n");
    process.exit(2);
  }
  const workspace = path.resolve(given);
  const realRoot = realpathSync(workspace);
  const scopes = new Map<FileToolRequest["scope"], Scope>();
  const scopeOf = (name: FileToolRequest["scope"]): Scope => {
    let scope = scopes.get(name);
    if (!scope) {
      scope = {
        registry: new ToolRegistry(),
        guard: new ConflictGuard(),
        loaded: new Map(),
        readOnly: name === "readonly",
      };
      scopes.set(name, scope);
    }
    return scope;
  };
  const running = new Map<number, AbortController>();
  const write = (reply: FileToolReply): void => {
    process.stdout.write(JSON.stringify(reply) + "\n");
  };

  const run = async (req: FileToolRequest): Promise<FileToolReply> => {
    const id = req.id;
    const scope = scopeOf(req.scope === "readonly" ? "readonly" : "main");
    const family = FAMILY[req.tool];
    if (!family || (scope.readOnly && !READONLY_FAMILIES.has(family))) {
      throw new Error(`Cannot run ${req.tool}: not an isolated file tool`);
    }
    let loading = scope.loaded.get(family);
    if (!loading) scope.loaded.set(family, loading = load(scope, family, workspace));
    await loading;
    const spec = scope.registry.get(req.tool);
    if (!spec) throw new Error(`Cannot run ${req.tool}: not an isolated file tool`);
    const args = req.args && typeof req.args === "object" ? req.args : {};
    const grants: GrantedRoot[] = Array.isArray(req.grants) ? req.grants : [];
    const check = {
      workspace,
      realRoot,
      grants,
      write: spec.metadata.riskClass === RiskClass.WRITE,
    };
    for (const p of pathArguments(args)) checkToolPath(req.tool, p, check);
    for (const p of await patchPaths(req.tool, args)) checkToolPath(req.tool, p, check);
    const controller = new AbortController();
    running.set(id, controller);
    const queue = Array.isArray(req.attachments) ? req.attachments.map(queued) : undefined;
    const before = queue?.length ?? 0;
    const ctx: ToolContext = {
      signal: controller.signal,
      attachments: queue,
      engine: {
        permissions: {
          workspaceRoot: workspace,
          grantedDirectories: () => grants.map((g) => ({ ...g })),
        },
      },
    };
    try {
      const result = await spec.func(args, ctx);
      const added = queue?.slice(before) ?? [];
      return {
        id,
        ok: true,
        result: typeof result === "string" ? result : JSON.stringify(result),
        ...(added.length > 0 ? { attachments: added } : {}),
      };
    } finally {
      running.delete(id);
    }
  };

  write({ id: 0, ok: true, result: "ready" });
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === "") continue;
    let req: FileToolRequest & { cancel?: boolean };
    try {
      req = JSON.parse(line);
    } catch {
      continue;
    }
    if (req.cancel) {
      running.get(req.id)?.abort();
      continue;
    }
    // Calls run concurrently, as the engine runs read-only calls together.
    void run(req).then(write, (e) => {
      const err = e as Error & { path?: unknown };
      write({
        id: req.id,
        ok: false,
        error: err?.message ?? String(e),
        name: err?.name ?? "Error",
        ...(err?.name === "FileConflictError" && typeof err.path === "string"
          ? { path: err.path }
          : {}),
      });
    });
  }
}

if (import.meta.main) await main();
