// The manual's samples owned by the lifecycle issue (DESIGN §7: §11, §12.3–12.5, §13, §14) run
// as written, as modules under Deno, against a local MockOpenAIServer, each in a fresh
// temporary workspace.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import type { ScriptedTurn } from "../testing/mod.ts";
import { cleanUpSamples, lastJson, runSample as runManualSample } from "./_manual.ts";

afterEach(cleanUpSamples);

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const skip = isDeno ? false : "the samples are run as modules by the Deno binary";

async function runSample(
  file: string,
  turns: ScriptedTurn[],
  files: Record<string, string> = {},
) {
  const run = await runManualSample(file, {
    turns,
    files,
    env: { OPENAI_MAX_RETRIES: "0", NETWORK_RETRY_MAX: "0" },
  });
  return { ...run, ws: run.workspace };
}

test("§11.1–11.2: a CompositeHook feeds every member; a throwing hook does not stop the turn", {
  skip,
}, async () => {
  const { code, out, err, ws } = await runSample("sec11_2_composite_hook.ts", [{ text: "hello" }]);
  assert.equal(code, 0, out + err);
  const r = lastJson(out);
  assert.equal(r.members, 2);
  assert.deepEqual(r.seen, ["end:completed"]);
  const log = fs.readFileSync(path.join(ws, "manual-11-2.jsonl"), "utf8").trim().split("\n");
  assert.equal(JSON.parse(log[0]).type, "turn_start");
});

test("§11.3: FileLogHook saves, loads and restores a session with its permissions", {
  skip,
}, async () => {
  const { code, out, err, ws } = await runSample("sec11_3_file_log_hook.ts", [
    { toolCalls: [{ id: "w", name: "write_file", arguments: { path: "n.md", content: "x" } }] },
    { text: "saved" },
  ]);
  assert.equal(code, 0, out + err);
  const r = lastJson(out);
  assert.equal(r.name, "Sample session");
  assert.equal(r.taskCount, 1);
  assert.deepEqual(r.roles, ["system", "user", "assistant", "tool", "assistant"]);
  assert.equal(r.mode, "interactive");
  assert.deepEqual(r.allowTools, ["write_file"]);
  assert.equal(r.missing, null);
  for (const t of ["turn_start", "tool_finished", "turn_end"]) {
    assert.ok((r.loggedTypes as string[]).includes(t), t);
  }
  assert.ok(fs.existsSync(path.join(ws, ".sessions", "manual-11-3_state.json")));
});

test("§12.3: retry() re-runs a turn that ended with a retriable error, and only then", {
  skip,
}, async () => {
  const { code, out, err } = await runSample("sec12_3_retry.ts", [
    { httpError: { status: 503, message: "overloaded" } },
    { text: "hello again" },
  ]);
  assert.equal(code, 0, out + err);
  const r = lastJson(out);
  assert.deepEqual(r.firstTurn, ["error:true", "turn_end:error"]);
  assert.equal(r.retried, "turn_end:completed");
  assert.equal(r.again, 0);
});

test("§12.4: resume() processes the pending call through the approver, then yields nothing", {
  skip,
}, async () => {
  const { code, out, err } = await runSample("sec12_4_resume.ts", [{ text: "note written" }]);
  assert.equal(code, 0, out + err);
  const r = lastJson(out);
  const seen = r.seen as string[];
  assert.deepEqual(seen.slice(0, 5), [
    "turn_start",
    "tool_proposed",
    "permission_required",
    "tool_started",
    "tool_finished:ok",
  ]);
  assert.equal(seen.at(-1), "turn_end");
  assert.equal(r.again, 0);
  assert.equal(r.note, "ok");
});

test("§12.5: queued steering is injected in order between iterations; removal works until then", {
  skip,
}, async () => {
  const { code, out, err, server } = await runSample("sec12_5_steering.ts", [
    { toolCalls: [{ id: "l", name: "list_files", arguments: { path: "." } }] },
    { text: "ok" },
  ]);
  assert.equal(code, 0, out + err);
  const r = lastJson(out);
  assert.deepEqual(r.injected, ["顺便把测试也跑一下", "忽略 dist 目录"]);
  assert.equal(r.removed, true);
  assert.equal(r.removedLate, false);
  assert.match(JSON.stringify(server.requests[1].body), /忽略 dist 目录[\s\S]*data:image\/png/);
});

test("§13.2: attachments are validated, stored, sent in their turn only, and read back safely", {
  skip,
}, async () => {
  const { code, out, err, server, ws } = await runSample("sec13_attachments.ts", [
    { text: "a 1x1 image" },
    { text: "still a 1x1 image" },
  ]);
  assert.equal(code, 0, out + err);
  const r = lastJson(out);
  const start = (r.starts as Record<string, unknown>[])[0];
  assert.equal(start.attachmentCount, 1);
  assert.deepEqual(start.attachments, [r.ref]);
  assert.equal(r.name, "screenshot.png");
  assert.equal(r.mimeType, "image/png");
  assert.equal(r.size, 70);
  assert.equal(r.traversal, "AttachmentError:bad_path");
  assert.ok(fs.existsSync(path.join(ws, "session", (r.ref as { path: string }).path)));
  assert.match(JSON.stringify(server.requests[0].body), /data:image\/png;base64/);
  assert.doesNotMatch(JSON.stringify(server.requests[1].body), /base64/);
});

test("§14: createDefaultEngine takes the compaction options and compacts over the threshold", {
  skip,
}, async () => {
  const { code, out, err } = await runSample("sec14_compaction.ts", [
    { toolCalls: [{ id: "r", name: "read_file", arguments: { path: "README.md" } }] },
    { text: "README read", usage: { inputTokens: 130_000, outputTokens: 10 } },
    { text: "summary of the session" },
    { text: "continuing" },
  ], { "README.md": "# demo\n" });
  assert.equal(code, 0, out + err);
  const r = lastJson(out);
  const events = r.events as Record<string, unknown>[];
  const compacting = events.find((e) => e.type === "compacting" && e.level === "hard")!;
  assert.equal(compacting.trigger, "threshold");
  assert.equal(compacting.contextWindow, 200_000);
  assert.equal(compacting.thresholdTokens, 120_000, "capTokens caps 0.85 × 200,000");
  const compacted = events.find((e) => e.type === "compacted" && e.level === "hard")!;
  assert.equal(compacted.method, "summarized");
  assert.equal((r.state as { summaries: number }).summaries, 1);
});
