import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import process from "node:process";
import path from "node:path";
import { writeFileAtomic, writeFileAtomicSync } from "./atomic_write.ts";

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "zq-atomic-"));
}

test("an atomic write replaces the file and leaves no temporary file", async () => {
  const dir = tempDir();
  try {
    const file = path.join(dir, "state.json");
    fs.writeFileSync(file, "old");
    writeFileAtomicSync(file, "new");
    assert.equal(fs.readFileSync(file, "utf8"), "new");
    await writeFileAtomic(file, new TextEncoder().encode("newer"));
    assert.equal(fs.readFileSync(file, "utf8"), "newer");
    assert.deepEqual(fs.readdirSync(dir), ["state.json"]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a failed atomic write keeps the old file and removes its temporary file", () => {
  const dir = tempDir();
  try {
    const file = path.join(dir, "state.json");
    fs.writeFileSync(file, "old");
    fs.mkdirSync(path.join(dir, "target-is-a-dir"));
    assert.throws(() => writeFileAtomicSync(path.join(dir, "target-is-a-dir"), "x"));
    assert.equal(fs.readFileSync(file, "utf8"), "old");
    assert.deepEqual(fs.readdirSync(dir).sort(), ["state.json", "target-is-a-dir"]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("mode and mkdir options are applied", { skip: process.platform === "win32" }, async () => {
  const dir = tempDir();
  try {
    const file = path.join(dir, "a", "b", "secret.json");
    await writeFileAtomic(file, "{}", { mode: 0o600, mkdir: true });
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
