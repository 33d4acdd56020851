import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { store as target } from "../tests/_target.ts";

// The code under test: the source tree, or the npm build (tests/_target.ts).
const { FileSessionStore } = target;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function folder(): string {
  const d = tempWorkspace();
  cleanups.push(() => removeDir(d));
  return d;
}

const modeOf = (p: string): string => (fs.statSync(p).mode & 0o777).toString(8);

test("every file of a session and the folder the store creates are private to their owner", {
  skip: process.platform === "win32" ? "no POSIX modes on Windows" : false,
}, async () => {
  const dir = path.join(folder(), "a", "sessions");
  const store = new FileSessionStore(dir);
  await store.create("s1");
  const lease = await store.acquire("s1", { ownerId: "w1" });
  assert.ok(lease);
  await store.append(lease, [{ kind: "note", payload: { text: "my password is hunter2" } }]);
  store.writeCheckpointLocal("s1", { messages: [] });
  assert.equal(modeOf(dir), "700");
  assert.equal(modeOf(path.dirname(dir)), "700");
  for (const file of ["s1.jsonl", "s1_state.json", "s1_session.json"]) {
    assert.equal(modeOf(path.join(dir, file)), "600", file);
  }
});

test("a checkpoint written 0644 by an older version becomes private when replaced", {
  skip: process.platform === "win32" ? "no POSIX modes on Windows" : false,
}, () => {
  const dir = folder();
  const file = path.join(dir, "s2_state.json");
  fs.writeFileSync(file, JSON.stringify({ messages: [] }), { mode: 0o644 });
  fs.chmodSync(file, 0o644);
  new FileSessionStore(dir).writeCheckpointLocal("s2", { messages: [] });
  assert.equal(modeOf(file), "600");
});
