// Permission decisions are taken right before each call runs, not once per model reply.
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
  registerShellTool,
  ToolRegistry,
  TurnEngine,
} from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "../tests/_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(turns: ScriptedTurn[], mode: Mode) {
  const ws = tempWorkspace();
  const outside = tempWorkspace();
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  registerShellTool(registry, ws);
  const engine = new TurnEngine({
    provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode: "chat" }),
    registry,
    permissions: new PermissionEngine({ workspaceRoot: ws, mode }),
    model: "m",
    instructions: "",
  });
  return { ws, outside, engine, server };
}

test("a write through a symlink made earlier in the same reply is refused", async () => {
  const { ws, outside, engine, server } = await setup([], Mode.AUTO);
  server.enqueue(
    {
      toolCalls: [
        { id: "ln", name: "run_shell", arguments: { command: `ln -s ${outside} docs` } },
        { id: "w", name: "write_file", arguments: { path: "docs/pwned.txt", content: "x" } },
      ],
    },
    { text: "done" },
  );
  const { events } = await collect(engine.run("go"));
  const finished = ofType(events, EventType.TOOL_FINISHED).map((
    e,
  ) => [e.data.reqId, e.data.status]);
  assert.deepEqual(finished, [["ln", "ok"], ["w", "denied"]]);
  assert.ok(fs.lstatSync(path.join(ws, "docs")).isSymbolicLink());
  assert.deepEqual(fs.readdirSync(outside), []);
});

test("always-this-tool given for the first call of a reply covers the next call", async () => {
  const { engine } = await setup([
    {
      toolCalls: [
        { id: "w1", name: "write_file", arguments: { path: "a.txt", content: "a" } },
        { id: "w2", name: "write_file", arguments: { path: "b.txt", content: "b" } },
      ],
    },
    { text: "done" },
  ], Mode.INTERACTIVE);
  let asked = 0;
  engine.setApprover(() => {
    asked++;
    return Promise.resolve(ApprovalOutcome.ALWAYS_TOOL);
  });
  const { events } = await collect(engine.run("go"));
  assert.equal(asked, 1);
  assert.equal(ofType(events, EventType.PERMISSION_REQUIRED).length, 1);
  assert.deepEqual(
    ofType(events, EventType.TOOL_FINISHED).map((e) => e.data.status),
    ["ok", "ok"],
  );
});
