import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import {
  ApprovalOutcome,
  createDefaultEngine,
  type EngineHook,
  EventType,
  Mode,
  OpenAIProvider,
  PermissionEngine,
  SubagentHook,
  ToolRegistry,
  TurnEngine,
  type WsEvent,
} from "../mod.ts";
import { MockOpenAIServer, type RecordedRequest, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "../tests/_util.ts";
import { DEFAULT_EXPLORE_MAX_ITERATIONS, registerExploreTool } from "./explore.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Msg = { role: string; content: unknown; tool_call_id?: string };
const messagesOf = (r: RecordedRequest) => (r.body as { messages: Msg[] }).messages;
const isSubagent = (r: RecordedRequest) =>
  String(messagesOf(r)[0]?.content).includes("read-only research subagent");
const toolNames = (r: RecordedRequest) =>
  ((r.body as { tools?: { function: { name: string } }[] }).tools ?? []).map((t) =>
    t.function.name
  );

/** Serves the parent from `parent` and the subagent from `sub`, told apart by system prompt. */
async function serve(parent: ScriptedTurn[], sub: (n: number) => ScriptedTurn) {
  let p = 0;
  let s = 0;
  const server = await new MockOpenAIServer({
    turns: (req) => (isSubagent(req) ? sub(s++) : parent[p++] ?? { text: "parent done" }),
  }).start();
  cleanups.push(() => server.close());
  return server;
}

function workspace(): string {
  const ws = tempWorkspace({
    "src/auth.ts": "export function login() { return 'marker-42'; }\n",
    "README.md": "# demo\n",
  });
  cleanups.push(() => removeDir(ws));
  return ws;
}

function parentEngine(
  server: MockOpenAIServer,
  ws: string,
  options: { maxIterations?: number; hook?: () => EngineHook } = {},
): TurnEngine {
  const provider = new OpenAIProvider({
    apiKey: "k",
    baseURL: server.baseURL,
    apiMode: "chat",
    maxRetries: 0,
  });
  const registry = new ToolRegistry();
  registerExploreTool(registry, {
    workspace: ws,
    provider,
    model: "sub-model",
    lang: "en",
    maxIterations: options.maxIterations,
    hookFactory: options.hook,
  });
  const engine = new TurnEngine({
    provider,
    registry,
    permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.INTERACTIVE }),
    model: "parent-model",
    instructions: "You are the parent agent.",
    networkRetryMax: 0,
  });
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.DENY));
  return engine;
}

const exploreCall: ScriptedTurn = {
  toolCalls: [{ id: "ex1", name: "explore", arguments: { task: "Where is login defined?" } }],
};

