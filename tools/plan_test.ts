import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import {
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
import { getPlanHandler, registerPlanTool, setPlanHandler } from "./plan.ts";
import type { QuestionContext } from "./registry.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  setPlanHandler(null);
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(turns: ScriptedTurn[], mode = Mode.PLAN) {
  const ws = tempWorkspace({ "a.txt": "a" });
  cleanups.push(() => removeDir(ws));
  const server = await new MockOpenAIServer({ turns }).start();
  cleanups.push(() => server.close());
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  registerPlanTool(registry);
  const engine = new TurnEngine({
    provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode: "chat" }),
    registry,
    permissions: new PermissionEngine({ workspaceRoot: ws, mode }),
    model: "m",
    instructions: "test",
  });
  return { engine, server, ws };
}

const PLAN = "## Plan\n1. Read a.txt\n2. Change it";
const planCall: ScriptedTurn = {
  toolCalls: [{ id: "p1", name: "propose_plan", arguments: { plan: PLAN } }],
};

function toolResult(server: MockOpenAIServer, i: number, id: string): string {
  const messages = (server.requests[i].body as { messages: Record<string, string>[] }).messages;
  return messages.find((m) => m.role === "tool" && m.tool_call_id === id)?.content ?? "";
}

test("propose_plan works in PLAN mode: plan_proposed, the engine's handler, the answer", async () => {
  const { engine, server } = await setup([planCall, { text: "ok" }]);
  const seen: { plan: string; ctx?: QuestionContext }[] = [];
  engine.setPlanHandler(async (plan, ctx) => {
    await Promise.resolve();
    seen.push({ plan, ctx });
    return { approved: true, feedback: "keep it small" };
  });
  const { events } = await collect(engine.run("plan it", "task-p"));
  const proposed = ofType(events, EventType.PLAN_PROPOSED);
  assert.equal(proposed.length, 1);
  assert.equal(proposed[0].data.plan, PLAN);
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "ok");
  assert.equal(seen[0].plan, PLAN);
  assert.equal(seen[0].ctx?.engine, engine);
  assert.equal(seen[0].ctx?.taskId, "task-p");
  assert.equal(seen[0].ctx?.toolCallId, "p1");
  assert.equal(
    toolResult(server, 1, "p1"),
    "The user approved the plan. Carry it out. Feedback: keep it small",
  );
});

test("the engine's plan handler overrides the global one; the global one serves the rest", async () => {
  const calls: string[] = [];
  setPlanHandler(async () => {
    await Promise.resolve();
    calls.push("global");
    return false;
  });
  assert.equal(typeof getPlanHandler(), "function");
  const a = await setup([planCall, { text: "ok" }]);
  a.engine.setPlanHandler(async () => {
    await Promise.resolve();
    calls.push("engine");
    return true;
  });
  await collect(a.engine.run("x"));
  const b = await setup([planCall, { text: "ok" }]);
  await collect(b.engine.run("x"));
  assert.deepEqual(calls, ["engine", "global"]);
  assert.match(toolResult(b.server, 1, "p1"), /^The user rejected the plan\. Do not carry it out/);
});

test("propose_plan without any handler gives the model a clear tool error", async () => {
  const { engine, server } = await setup([planCall, { text: "ok" }]);
  const { events } = await collect(engine.run("x"));
  const finished = ofType(events, EventType.TOOL_FINISHED)[0].data;
  assert.equal(finished.status, "error");
  assert.equal(ofType(events, EventType.PLAN_PROPOSED).length, 0);
  assert.match(toolResult(server, 1, "p1"), /Cannot propose the plan: no plan handler is set/);
});

test("propose_plan rejects an empty plan and a handler without a decision", async () => {
  const { engine, server } = await setup([
    { toolCalls: [{ id: "e", name: "propose_plan", arguments: { plan: "  " } }] },
    planCall,
    { text: "ok" },
  ]);
  engine.setPlanHandler(() => Promise.resolve({ nope: 1 } as never));
  await collect(engine.run("x"));
  assert.match(toolResult(server, 1, "e"), /plan is empty/);
  assert.match(toolResult(server, 2, "p1"), /returned no \{approved\} decision/);
});

test("interrupting the turn while the plan waits ends the call as interrupted", async () => {
  const { engine } = await setup([planCall, { text: "never" }]);
  engine.setPlanHandler(() => new Promise(() => {}));
  const events = [];
  for await (const e of engine.run("x")) {
    events.push(e);
    if (e.type === EventType.PLAN_PROPOSED) engine.requestInterrupt();
  }
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "interrupted");
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "interrupted");
});

test("setPlanHandler refuses a non-function", () => {
  assert.throws(() => setPlanHandler("x" as never), /not a function/);
});
