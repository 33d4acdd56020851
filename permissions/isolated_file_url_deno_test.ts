// The isolated file-tool process (DESIGN §5, `sandbox: { deno: true }`) judges a `file:` URL as
// the path the file tool will touch (permissions/_file_tool_child.ts converts it as
// tools/_common.ts does): inside works, outside is refused by its own guard.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { registerFileTools, ToolRegistry } from "../tools/mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { isolateFileTools } from "./isolated_file_tools.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

test("the isolated file-tool process takes a file:// URL as the path it names", async () => {
  const ws = tempWorkspace({ "inside.txt": "inside\n" });
  const outside = tempWorkspace({ "secret.txt": "secret\n" });
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  const isolation = isolateFileTools(registry, ws);
  cleanups.push(() => isolation.close());
  const call = (tool: string, args: Record<string, unknown>): Promise<unknown> =>
    Promise.resolve(registry.get(tool)!.func(args));
  const url = (p: string) =>
    pathToFileURL(fs.realpathSync(path.dirname(p))).href + "/" +
    encodeURIComponent(path.basename(p));

  assert.match(
    String(await call("read_file", { path: url(path.join(ws, "inside.txt")) })),
    /inside/,
  );
  await call("write_file", { path: url(path.join(ws, "new.txt")), content: "written" });
  assert.equal(fs.readFileSync(path.join(ws, "new.txt"), "utf8"), "written");
  await assert.rejects(
    call("write_file", { path: url(path.join(outside, "planted.txt")), content: "x" }),
    /outside the workspace \(refused by the isolated file-tool process\)/,
  );
  assert.equal(fs.existsSync(path.join(outside, "planted.txt")), false);
  assert.deepEqual(fs.readdirSync(ws).sort(), ["inside.txt", "new.txt"], "no literal file: folder");
});
