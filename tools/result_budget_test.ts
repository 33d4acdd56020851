import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { budgetToolResult } from "./result_budget.ts";

function tempDir(): string {
  return mkdtempSync(path.join(os.tmpdir(), "zq-budget-"));
}

test("a result within the budget is returned unchanged and not saved", () => {
  const ws = tempDir();
  try {
    const r = budgetToolResult("small output", { workspace: ws, toolCallId: "c1" });
    assert.equal(r.text, "small output");
    assert.equal(r.truncated, false);
    assert.equal(r.savedPath, undefined);
    assert.deepEqual(readdirSync(ws), []);
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
});

test("a large result keeps head and tail and is saved under <workspace>/.agent/tool-results", () => {
  const ws = tempDir();
  try {
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i}`);
    const text = lines.join("\n");
    const r = budgetToolResult(text, {
      workspace: ws,
      toolCallId: "call_42",
      toolName: "run_shell",
    });
    assert.equal(r.truncated, true);
    assert.ok(r.text.length <= 20_000, `visible ${r.text.length} chars`);
    assert.ok(r.text.startsWith("line 0\nline 1\n"));
    assert.ok(r.text.endsWith("line 4999"));
    assert.equal(r.savedPath, path.join(ws, ".agent", "tool-results", "run_shell_call_42.txt"));
    assert.equal(readFileSync(r.savedPath!, "utf8"), text);
    assert.ok(r.text.includes(`of ${text.length} chars (${text.length} bytes)`));
    assert.ok(r.text.includes(r.savedPath!));
    // No temp files left behind.
    assert.deepEqual(readdirSync(path.dirname(r.savedPath!)), ["run_shell_call_42.txt"]);
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
});

test("the cut never splits a surrogate pair at the head or the tail", () => {
  const ws = tempDir();
  try {
    // Emoji are surrogate pairs; no newlines, so the cut cannot snap to a line boundary.
    for (const pad of [0, 1]) {
      const text = "a".repeat(pad) + "😀".repeat(30_000);
      const r = budgetToolResult(text, { dir: ws, maxChars: 1001, saveThreshold: Infinity });
      assert.equal(r.truncated, true);
      assert.equal(r.savedPath, undefined);
      const roundTrip = new TextDecoder().decode(new TextEncoder().encode(r.text));
      assert.equal(roundTrip, r.text, "a lone surrogate would turn into U+FFFD");
      assert.ok(!r.text.includes("\uFFFD"));
      assert.ok(r.text.endsWith("😀"));
    }
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
});

test("the total size is reported in chars and UTF-8 bytes", () => {
  const text = "阴".repeat(30_000);
  const r = budgetToolResult(text, { maxChars: 2000, saveThreshold: Infinity });
  assert.equal(r.totalChars, 30_000);
  assert.equal(r.totalBytes, 90_000);
  assert.ok(r.text.includes("of 30000 chars (90000 bytes)"));
});

test("options.dir wins over TOOL_RESULT_DIR, which wins over the workspace default", () => {
  const ws = tempDir();
  const saved = process.env.TOOL_RESULT_DIR;
  try {
    process.env.TOOL_RESULT_DIR = path.join(ws, "from-env");
    const big = "x".repeat(25_000);
    const a = budgetToolResult(big, { workspace: ws, toolCallId: "a" });
    assert.equal(path.dirname(a.savedPath!), path.join(ws, "from-env"));
    const b = budgetToolResult(big, {
      workspace: ws,
      dir: path.join(ws, "explicit"),
      toolCallId: "b",
    });
    assert.equal(path.dirname(b.savedPath!), path.join(ws, "explicit"));
  } finally {
    if (saved === undefined) delete process.env.TOOL_RESULT_DIR;
    else process.env.TOOL_RESULT_DIR = saved;
    rmSync(ws, { recursive: true, force: true });
  }
});

test("TOOL_RESULT_MAX_CHARS and TOOL_RESULT_SAVE_THRESHOLD are read from the environment", () => {
  const ws = tempDir();
  const keep = [process.env.TOOL_RESULT_MAX_CHARS, process.env.TOOL_RESULT_SAVE_THRESHOLD];
  try {
    process.env.TOOL_RESULT_MAX_CHARS = "5000";
    process.env.TOOL_RESULT_SAVE_THRESHOLD = "100000";
    const r = budgetToolResult("y".repeat(50_000), { workspace: ws });
    assert.ok(r.text.length <= 5000);
    assert.equal(r.savedPath, undefined);
    assert.ok(r.text.includes("full output not saved"));
  } finally {
    for (
      const [k, v] of [["TOOL_RESULT_MAX_CHARS", keep[0]], ["TOOL_RESULT_SAVE_THRESHOLD", keep[1]]]
    ) {
      if (v === undefined) delete process.env[k!];
      else process.env[k!] = v;
    }
    rmSync(ws, { recursive: true, force: true });
  }
});

test("the saved file name is made safe from a hostile tool call id", () => {
  const ws = tempDir();
  try {
    const r = budgetToolResult("z".repeat(30_000), { dir: ws, toolCallId: "../../etc/passwd" });
    assert.equal(path.dirname(r.savedPath!), ws);
    assert.ok(!path.basename(r.savedPath!).startsWith("."));
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
});

test("saving without any folder throws a clear error", () => {
  const saved = process.env.TOOL_RESULT_DIR;
  delete process.env.TOOL_RESULT_DIR;
  try {
    assert.throws(() => budgetToolResult("q".repeat(30_000), {}), /Cannot save tool result/);
  } finally {
    if (saved !== undefined) process.env.TOOL_RESULT_DIR = saved;
  }
});

test("a saved result and the folders made for it are private to their owner", {
  skip: process.platform === "win32" ? "no POSIX modes on Windows" : false,
}, () => {
  const ws = tempDir();
  try {
    const r = budgetToolResult("secret ".repeat(5000), { workspace: ws, toolCallId: "c9" });
    assert.ok(r.savedPath);
    const modeOf = (p: string) => (statSync(p).mode & 0o777).toString(8);
    assert.equal(modeOf(r.savedPath), "600");
    assert.equal(modeOf(path.join(ws, ".agent")), "700");
    assert.equal(modeOf(path.join(ws, ".agent", "tool-results")), "700");
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
});
