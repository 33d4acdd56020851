// Tool suite part A through whole engines (createDefaultEngine + the real openai SDK against a
// local MockOpenAIServer): one ConflictGuard per engine, the patch tools and the task list.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  ApprovalOutcome,
  createDefaultEngine,
  Mode,
  OpenAIProvider,
  TodoList,
  type TurnEngine,
} from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "./_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function engineWith(
  ws: string,
  turns: ScriptedTurn[],
  mode = Mode.AUTO,
): Promise<TurnEngine> {
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  return createDefaultEngine({
    workspace: ws,
    model: "test-model",
    mode,
    defaultApproval: "allow",
    provider: new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
    }),
  });
}

function finished(events: { type: string; data: Record<string, unknown> }[]) {
  return Object.fromEntries(
    ofType(events as never, "tool_finished").map((e) => [e.data.reqId, e.data]),
  ) as Record<string, Record<string, unknown>>;
}

test("an engine refuses to overwrite a file another engine changed after it read it", async () => {
  const ws = tempWorkspace({ "notes.txt": "draft\n" });
  cleanups.push(() => removeDir(ws));
  const a = await engineWith(ws, [
    { toolCalls: [{ id: "read", name: "read_file", arguments: { path: "notes.txt" } }] },
    { text: "read it" },
    {
      toolCalls: [{
        id: "edit",
        name: "replace_in_file",
        arguments: { path: "notes.txt", old_text: "draft", new_text: "A's version" },
      }],
    },
    { text: "tried" },
  ]);
  const b = await engineWith(ws, [
    {
      toolCalls: [{
        id: "write",
        name: "write_file",
        arguments: { path: "notes.txt", content: "draft\nB was here\n" },
      }],
    },
    { text: "written" },
  ]);
  await collect(a.run("read notes"));
  const bEvents = await collect(b.run("write notes"));
  assert.equal(finished(bEvents.events).write.status, "ok");
  const aEvents = await collect(a.run("edit notes"));
  const edit = finished(aEvents.events).edit;
  assert.equal(edit.status, "error");
  const toolMsg = a.messages.find((m) => m.tool_call_id === "edit");
  assert.match(String(toolMsg?.content), /FileConflictError/);
  assert.match(String(toolMsg?.content), /changed on disk since it was last read/);
  assert.equal(fs.readFileSync(path.join(ws, "notes.txt"), "utf8"), "draft\nB was here\n");
});

test("apply_patch runs through the engine and needs approval outside AUTO mode", async () => {
  const ws = tempWorkspace({ "a.txt": "one\n" });
  cleanups.push(() => removeDir(ws));
  const engine = await engineWith(ws, [
    {
      toolCalls: [{
        id: "p",
        name: "apply_patch",
        arguments: {
          patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+uno\n*** End Patch",
        },
      }],
    },
    { text: "patched" },
  ], Mode.INTERACTIVE);
  const asked: string[] = [];
  engine.setApprover((request) => {
    asked.push(request.toolName);
    return Promise.resolve(ApprovalOutcome.ONCE);
  });
  const { events } = await collect(engine.run("patch it"));
  assert.deepEqual(asked, ["apply_patch"]);
  assert.equal(finished(events).p.status, "ok");
  assert.equal(fs.readFileSync(path.join(ws, "a.txt"), "utf8"), "uno\n");
});

test("todo_write through the engine leaves a list the host can read", async () => {
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  const engine = await engineWith(ws, [
    {
      toolCalls: [{
        id: "t",
        name: "todo_write",
        arguments: {
          todos: [{ content: "Plan", status: "completed" }, {
            content: "Do",
            status: "in_progress",
          }],
        },
      }],
    },
    { text: "planned" },
  ], Mode.PLAN);
  const { events } = await collect(engine.run("plan it"));
  assert.equal(finished(events).t.status, "ok");
  const list = TodoList.of(engine.registry)!;
  assert.deepEqual(list.items().map((t) => t.status), ["completed", "in_progress"]);
  // A restored session gets the same list back from its messages.
  const restored = createDefaultEngine({ workspace: ws, model: "m", messages: engine.messages });
  assert.deepEqual(TodoList.of(restored.registry)!.items(), list.items());
});
