import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  ApprovalOutcome,
  EventType,
  Mode,
  OpenAIProvider,
  PermissionEngine,
  registerFileTools,
  ToolRegistry,
  TurnEngine,
} from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "../tests/_util.ts";
import { registerDirectoryTool, setDirectoryHandler } from "./directories.ts";
import type { DirectoryRequest, QuestionContext } from "./registry.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  setDirectoryHandler(null);
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A real folder outside the workspace. */
function outsideDir(): string {
  const dir = tempWorkspace({ "data.txt": "outside data" });
  cleanups.push(() => removeDir(dir));
  return dir;
}

async function setup(turns: ScriptedTurn[], mode = Mode.INTERACTIVE) {
  const ws = tempWorkspace({ "a.txt": "a" });
  cleanups.push(() => removeDir(ws));
  const server = await new MockOpenAIServer({ turns }).start();
  cleanups.push(() => server.close());
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  registerDirectoryTool(registry);
  const engine = new TurnEngine({
    provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode: "chat" }),
    registry,
    permissions: new PermissionEngine({ workspaceRoot: ws, mode }),
    model: "m",
    instructions: "test",
  });
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.ONCE));
  return { engine, server, ws };
}

function toolResult(server: MockOpenAIServer, i: number, id: string): string {
  const messages = (server.requests[i].body as { messages: Record<string, string>[] }).messages;
  return messages.find((m) => m.role === "tool" && m.tool_call_id === id)?.content ?? "";
}

const ask = (p: string, writable?: boolean): ScriptedTurn => ({
  toolCalls: [{
    id: "d1",
    name: "request_directory",
    arguments: {
      path: p,
      reason: "need the data",
      ...(writable === undefined ? {} : { writable }),
    },
  }],
});

test("a read-only grant lets read_file in and keeps writes out", async () => {
  const outside = outsideDir();
  const { engine, server } = await setup([
    ask(outside),
    { toolCalls: [{ id: "r", name: "read_file", arguments: { path: `${outside}/data.txt` } }] },
    {
      toolCalls: [{
        id: "w",
        name: "write_file",
        arguments: { path: `${outside}/new.txt`, content: "x" },
      }],
    },
    { text: "done" },
  ]);
  const requests: DirectoryRequest[] = [];
  let context: QuestionContext | undefined;
  engine.setDirectoryHandler(async (request, ctx) => {
    await Promise.resolve();
    requests.push(request);
    context = ctx;
    return true;
  });
  const { events } = await collect(engine.run("x", "task-d"));
  const requested = ofType(events, EventType.DIRECTORY_REQUESTED);
  assert.equal(requested.length, 1);
  assert.deepEqual(
    { ...requested[0].data, seq: undefined, taskId: undefined },
    { reason: "need the data", path: outside, writable: false, seq: undefined, taskId: undefined },
  );
  assert.deepEqual(requests, [{ path: outside, reason: "need the data", writable: false }]);
  assert.equal(context?.engine, engine);
  assert.equal(context?.toolCallId, "d1");
  assert.deepEqual(engine.permissions.grantedDirectories(), [{ path: outside, writable: false }]);
  assert.equal(toolResult(server, 1, "d1"), `Access granted to ${outside} (read-only).`);
  const statuses = ofType(events, EventType.TOOL_FINISHED).map((e) =>
    `${e.data.name}:${e.data.status}`
  );
  assert.deepEqual(statuses, ["request_directory:ok", "read_file:ok", "write_file:denied"]);
  assert.match(toolResult(server, 2, "r"), /outside data/);
  assert.equal(fs.existsSync(path.join(outside, "new.txt")), false);
  // The read ran without a person: no permission_required for it.
  assert.deepEqual(
    ofType(events, EventType.PERMISSION_REQUIRED).map((e) => e.data.name),
    [],
  );
});

test("a writable grant lets write_file write there", async () => {
  const outside = outsideDir();
  const s2 = await setup([
    ask(outside, true),
    {
      toolCalls: [{
        id: "w",
        name: "write_file",
        arguments: { path: `${outside}/new.txt`, content: "written" },
      }],
    },
    { text: "done" },
  ]);
  s2.engine.setDirectoryHandler(() => Promise.resolve({ granted: true }));
  const { events } = await collect(s2.engine.run("x"));
  assert.deepEqual(
    ofType(events, EventType.TOOL_FINISHED).map((e) => e.data.status),
    ["ok", "ok"],
  );
  assert.equal(fs.readFileSync(path.join(outside, "new.txt"), "utf8"), "written");
});

test("the handler can downgrade a writable request to read-only, or refuse", async () => {
  const outside = outsideDir();
  const a = await setup([ask(outside, true), { text: "ok" }]);
  a.engine.setDirectoryHandler(() => Promise.resolve({ granted: true, writable: false }));
  await collect(a.engine.run("x"));
  assert.deepEqual(a.engine.permissions.grantedDirectories(), [{ path: outside, writable: false }]);
  const b = await setup([ask(outside), { text: "ok" }]);
  b.engine.setDirectoryHandler(() => Promise.resolve({ granted: false, reason: "private" }));
  await collect(b.engine.run("x"));
  assert.deepEqual(b.engine.permissions.grantedDirectories(), []);
  assert.equal(
    toolResult(b.server, 1, "d1"),
    `The user refused access to ${outside}. Do not use it. Note: private`,
  );
});

test("request_directory without a handler gives the model a clear tool error", async () => {
  const { engine, server } = await setup([ask(outsideDir()), { text: "ok" }]);
  const { events } = await collect(engine.run("x"));
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "error");
  assert.match(toolResult(server, 1, "d1"), /no directory handler is set/);
});

test("the global handler serves engines without their own", async () => {
  const { engine } = await setup([ask(outsideDir()), { text: "ok" }], Mode.PLAN);
  setDirectoryHandler(() => Promise.resolve(true));
  const { events } = await collect(engine.run("x"));
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "ok");
  assert.equal(engine.permissions.grantedDirectories().length, 1);
});

test("a missing path, a file, and a path inside the workspace are answered clearly", async () => {
  const { engine, server, ws } = await setup([
    ask("/no/such/dir/anywhere"),
    {
      toolCalls: [{
        id: "d2",
        name: "request_directory",
        arguments: { path: "a.txt", reason: "r" },
      }],
    },
    { toolCalls: [{ id: "d3", name: "request_directory", arguments: { path: ".", reason: "r" } }] },
    { text: "ok" },
  ]);
  engine.setDirectoryHandler(() => Promise.resolve(true));
  await collect(engine.run("x"));
  assert.match(toolResult(server, 1, "d1"), /no such directory/);
  assert.match(toolResult(server, 2, "d2"), /it is a file, not a directory/);
  assert.equal(
    toolResult(server, 3, "d3"),
    `${ws} is inside the workspace already; no grant is needed.`,
  );
});