test("explore runs a read-only subagent and only its report reaches the parent", async () => {
  const ws = workspace();
  const server = await serve([exploreCall, { text: "login is in src/auth.ts" }], (n) =>
    [
      { toolCalls: [{ id: "s1", name: "grep", arguments: { pattern: "login" } }] },
      { toolCalls: [{ id: "s2", name: "read_file", arguments: { path: "src/auth.ts" } }] },
      { text: "REPORT: login is defined in src/auth.ts line 1." },
    ][n]);
  const lines: string[] = [];
  const engine = parentEngine(server, ws, {
    hook: () => new SubagentHook("explore", { write: (t) => lines.push(t), color: false }),
  });
  const { events, error } = await collect(engine.run("find login", "task-e"));
  assert.equal(error, undefined);
  assert.equal(ofType(events, EventType.TURN_END).at(-1)!.data.status, "completed");

  // The subagent: its own context, model, prompt and read-only tools.
  const subRequests = server.requests.filter(isSubagent);
  assert.equal(subRequests.length, 3);
  assert.equal((subRequests[0].body as { model: string }).model, "sub-model");
  assert.deepEqual(toolNames(subRequests[0]).sort(), [
    "git_diff",
    "git_log",
    "git_status",
    "grep",
    "list_files",
    "read_file",
  ]);
  assert.deepEqual(
    messagesOf(subRequests[0]).map((m) => m.role),
    ["system", "user"],
    "the subagent starts from its own context",
  );
  assert.equal(messagesOf(subRequests[0])[1].content, "Where is login defined?");

  // The parent gets the report only, never the subagent's file reads.
  const parentAfter = server.requests.filter((r) => !isSubagent(r))[1];
  const toolMsg = messagesOf(parentAfter).find((m) => m.tool_call_id === "ex1");
  assert.equal(toolMsg?.content, "REPORT: login is defined in src/auth.ts line 1.");
  assert.doesNotMatch(JSON.stringify(parentAfter.body), /marker-42/);

  // Its events are forwarded into the parent stream.
  const forwarded = ofType(events, EventType.SUBAGENT_EVENT);
  assert.ok(forwarded.every((e) => e.data.agent === "explore" && e.data.parentReqId === "ex1"));
  assert.ok(forwarded.every((e) => e.data.taskId === "task-e"));
  const inner = forwarded.map((e) => e.data.event as WsEvent);
  assert.equal(inner[0].type, "turn_start");
  assert.equal(inner.at(-1)!.type, "turn_end");
  assert.equal(inner.at(-1)!.data.status, "completed");
  assert.deepEqual(
    inner.filter((e) => e.type === "tool_finished").map((e) => `${e.data.name}:${e.data.status}`),
    ["grep:ok", "read_file:ok"],
  );
  // Forwarded events come between the parent's tool_started and tool_finished of explore.
  const started = events.findIndex((e) => e.type === "tool_started" && e.data.name === "explore");
  const finished = events.findIndex((e) => e.type === "tool_finished" && e.data.name === "explore");
  const firstFwd = events.findIndex((e) => e.type === "subagent_event");
  const lastFwd = events.findLastIndex((e) => e.type === "subagent_event");
  assert.ok(started < firstFwd && lastFwd < finished);

  // The hook from hookFactory printed the subagent's tool calls, indented.
  const printed = lines.join("");
  assert.match(printed, / {4}↳ \[explore\] Where is login defined\?/);
  assert.match(printed, / {4}▸ read_file \{"path":"src\/auth\.ts"\}/);
  assert.match(printed, / {4} {2}✓ grep ok/);
  assert.match(printed, / {4}↳ \[explore\] completed \(3 iteration\(s\)\)/);
});

test("the subagent runs in PLAN mode: a read outside the workspace is refused, not asked", async () => {
  const ws = workspace();
  const server = await serve([exploreCall], (n) =>
    [
      { toolCalls: [{ id: "o", name: "read_file", arguments: { path: "/etc/hostname" } }] },
      { toolCalls: [{ id: "w", name: "write_file", arguments: { path: "x", content: "x" } }] },
      { text: "REPORT: could not read it" },
    ][n]);
  const engine = parentEngine(server, ws);
  const { events } = await collect(engine.run("x"));
  const inner = ofType(events, EventType.SUBAGENT_EVENT).map((e) => e.data.event as WsEvent);
  const finished = inner.filter((e) => e.type === "tool_finished");
  assert.equal(finished[0].data.status, "denied");
  assert.equal(finished[1].data.status, "error", "write_file does not exist for the subagent");
  assert.equal(ofType(events, EventType.TOOL_FINISHED).at(-1)!.data.status, "ok");
});

