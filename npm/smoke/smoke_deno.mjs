// Deno smoke test of the packed package, run by npm/ci.ts (smoke step) with `deno run -A` in the
// throwaway project where the tarball is installed: the npm build's ESM entries, imported from
// node_modules, isolate the file tools (`sandbox.deno`, DESIGN §5) in the bundled child process
// the package ships (_file_tool_child.mjs): calls inside the workspace work, paths outside it
// (a symlink included) are refused by the child.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { fileURLToPath, pathToFileURL } from "node:url";

assert.ok(globalThis.Deno, "this smoke test runs under Deno");
const name = process.env.SMOKE_PACKAGE;
assert.ok(name, "SMOKE_PACKAGE is set");
const entry = fileURLToPath(import.meta.resolve(name));
const packageDir = path.dirname(entry);
assert.ok(
  entry.includes(`${path.sep}node_modules${path.sep}`) && entry.endsWith(".mjs"),
  `${name} resolves to the installed ESM build (${entry})`,
);
const child = path.join(packageDir, "_file_tool_child.mjs");
assert.ok(fs.existsSync(child), "the package ships the bundled file-tool child");

const core = await import(name);
const tools = await import(`${name}/tools`);
const { isolateFileTools } = await import(`${name}/permissions`);

const tmp = fs.realpathSync(os.tmpdir());
const ws = fs.mkdtempSync(path.join(tmp, "zqagent-deno-smoke-ws-"));
const outside = fs.mkdtempSync(path.join(tmp, "zqagent-deno-smoke-out-"));
let isolation;
try {
  fs.writeFileSync(path.join(ws, "inside.txt"), "inside\n");
  fs.writeFileSync(path.join(outside, "secret.txt"), "secret\n");
  fs.symlinkSync(path.join(outside, "secret.txt"), path.join(ws, "link.txt"));
  // A 1×1 PNG's first bytes (media sniffs the type with the bundled file-type).
  fs.writeFileSync(
    path.join(ws, "pixel.png"),
    Uint8Array.from([
      0x89,
      0x50,
      0x4e,
      0x47,
      0x0d,
      0x0a,
      0x1a,
      0x0a,
      0,
      0,
      0,
      13,
      0x49,
      0x48,
      0x44,
      0x52,
      0,
      0,
      0,
      1,
      0,
      0,
      0,
      1,
      8,
      6,
      0,
      0,
      0,
      0x1f,
      0x15,
      0xc4,
      0x89,
    ]),
  );

  const registry = new tools.ToolRegistry();
  const conflictGuard = new tools.ConflictGuard();
  tools.registerFileTools(registry, ws, { conflictGuard });
  tools.registerDiffTools(registry, ws, { conflictGuard });
  tools.registerSearchTool(registry, ws, { engine: "js" });
  tools.registerMediaTool(registry, ws);
  isolation = isolateFileTools(registry, ws, { grepEngine: "js" });
  const call = (tool, args, ctx) => Promise.resolve(registry.get(tool).func(args, ctx));

  assert.match(String(await call("read_file", { path: "inside.txt" })), /1\tinside/);
  assert.ok(isolation.pid, "read_file ran in a child process");
  if (fs.existsSync(`/proc/${isolation.pid}/cmdline`)) {
    const argv = fs.readFileSync(`/proc/${isolation.pid}/cmdline`, "utf8").split("\0");
    assert.ok(argv.includes(`--allow-read=${ws}`), "the child may read the workspace only");
    assert.ok(argv.includes(pathToFileURL(child).href), "the child is the shipped bundle");
  }
  await assert.rejects(
    call("read_file", { path: path.join(outside, "secret.txt") }),
    /outside the workspace \(refused by the isolated file-tool process\)/,
  );
  await assert.rejects(call("read_file", { path: "link.txt" }), /refused by the isolated/);
  await assert.rejects(
    call("write_file", { path: path.join(outside, "planted.txt"), content: "x" }),
    /refused by the isolated file-tool process/,
  );
  assert.equal(fs.existsSync(path.join(outside, "planted.txt")), false);

  await call("apply_patch", {
    patch: "*** Begin Patch\n*** Add File: notes.md\n+# Notes\n*** End Patch",
  });
  await call("apply_unified_diff", {
    diff: "--- a/inside.txt\n+++ b/inside.txt\n@@ -1 +1 @@\n-inside\n+patched\n",
  });
  assert.equal(fs.readFileSync(path.join(ws, "inside.txt"), "utf8"), "patched\n");
  assert.match(String(await call("grep", { pattern: "Notes" })), /notes\.md:1:# Notes/);
  const queue = [];
  assert.match(
    String(await call("media", { path: "pixel.png" }, { attachments: queue })),
    /^Attached pixel\.png \(image\/png/,
  );
  assert.equal(queue.length, 1);

  const engine = core.createDefaultEngine({
    workspace: ws,
    model: "m",
    sandbox: { mode: "off", deno: true },
  });
  const read = engine.registry.get("read_file").func;
  assert.match(String(await read({ path: "notes.md" })), /# Notes/);
  await assert.rejects(
    Promise.resolve(read({ path: path.join(outside, "secret.txt") })),
    /refused by the isolated file-tool process/,
  );
  console.log(
    `deno: the packed build's isolated file tools work (child ${path.relative(tmp, child)})`,
  );
} finally {
  await isolation?.close();
  fs.rmSync(ws, { recursive: true, force: true });
  fs.rmSync(outside, { recursive: true, force: true });
}
// createDefaultEngine's child is idle and unreferenced; end now rather than at its leisure.
process.exit(0);
