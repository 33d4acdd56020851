import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const MAIN = new URL("./main.ts", import.meta.url).pathname;
const skip = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined"
  ? false
  : "the CLI test spawns the Deno binary";

async function mockServer(turns: ScriptedTurn[]) {
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  return server;
}

function workspace(files: Record<string, string> = {}): string {
  const ws = tempWorkspace(files);
  cleanups.push(() => removeDir(ws));
  return ws;
}

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

test("a relative --workspace is resolved from the folder the user ran the command in", {
  skip,
}, async () => {
  const parent = workspace({ "proj/hello.txt": "hi\n" });
  const server = await mockServer([
    { toolCalls: [{ id: "l", name: "list_files", arguments: { path: "." } }] },
    { text: "ok" },
  ]);
  const { code, out } = await runCli(["--workspace", "proj", "--model", "m", "list"], {
    env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "k", INIT_CWD: parent },
  });
  assert.equal(code, 0, out);
  assert.match(out, /hello\.txt/);
});

test("without a terminal ask_user fails instead of inventing the user's answer", {
  skip,
}, async () => {
  const ws = workspace();
  const server = await mockServer([
    {
      toolCalls: [{
        id: "q",
        name: "ask_user",
        arguments: { question: "Delete the database?", options: ["yes", "no"] },
      }],
    },
    { text: "I will not delete anything." },
  ]);
  const { code, out } = await runCli(["--workspace", ws, "--model", "m", "clean up"], {
    env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "k" },
  });
  assert.equal(code, 0, out);
  assert.match(out, /✗ ask_user error/);
  assert.match(JSON.stringify(server.requests[1].body), /no terminal to ask on/);
});

test("--max-iterations caps a model that never stops calling tools", { skip }, async () => {
  const ws = workspace();
  const loop = { toolCalls: [{ name: "list_files", arguments: {} }] };
  const server = await mockServer([loop, loop, loop, loop]);
  const { code, out } = await runCli(
    ["--workspace", ws, "--model", "m", "--max-iterations", "2", "loop"],
    { env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "k" } },
  );
  assert.equal(code, 1, out);
  assert.match(out, /max_iterations_exceeded/);
  assert.equal(server.requests.length, 2);
});

test("bad flags and a missing model are refused before any request", { skip }, async () => {
  const lang = await runCli(["--lang", "klingon", "hi"]);
  assert.equal(lang.code, 2);
  assert.match(lang.out, /Cannot use --lang klingon/);
  const iters = await runCli(["--max-iterations", "0", "hi"]);
  assert.equal(iters.code, 2);
  const ws = workspace();
  const model = await runCli(["--workspace", ws, "hi"], { env: { OPENAI_MODEL: "" } });
  assert.equal(model.code, 2);
  assert.match(model.out, /no model specified/);
});

function sleepers(marker: string): string[] {
  const out = execFileSync("ps", ["-eo", "stat=,args="], { encoding: "utf8" });
  return out.split("\n").filter((l) => /^\s*[^Z\s]/.test(l) && l.includes(`sleep ${marker}`));
}

test("SIGTERM interrupts the turn and leaves no shell command running", { skip }, async () => {
  const ws = workspace();
  const marker = `${400 + Math.floor(Math.random() * 500)}.${Date.now() % 100000}`;
  const server = await mockServer([
    { toolCalls: [{ id: "s", name: "run_shell", arguments: { command: `sleep ${marker}` } }] },
    { text: "never" },
  ]);
  const child = spawn(process.execPath, [
    "run",
    "-A",
    MAIN,
    "--workspace",
    ws,
    "--mode",
    "auto",
    "--model",
    "m",
    "go",
  ], {
    env: { ...process.env, NO_COLOR: "1", OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "k" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const closed = new Promise<string>((r) => child.on("close", (code, sig) => r(`${code}/${sig}`)));
  for (let i = 0; i < 600 && sleepers(marker).length === 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(sleepers(marker).length > 0, out);
  child.kill("SIGTERM");
  // Exit status 143 (or death by SIGTERM as Deno reports it) after the turn was interrupted.
  assert.match(await closed, /^(143\/null|null\/SIGTERM)$/);
  for (let i = 0; i < 400 && sleepers(marker).length > 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.deepEqual(sleepers(marker), []);
  assert.match(out, /\[turn_end\] interrupted/);
});

/** Runs the CLI on a pseudo-terminal (util-linux `script`), answering prompts as they appear. */
async function onTerminal(
  args: string[],
  env: Record<string, string>,
  steps: { waitFor: RegExp; send: string }[],
): Promise<{ code: number | null; out: string }> {
  const cmd = [process.execPath, "run", "-A", MAIN, ...args].map((a) => `'${a}'`).join(" ");
  const child = spawn("script", ["-qfec", cmd, "/dev/null"], {
    env: { ...process.env, NO_COLOR: "1", TERM: "dumb", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const closed = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
  let from = 0;
  for (const step of steps) {
    for (let i = 0; i < 600 && !step.waitFor.test(out.slice(from)); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!step.waitFor.test(out.slice(from))) {
      child.kill("SIGKILL");
      await closed;
      return { code: -1, out: `timed out waiting for ${step.waitFor}:\n${out}` };
    }
    from = out.length;
    child.stdin.write(step.send);
  }
  const timer = setTimeout(() => child.kill("SIGKILL"), 30000);
  const code = await closed;
  clearTimeout(timer);
  return { code, out };
}

const hasScript = (() => {
  try {
    execFileSync("script", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

test("on a terminal the REPL asks for approval, and Ctrl-C at the prompt leaves it usable", {
  skip: skip ||
    (!hasScript && process.env.CI_REQUIRE_REAL !== "1" ? "no `script` (util-linux)" : false),
}, async () => {
  const ws = workspace();
  const write = (id: string, file: string) => ({
    toolCalls: [{ id, name: "write_file", arguments: { path: file, content: id } }],
  });
  const server = await mockServer([
    write("w1", "one.txt"),
    { text: "first done" },
    { text: "Writing files" }, // the session name, asked after the first turn
    write("w2", "two.txt"),
    { text: "third answer" },
  ]);
  const { code, out } = await onTerminal(
    ["--workspace", ws, "--model", "m"],
    { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "k" },
    [
      { waitFor: /› $/m, send: "first\r" },
      { waitFor: /\[n\] deny > /, send: "y\r" },
      { waitFor: /first done[\s\S]*› /, send: "second\r" },
      { waitFor: /\[n\] deny > /, send: "\x03" },
      { waitFor: /interrupted[\s\S]*› /, send: "third\r" },
      { waitFor: /third answer[\s\S]*› /, send: "/exit\r" },
    ],
  );
  assert.equal(code, 0, out);
  assert.equal(fs.readFileSync(path.join(ws, "one.txt"), "utf8"), "w1");
  assert.equal(fs.existsSync(path.join(ws, "two.txt")), false);
  assert.match(out, /\[turn_end\] completed/);
  assert.match(out, /session: Writing files/);
});
