import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { which } from "../_internal/process.ts";
import { RiskClass, type ToolContext, ToolRegistry } from "./registry.ts";
import { registerSearchTool } from "./search.ts";
import { FIFO_TEST_TIMEOUT_MS, makeFifo, NO_FIFOS, releaseFifos } from "../tests/_fifo.ts";

after(releaseFifos);

const rgMissing = which("rg") === null;
if (rgMissing && process.env.CI_REQUIRE_REAL === "1") {
  throw new Error(
    "Cannot run the grep tests: ripgrep (rg) is not on the PATH and CI_REQUIRE_REAL=1",
  );
}
const needRg = rgMissing ? "ripgrep (rg) is not on the PATH" : false;

function tree(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "zq-grep-"));
  const files: Record<string, string | Uint8Array> = {
    ".gitignore": "*.log\nbuild/\n!keep.log\n",
    "src/a.ts":
      "import x from 'y';\nconst needle = 1;\nfoo();\nbar();\nbaz();\nreturn needle + 1;\n",
    "src/b.tsx": "export const Needle = () => <div>needle</div>;\n",
    "src/nested/.gitignore": "secret.txt\n",
    "src/nested/secret.txt": "needle in a secret\n",
    "src/nested/c.ts": "// no match here\n",
    "a/b.txt": "needle under a/\n",
    "a.txt": "needle in a.txt\n",
    "build/out.js": "needle built\n",
    "x.log": "needle logged\n",
    "keep.log": "needle kept\n",
    ".hidden/file.txt": "needle hidden\n",
    ".git/config": "needle in git\n",
    "bin.dat": new Uint8Array([...new TextEncoder().encode("needle\n"), 0, 1, 2, 10]),
    "crlf.txt": "first needle\r\nsecond\r\nthird needle\r\n",
    "uni.txt": "ünïcode needle 😀\nlast line without newline needle",
    "long.txt": `${"z".repeat(800)} needle\n`,
  };
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
  return dir;
}

function grepOf(dir: string, engine: "rg" | "js" | "auto") {
  const registry = new ToolRegistry();
  registerSearchTool(registry, dir, { engine });
  return async (args: Record<string, unknown>, ctx?: ToolContext): Promise<string> =>
    String(await registry.get("grep")!.func(args, ctx));
}

test("grep is registered as a low-risk read tool", () => {
  const registry = new ToolRegistry();
  registerSearchTool(registry, "/tmp");
  const m = registry.get("grep")!.metadata;
  assert.deepEqual([m.category, m.riskLevel, m.requiresApproval, m.riskClass], [
    "search",
    "low",
    false,
    RiskClass.READ,
  ]);
});

