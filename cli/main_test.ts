import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import process from "node:process";
import { MockOpenAIServer } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const MAIN = new URL("./main.ts", import.meta.url).pathname;

function runCli(
  args: string[],
  options: { env?: Record<string, string>; cwd?: string; input?: string } = {},
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["run", "-A", MAIN, ...args], {
      cwd: options.cwd,
      env: { ...process.env, NO_COLOR: "1", ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
    child.stdin.end(options.input ?? "");
  });
}

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

test("the demo runs a full turn with tool calls, an approval and turn_end completed", {
  skip: isDeno ? false : "the CLI test spawns the Deno binary",
}, async () => {
  const { code, out } = await runCli(["--demo"]);
  assert.equal(code, 0, out);
  assert.match(out, /SCRIPTED/);
  for (const tool of ["list_files", "read_file", "grep", "write_file", "run_shell"]) {
    assert.match(out, new RegExp(`✓ ${tool} ok`), `${tool} ran:\n${out}`);
  }
  assert.match(out, /approval needed: write_file/);
  assert.match(out, /approval needed: run_shell/);
  assert.match(out, /all tests passed/);
  assert.match(out, /\[turn_end\] completed/);
  assert.match(out, /final status: completed/);
});

test("the agent runs one turn against OPENAI_BASE_URL in the given workspace", {
  skip: isDeno ? false : "the CLI test spawns the Deno binary",
}, async () => {
  const ws = tempWorkspace({ "hello.txt": "hi there\n" });
  cleanups.push(() => removeDir(ws));
  const server = new MockOpenAIServer({
    turns: [
      { toolCalls: [{ id: "c1", name: "read_file", arguments: { path: "hello.txt" } }] },
      { text: "The file says hi." },
    ],
  });
  await server.start();
  cleanups.push(() => server.close());
  const { code, out } = await runCli(
    ["--workspace", ws, "--model", "m1", "what is in hello.txt?"],
    {
      env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "k" },
    },
  );
  assert.equal(code, 0, out);
  assert.match(out, /The file says hi\./);
  assert.match(out, /\[turn_end\] completed/);
  assert.equal((server.requests[0].body as { model: string }).model, "m1");
});

test("without a terminal an approval is shown and denied, and the turn still completes", {
  skip: isDeno ? false : "the CLI test spawns the Deno binary",
}, async () => {
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  const server = new MockOpenAIServer({
    turns: [
      { toolCalls: [{ id: "w", name: "write_file", arguments: { path: "x.txt", content: "x" } }] },
      { text: "Could not write." },
    ],
  });
  await server.start();
  cleanups.push(() => server.close());
  const { code, out } = await runCli(["--workspace", ws, "write x"], {
    env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "k", OPENAI_MODEL: "m" },
  });
  assert.equal(code, 0, out);
  assert.match(out, /approval needed: write_file/);
  assert.match(out, /✗ write_file denied/);
});

test("a bad --mode is refused with a clear message", {
  skip: isDeno ? false : "the CLI test spawns the Deno binary",
}, async () => {
  const { code, out } = await runCli(["--mode", "yolo", "hi"]);
  assert.equal(code, 2);
  assert.match(out, /Cannot use --mode yolo/);
});
