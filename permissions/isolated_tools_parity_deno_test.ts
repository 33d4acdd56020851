// The isolated tools (DESIGN §5, `sandbox: { deno: true }`) give the same results as the same
// tools in the engine's own process: the same calls on two copies of a workspace, one registry
// isolated and one not, return the same text, fail with the same error, queue the same media and
// leave the same files.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  ConflictGuard,
  FileConflictError,
  registerDiffTools,
  registerFileTools,
  registerMediaTool,
  registerSearchTool,
  type ToolAttachment,
  type ToolContext,
  ToolRegistry,
} from "../tools/mod.ts";
import { removeDir, tempWorkspace, TINY_PNG } from "../tests/_util.ts";
import { isolateFileTools } from "./isolated_file_tools.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const FILES = {
  "a.txt": "one\ntwo\nthree\n",
  "crlf.txt": "first\r\nsecond\r\n",
  "src/app.ts": "export const name = 'app';\nexport function run() {\n  return name;\n}\n",
  "src/util.ts": "export const twice = (n: number) => n * 2;\n",
  "notes/todo.md": "- write tests\n- ship\n",
};

/** The built-in tools that touch files, as createDefaultEngine registers them. */
function tools(ws: string): ToolRegistry {
  const registry = new ToolRegistry();
  const conflictGuard = new ConflictGuard();
  registerFileTools(registry, ws, { conflictGuard });
  registerDiffTools(registry, ws, { conflictGuard });
  registerSearchTool(registry, ws, { engine: "js" });
  registerMediaTool(registry, ws);
  return registry;
}

/** Every file under `dir` with its content, relative paths sorted. */
function tree(dir: string, prefix = ""): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of fs.readdirSync(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) Object.assign(out, tree(dir, rel));
    else out[rel] = fs.readFileSync(path.join(dir, rel), "latin1");
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

interface Step {
  tool: string;
  args: Record<string, unknown>;
  /** Runs on the workspace before the call (e.g. someone else edits a file). */
  before?: (ws: string) => void;
}

const STEPS: Step[] = [
  { tool: "read_file", args: { path: "a.txt" } },
  { tool: "read_file", args: { path: "a.txt", offset: 2, limit: 1 } },
  { tool: "read_file", args: { path: "missing.txt" } },
  { tool: "read_file", args: { path: "src" } },
  { tool: "list_files", args: {} },
  { tool: "list_files", args: { path: "src", recursive: true } },
  { tool: "write_file", args: { path: "new/b.txt", content: "bee\n" } },
  { tool: "write_file", args: { path: "crlf.txt", content: "first\nsecond\nthird\n" } },
  { tool: "replace_in_file", args: { path: "a.txt", old_text: "two", new_text: "2" } },
  { tool: "replace_in_file", args: { path: "a.txt", old_text: "absent", new_text: "x" } },
  {
    tool: "apply_patch",
    args: {
      patch: [
        "*** Begin Patch",
        "*** Add File: docs/readme.md",
        "+# Docs",
        "*** Update File: src/app.ts",
        "@@ export function run() {",
        "-  return name;",
        "+  return name.toUpperCase();",
        "*** Update File: notes/todo.md",
        "*** Move to: notes/done.md",
        "@@",
        " - write tests",
        "-- ship",
        "+- shipped",
        "*** Delete File: src/util.ts",
        "*** End Patch",
      ].join("\n"),
    },
  },
  {
    tool: "apply_patch",
    args: {
      patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-not there\n+x\n*** End Patch",
    },
  },
  {
    tool: "apply_unified_diff",
    args: {
      diff: "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n-one\n+uno\n 2\n three\n",
    },
  },
  { tool: "grep", args: { pattern: "name", context: 1 } },
  { tool: "grep", args: { pattern: "(unclosed" } },
  {
    tool: "media",
    args: { path: "pixel.png" },
    before: (ws) => fs.writeFileSync(path.join(ws, "pixel.png"), TINY_PNG),
  },
  { tool: "media", args: { path: "a.txt" } },
  // Someone else edits a file the engine read: both refuse to overwrite it.
  { tool: "read_file", args: { path: "docs/readme.md" } },
  {
    tool: "write_file",
    args: { path: "docs/readme.md", content: "mine\n" },
    before: (ws) => fs.writeFileSync(path.join(ws, "docs/readme.md"), "theirs\n"),
  },
];

/** Runs a step; the outcome with the workspace path replaced, so two workspaces compare. */
async function outcome(
  registry: ToolRegistry,
  ws: string,
  step: Step,
  queue: ToolAttachment[],
): Promise<unknown> {
  step.before?.(ws);
  const ctx: ToolContext = { attachments: queue };
  const clean = (s: string) => s.replaceAll(ws, "<ws>");
  try {
    const result = await registry.get(step.tool)!.func(step.args, ctx);
    return { result: clean(String(result)) };
  } catch (e) {
    const err = e as Error;
    return {
      error: clean(err.message),
      name: err.name,
      conflict: err instanceof FileConflictError ? clean(err.path) : undefined,
    };
  }
}

test("the isolated tools give the same results, errors, media and files as in-process ones", async () => {
  const plain = tempWorkspace(FILES);
  const isolated = tempWorkspace(FILES);
  cleanups.push(() => removeDir(plain), () => removeDir(isolated));
  const inProcess = tools(plain);
  const routed = tools(isolated);
  const isolation = isolateFileTools(routed, isolated, { grepEngine: "js" });
  cleanups.push(() => isolation.close());
  assert.deepEqual([...isolation.tools].sort(), [
    "apply_patch",
    "apply_unified_diff",
    "grep",
    "list_files",
    "media",
    "read_file",
    "replace_in_file",
    "write_file",
  ]);
  const plainQueue: ToolAttachment[] = [];
  const isolatedQueue: ToolAttachment[] = [];
  for (const [i, step] of STEPS.entries()) {
    const want = await outcome(inProcess, plain, step, plainQueue);
    const got = await outcome(routed, isolated, step, isolatedQueue);
    assert.deepEqual(got, want, `step ${i}: ${step.tool} ${JSON.stringify(step.args)}`);
  }
  assert.ok(isolation.pid, "the calls ran in a child process");
  assert.deepEqual(isolatedQueue, plainQueue);
  assert.equal(isolatedQueue.length, 1, "one image was queued");
  assert.deepEqual(tree(isolated), tree(plain));
  assert.match(tree(isolated)["crlf.txt"], /\r\nthird\r\n$/, "the write kept CRLF");
});

test("names, schemas and metadata of the isolated tools are those of the in-process tools", () => {
  const ws = tempWorkspace(FILES);
  cleanups.push(() => removeDir(ws));
  const before = tools(ws).list().map((s) => ({ ...s, func: undefined }));
  const routed = tools(ws);
  const isolation = isolateFileTools(routed, ws);
  cleanups.push(() => isolation.close());
  assert.deepEqual(routed.list().map((s) => ({ ...s, func: undefined })), before);
});
