// The Deno permission layer's file-tool isolation (DESIGN §5, `sandbox: { deno: true }`): with
// the engine's own path guard bypassed (the test calls the tools directly), the child `deno run`
// process still refuses paths outside the workspace, symlinks pointing out included.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createDefaultEngine } from "../engine/create_default_engine.ts";
import { registerFileTools, ToolRegistry } from "../tools/mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { isolateFileTools } from "./isolated_file_tools.ts";

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
