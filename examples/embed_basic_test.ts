// examples/embed_basic.ts (manual §4) as a real process against a local MockOpenAIServer.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { MockOpenAIServer } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { finish, skipExamples as skip, spawnExample } from "./_test_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(turns: ConstructorParameters<typeof MockOpenAIServer>[0]) {
  const ws = tempWorkspace({ "README.md": "# demo\n" });
  cleanups.push(() => removeDir(ws));
  const model = await new MockOpenAIServer(turns).start();
  cleanups.push(() => model.close());
  return { ws, model };
}

test("the basic host streams a turn, approves a write and answers a question from stdin", {
  skip,
}, async () => {
  const { ws, model } = await setup({
    turns: [
      { toolCalls: [{ id: "l", name: "list_files", arguments: { path: "." } }] },
      {
        toolCalls: [{ id: "w", name: "write_file", arguments: { path: "NOTES.md", content: "n" } }],
      },
      {
        toolCalls: [{
          id: "q",
          name: "ask_user",
          arguments: { question: "Which language?", options: ["中文", "English"] },
        }],
      },
      { text: ["A small ", "demo project."] },
    ],
  });
  const child = spawnExample("embed_basic.ts", { cwd: ws, baseURL: model.baseURL });
  const { code, out, err } = await finish(child, "y\nEnglish\n");
  assert.equal(code, 0, out + err);
  assert.match(out, /\[tool\] list_files/);
  assert.match(out, /\[approval\] write_file/);
  assert.match(out, /\[tool done\] write_file: ok/);
  assert.match(out, /\[question\] Which language\?/);
  assert.match(out, /A small demo project\./);
  assert.match(out, /\[end\] completed/);
  assert.equal(fs.readFileSync(path.join(ws, "NOTES.md"), "utf8"), "n");
  assert.match(JSON.stringify(model.requests[3].body), /English/);
});

test("the basic host denies when the input ends, and exits non-zero without a model", {
  skip,
}, async () => {
  const { ws, model } = await setup({
    turns: [
      { toolCalls: [{ id: "w", name: "write_file", arguments: { path: "x.md", content: "x" } }] },
      { text: "ok" },
    ],
  });
  const denied = await finish(spawnExample("embed_basic.ts", { cwd: ws, baseURL: model.baseURL }));
  assert.equal(denied.code, 0, denied.out + denied.err);
  assert.match(denied.out, /\[tool done\] write_file: denied/);
  assert.equal(fs.existsSync(path.join(ws, "x.md")), false);
  const noModel = await finish(
    spawnExample("embed_basic.ts", { cwd: ws, baseURL: model.baseURL, env: { OPENAI_MODEL: "" } }),
  );
  assert.equal(noModel.code, 2);
  assert.match(noModel.err, /Cannot start: set OPENAI_MODEL/);
});
