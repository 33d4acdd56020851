// The Deno permission layer's file-tool isolation (DESIGN §5, `sandbox: { deno: true }`): with
// the engine's own path guard bypassed (the test calls the tools directly), the child `deno run`
// process still refuses paths outside the workspace, symlinks pointing out included.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import process from "node:process";
import { createDefaultEngine } from "../engine/create_default_engine.ts";
import {
  registerDiffTools,
  registerFileTools,
  registerMediaTool,
  registerSearchTool,
  type ToolAttachment,
  type ToolContext,
  ToolRegistry,
} from "../tools/mod.ts";
import { ScriptedProvider } from "../testing/mod.ts";
import { which } from "../_internal/process.ts";
import { collect, ofType, removeDir, tempWorkspace, TINY_PNG, until } from "../tests/_util.ts";
import { isolateFileTools } from "./isolated_file_tools.ts";
// Only started as a process, so nothing else type-checks it; importing it starts nothing.
import "./_file_tool_child.ts";

const requireReal = process.env.CI_REQUIRE_REAL === "1";

/** True while a process with this pid exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(): {
  ws: string;
  outside: string;
  call: (t: string, a: object) => Promise<unknown>;
} {
  const ws = tempWorkspace({ "inside.txt": "inside\n" });
  const outside = tempWorkspace({ "secret.txt": "secret\n" });
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  const isolation = isolateFileTools(registry, ws);
  cleanups.push(() => isolation.close());
  const call = (tool: string, args: object): Promise<unknown> =>
    Promise.resolve(registry.get(tool)!.func(args as Record<string, unknown>));
  return { ws, outside, call };
}

test("isolated file tools read and write inside the workspace", async () => {
  const { ws, call } = setup();
  assert.match(String(await call("read_file", { path: "inside.txt" })), /inside/);
  await call("write_file", { path: "new/out.txt", content: "written" });
  assert.equal(fs.readFileSync(path.join(ws, "new/out.txt"), "utf8"), "written");
});

test("the isolated file-tool process refuses a path outside the workspace", async () => {
  const { outside, call } = setup();
  await assert.rejects(
    call("read_file", { path: path.join(outside, "secret.txt") }),
    /outside the workspace/,
  );
  await assert.rejects(
    call("write_file", { path: path.join(outside, "planted.txt"), content: "x" }),
    /outside the workspace/,
  );
  assert.equal(fs.existsSync(path.join(outside, "planted.txt")), false);
});

test("the isolated file-tool process refuses symlinks that point out of the workspace", async () => {
  const { ws, outside, call } = setup();
  fs.symlinkSync(path.join(outside, "secret.txt"), path.join(ws, "link.txt"));
  fs.symlinkSync(outside, path.join(ws, "linkdir"));
  await assert.rejects(call("read_file", { path: "link.txt" }), /outside the workspace/);
  await assert.rejects(call("list_files", { path: "linkdir" }), /outside the workspace/);
  await assert.rejects(
    call("write_file", { path: "linkdir/planted.txt", content: "x" }),
    /outside the workspace/,
  );
  assert.equal(fs.existsSync(path.join(outside, "planted.txt")), false);
  assert.equal(fs.readFileSync(path.join(outside, "secret.txt"), "utf8"), "secret\n");
});

test("a path climbing out of the workspace with .. is refused by the child process", async () => {
  const { call } = setup();
  await assert.rejects(call("read_file", { path: "../../../../etc/hostname" }), /outside/);
});

test("createDefaultEngine with sandbox.deno routes the file tools to the child process", async () => {
  const ws = tempWorkspace({ "a.txt": "a\n" });
  const outside = tempWorkspace({ "secret.txt": "s\n" });
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  const engine = createDefaultEngine({
    workspace: ws,
    model: "m",
    sandbox: { mode: "off", deno: true },
  });
  assert.equal(engine.permissions.sandbox.deno, true);
  // Bypass the permission engine: call the registered function directly.
  const read = engine.registry.get("read_file")!.func;
  assert.match(String(await read({ path: "a.txt" })), /a/);
  await assert.rejects(
    Promise.resolve(read({ path: path.join(outside, "secret.txt") })),
    /refused by the isolated file-tool process/,
  );
});

// --- the patch tools, grep and media (they touch files too) ---

test("the isolated patch tools refuse files a patch names outside the workspace, links included", async () => {
  const ws = tempWorkspace({ "inside.txt": "inside\n" });
  const outside = tempWorkspace({ "secret.txt": "secret\n" });
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  fs.symlinkSync(outside, path.join(ws, "linkdir"));
  const registry = new ToolRegistry();
  registerDiffTools(registry, ws);
  const isolation = isolateFileTools(registry, ws);
  cleanups.push(() => isolation.close());
  const call = (tool: string, args: Record<string, unknown>) =>
    Promise.resolve(registry.get(tool)!.func(args));
  await assert.rejects(
    call("apply_patch", {
      patch: "*** Begin Patch\n*** Update File: linkdir/secret.txt\n@@\n-secret\n+owned\n" +
        "*** End Patch",
    }),
    /linkdir\/secret\.txt: it resolves to .*outside the workspace \(refused by the isolated/,
  );
  await assert.rejects(
    call("apply_patch", {
      patch: "*** Begin Patch\n*** Update File: inside.txt\n*** Move to: ../planted.txt\n@@\n" +
        "-inside\n+moved\n*** End Patch",
    }),
    /refused by the isolated file-tool process/,
  );
  await assert.rejects(
    call("apply_unified_diff", {
      diff: "--- a/linkdir/secret.txt\n+++ b/linkdir/secret.txt\n@@ -1 +1 @@\n-secret\n+owned\n",
    }),
    /refused by the isolated file-tool process/,
  );
  assert.equal(fs.readFileSync(path.join(outside, "secret.txt"), "utf8"), "secret\n");
  assert.equal(fs.readFileSync(path.join(ws, "inside.txt"), "utf8"), "inside\n");
  assert.equal(fs.existsSync(path.join(path.dirname(ws), "planted.txt")), false);
});

test("a patch tool whose own path check lets a path out is still refused by the child", async () => {
  const ws = tempWorkspace({});
  const outside = tempWorkspace({ "secret.txt": "secret\n" });
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  // A "bug": the tool is told the outside folder is writable. In this process it writes there.
  const patch = `*** Begin Patch\n*** Add File: ${path.join(outside, "planted.txt")}\n+x\n` +
    "*** End Patch";
  const plain = new ToolRegistry();
  registerDiffTools(plain, ws, { writableRoots: () => [outside] });
  await plain.get("apply_patch")!.func({ patch });
  assert.equal(fs.existsSync(path.join(outside, "planted.txt")), true, "in-process it escapes");
  fs.rmSync(path.join(outside, "planted.txt"));

  const registry = new ToolRegistry();
  registerDiffTools(registry, ws, { writableRoots: () => [outside] });
  const isolation = isolateFileTools(registry, ws);
  cleanups.push(() => isolation.close());
  await assert.rejects(
    Promise.resolve(registry.get("apply_patch")!.func({ patch })),
    /outside the workspace \(refused by the isolated file-tool process\)/,
  );
  assert.equal(fs.existsSync(path.join(outside, "planted.txt")), false);
});

test("grep's JavaScript search runs in the child and cannot follow a link out", async () => {
  const ws = tempWorkspace({ "a.txt": "needle here\n" });
  const outside = tempWorkspace({ "secret.txt": "needle secret\n" });
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  fs.symlinkSync(outside, path.join(ws, "linkdir"));
  const plain = new ToolRegistry();
  registerSearchTool(plain, ws, { engine: "js" });
  assert.match(
    String(await plain.get("grep")!.func({ pattern: "needle", path: "linkdir" })),
    /secret/,
  );

  const registry = new ToolRegistry();
  registerSearchTool(registry, ws, { engine: "js" });
  const isolation = isolateFileTools(registry, ws, { grepEngine: "js" });
  cleanups.push(() => isolation.close());
  const grep = (args: Record<string, unknown>) => Promise.resolve(registry.get("grep")!.func(args));
  assert.match(String(await grep({ pattern: "needle" })), /^1 matching line in 1 file\na\.txt:1:/);
  assert.ok(isolation.pid, "grep ran in the child");
  await assert.rejects(
    grep({ pattern: "needle", path: "linkdir" }),
    /refused by the isolated file-tool process/,
  );
});

test(
  "grep with ripgrep stays in the engine's process, its search root checked first",
  {
    skip: which("rg") || requireReal ? false : "ripgrep (rg) is not on the PATH",
  },
  async () => {
    assert.ok(which("rg"), "ripgrep must be on the PATH (CI_REQUIRE_REAL=1)");
    const ws = tempWorkspace({ "a.txt": "needle here\n" });
    const outside = tempWorkspace({ "secret.txt": "needle secret\n" });
    cleanups.push(() => removeDir(ws), () => removeDir(outside));
    fs.symlinkSync(outside, path.join(ws, "linkdir"));
    const registry = new ToolRegistry();
    registerSearchTool(registry, ws);
    const isolation = isolateFileTools(registry, ws);
    cleanups.push(() => isolation.close());
    const grep = (args: Record<string, unknown>) =>
      Promise.resolve(registry.get("grep")!.func(args));
    assert.match(String(await grep({ pattern: "needle" })), /a\.txt:1:needle here/);
    assert.equal(isolation.pid, undefined, "no child process was needed");
    await assert.rejects(
      grep({ pattern: "needle", path: "linkdir" }),
      /outside the workspace \(refused by the file-tool isolation, before ripgrep\)/,
    );
    await assert.rejects(grep({ pattern: "needle", path: outside }), /outside the workspace/);
  },
);

test("media reads a local file in the child and fetches a URL in the engine's process", async () => {
  const ws = tempWorkspace({});
  const outside = tempWorkspace({});
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  fs.writeFileSync(path.join(ws, "pixel.png"), TINY_PNG);
  fs.writeFileSync(path.join(outside, "secret.png"), TINY_PNG);
  fs.symlinkSync(path.join(outside, "secret.png"), path.join(ws, "link.png"));
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "image/png" });
    res.end(TINY_PNG);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as { port: number }).port;
  const registry = new ToolRegistry();
  registerMediaTool(registry, ws);
  const isolation = isolateFileTools(registry, ws);
  cleanups.push(() => isolation.close());
  const queue: ToolAttachment[] = [];
  const media = (args: Record<string, unknown>) =>
    Promise.resolve(registry.get("media")!.func(args, { attachments: queue }));
  assert.match(String(await media({ path: "pixel.png" })), /^Attached pixel\.png \(image\/png/);
  assert.match(
    String(await media({ url: `http://127.0.0.1:${port}/shot.png` })),
    /^Attached shot\.png \(image\/png/,
  );
  await assert.rejects(media({ path: "link.png" }), /refused by the isolated file-tool process/);
  assert.deepEqual(queue.map((a) => [a.name, a.mimeType, a.size]), [
    ["pixel.png", "image/png", TINY_PNG.byteLength],
    ["shot.png", "image/png", TINY_PNG.byteLength],
  ]);
  assert.match(
    String(queue[0].part.image_url && JSON.stringify(queue[0].part)),
    /base64,iVBORw0KGgo/,
  );
});

// --- granted directories, subagents, interruption ---

test("a granted directory is readable in the child, and writable only once granted so", async () => {
  const ws = tempWorkspace({});
  const outside = tempWorkspace({ "shared.txt": "shared\n" });
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  const isolation = isolateFileTools(registry, ws);
  cleanups.push(() => isolation.close());
  let grants: { path: string; writable: boolean }[] = [];
  const ctx: ToolContext = { engine: { permissions: { grantedDirectories: () => grants } } };
  const call = (tool: string, args: Record<string, unknown>) =>
    Promise.resolve(registry.get(tool)!.func(args, ctx));
  const file = path.join(outside, "shared.txt");
  await assert.rejects(call("read_file", { path: file }), /outside the workspace \(refused/);

  grants = [{ path: outside, writable: false }];
  assert.match(String(await call("read_file", { path: file })), /shared/);
  await assert.rejects(
    call("write_file", { path: path.join(outside, "new.txt"), content: "x" }),
    /outside the workspace and the writable granted directories/,
  );
  const first = isolation.pid;

  grants = [{ path: outside, writable: true }];
  await call("write_file", { path: path.join(outside, "new.txt"), content: "x" });
  assert.equal(fs.readFileSync(path.join(outside, "new.txt"), "utf8"), "x");
  assert.notEqual(isolation.pid, first, "a child with the wider grant took over");
  await until(() => !alive(first!), "the older child to end");
});

test("a subagent's read-only tools use the child with a conflict guard of their own", async () => {
  const ws = tempWorkspace({ "c.txt": "v1\n" });
  cleanups.push(() => removeDir(ws));
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  const isolation = isolateFileTools(registry, ws);
  cleanups.push(() => isolation.close());
  const sub = new ToolRegistry();
  registerFileTools(sub, ws);
  registerSearchTool(sub, ws);
  const write = sub.get("write_file")!.func;
  assert.deepEqual([...isolation.route(sub, { readOnly: true })].sort(), [
    "grep",
    "list_files",
    "read_file",
  ]);
  assert.equal(sub.get("write_file")!.func, write, "write tools are left alone");
  assert.match(String(await sub.get("read_file")!.func({ path: "c.txt" })), /v1/);
  fs.writeFileSync(path.join(ws, "c.txt"), "edited by the user\n");
  // The engine never read c.txt itself: its guard has nothing to object to.
  await registry.get("write_file")!.func({ path: "c.txt", content: "v2\n" });
  assert.equal(fs.readFileSync(path.join(ws, "c.txt"), "utf8"), "v2\n");
});

test("createDefaultEngine with sandbox.deno sends the explore subagent's reads to the child", {
  skip: process.platform === "linux" || requireReal ? false : "looks for the child in /proc",
}, async () => {
  const ws = tempWorkspace({ "a.txt": "alpha\n" });
  cleanups.push(() => removeDir(ws));
  const provider = new ScriptedProvider([
    { toolCalls: [{ id: "e", name: "explore", arguments: { task: "What is in a.txt?" } }] },
    { toolCalls: [{ id: "r", name: "read_file", arguments: { path: "a.txt" } }] },
    { text: "a.txt holds alpha" },
    { text: "done" },
  ]);
  const engine = createDefaultEngine({
    workspace: ws,
    model: "m",
    provider,
    defaultApproval: "allow",
    sandbox: { mode: "off", deno: true },
  });
  const { events } = await collect(engine.run("explore"));
  const explored = ofType(events, "tool_finished").find((e) => e.data.name === "explore");
  assert.equal(explored?.data.status, "ok");
  // Only the subagent touched a file: a child process for this workspace exists because of it.
  const children = fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p)).filter((pid) => {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
      return cmd.at(-2)?.endsWith("/_file_tool_child.ts") && cmd.at(-1) === ws;
    } catch {
      return false;
    }
  });
  assert.equal(children.length, 1);
  cleanups.push(() => void process.kill(Number(children[0]), "SIGKILL"));
});

test("an interrupted call fails at once with an AbortError and the child keeps serving", async () => {
  const ws = tempWorkspace({ "a.txt": "a\n" });
  cleanups.push(() => removeDir(ws));
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  const isolation = isolateFileTools(registry, ws);
  cleanups.push(() => isolation.close());
  const read = registry.get("read_file")!.func;
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(
    Promise.resolve(read({ path: "a.txt" }, { signal: controller.signal })),
    { name: "AbortError" },
  );
  assert.match(String(await read({ path: "a.txt" })), /a/);
});