test("the default cap is 30 iterations, then one final turn without tools", async () => {
  assert.equal(DEFAULT_EXPLORE_MAX_ITERATIONS, 30);
  const ws = workspace();
  const server = await serve(
    [exploreCall],
    (n) =>
      n < 30
        // Distinct arguments: 30 identical calls would be stopped by loop detection first.
        ? {
          toolCalls: [{
            id: `l${n}`,
            name: "list_files",
            arguments: { path: ".", max_entries: 500 + n },
          }],
        }
        : { text: "REPORT: final after the cap" },
  );
  const engine = parentEngine(server, ws);
  const { events } = await collect(engine.run("x"));
  const subRequests = server.requests.filter(isSubagent);
  assert.equal(subRequests.length, 31);
  assert.deepEqual(toolNames(subRequests[30]), [], "the final request offers no tools");
  const inner = ofType(events, EventType.SUBAGENT_EVENT).map((e) => e.data.event as WsEvent);
  assert.equal(inner.at(-1)!.data.status, "max_iterations_exceeded");
  const parentAfter = server.requests.filter((r) => !isSubagent(r))[1];
  assert.equal(
    messagesOf(parentAfter).find((m) => m.tool_call_id === "ex1")?.content,
    "REPORT: final after the cap",
  );
});

test("maxIterations lowers the cap", async () => {
  const ws = workspace();
  const server = await serve(
    [exploreCall],
    (n) =>
      n < 2
        ? { toolCalls: [{ id: `l${n}`, name: "list_files", arguments: {} }] }
        : { text: "REPORT: capped" },
  );
  await collect(parentEngine(server, ws, { maxIterations: 2 }).run("x"));
  assert.equal(server.requests.filter(isSubagent).length, 3);
});

test("interrupting the parent interrupts the subagent's model request", async () => {
  const ws = workspace();
  let arrived!: () => void;
  const subRequestArrived = new Promise<void>((r) => (arrived = r));
  const server = await serve([exploreCall], () => {
    arrived();
    return { stallForever: true };
  });
  const engine = parentEngine(server, ws);
  const run = collect(engine.run("x"));
  await subRequestArrived;
  engine.requestInterrupt();
  const { events } = await run;
  assert.equal(ofType(events, EventType.TURN_END).at(-1)!.data.status, "interrupted");
  assert.equal(
    ofType(events, EventType.TOOL_FINISHED).find((e) => e.data.name === "explore")?.data.status,
    "interrupted",
  );
  const subIndex = server.requests.findIndex(isSubagent);
  await server.waitForClientClose(subIndex); // resolves only once the subagent's request is aborted
  assert.equal(server.requests[subIndex].clientClosed, true);
});

test("a failing subagent gives the parent a clear tool error", async () => {
  const ws = workspace();
  const server = await serve([exploreCall], () => ({
    httpError: { status: 401, message: "bad key" },
  }));
  const { events } = await collect(parentEngine(server, ws).run("x"));
  const done = ofType(events, EventType.TOOL_FINISHED).find((e) => e.data.name === "explore")!;
  assert.equal(done.data.status, "error");
  assert.match(String(done.data.reason), /Cannot finish explore: .*bad key/);
});

test("an empty task is refused", async () => {
  const ws = workspace();
  const server = await serve([{
    toolCalls: [{ id: "ex1", name: "explore", arguments: { task: " " } }],
  }], () => ({ text: "never" }));
  const { events } = await collect(parentEngine(server, ws).run("x"));
  assert.match(
    String(ofType(events, EventType.TOOL_FINISHED)[0].data.reason),
    /Cannot explore: task is empty/,
  );
  assert.equal(server.requests.filter(isSubagent).length, 0);
});

test("createDefaultEngine wires explore with subagentHookFactory and the engine's model", async () => {
  const ws = workspace();
  const server = await serve([exploreCall, { text: "ok" }], () => ({ text: "REPORT: r" }));
  let made = 0;
  const seen: string[] = [];
  const engine = createDefaultEngine({
    workspace: ws,
    model: "first-model",
    lang: "en",
    provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode: "chat" }),
    subagentHookFactory: () => {
      made++;
      return { onTurnEnd: (status) => seen.push(status) };
    },
  });
  engine.model = "second-model";
  const { events } = await collect(engine.run("x"));
  assert.equal(ofType(events, EventType.TURN_END).at(-1)!.data.status, "completed");
  assert.equal(made, 1);
  assert.deepEqual(seen, ["completed"]);
  const sub = server.requests.find(isSubagent)!;
  assert.equal((sub.body as { model: string }).model, "second-model");
});
