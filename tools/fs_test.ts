import { after, test } from "node:test";
import assert from "node:assert/strict";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { RiskClass, ToolRegistry } from "./registry.ts";
import { registerFileTools, registerReadOnlyFileTools } from "./fs.ts";
import { Mode, PermissionEngine } from "../permissions/mod.ts";
import { FIFO_TEST_TIMEOUT_MS, makeFifo, NO_FIFOS, releaseFifos } from "../tests/_fifo.ts";

after(releaseFifos);

interface Ws {
  dir: string;
  call: (name: string, args: Record<string, unknown>) => Promise<string>;
  dispose(): void;
}

function workspace(): Ws {
  const dir = mkdtempSync(path.join(os.tmpdir(), "zq-fs-"));
  const registry = new ToolRegistry();
  registerFileTools(registry, dir);
  return {
    dir,
    call: async (name, args) => String(await registry.get(name)!.func(args)),
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Runs `fn` with a fresh temp workspace and removes it afterwards. */
async function inWs(fn: (ws: Ws) => Promise<void>): Promise<void> {
  const ws = workspace();
  try {
    await fn(ws);
  } finally {
    ws.dispose();
  }
}

const BOM = "\uFEFF";

test("registerFileTools registers the four tools with the issue's metadata", () => {
  const registry = new ToolRegistry();
  registerFileTools(registry, "/tmp");
  assert.deepEqual(registry.names(), ["read_file", "list_files", "write_file", "replace_in_file"]);
  const read = registry.get("read_file")!.metadata;
  assert.equal(read.riskClass, RiskClass.READ);
  assert.equal(read.riskLevel, "low");
  assert.equal(read.requiresApproval, false);
  const write = registry.get("replace_in_file")!.metadata;
  assert.equal(write.riskClass, RiskClass.WRITE);
  assert.equal(write.riskLevel, "medium");
  assert.equal(write.requiresApproval, true);
  const props = registry.get("write_file")!.schema.function.parameters as {
    properties: Record<string, unknown>;
  };
  assert.ok("path" in props.properties);
});

test("registerReadOnlyFileTools registers only read_file and list_files", () => {
  const registry = new ToolRegistry();
  registerReadOnlyFileTools(registry, "/tmp");
  assert.deepEqual(registry.names(), ["read_file", "list_files"]);
});

test("read_file returns numbered lines and pages with offset and limit", () =>
  inWs(async (ws) => {
    writeFileSync(path.join(ws.dir, "a.txt"), "one\r\ntwo\r\nthree\r\nfour\r\n");
    const all = await ws.call("read_file", { path: "a.txt" });
    assert.equal(all, "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour");
    const page = await ws.call("read_file", { path: "a.txt", offset: 2, limit: 2 });
    assert.equal(page, "     2\ttwo\n     3\tthree\n[lines 2-3 of 4; use offset=4 to read more]");
  }));

test("read_file refuses a binary file with a clear message", () =>
  inWs(async (ws) => {
    writeFileSync(path.join(ws.dir, "b.bin"), new Uint8Array([0x89, 0x50, 0x00, 0x01]));
    await assert.rejects(ws.call("read_file", { path: "b.bin" }), /Cannot read b\.bin: .*binary/);
  }));

test("read_file refuses a file over the size limit", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "zq-fs-"));
  try {
    const registry = new ToolRegistry();
    registerFileTools(registry, dir, { maxReadBytes: 1024 });
    writeFileSync(path.join(dir, "big.txt"), "x".repeat(4096));
    await assert.rejects(
      Promise.resolve(registry.get("read_file")!.func({ path: "big.txt" })),
      /Cannot read big\.txt: file is .* over the .* read limit/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a file one byte over the size limit is reported in exact bytes", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "zq-fs-"));
  try {
    const registry = new ToolRegistry();
    const limit = 10 * 1024 * 1024;
    registerFileTools(registry, dir, { maxReadBytes: limit, maxEditBytes: limit });
    writeFileSync(path.join(dir, "big.txt"), "x".repeat(limit + 1));
    await assert.rejects(
      Promise.resolve(registry.get("read_file")!.func({ path: "big.txt" })),
      {
        message: "Cannot read big.txt: file is 10485761 bytes, over the 10485760-byte (10 MiB) " +
          "read limit; use grep to find the part you need",
      },
    );
    await assert.rejects(
      Promise.resolve(
        registry.get("replace_in_file")!.func({ path: "big.txt", old_text: "x", new_text: "y" }),
      ),
      {
        message:
          "Cannot run replace_in_file on big.txt: file is 10485761 bytes, over the 10485760-byte " +
          "(10 MiB) limit",
      },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("read_file reports a missing file and a directory", () =>
  inWs(async (ws) => {
    await assert.rejects(
      ws.call("read_file", { path: "nope.txt" }),
      /Cannot read nope\.txt: no such file/,
    );
    await assert.rejects(ws.call("read_file", { path: "." }), /it is a directory/);
  }));

test("read_file resolves .. segments with node:path", () =>
  inWs(async (ws) => {
    mkdirSync(path.join(ws.dir, "sub"));
    writeFileSync(path.join(ws.dir, "top.txt"), "top\n");
    assert.equal(await ws.call("read_file", { path: "sub/../top.txt" }), "     1\ttop");
  }));

test("list_files lists sorted entries, marks folders and skips .git and node_modules", () =>
  inWs(async (ws) => {
    for (const d of ["src/lib", ".git/objects", "node_modules/x"]) {
      mkdirSync(path.join(ws.dir, d), { recursive: true });
    }
    writeFileSync(path.join(ws.dir, "b.txt"), "");
    writeFileSync(path.join(ws.dir, "src", "main.ts"), "");
    writeFileSync(path.join(ws.dir, "src", "lib", "util.ts"), "");
    assert.equal(await ws.call("list_files", {}), "b.txt\nsrc/");
    assert.equal(
      await ws.call("list_files", { recursive: true }),
      "b.txt\nsrc/\nsrc/lib/\nsrc/lib/util.ts\nsrc/main.ts",
    );
  }));

test("list_files stops at max_entries and says so", () =>
  inWs(async (ws) => {
    for (let i = 0; i < 10; i++) writeFileSync(path.join(ws.dir, `f${i}.txt`), "");
    const out = await ws.call("list_files", { max_entries: 3 });
    assert.equal(out.split("\n").slice(0, 3).join("\n"), "f0.txt\nf1.txt\nf2.txt");
    assert.match(out, /stopped at 3 entries/);
  }));

test("write_file creates parent folders and leaves no temp file", () =>
  inWs(async (ws) => {
    const out = await ws.call("write_file", { path: "deep/er/new.txt", content: "hi\n" });
    assert.match(out, /^Created deep\/er\/new\.txt/);
    assert.equal(readFileSync(path.join(ws.dir, "deep/er/new.txt"), "utf8"), "hi\n");
    assert.deepEqual(readdirSync(path.join(ws.dir, "deep/er")), ["new.txt"]);
  }));

test("write_file keeps the BOM, CRLF line endings and mode of an existing file", () =>
  inWs(async (ws) => {
    const file = path.join(ws.dir, "win.txt");
    writeFileSync(file, `${BOM}a\r\nb\r\n`, { mode: 0o640 });
    const out = await ws.call("write_file", { path: "win.txt", content: "x\ny\nz\n" });
    assert.match(out, /kept the UTF-8 BOM, kept CRLF line endings/);
    assert.equal(readFileSync(file, "utf8"), `${BOM}x\r\ny\r\nz\r\n`);
    assert.equal(statSync(file).mode & 0o777, 0o640);
  }));

test("write_file writes through a symlink instead of replacing it", () =>
  inWs(async (ws) => {
    writeFileSync(path.join(ws.dir, "target.txt"), "old\n");
    symlinkSync("target.txt", path.join(ws.dir, "link.txt"));
    await ws.call("write_file", { path: "link.txt", content: "new\n" });
    assert.equal(readFileSync(path.join(ws.dir, "target.txt"), "utf8"), "new\n");
  }));

test("replace_in_file replaces a unique exact match and names the strategy", () =>
  inWs(async (ws) => {
    writeFileSync(path.join(ws.dir, "a.ts"), "const a = 1;\nconst b = 2;\n");
    const out = await ws.call("replace_in_file", {
      path: "a.ts",
      old_text: "const b = 2;",
      new_text: "const b = 3;",
    });
    assert.match(out, /Replaced 1 occurrence in a\.ts; strategy: exact/);
    assert.equal(readFileSync(path.join(ws.dir, "a.ts"), "utf8"), "const a = 1;\nconst b = 3;\n");
  }));

test("replace_in_file fails on an ambiguous match unless replace_all is set", () =>
  inWs(async (ws) => {
    const file = path.join(ws.dir, "dup.txt");
    writeFileSync(file, "x = 1\ny = 2\nx = 1\n");
    await assert.rejects(
      ws.call("replace_in_file", { path: "dup.txt", old_text: "x = 1", new_text: "x = 9" }),
      /Cannot edit dup\.txt: old_text matches 2 places/,
    );
    assert.equal(readFileSync(file, "utf8"), "x = 1\ny = 2\nx = 1\n");
    const out = await ws.call("replace_in_file", {
      path: "dup.txt",
      old_text: "x = 1",
      new_text: "x = 9",
      replace_all: true,
    });
    assert.match(out, /Replaced 2 occurrences/);
    assert.equal(readFileSync(file, "utf8"), "x = 9\ny = 2\nx = 9\n");
  }));

test("replace_in_file matches LF old_text in a CRLF file and keeps CRLF and the BOM", () =>
  inWs(async (ws) => {
    const file = path.join(ws.dir, "crlf.txt");
    writeFileSync(file, `${BOM}alpha\r\nbeta\r\ngamma\r\n`);
    const out = await ws.call("replace_in_file", {
      path: "crlf.txt",
      old_text: "alpha\nbeta\n",
      new_text: "ALPHA\ninserted\nBETA\n",
    });
    assert.match(out, /strategy: line_endings/);
    assert.equal(readFileSync(file, "utf8"), `${BOM}ALPHA\r\ninserted\r\nBETA\r\ngamma\r\n`);
  }));

test("replace_in_file converts new lines to CRLF on an exact match in a CRLF file", () =>
  inWs(async (ws) => {
    const file = path.join(ws.dir, "crlf2.txt");
    writeFileSync(file, "one\r\ntwo\r\n");
    const out = await ws.call("replace_in_file", {
      path: "crlf2.txt",
      old_text: "two",
      new_text: "two\nthree",
    });
    assert.match(out, /strategy: exact/);
    assert.equal(readFileSync(file, "utf8"), "one\r\ntwo\r\nthree\r\n");
  }));

test("replace_in_file tolerates whitespace differences only when the match is unique", () =>
  inWs(async (ws) => {
    const file = path.join(ws.dir, "ws.py");
    writeFileSync(file, "def f():\n   beta_line()\n   return 1\n");
    const out = await ws.call("replace_in_file", {
      path: "ws.py",
      old_text: "    beta_line()\n    return 1",
      new_text: "    beta_line(2)\n    return 2",
    });
    assert.match(out, /strategy: whitespace/);
    // Re-indented to the file's three spaces.
    assert.equal(readFileSync(file, "utf8"), "def f():\n   beta_line(2)\n   return 2\n");
  }));

test("replace_in_file refuses an ambiguous whitespace-tolerant match even with replace_all", () =>
  inWs(async (ws) => {
    const file = path.join(ws.dir, "amb.py");
    const original = "if a:\n   go()\nif b:\n   go()\n";
    writeFileSync(file, original);
    await assert.rejects(
      ws.call("replace_in_file", {
        path: "amb.py",
        old_text: "    go()",
        new_text: "    stop()",
        replace_all: true,
      }),
      /matches 2 places \(whitespace match\)/,
    );
    assert.equal(readFileSync(file, "utf8"), original);
  }));

test("replace_in_file reports text that is not there", () =>
  inWs(async (ws) => {
    writeFileSync(path.join(ws.dir, "n.txt"), "abc\n");
    await assert.rejects(
      ws.call("replace_in_file", { path: "n.txt", old_text: "xyz", new_text: "q" }),
      /Cannot edit n\.txt: old_text was not found/,
    );
  }));

test("replace_in_file treats $ patterns in new_text literally", () =>
  inWs(async (ws) => {
    const file = path.join(ws.dir, "d.txt");
    writeFileSync(file, "price\n");
    await ws.call("replace_in_file", { path: "d.txt", old_text: "price", new_text: "$& $1 $$" });
    assert.equal(readFileSync(file, "utf8"), "$& $1 $$\n");
  }));

test("write_file and replace_in_file refuse git hooks and git config", async () => {
  await inWs(async (ws) => {
    mkdirSync(path.join(ws.dir, ".git", "hooks"), { recursive: true });
    writeFileSync(path.join(ws.dir, ".git", "config"), "[core]\n");
    await assert.rejects(
      ws.call("write_file", { path: ".git/hooks/pre-commit", content: "#!/bin/sh\nevil\n" }),
      /Cannot write \.git\/hooks\/pre-commit: git hooks and git config/,
    );
    await assert.rejects(
      ws.call("write_file", { path: "nested/.git/hooks/post-checkout", content: "evil" }),
      /git hooks and git config/,
    );
    await assert.rejects(
      ws.call("replace_in_file", { path: ".git/config", old_text: "[core]", new_text: "[x]" }),
      /Cannot edit \.git\/config: git hooks and git config/,
    );
    assert.deepEqual(readdirSync(path.join(ws.dir, ".git", "hooks")), []);
    assert.equal(readFileSync(path.join(ws.dir, ".git", "config"), "utf8"), "[core]\n");
    assert.equal(existsSync(path.join(ws.dir, "nested")), false);
  });
});

test("write_file and read_file accept a file:// URL and touch the path it names", () =>
  inWs(async (ws) => {
    const url = pathToFileURL(path.join(ws.dir, "sub dir", "x.txt")).href;
    assert.match(url, /%20/);
    assert.match(
      await ws.call("write_file", { path: url, content: "hi\n" }),
      /Created sub dir\/x\.txt/,
    );
    assert.equal(readFileSync(path.join(ws.dir, "sub dir", "x.txt"), "utf8"), "hi\n");
    assert.deepEqual(readdirSync(ws.dir), ["sub dir"], "no literal file: folder");
    assert.equal(await ws.call("read_file", { path: url }), "     1\thi");
    assert.equal(
      await ws.call("read_file", { path: `file:${path.join(ws.dir, "sub dir", "x.txt")}` }),
      "     1\thi",
    );
    await ws.call("replace_in_file", { path: url, old_text: "hi", new_text: "ho" });
    assert.equal(readFileSync(path.join(ws.dir, "sub dir", "x.txt"), "utf8"), "ho\n");
    assert.match(await ws.call("list_files", { path: pathToFileURL(ws.dir).href }), /sub dir\//);
  }));

test("the file tools refuse other URLs with a clear error and create nothing", () =>
  inWs(async (ws) => {
    await assert.rejects(
      ws.call("write_file", { path: "http://example.com/x.txt", content: "x" }),
      { message: "Cannot write http://example.com/x.txt: path must be a file path, not a URL" },
    );
    await assert.rejects(
      ws.call("read_file", { path: "https://example.com/x.txt" }),
      { message: "Cannot read https://example.com/x.txt: path must be a file path, not a URL" },
    );
    await assert.rejects(
      ws.call("write_file", { path: "file://evil.example/x.txt", content: "x" }),
      /Cannot write file:\/\/evil\.example\/x\.txt: path must be a file path or a file URL of this machine/,
    );
    assert.deepEqual(readdirSync(ws.dir), []);
  }));

test("the permission engine judges a file:// URL as the path the tool will write", () => {
  const ws = workspace();
  const outside = mkdtempSync(path.join(os.tmpdir(), "zq-fs-out-"));
  try {
    const registry = new ToolRegistry();
    registerFileTools(registry, ws.dir);
    const write = registry.get("write_file")!.metadata;
    const read = registry.get("read_file")!.metadata;
    const p = new PermissionEngine({ workspaceRoot: ws.dir, mode: Mode.AUTO });
    const verdict = (d: { allowed: boolean; needsUser: boolean }) =>
      d.allowed ? "allow" : d.needsUser ? "ask" : "deny";
    const outFile = path.join(outside, "x.txt");
    for (const target of [outFile, pathToFileURL(outFile).href]) {
      assert.equal(verdict(p.evaluate("write_file", { path: target }, write)), "deny", target);
    }
    const inFile = path.join(ws.dir, "x.txt");
    for (const target of [inFile, pathToFileURL(inFile).href]) {
      assert.equal(verdict(p.evaluate("write_file", { path: target }, write)), "allow", target);
    }
    const interactive = new PermissionEngine({ workspaceRoot: ws.dir, mode: Mode.INTERACTIVE });
    assert.equal(
      verdict(interactive.evaluate("read_file", { path: pathToFileURL(outFile).href }, read)),
      "ask",
      "a read outside through a URL is not auto-allowed",
    );
    assert.equal(
      verdict(interactive.evaluate("read_file", { path: pathToFileURL(inFile).href }, read)),
      "allow",
    );
  } finally {
    rmSync(outside, { recursive: true, force: true });
    ws.dispose();
  }
});

// ---------------------------------------------------------------------------------------------
// Special files, empty paths, symlink loops

const FIFO_TEST = { skip: NO_FIFOS, timeout: FIFO_TEST_TIMEOUT_MS };

test(
  "read_file refuses a named pipe instead of waiting for a writer",
  FIFO_TEST,
  (t) =>
    inWs(async (ws) => {
      const why = makeFifo(path.join(ws.dir, "pipe"), t.signal);
      if (why) return t.skip(why);
      await assert.rejects(ws.call("read_file", { path: "pipe" }), {
        message: "Cannot read pipe: it is not a regular file (a named pipe)",
      });
    }),
);

test(
  "write_file refuses to replace a named pipe and leaves it in place",
  FIFO_TEST,
  (t) =>
    inWs(async (ws) => {
      const pipe = path.join(ws.dir, "pipe");
      const why = makeFifo(pipe, t.signal);
      if (why) return t.skip(why);
      await assert.rejects(ws.call("write_file", { path: "pipe", content: "x" }), {
        message: "Cannot write pipe: it is not a regular file (a named pipe)",
      });
      assert.equal(statSync(pipe).isFIFO(), true);
      assert.deepEqual(readdirSync(ws.dir), ["pipe"], "no temporary file left");
    }),
);

test("write_file refuses a symlink to a named pipe", FIFO_TEST, (t) =>
  inWs(async (ws) => {
    const why = makeFifo(path.join(ws.dir, "pipe"), t.signal);
    if (why) return t.skip(why);
    symlinkSync("pipe", path.join(ws.dir, "alias"));
    await assert.rejects(ws.call("write_file", { path: "alias", content: "x" }), {
      message: "Cannot write alias: it is not a regular file (a named pipe)",
    });
  }));

test(
  "replace_in_file refuses a named pipe instead of waiting for a writer",
  FIFO_TEST,
  (t) =>
    inWs(async (ws) => {
      const why = makeFifo(path.join(ws.dir, "pipe"), t.signal);
      if (why) return t.skip(why);
      await assert.rejects(
        ws.call("replace_in_file", { path: "pipe", old_text: "a", new_text: "b" }),
        { message: "Cannot edit pipe: it is not a regular file (a named pipe)" },
      );
    }),
);

test(
  "list_files leaves named pipes out and lists the files beside them",
  FIFO_TEST,
  (t) =>
    inWs(async (ws) => {
      mkdirSync(path.join(ws.dir, "sub"));
      writeFileSync(path.join(ws.dir, "sub", "a.txt"), "a");
      const why = makeFifo(path.join(ws.dir, "sub", "pipe"), t.signal);
      if (why) return t.skip(why);
      assert.equal(await ws.call("list_files", { recursive: true }), "sub/\nsub/a.txt");
      await assert.rejects(ws.call("list_files", { path: "sub/pipe" }), {
        message: "Cannot list sub/pipe: it is not a directory (a named pipe)",
      });
    }),
);

test(
  "read_file refuses a character device that would never end",
  { skip: process.platform === "win32" ? "no /dev/zero on Windows" : false },
  () =>
    inWs(async (ws) => {
      await assert.rejects(ws.call("read_file", { path: "/dev/zero" }), {
        message: "Cannot read /dev/zero: it is not a regular file (a character device)",
      });
    }),
);

test("read_file, write_file and replace_in_file refuse an empty path", () =>
  inWs(async (ws) => {
    await assert.rejects(ws.call("read_file", { path: "" }), {
      message: "Cannot read: path is empty",
    });
    await assert.rejects(ws.call("read_file", { path: "  " }), {
      message: "Cannot read: path is empty",
    });
    await assert.rejects(ws.call("write_file", { path: "", content: "x" }), {
      message: "Cannot write: path is empty",
    });
    await assert.rejects(
      ws.call("replace_in_file", { path: "", old_text: "a", new_text: "b" }),
      { message: "Cannot edit: path is empty" },
    );
    assert.deepEqual(readdirSync(ws.dir), []);
  }));

/** A workspace with the symlink loop `a -> b -> a`. */
function withLoop(ws: Ws): void {
  symlinkSync("b", path.join(ws.dir, "a"));
  symlinkSync("a", path.join(ws.dir, "b"));
}

test("read_file names a symlink loop as one", () =>
  inWs(async (ws) => {
    withLoop(ws);
    await assert.rejects(ws.call("read_file", { path: "a" }), {
      message: "Cannot read a: too many levels of symbolic links (a symlink loop)",
    });
    await assert.rejects(ws.call("read_file", { path: "a/x.txt" }), {
      message: "Cannot read a/x.txt: too many levels of symbolic links (a symlink loop)",
    });
  }));

test("write_file and replace_in_file name a symlink loop and leave it alone", () =>
  inWs(async (ws) => {
    withLoop(ws);
    await assert.rejects(ws.call("write_file", { path: "a", content: "x" }), {
      message: "Cannot write a: too many levels of symbolic links (a symlink loop)",
    });
    await assert.rejects(
      ws.call("replace_in_file", { path: "b", old_text: "a", new_text: "b" }),
      { message: "Cannot edit b: too many levels of symbolic links (a symlink loop)" },
    );
    assert.deepEqual(readdirSync(ws.dir).sort(), ["a", "b"]);
  }));

test("the permission engine keeps a symlink loop inside the workspace inside", () =>
  inWs((ws) => {
    withLoop(ws);
    const registry = new ToolRegistry();
    registerFileTools(registry, ws.dir);
    const write = registry.get("write_file")!.metadata;
    const read = registry.get("read_file")!.metadata;
    const p = new PermissionEngine({ workspaceRoot: ws.dir, mode: Mode.INTERACTIVE });
    const read1 = p.evaluate("read_file", { path: "a" }, read);
    assert.equal(read1.allowed, true, read1.reason);
    const write1 = p.evaluate("write_file", { path: "a" }, write);
    assert.equal(write1.needsUser, true, write1.reason);
    assert.doesNotMatch(write1.reason, /outside/);
    return Promise.resolve();
  }));
