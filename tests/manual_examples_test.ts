// The manual's §9.3 and §18 samples (DESIGN §7: owned by the examples issue) run as written, as
// modules under Deno (and Node 22), against a local MockOpenAIServer, each in a fresh temporary
// workspace. §18.2 and §18.4 have no code in the manual: examples/desktop_sidecar.ts and
// examples/server/ are their runnable form (tested beside them).
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import process from "node:process";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "./_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const nodeFlags = process.execArgv.filter((a) => /^--(experimental|no-warnings)/.test(a));
const skip = isDeno || nodeFlags.some((a) => a.includes("transform-types"))
  ? false
  : "the samples are TypeScript modules: run with Deno or node --experimental-transform-types";

async function runSample(
  file: string,
  turns: ScriptedTurn[],
): Promise<{ code: number | null; out: string; err: string; server: MockOpenAIServer }> {
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  const server = await new MockOpenAIServer({ turns }).start();
  cleanups.push(() => server.close());
  const path = new URL(`./manual/${file}`, import.meta.url).pathname;
  return await new Promise((resolve, reject) => {
    const args = isDeno ? ["run", "-A", path] : [...nodeFlags, path];
    const child = spawn(process.execPath, args, {
      cwd: ws,
      env: {
        ...process.env,
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "sample-key",
        OPENAI_MODEL: "sample-model",
        NO_COLOR: "1",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out, err, server }));
  });
}

function lastJson(out: string): Record<string, unknown> {
  return JSON.parse(out.trim().split("\n").at(-1) ?? "");
}

test("§9.3: a turn is forwarded as SSE frames by the Express-style handler", { skip }, async () => {
  const { code, out, err } = await runSample("sec09_3_sse.ts", [{ text: ["Hello ", "there."] }]);
  assert.equal(code, 0, out + err);
  const r = lastJson(out);
  assert.equal(r.contentType, "text/event-stream");
  assert.equal(r.text, "Hello there.");
  assert.equal(r.status, "completed");
  assert.deepEqual(
    (r.types as string[]).filter((t) => ["turn_start", "assistant_delta", "turn_end"].includes(t)),
    ["turn_start", "assistant_delta", "turn_end"],
  );
});

test(
  "§18.1: one engine per session, queued run() calls and a suspended approval",
  { skip },
  async () => {
    const { code, out, err } = await runSample("sec18_1_http_sse.ts", [
      {
        toolCalls: [{ id: "w", name: "write_file", arguments: { path: "note.md", content: "ok" } }],
      },
      { text: "written" },
      { text: "you are welcome" },
    ]);
    assert.equal(code, 0, out + err);
    assert.deepEqual(lastJson(out), {
      order: ["a:turn_start", "a:turn_end", "b:turn_start", "b:turn_end"],
      approvalAsked: true,
      note: "ok",
      sameEngine: 1,
    });
  },
);

test("§18.3: the worker's static rules deny what nobody can approve", { skip }, async () => {
  const { code, out, err } = await runSample("sec18_3_worker.ts", [
    { toolCalls: [{ id: "l", name: "run_shell", arguments: { command: "npm run lint" } }] },
    { toolCalls: [{ id: "w", name: "write_file", arguments: { path: "a.js", content: "x" } }] },
    { text: "could not fix it" },
  ]);
  assert.equal(code, 0, out + err);
  assert.deepEqual(lastJson(out), {
    tools: ["run_shell:denied", "write_file:denied"],
    status: "completed",
    npmTestAllowed: true,
    approverNpmTest: "once",
  });
});
