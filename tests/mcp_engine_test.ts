// A full engine turn where a scripted model (MockOpenAIServer, real openai SDK over HTTP) calls an
// MCP tool from a real server through the approver; and the engine's interrupt cancelling a call.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  ApprovalOutcome,
  createDefaultEngine,
  EventType,
  OpenAIProvider,
  type WsEvent,
} from "../mod.ts";
import { McpManager, normalizeMcpConfigs } from "../mcp/mod.ts";
import { EVERYTHING_ENTRY, FIXTURES, needReal, waitFor } from "../mcp/_test_util.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "./_util.ts";

const skip = needReal({ node: true, servers: true });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(turns: ScriptedTurn[], servers: Record<string, unknown>) {
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  const engine = createDefaultEngine({
    workspace: ws,
    model: "test-model",
    provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL }),
  });
  const { configs } = normalizeMcpConfigs({ servers });
  const manager = new McpManager(engine.registry, configs, { builtin: { workspace: ws } });
  cleanups.push(() => manager.closeAll());
  const result = await manager.connectAll();
  assert.deepEqual(result.failed, []);
  return { ws, server, engine, manager };
}

test(
  "a scripted model calls an MCP tool through approval and reads its result",
  { skip },
  async () => {
    const { server, engine } = await setup([
      {
        toolCalls: [{
          id: "m1",
          name: "mcp__everything__echo",
          arguments: { message: "hello mcp" },
        }],
      },
      { text: "The server said hello." },
    ], { everything: { command: "node", args: [EVERYTHING_ENTRY, "stdio"] } });
    const asked: { toolName: string; category?: string }[] = [];
    engine.setApprover((request) => {
      asked.push({
        toolName: request.toolName,
        category: (request.metadata as { category?: string } | null)?.category,
      });
      return Promise.resolve(ApprovalOutcome.ONCE);
    });
    const { events, error } = await collect(engine.run("Echo something"));
    assert.equal(error, undefined);
    assert.deepEqual(asked, [{ toolName: "mcp__everything__echo", category: "mcp" }]);
    const required = ofType(events, EventType.PERMISSION_REQUIRED)[0].data;
    assert.equal(required.name, "mcp__everything__echo");
    assert.equal(required.category, "mcp");
    const finished = ofType(events, EventType.TOOL_FINISHED)[0].data;
    assert.equal(finished.status, "ok");
    assert.equal(finished.result_preview, "Echo: hello mcp");
    const tools =
      (server.requests[0].body as { tools?: { name?: string; function?: { name: string } }[] })
        .tools ?? [];
    assert.ok(tools.some((t) => (t.name ?? t.function?.name) === "mcp__everything__echo"));
    assert.match(JSON.stringify(server.requests[1].body), /Echo: hello mcp/);
    assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
  },
);

test("a denied MCP call is not sent to the server", { skip }, async () => {
  const { engine } = await setup([
    { toolCalls: [{ id: "m1", name: "mcp__everything__echo", arguments: { message: "x" } }] },
    { text: "ok" },
  ], { everything: { command: "node", args: [EVERYTHING_ENTRY, "stdio"] } });
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.DENY));
  const { events } = await collect(engine.run("Echo"));
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "denied");
  assert.equal(ofType(events, EventType.TOOL_STARTED).length, 0);
});

test("the engine's interrupt cancels a running MCP call on the server", { skip }, async () => {
  const cancelDir = tempWorkspace();
  cleanups.push(() => removeDir(cancelDir));
  const cancelFile = path.join(cancelDir, "cancelled");
  const { engine, manager } = await setup([
    { toolCalls: [{ id: "s1", name: "mcp__slow__sleep", arguments: {} }] },
    { text: "never" },
  ], {
    slow: {
      command: "node",
      args: [path.join(FIXTURES, "helper-server.mjs"), "slow"],
      env: { CANCEL_FILE: cancelFile },
    },
  });
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.ONCE));
  const events: WsEvent[] = [];
  for await (const event of engine.run("Sleep")) {
    events.push(event);
    if (event.type === EventType.TOOL_STARTED) setTimeout(() => engine.requestInterrupt(), 100);
  }
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "interrupted");
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "interrupted");
  assert.ok(
    await waitFor(() => fs.existsSync(cancelFile)),
    "notifications/cancelled reached the server",
  );
  assert.equal(manager.status("slow")!.state, "connected");
});
