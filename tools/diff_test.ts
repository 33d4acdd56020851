import { after, afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { RiskClass, ToolRegistry } from "./registry.ts";
import { ConflictGuard } from "./conflict_guard.ts";
import { registerDiffTools } from "./diff.ts";
import { registerFileTools } from "./fs.ts";
import { FIFO_TEST_TIMEOUT_MS, makeFifo, NO_FIFOS, releaseFifos } from "../tests/_fifo.ts";

after(releaseFifos);

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const BOM = "\uFEFF";

interface Ws {
  dir: string;
  registry: ToolRegistry;
  call(name: string, args: Record<string, unknown>, ctx?: unknown): Promise<string>;
  read(rel: string): string;
  write(rel: string, content: string): void;
  snapshot(): Record<string, string>;
}

function ws(
  files: Record<string, string> = {},
  options: Parameters<typeof registerDiffTools>[2] = {},
): Ws {
  const dir = tempWorkspace(files);
  cleanups.push(() => removeDir(dir));
  const registry = new ToolRegistry();
  const guard = options.conflictGuard ?? new ConflictGuard();
  registerFileTools(registry, dir, { conflictGuard: guard });
  registerDiffTools(registry, dir, { ...options, conflictGuard: guard });
  const snapshot = (): Record<string, string> => {
    const out: Record<string, string> = {};
    const walk = (d: string): void => {
      for (const name of (execFileSync("ls", ["-A", d], { encoding: "utf8" }).split("\n"))) {
        if (!name) continue;
        const p = path.join(d, name);
        if (statSync(p).isDirectory()) walk(p);
        else out[path.relative(dir, p)] = readFileSync(p, "latin1");
      }
    };
    walk(dir);
    return out;
  };
  return {
    dir,
    registry,
    call: async (name, args, ctx) =>
      String(await registry.get(name)!.func(args, ctx as Record<string, unknown>)),
    read: (rel) => readFileSync(path.join(dir, rel), "utf8"),
    write: (rel, content) => {
      mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      writeFileSync(path.join(dir, rel), content);
    },
    snapshot,
  };
}

const patch = (...body: string[]): string =>
  ["*** Begin Patch", ...body, "*** End Patch"].join("\n");

// ---------------------------------------------------------------------------------------------
// registration

test("registerDiffTools registers apply_patch and apply_unified_diff as approval-needing writes", () => {
  const registry = new ToolRegistry();
  registerDiffTools(registry, "/tmp");
  assert.deepEqual(registry.names(), ["apply_patch", "apply_unified_diff"]);
  for (const name of registry.names()) {
    const meta = registry.get(name)!.metadata;
    assert.equal(meta.riskClass, RiskClass.WRITE);
    assert.equal(meta.requiresApproval, true);
  }
});

// ---------------------------------------------------------------------------------------------
// apply_patch

test("apply_patch adds, updates, deletes and moves files and reports each one", async () => {
  const w = ws({
    "src/a.ts": "const a = 1;\nconst b = 2;\nconst c = 3;\n",
    "old.txt": "bye\n",
    "move_me.txt": "one\ntwo\n",
  });
  const out = await w.call("apply_patch", {
    patch: patch(
      "*** Add File: docs/new.md",
      "+# New",
      "+text",
      "*** Update File: src/a.ts",
      "@@",
      " const a = 1;",
      "-const b = 2;",
      "+const b = 20;",
      " const c = 3;",
      "*** Delete File: old.txt",
      "*** Update File: move_me.txt",
      "*** Move to: moved/here.txt",
      "@@",
      " one",
      "-two",
      "+2",
    ),
  });
  assert.equal(w.read("docs/new.md"), "# New\ntext\n");
  assert.equal(w.read("src/a.ts"), "const a = 1;\nconst b = 20;\nconst c = 3;\n");
  assert.equal(existsSync(path.join(w.dir, "old.txt")), false);
  assert.equal(existsSync(path.join(w.dir, "move_me.txt")), false);
  assert.equal(w.read("moved/here.txt"), "one\n2\n");
  assert.match(out, /^Applied patch to 4 files/);
  assert.match(out, /^A docs\/new\.md \(\+2 -0\)$/m);
  assert.match(out, /^M src\/a\.ts \(\+1 -1\)$/m);
  assert.match(out, /^D old\.txt \(-1\)$/m);
  assert.match(out, /^R move_me\.txt -> moved\/here\.txt \(\+1 -1\)$/m);
});

test("apply_patch keeps CRLF line endings and the BOM of the file it updates", async () => {
  const w = ws({ "win.txt": `${BOM}alpha\r\nbeta\r\ngamma\r\n` });
  await w.call("apply_patch", {
    patch: patch("*** Update File: win.txt", "@@", " alpha", "-beta", "+BETA", "+beta2", " gamma"),
  });
  assert.equal(w.read("win.txt"), `${BOM}alpha\r\nBETA\r\nbeta2\r\ngamma\r\n`);
});

test("apply_patch accepts a patch sent with CRLF line breaks", async () => {
  const w = ws({ "a.txt": "x\ny\n" });
  await w.call("apply_patch", {
    patch: patch("*** Update File: a.txt", "@@", " x", "-y", "+z").replace(/\n/g, "\r\n"),
  });
  assert.equal(w.read("a.txt"), "x\nz\n");
});

test("apply_patch appends to a CRLF file without a final newline without mixing endings", async () => {
  const w = ws({ "w.txt": "a\r\nb" });
  await w.call("apply_patch", {
    patch: patch("*** Update File: w.txt", "@@", " b", "+c", "*** End of File"),
  });
  assert.equal(w.read("w.txt"), "a\r\nb\r\nc");
});

test("apply_patch finds context written with ASCII look-alikes in a Unicode file", async () => {
  const w = ws({
    "zh.md": "# 标题 — 说明\nconst s = “你好”;\nconst t = 'x';\n",
  });
  const out = await w.call("apply_patch", {
    patch: patch(
      "*** Update File: zh.md",
      "@@",
      " # 标题 - 说明",
      '-const s = "你好";',
      '+const s = "世界";',
    ),
  });
  assert.equal(w.read("zh.md"), "# 标题 — 说明\nconst s = \"世界\";\nconst t = 'x';\n");
  assert.match(out, /context found ignoring indentation and Unicode punctuation/);
});

test("apply_patch tolerates whitespace drift and keeps the file's own context lines", async () => {
  const w = ws({ "py.py": "def f():\n    x = 1   \n    return x\n" });
  const out = await w.call("apply_patch", {
    patch: patch(
      "*** Update File: py.py",
      "@@ def f():",
      "  x = 1",
      "-  return x",
      "+    return x + 1",
    ),
  });
  assert.equal(w.read("py.py"), "def f():\n    x = 1   \n    return x + 1\n");
  assert.match(out, /context found ignoring indentation/);
});

test("apply_patch says nothing about tolerance when every chunk matched exactly", async () => {
  const w = ws({ "a.txt": "1\n2\n3\n" });
  const out = await w.call("apply_patch", {
    patch: patch("*** Update File: a.txt", "@@", " 1", "-2", "+two", " 3"),
  });
  assert.equal(out.split("\n")[1], "M a.txt (+1 -1)");
});

test("apply_patch changes no file when the third chunk does not match", async () => {
  const w = ws({
    "first.txt": "keep\nme\n",
    "second.txt": "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\n",
  });
  const before = w.snapshot();
  await assert.rejects(
    w.call("apply_patch", {
      patch: patch(
        "*** Update File: first.txt",
        "@@",
        "-keep",
        "+kept",
        "*** Add File: brand_new.txt",
        "+new",
        "*** Update File: second.txt",
        "@@",
        " l1",
        "-l2",
        "+L2",
        "@@",
        " l4",
        "-l5",
        "+L5",
        "@@",
        " l7",
        "-this line is not in the file",
        "+L8",
      ),
    }),
    (e: Error) => {
      assert.match(e.message, /^Cannot apply patch: second\.txt/);
      assert.match(e.message, /chunk 3 of 3/);
      assert.match(e.message, /this line is not in the file/);
      assert.match(e.message, /No file was changed/);
      return true;
    },
  );
  assert.deepEqual(w.snapshot(), before);
});

test("apply_patch inserts a pure addition after its @@ context line", async () => {
  const w = ws({ "a.ts": "class A {\n}\nclass B {\n}\n" });
  await w.call("apply_patch", {
    patch: patch("*** Update File: a.ts", "@@ class B {", "+  x = 1;"),
  });
  assert.equal(w.read("a.ts"), "class A {\n}\nclass B {\n  x = 1;\n}\n");
});

test("apply_patch accepts a heredoc wrapper and padded markers", async () => {
  const w = ws();
  await w.call("apply_patch", {
    patch: "<<'EOF'\n  *** Begin Patch  \n*** Add File: h.txt\n+hi\n *** End Patch\nEOF\n",
  });
  assert.equal(w.read("h.txt"), "hi\n");
});

test("apply_patch rejects malformed patches with the line at fault", async () => {
  const w = ws({ "a.txt": "x\n" });
  await assert.rejects(w.call("apply_patch", { patch: "*** Update File: a.txt\n" }), /Begin Patch/);
  await assert.rejects(
    w.call("apply_patch", { patch: patch("*** Change File: a.txt") }),
    /line 2: .*not a valid hunk header/,
  );
  await assert.rejects(
    w.call("apply_patch", { patch: patch("*** Update File: a.txt") }),
    /the update of a\.txt is empty/,
  );
  await assert.rejects(
    w.call("apply_patch", { patch: patch("*** Update File: a.txt", "@@", "?x") }),
    /unexpected line/,
  );
  await assert.rejects(w.call("apply_patch", { patch: patch() }), /changes no file/);
  await assert.rejects(w.call("apply_patch", {}), /patch must be a string/);
});

test("apply_patch refuses to update or delete a missing file", async () => {
  const w = ws();
  await assert.rejects(
    w.call("apply_patch", { patch: patch("*** Delete File: nope.txt") }),
    /cannot delete nope\.txt: no such file/,
  );
  await assert.rejects(
    w.call("apply_patch", { patch: patch("*** Update File: nope.txt", "@@", "-a", "+b") }),
    /cannot update nope\.txt: no such file/,
  );
});

test("apply_patch refuses a directory and a binary file", async () => {
  const w = ws({ "d/x.txt": "x\n" });
  writeFileSync(path.join(w.dir, "bin.dat"), new Uint8Array([1, 0, 2]));
  await assert.rejects(
    w.call("apply_patch", { patch: patch("*** Delete File: d") }),
    /d is a directory/,
  );
  await assert.rejects(
    w.call("apply_patch", { patch: patch("*** Update File: bin.dat", "@@", "-a", "+b") }),
    /bin\.dat is a binary file/,
  );
});

test("apply_patch refuses paths outside the workspace and writes nothing", async () => {
  const outside = tempWorkspace();
  cleanups.push(() => removeDir(outside));
  const w = ws({ "in.txt": "a\n" });
  const before = w.snapshot();
  for (const target of ["../escape.txt", path.join(outside, "x.txt")]) {
    await assert.rejects(
      w.call("apply_patch", {
        patch: patch("*** Update File: in.txt", "@@", "-a", "+b", `*** Add File: ${target}`, "+x"),
      }),
      /is outside the workspace/,
    );
  }
  assert.deepEqual(w.snapshot(), before);
  assert.equal(existsSync(path.join(outside, "x.txt")), false);
});

test("apply_patch and apply_unified_diff refuse git hooks and git config and write nothing", async () => {
  const w = ws({
    "in.txt": "a\n",
    ".git/config": "[core]\n",
    ".git/hooks/README": "hooks\n",
    "lib/inner/.git/config": "[core]\n",
  });
  const before = w.snapshot();
  for (const target of [".git/hooks/pre-commit", "lib/inner/.git/hooks/post-checkout"]) {
    await assert.rejects(
      w.call("apply_patch", {
        patch: patch("*** Update File: in.txt", "@@", "-a", "+b", `*** Add File: ${target}`, "+x"),
      }),
      /git hook or git config/,
    );
  }
  await assert.rejects(
    w.call("apply_patch", {
      patch: patch("*** Update File: lib/inner/.git/config", "@@", "-[core]", "+[core] x"),
    }),
    /lib\/inner\/\.git\/config is a git hook or git config/,
  );
  await assert.rejects(
    w.call("apply_patch", {
      patch: patch("*** Update File: in.txt", "*** Move to: .git/config", "@@", "-a", "+b"),
    }),
    /git hook or git config/,
  );
  await assert.rejects(
    w.call("apply_unified_diff", {
      diff: "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-[core]\n+[core] fsmonitor = x\n",
    }),
    /git hook or git config/,
  );
  assert.deepEqual(w.snapshot(), before);
});

test("apply_patch may write into a writable granted directory of the running engine", async () => {
  const granted = tempWorkspace();
  cleanups.push(() => removeDir(granted));
  const w = ws();
  const engine = {
    permissions: { grantedDirectories: () => [{ path: granted, writable: true }] },
  };
  const readOnly = {
    permissions: { grantedDirectories: () => [{ path: granted, writable: false }] },
  };
  const target = path.join(granted, "g.txt");
  await assert.rejects(
    w.call("apply_patch", { patch: patch(`*** Add File: ${target}`, "+g") }, { engine: readOnly }),
    /outside the workspace and the writable granted directories|outside the workspace/,
  );
  await w.call("apply_patch", { patch: patch(`*** Add File: ${target}`, "+g") }, { engine });
  assert.equal(readFileSync(target, "utf8"), "g\n");
});

test("apply_patch puts back the files already written when a later write fails", async () => {
  const w = ws({ "x.txt": "old\n", "blocker": "I am a file\n" });
  await assert.rejects(
    w.call("apply_patch", {
      patch: patch(
        "*** Update File: x.txt",
        "@@",
        "-old",
        "+new",
        "*** Add File: blocker/inside.txt",
        "+cannot exist",
      ),
    }),
    /writing the files failed .*restored/,
  );
  assert.equal(w.read("x.txt"), "old\n");
  assert.equal(w.read("blocker"), "I am a file\n");
});

test("apply_patch refuses a file edited by someone else since read_file saw it", async () => {
  const w = ws({ "shared.txt": "v1\n" });
  await w.call("read_file", { path: "shared.txt" });
  w.write("shared.txt", "v1\nedited by the user\n");
  await assert.rejects(
    w.call("apply_patch", { patch: patch("*** Update File: shared.txt", "@@", "-v1", "+v2") }),
    (e: Error) => {
      assert.equal(e.name, "FileConflictError");
      assert.match(e.message, /changed on disk since it was last read/);
      return true;
    },
  );
  assert.equal(w.read("shared.txt"), "v1\nedited by the user\n");
  // Reading again makes the edit possible.
  await w.call("read_file", { path: "shared.txt" });
  await w.call("apply_patch", { patch: patch("*** Update File: shared.txt", "@@", "-v1", "+v2") });
  assert.equal(w.read("shared.txt"), "v2\nedited by the user\n");
});

// ---------------------------------------------------------------------------------------------
// apply_unified_diff

test("apply_unified_diff applies a multi-file diff with a new and a deleted file", async () => {
  const w = ws({ "a.txt": "one\ntwo\nthree\n", "gone.txt": "bye\n" });
  const out = await w.call("apply_unified_diff", {
    diff: [
      "--- a/a.txt",
      "+++ b/a.txt",
      "@@ -1,3 +1,3 @@",
      " one",
      "-two",
      "+2",
      " three",
      "--- /dev/null",
      "+++ b/sub/new.txt",
      "@@ -0,0 +1,2 @@",
      "+hello",
      "+world",
      "--- a/gone.txt",
      "+++ /dev/null",
      "@@ -1 +0,0 @@",
      "-bye",
      "",
    ].join("\n"),
  });
  assert.equal(w.read("a.txt"), "one\n2\nthree\n");
  assert.equal(w.read("sub/new.txt"), "hello\nworld\n");
  assert.equal(existsSync(path.join(w.dir, "gone.txt")), false);
  assert.match(out, /^Applied diff to 3 files/);
  assert.match(out, /^M a\.txt \(\+1 -1\)$/m);
  assert.match(out, /^A sub\/new\.txt \(\+2 -0\)$/m);
  assert.match(out, /^D gone\.txt/m);
});

test("apply_unified_diff applies an LF diff to a CRLF file and keeps CRLF and the BOM", async () => {
  const w = ws({ "w.txt": `${BOM}a\r\nb\r\nc\r\n` });
  await w.call("apply_unified_diff", {
    diff: "--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,4 @@\n a\n-b\n+B\n+B2\n c\n",
  });
  assert.equal(w.read("w.txt"), `${BOM}a\r\nB\r\nB2\r\nc\r\n`);
});

test("apply_unified_diff handles Unicode text and ASCII look-alikes in context", async () => {
  const w = ws({ "u.txt": "第一行 — 开始\n第二行\n第三行\n" });
  const out = await w.call("apply_unified_diff", {
    diff:
      "--- a/u.txt\n+++ b/u.txt\n@@ -1,3 +1,3 @@\n 第一行 - 开始\n-第二行\n+第二行 ✓\n 第三行\n",
  });
  assert.equal(w.read("u.txt"), "第一行 — 开始\n第二行 ✓\n第三行\n");
  assert.match(out, /Unicode punctuation/);
});

test("apply_unified_diff tolerates trailing-space drift and says so", async () => {
  const w = ws({ "s.txt": "alpha  \nbeta\t\ngamma\n" });
  const out = await w.call("apply_unified_diff", {
    diff: "--- a/s.txt\n+++ b/s.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n",
  });
  assert.equal(w.read("s.txt"), "alpha  \nBETA\ngamma\n");
  assert.match(out, /context found ignoring trailing spaces/);
});

test("apply_unified_diff changes no file when the third hunk does not match", async () => {
  const lines = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`);
  const w = ws({ "other.txt": "x\n", "big.txt": lines.join("\n") + "\n" });
  const before = w.snapshot();
  await assert.rejects(
    w.call("apply_unified_diff", {
      diff: [
        "--- a/other.txt",
        "+++ b/other.txt",
        "@@ -1 +1 @@",
        "-x",
        "+y",
        "--- a/big.txt",
        "+++ b/big.txt",
        "@@ -2,3 +2,3 @@",
        " line 2",
        "-line 3",
        "+LINE 3",
        " line 4",
        "@@ -12,3 +12,3 @@",
        " line 12",
        "-line 13",
        "+LINE 13",
        " line 14",
        "@@ -22,3 +22,3 @@",
        " line 22",
        "-not in the file",
        "+LINE 23",
        " line 24",
        "",
      ].join("\n"),
    }),
    (e: Error) => {
      assert.match(e.message, /^Cannot apply diff: big\.txt: hunk 3 of 3/);
      assert.match(e.message, /no file was changed/);
      return true;
    },
  );
  assert.deepEqual(w.snapshot(), before);
});

test("apply_unified_diff follows a Git rename", async () => {
  const w = ws({ "old/name.txt": "a\nb\n" });
  const out = await w.call("apply_unified_diff", {
    diff: [
      "diff --git a/old/name.txt b/new/name.txt",
      "similarity index 50%",
      "rename from old/name.txt",
      "rename to new/name.txt",
      "--- a/old/name.txt",
      "+++ b/new/name.txt",
      "@@ -1,2 +1,2 @@",
      " a",
      "-b",
      "+c",
      "",
    ].join("\n"),
  });
  assert.equal(w.read("new/name.txt"), "a\nc\n");
  assert.equal(existsSync(path.join(w.dir, "old/name.txt")), false);
  assert.match(out, /^R old\/name\.txt -> new\/name\.txt/m);
});

test("apply_unified_diff rejects malformed diffs, missing files and existing new files", async () => {
  const w = ws({ "here.txt": "x\n" });
  await assert.rejects(w.call("apply_unified_diff", { diff: "just some text" }), /no hunks/);
  await assert.rejects(
    w.call("apply_unified_diff", { diff: "--- a/x\n@@ -1 +1 @@\n-a\n+b\n" }),
    /not a valid unified diff/,
  );
  await assert.rejects(
    w.call("apply_unified_diff", { diff: "--- a/none.txt\n+++ b/none.txt\n@@ -1 +1 @@\n-a\n+b\n" }),
    /none\.txt: no such file/,
  );
  await assert.rejects(
    w.call("apply_unified_diff", { diff: "--- /dev/null\n+++ b/here.txt\n@@ -0,0 +1 @@\n+y\n" }),
    /here\.txt already exists/,
  );
  await assert.rejects(w.call("apply_unified_diff", {}), /diff must be a string/);
});

test("apply_unified_diff refuses a path outside the workspace", async () => {
  const w = ws();
  await assert.rejects(
    w.call("apply_unified_diff", { diff: "--- /dev/null\n+++ ../evil.txt\n@@ -0,0 +1 @@\n+x\n" }),
    /outside the workspace/,
  );
  assert.equal(existsSync(path.join(w.dir, "..", "evil.txt")), false);
});

test("apply_unified_diff refuses a file edited by someone else since it was read", async () => {
  const w = ws({ "c.txt": "1\n" });
  await w.call("read_file", { path: "c.txt" });
  w.write("c.txt", "1\nmore\n");
  await assert.rejects(
    w.call("apply_unified_diff", { diff: "--- a/c.txt\n+++ b/c.txt\n@@ -1 +1 @@\n-1\n+2\n" }),
    /FileConflictError|changed on disk/,
  );
  assert.equal(w.read("c.txt"), "1\nmore\n");
});

// ---------------------------------------------------------------------------------------------
// special files and symlink loops

test(
  "apply_patch and apply_unified_diff refuse a named pipe and change no file",
  { skip: NO_FIFOS, timeout: FIFO_TEST_TIMEOUT_MS },
  async (t) => {
    const w = ws({ "in.txt": "a\n" });
    const why = makeFifo(path.join(w.dir, "pipe"), t.signal);
    if (why) return t.skip(why);
    const refused = /pipe is not a regular file \(a named pipe\); no file was changed/;
    for (
      const body of [["*** Update File: pipe", "@@", "-a", "+b"], ["*** Add File: pipe", "+x"]]
    ) {
      await assert.rejects(
        w.call("apply_patch", {
          patch: patch("*** Update File: in.txt", "@@", "-a", "+b", ...body),
        }),
        refused,
      );
    }
    await assert.rejects(
      w.call("apply_unified_diff", { diff: "--- a/pipe\n+++ b/pipe\n@@ -1 +1 @@\n-a\n+b\n" }),
      refused,
    );
    assert.equal(w.read("in.txt"), "a\n");
    assert.equal(statSync(path.join(w.dir, "pipe")).isFIFO(), true);
    assert.deepEqual(readdirSync(w.dir).sort(), ["in.txt", "pipe"]);
  },
);

test("apply_patch names a symlink loop and changes no file", async () => {
  const w = ws({ "in.txt": "a\n" });
  symlinkSync("b", path.join(w.dir, "a"));
  symlinkSync("a", path.join(w.dir, "b"));
  await assert.rejects(
    w.call("apply_patch", {
      patch: patch("*** Update File: in.txt", "@@", "-a", "+b", "*** Add File: a", "+x"),
    }),
    {
      message:
        "Cannot apply patch: a: too many levels of symbolic links (a symlink loop); no file was changed",
    },
  );
  assert.equal(w.read("in.txt"), "a\n");
});
