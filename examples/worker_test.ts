// examples/worker.ts (manual §18.3) in-process and as a real process, against a local
// MockOpenAIServer through the real OpenAIProvider.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { ApprovalOutcome, OpenAIProvider } from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { finish, skipExamples, spawnExample } from "./_test_util.ts";
import { runJob, staticApprover } from "./worker.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(turns: ScriptedTurn[]) {
  const root = tempWorkspace({ "template/README.md": "# job\n" });
  cleanups.push(() => removeDir(root));
  const model = await new MockOpenAIServer({ turns }).start();
  cleanups.push(() => model.close());
  const provider = new OpenAIProvider({ apiKey: "k", baseURL: model.baseURL });
  return { root, model, provider };
}

const usage = { inputTokens: 100, outputTokens: 10 };

test("a job runs in its own workspace with static approvals and counts its tokens", async () => {
  const { root, provider } = await setup([
    { toolCalls: [{ id: "r", name: "read_file", arguments: { path: "README.md" } }], usage },
    { toolCalls: [{ id: "s", name: "run_shell", arguments: { command: "echo checked" } }], usage },
    {
      toolCalls: [{ id: "w", name: "write_file", arguments: { path: "x.md", content: "x" } }],
      usage,
    },
    { text: "All done.", usage },
  ]);
  const lines: string[] = [];
  const report = await runJob(
    { id: "job-1", prompt: "check the project", template: path.join(root, "template") },
    {
      provider,
      model: "m",
      jobsRoot: path.join(root, "jobs"),
      archiveDir: path.join(root, "archive"),
      allowedCommands: ["echo"],
      log: (l) => lines.push(l),
    },
  );
  assert.equal(report.ok, true);
  assert.equal(report.status, "completed");
  assert.equal(report.answer, "All done.");
  assert.deepEqual(report.tools, ["read_file:ok", "run_shell:ok", "write_file:denied"]);
  assert.deepEqual(report.usage, {
    inputTokens: 400,
    outputTokens: 40,
    totalTokens: 440,
    replies: 4,
  });
  // The workspace is gone from jobsRoot and kept in the archive, with the template copied in.
  assert.deepEqual(fs.readdirSync(path.join(root, "jobs")), []);
  assert.equal(report.archivedTo, path.join(root, "archive", "job-1"));
  assert.ok(fs.existsSync(path.join(root, "archive", "job-1", "README.md")));
  assert.ok(!fs.existsSync(path.join(root, "archive", "job-1", "x.md")));
  assert.deepEqual(lines, []);
});

test("a job whose turn does not complete is reported and logged as a failure", async () => {
  const { root, provider } = await setup([
    { toolCalls: [{ id: "l", name: "list_files", arguments: { path: "." } }] },
    { toolCalls: [{ id: "l2", name: "list_files", arguments: { path: "." } }] },
  ]);
  const lines: string[] = [];
  const report = await runJob({ id: "job-2", prompt: "loop" }, {
    provider,
    model: "m",
    jobsRoot: path.join(root, "jobs"),
    maxIterations: 1,
    log: (l) => lines.push(l),
  });
  assert.equal(report.ok, false);
  assert.equal(report.status, "max_iterations_exceeded");
  assert.deepEqual(lines, ["job job-2 failed: turn ended max_iterations_exceeded"]);
  assert.equal(report.archivedTo, null);
  assert.deepEqual(fs.readdirSync(path.join(root, "jobs")), []);
});

test("the static rules allow npm test and deny everything else", async () => {
  const ask = (toolName: string, args: Record<string, unknown>) =>
    staticApprover({ toolName, arguments: args, metadata: null, reason: "" });
  assert.equal(await ask("run_shell", { command: "npm test -- --ci" }), ApprovalOutcome.ONCE);
  assert.equal(await ask("run_shell", { command: "npm publish" }), ApprovalOutcome.DENY);
  assert.equal(await ask("write_file", { path: "a" }), ApprovalOutcome.DENY);
});

test("a bad job id is refused before anything is created", async () => {
  await assert.rejects(runJob({ id: "../x", prompt: "p" }), /id must be/);
});

test("the worker runs a job from stdin and exits 0 with its report", {
  skip: skipExamples,
}, async () => {
  const { root, model } = await setup([{ text: "Finished.", usage }]);
  const child = spawnExample("worker.ts", {
    cwd: root,
    baseURL: model.baseURL,
    env: { JOBS_ROOT: path.join(root, "jobs") },
  });
  const { code, out, err } = await finish(child, JSON.stringify({ id: "cli", prompt: "go" }));
  assert.equal(code, 0, out + err);
  const report = JSON.parse(out.trim().split("\n").at(-1)!);
  assert.equal(report.status, "completed");
  assert.equal(report.answer, "Finished.");
  assert.equal(report.usage.inputTokens, 100);
});