test("grep skips ignored, hidden, .git and binary files and sorts by path then line", {
  skip: needRg,
}, async () => {
  const dir = tree();
  try {
    const out = await grepOf(dir, "rg")({ pattern: "needle" });
    assert.equal(
      out,
      [
        "11 matching lines in 8 files",
        "a/b.txt:1:needle under a/",
        "a.txt:1:needle in a.txt",
        "crlf.txt:1:first needle",
        "crlf.txt:3:third needle",
        "keep.log:1:needle kept",
        `long.txt:1:${"z".repeat(500)}… [807 chars]`,
        "src/a.ts:2:const needle = 1;",
        "src/a.ts:6:return needle + 1;",
        "src/b.tsx:1:export const Needle = () => <div>needle</div>;",
        "uni.txt:1:ünïcode needle 😀",
        "uni.txt:2:last line without newline needle",
      ].join("\n"),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const queries: Array<Record<string, unknown>> = [
  { pattern: "needle" },
  { pattern: "NEEDLE", ignore_case: true },
  { pattern: "needle$" },
  { pattern: "^(first|third) needle$" },
  { pattern: "needle", context: 1 },
  { pattern: "needle", path: "src" },
  { pattern: "needle", path: "src/a.ts", context: 2 },
  { pattern: "needle", glob: "*.ts" },
  { pattern: "needle", glob: "*.{ts,tsx}" },
  { pattern: "needle", glob: "!*.txt" },
  { pattern: "needle", max_results: 3 },
  { pattern: "\\bNeedle\\b" },
  { pattern: "[0-9]+;" },
  { pattern: "😀" },
  { pattern: "no-such-text" },
  { pattern: "needle", path: "x.log" },
  { pattern: "needle", path: "bin.dat" },
  { pattern: "needle", path: ".hidden" },
  { pattern: "needle", path: "src/nested" },
];

for (const query of queries) {
  test(`ripgrep and the JS fallback give the same result for ${JSON.stringify(query)}`, {
    skip: needRg,
  }, async () => {
    const dir = tree();
    try {
      const viaRg = await grepOf(dir, "rg")(query);
      const viaJs = await grepOf(dir, "js")(query);
      assert.equal(viaJs, viaRg);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test("grep shows context lines with - and separates groups with --", async () => {
  const dir = tree();
  try {
    const out = await grepOf(dir, "js")({ pattern: "needle", path: "src/a.ts", context: 1 });
    assert.equal(
      out,
      [
        "2 matching lines in 1 file",
        "src/a.ts-1-import x from 'y';",
        "src/a.ts:2:const needle = 1;",
        "src/a.ts-3-foo();",
        "--",
        "src/a.ts-5-baz();",
        "src/a.ts:6:return needle + 1;",
      ].join("\n"),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("grep says how many matches it left out", async () => {
  const dir = tree();
  try {
    const out = await grepOf(dir, "js")({ pattern: "needle", max_results: 2 });
    assert.match(out.split("\n")[0], /^11 matching lines in 8 files \(showing the first 2\)$/);
    assert.equal(out.split("\n").length, 3);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("grep rejects an invalid pattern with a clear message", async () => {
  const dir = tree();
  try {
    await assert.rejects(
      grepOf(dir, "js")({ pattern: "(unclosed" }),
      /Cannot search: invalid pattern/,
    );
    if (!rgMissing) {
      await assert.rejects(
        grepOf(dir, "rg")({ pattern: "(unclosed" }),
        /Cannot search: ripgrep failed/,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("grep reports a missing path", async () => {
  const dir = tree();
  try {
    await assert.rejects(
      grepOf(dir, "js")({ pattern: "x", path: "nope" }),
      /Cannot search nope: no such/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("grep with an aborted signal throws AbortError", async () => {
  const dir = tree();
  try {
    const ac = new AbortController();
    ac.abort();
    for (const engine of rgMissing ? ["js" as const] : ["js" as const, "rg" as const]) {
      await assert.rejects(
        grepOf(dir, engine)({ pattern: "needle" }, { signal: ac.signal }),
        (e: Error) => e.name === "AbortError",
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------------
// Special files and symlink loops

const FIFO_TEST = { skip: NO_FIFOS, timeout: FIFO_TEST_TIMEOUT_MS };
const ENGINES = rgMissing ? ["js" as const] : ["js" as const, "rg" as const];

/** A folder with `a.txt` (one match) and a named pipe `pipe` (or why it could not be made). */
function treeWithPipe(signal: AbortSignal, pipeName = "pipe"): { dir: string; why?: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), "zq-grep-pipe-"));
  writeFileSync(path.join(dir, "a.txt"), "needle\n");
  return { dir, why: makeFifo(path.join(dir, pipeName), signal) };
}

test("grep refuses a named pipe given as its path, with either engine", FIFO_TEST, async (t) => {
  const { dir, why } = treeWithPipe(t.signal);
  try {
    if (why) return t.skip(why);
    for (const engine of ENGINES) {
      await assert.rejects(grepOf(dir, engine)({ pattern: "needle", path: "pipe" }), {
        message: "Cannot search pipe: it is not a regular file (a named pipe)",
      }, engine);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test(
  "grep skips a named pipe in the tree and searches the files beside it",
  FIFO_TEST,
  async (t) => {
    const { dir, why } = treeWithPipe(t.signal);
    try {
      if (why) return t.skip(why);
      for (const engine of ENGINES) {
        assert.equal(
          await grepOf(dir, engine)({ pattern: "needle" }),
          "1 matching line in 1 file\na.txt:1:needle",
          engine,
        );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test("grep does not wait on a .gitignore that is a named pipe", FIFO_TEST, async (t) => {
  const { dir, why } = treeWithPipe(t.signal, ".gitignore");
  try {
    if (why) return t.skip(why);
    for (const engine of ["js" as const, "auto" as const]) {
      assert.equal(
        await grepOf(dir, engine)({ pattern: "needle" }),
        "1 matching line in 1 file\na.txt:1:needle",
        engine,
      );
    }
    if (!rgMissing) {
      await assert.rejects(
        grepOf(dir, "rg")({ pattern: "needle" }),
        /Cannot search \.: .*\.gitignore is not a regular file \(a named pipe\), and ripgrep would wait on it forever/,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("grep names a symlink loop given as its path", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "zq-grep-loop-"));
  try {
    symlinkSync("b", path.join(dir, "a"));
    symlinkSync("a", path.join(dir, "b"));
    for (const engine of ENGINES) {
      await assert.rejects(grepOf(dir, engine)({ pattern: "x", path: "a" }), {
        message: "Cannot search a: too many levels of symbolic links (a symlink loop)",
      }, engine);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
