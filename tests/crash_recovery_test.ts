// Crash recovery (issue: checkpoint guarantee, DESIGN §6): a child process running a scripted
// session is killed with SIGKILL mid-stream, mid-tool and while waiting for approval; a fresh
// process restores from FileLogHook and resume()s. The turn completes, no tool runs twice, and
// the event log stays readable.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { FileLogHook } from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "./_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const skip = isDeno ? false : "the child host is run by the Deno binary";
const CHILD = new URL("./lifecycle/crash_child.ts", import.meta.url).pathname;

interface Setup {
  ws: string;
  stateDir: string;
  server: MockOpenAIServer;
}

async function setup(turns: ScriptedTurn[]): Promise<Setup> {
  const ws = tempWorkspace();
  const stateDir = tempWorkspace();
  cleanups.push(() => removeDir(ws), () => removeDir(stateDir));
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  return { ws, stateDir, server };
}

function start(s: Setup, phase: "first" | "resume"): { child: ChildProcess; lines: string[] } {
  const child = spawn(process.execPath, ["run", "-A", CHILD], {
    env: {
      ...process.env,
      PHASE: phase,
      CRASH_WS: s.ws,
      CRASH_STATE: s.stateDir,
      CRASH_BASE_URL: s.server.baseURL,
      NO_COLOR: "1",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const lines: string[] = [];
  let buf = "";
  child.stdout!.on("data", (d) => {
    buf += d;
    const parts = buf.split("\n");
    buf = parts.pop()!;
    lines.push(...parts);
  });
  let err = "";
  child.stderr!.on("data", (d) => (err += d));
  child.on("close", () => {
    if (buf) lines.push(buf);
    if (err.trim()) lines.push(`STDERR ${err.trim()}`);
  });
  return { child, lines };
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("close", () => resolve()));
}

/** Kills the child with SIGKILL once a line satisfies `when`. */
async function killWhen(
  run: { child: ChildProcess; lines: string[] },
  when: (lines: string[]) => boolean,
): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const check = () => {
      if (when(run.lines)) {
        run.child.stdout!.off("data", check);
        resolve();
      }
    };
    run.child.stdout!.on("data", check);
    run.child.once(
      "close",
      () => reject(new Error(`child exited first:\n${run.lines.join("\n")}`)),
    );
    check();
  });
  run.child.kill("SIGKILL");
  await exited(run.child);
}

async function resume(s: Setup): Promise<string[]> {
  const run = start(s, "resume");
  await exited(run.child);
  await new Promise((r) => setTimeout(r, 0));
  return run.lines;
}

function runs(ws: string): string[] {
  const p = path.join(ws, "runs.log");
  return fs.existsSync(p) ? fs.readFileSync(p, "utf8").trim().split("\n") : [];
}

function assertLogReadable(stateDir: string): string[] {
  const text = fs.readFileSync(path.join(stateDir, "crash-session.jsonl"), "utf8");
  const lines = text.split("\n").filter((l) => l.trim());
  // Every line but possibly a torn one parses; readEvents returns all complete ones.
  const good = lines.filter((l) => {
    try {
      JSON.parse(l);
      return true;
    } catch {
      return false;
    }
  });
  assert.ok(good.length >= lines.length - 1, "at most one torn line");
  const events = FileLogHook.readEvents("crash-session", stateDir);
  assert.equal(events.length, good.length);
  return events.map((e) => e.type);
}

function sent(server: MockOpenAIServer, i: number): string {
  return JSON.stringify(server.requests[i]?.body ?? null);
}

test("killed mid-stream, a fresh process resumes: the turn completes and no tool runs twice", {
  skip,
}, async () => {
  const s = await setup([
    { toolCalls: [{ id: "c1", name: "count", arguments: { tag: "a" } }] },
    { text: ["partial ", "answer"], holdOpen: true },
    { text: "the full answer" },
  ]);
  const first = start(s, "first");
  // The second model reply is streaming (its first delta arrived) when the process dies.
  await killWhen(first, (l) => l.filter((x) => x === "assistant_delta").length >= 1);
  assert.deepEqual(runs(s.ws), ["count a"]);
  const out = await resume(s);
  assert.ok(out.includes("turn_end completed"), out.join("\n"));
  assert.ok(!out.includes("tool_started"), "the finished tool is not run again");
  assert.deepEqual(runs(s.ws), ["count a"]);
  assert.match(sent(s.server, 2), /"tool_call_id":"c1"/, "the resumed request has the result");
  const types = assertLogReadable(s.stateDir);
  assert.equal(types.filter((t) => t === "turn_end").length, 1);
  assert.equal(
    FileLogHook.loadState("crash-session", s.stateDir)?.messages.at(-1)?.content,
    "the full answer",
  );
});

test("killed mid-stream in the first reply, a fresh process answers the saved user message", {
  skip,
}, async () => {
  const s = await setup([
    { text: ["thinking ", "about it"], holdOpen: true },
    { text: "answer after restart" },
  ]);
  const first = start(s, "first");
  await killWhen(first, (l) => l.includes("assistant_delta"));
  const out = await resume(s);
  assert.ok(out.includes("turn_end completed"), out.join("\n"));
  assert.match(sent(s.server, 1), /do the work/);
  assertLogReadable(s.stateDir);
});

test("killed mid-tool, the interrupted tool is reported to the model and not run again", {
  skip,
}, async () => {
  const s = await setup([
    { toolCalls: [{ id: "s1", name: "slow", arguments: {} }] },
    { text: "I see the tool was interrupted" },
  ]);
  const first = start(s, "first");
  await killWhen(first, (l) => l.includes("SLOW_RUNNING s1"));
  assert.deepEqual(runs(s.ws), ["slow s1"]);
  const out = await resume(s);
  assert.ok(out.includes("turn_end completed"), out.join("\n"));
  assert.deepEqual(runs(s.ws), ["slow s1"], "the slow tool did not run twice");
  assert.match(sent(s.server, 1), /may have partly run/);
  assertLogReadable(s.stateDir);
});

test("killed while waiting for approval, a fresh process asks again and finishes the batch", {
  skip,
}, async () => {
  const s = await setup([
    {
      toolCalls: [
        { id: "k1", name: "count", arguments: { tag: "b" } },
        { id: "w1", name: "write_file", arguments: { path: "out.txt", content: "written" } },
      ],
    },
    { text: "all done" },
  ]);
  const first = start(s, "first");
  await killWhen(first, (l) => l.some((x) => x.startsWith("APPROVAL_WAIT w1")));
  assert.equal(fs.existsSync(path.join(s.ws, "out.txt")), false);
  const out = await resume(s);
  assert.ok(out.includes("APPROVED w1"), out.join("\n"));
  assert.ok(out.includes("turn_end completed"), out.join("\n"));
  assert.deepEqual(runs(s.ws), ["count b"], "the call that had a result did not run again");
  assert.equal(fs.readFileSync(path.join(s.ws, "out.txt"), "utf8"), "written");
  const types = assertLogReadable(s.stateDir);
  assert.equal(types.filter((t) => t === "permission_required").length, 2);
});
