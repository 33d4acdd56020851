import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { ConflictGuard, FileConflictError } from "./conflict_guard.ts";
import { ToolRegistry } from "./registry.ts";
import { registerFileTools } from "./fs.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function workspace(files: Record<string, string>): string {
  const dir = tempWorkspace(files);
  cleanups.push(() => removeDir(dir));
  return dir;
}

test("ConflictGuard lets a write through when the file is unchanged since it was read", () => {
  const guard = new ConflictGuard();
  guard.noteRead("/ws/a.txt", "v1");
  assert.doesNotThrow(() => guard.check("/ws/a.txt", "v1"));
});

test("ConflictGuard refuses a write when the file changed since it was read", () => {
  const guard = new ConflictGuard();
  guard.noteRead("/ws/a.txt", new TextEncoder().encode("v1"));
  assert.throws(
    () => guard.check("/ws/a.txt", "v2", { shown: "a.txt" }),
    (e: unknown) => {
      assert.ok(e instanceof FileConflictError);
      assert.equal(e.path, "/ws/a.txt");
      assert.match(e.message, /^Cannot write a\.txt: it changed on disk since it was last read/);
      return true;
    },
  );
});

test("ConflictGuard allows files it never saw and files deleted since", () => {
  const guard = new ConflictGuard();
  assert.doesNotThrow(() => guard.check("/ws/new.txt", "anything"));
  guard.noteRead("/ws/gone.txt", "v1");
  assert.doesNotThrow(() => guard.check("/ws/gone.txt", null));
});

test("ConflictGuard counts the engine's own writes as seen", () => {
  const guard = new ConflictGuard();
  guard.noteRead("/ws/a.txt", "v1");
  guard.noteWrite("/ws/a.txt", "v2");
  assert.doesNotThrow(() => guard.check("/ws/a.txt", "v2"));
  assert.throws(() => guard.check("/ws/a.txt", "v1"), FileConflictError);
  assert.equal(guard.forget("/ws/a.txt"), true);
  assert.equal(guard.has("/ws/a.txt"), false);
});

test("ConflictGuard treats a symlink and its target as one file", () => {
  const dir = workspace({ "real.txt": "v1" });
  symlinkSync(path.join(dir, "real.txt"), path.join(dir, "link.txt"));
  const guard = new ConflictGuard();
  guard.noteRead(path.join(dir, "link.txt"), "v1");
  writeFileSync(path.join(dir, "real.txt"), "v2");
  assert.throws(() => guard.checkFile(path.join(dir, "real.txt")), FileConflictError);
});

function fileTools(dir: string): (name: string, args: Record<string, unknown>) => Promise<string> {
  const registry = new ToolRegistry();
  registerFileTools(registry, dir, { conflictGuard: new ConflictGuard() });
  return async (name, args) => String(await registry.get(name)!.func(args));
}

test("replace_in_file refuses a file edited between read_file and the edit", async () => {
  const dir = workspace({ "a.txt": "hello\n" });
  const call = fileTools(dir);
  await call("read_file", { path: "a.txt" });
  writeFileSync(path.join(dir, "a.txt"), "hello\nthe user typed this\n");
  await assert.rejects(
    call("replace_in_file", { path: "a.txt", old_text: "hello", new_text: "bye" }),
    (e: Error) => e.name === "FileConflictError" && /Cannot edit a\.txt/.test(e.message),
  );
  assert.equal(readFileSync(path.join(dir, "a.txt"), "utf8"), "hello\nthe user typed this\n");
  await call("read_file", { path: "a.txt" });
  await call("replace_in_file", { path: "a.txt", old_text: "hello", new_text: "bye" });
  assert.equal(readFileSync(path.join(dir, "a.txt"), "utf8"), "bye\nthe user typed this\n");
});

test("write_file refuses to overwrite a file edited since read_file", async () => {
  const dir = workspace({ "b.txt": "v1\n" });
  const call = fileTools(dir);
  await call("read_file", { path: "b.txt" });
  writeFileSync(path.join(dir, "b.txt"), "someone else's v2\n");
  await assert.rejects(call("write_file", { path: "b.txt", content: "mine\n" }), FileConflictError);
  assert.equal(readFileSync(path.join(dir, "b.txt"), "utf8"), "someone else's v2\n");
});

test("the engine's own successive edits never conflict with each other", async () => {
  const dir = workspace({ "c.txt": "1 2 3\n" });
  const call = fileTools(dir);
  await call("read_file", { path: "c.txt" });
  await call("replace_in_file", { path: "c.txt", old_text: "1", new_text: "one" });
  await call("replace_in_file", { path: "c.txt", old_text: "2", new_text: "two" });
  await call("write_file", { path: "c.txt", content: "done\n" });
  assert.equal(readFileSync(path.join(dir, "c.txt"), "utf8"), "done\n");
});
