import { after, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import process from "node:process";
import path from "node:path";
import { writeFileAtomic, writeFileAtomicSync } from "./atomic_write.ts";
import { FIFO_TEST_TIMEOUT_MS, makeFifo, NO_FIFOS, releaseFifos } from "../tests/_fifo.ts";

after(releaseFifos);

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

test(
  "a private file and the folders made for it are never readable by others",
  { skip: process.platform === "win32" ? "no POSIX modes on Windows" : false },
  async () => {
    const dir = tempDir();
    try {
      const file = path.join(dir, "a", "b", "secret.json");
      writeFileAtomicSync(file, "{}", { mode: 0o600, mkdir: true, dirMode: 0o700 });
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.equal(fs.statSync(path.join(dir, "a")).mode & 0o777, 0o700);
      assert.equal(fs.statSync(path.join(dir, "a", "b")).mode & 0o777, 0o700);
      const other = path.join(dir, "c", "d", "secret.json");
      await writeFileAtomic(other, "{}", { mode: 0o600, mkdir: true, dirMode: 0o700 });
      assert.equal(fs.statSync(other).mode & 0o777, 0o600);
      assert.equal(fs.statSync(path.join(dir, "c")).mode & 0o777, 0o700);
      // Replacing a file another version wrote 0644 makes it private too.
      fs.chmodSync(file, 0o644);
      writeFileAtomicSync(file, "{}", { mode: 0o600 });
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
);

test(
  "an atomic write refuses to replace a named pipe and leaves it in place",
  { skip: NO_FIFOS, timeout: FIFO_TEST_TIMEOUT_MS },
  async (t) => {
    const dir = tempDir();
    try {
      const pipe = path.join(dir, "pipe");
      const why = makeFifo(pipe, t.signal);
      if (why) return t.skip(why);
      const message = `Cannot write ${pipe}: it is not a regular file (a named pipe)`;
      assert.throws(() => writeFileAtomicSync(pipe, "x"), { message });
      await assert.rejects(writeFileAtomic(pipe, "x"), { message });
      assert.equal(fs.statSync(pipe).isFIFO(), true);
      assert.deepEqual(fs.readdirSync(dir), ["pipe"], "no temporary file left");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
);

test("an atomic write names a symlink loop and a folder as what they are", async () => {
  const dir = tempDir();
  try {
    const loop = path.join(dir, "a");
    fs.symlinkSync("b", loop);
    fs.symlinkSync("a", path.join(dir, "b"));
    const message = `Cannot write ${loop}: too many levels of symbolic links (a symlink loop)`;
    assert.throws(() => writeFileAtomicSync(loop, "x"), { message });
    await assert.rejects(writeFileAtomic(loop, "x"), { message });
    const sub = path.join(dir, "sub");
    fs.mkdirSync(sub);
    await assert.rejects(writeFileAtomic(sub, "x"), {
      message: `Cannot write ${sub}: it is a directory`,
    });
    assert.deepEqual(fs.readdirSync(dir).sort(), ["a", "b", "sub"]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
