// The manual's §9.3 and §18 samples (DESIGN §7: owned by the examples issue) run as written, as
// modules under Deno (and Node 22), against a local MockOpenAIServer, each in a fresh temporary
// workspace. §18.2 and §18.4 have no code in the manual: examples/desktop_sidecar.ts and
// examples/server/ are their runnable form (tested beside them).
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import type { ScriptedTurn } from "../testing/mod.ts";
import { cleanUpSamples, lastJson, runSample as runManualSample } from "./_manual.ts";

afterEach(cleanUpSamples);

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const nodeFlags = process.execArgv.filter((a) => /^--(experimental|no-warnings)/.test(a));
const skip = isDeno || nodeFlags.some((a) => a.includes("transform-types"))
  ? false
  : "the samples are TypeScript modules: run with Deno or node --experimental-transform-types";

function runSample(file: string, turns: ScriptedTurn[]) {
  return runManualSample(file, { turns });
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
