import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {
  ApprovalOutcome,
  ApprovalRequiredError,
  createDefaultEngine,
  EngineConfigError,
  EventType,
  Mode,
  OpenAIProvider,
  PermissionEngine,
  registerFileTools,
  registerSearchTool,
  registerShellTool,
  ToolRegistry,
  TurnEngine,
  TurnInProgressError,
  type WsEvent,
} from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace, types } from "../tests/_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function serve(turns: ScriptedTurn[], responses = true): Promise<MockOpenAIServer> {
  const server = new MockOpenAIServer({ turns, responses });
  await server.start();
  cleanups.push(() => server.close());
  return server;
}

function workspace(files: Record<string, string> = {}): string {
  const ws = tempWorkspace(files);
  cleanups.push(() => removeDir(ws));
  return ws;
}

interface EngineSetup {
  mode?: Mode;
  apiMode?: "chat" | "responses";
  maxIterations?: number;
  finalizeOnMaxIterations?: boolean;
  allowedCommands?: string[];
  registry?: ToolRegistry;
  model?: string;
}

function engineFor(server: MockOpenAIServer, ws: string, setup: EngineSetup = {}): TurnEngine {
  const registry = setup.registry ?? new ToolRegistry();
  if (!setup.registry) {
    registerFileTools(registry, ws);
    registerShellTool(registry, ws);
    registerSearchTool(registry, ws);
  }
  return new TurnEngine({
    provider: new OpenAIProvider({
      apiKey: "test-key",
      baseURL: server.baseURL,
      apiMode: setup.apiMode ?? "chat",
      maxRetries: 0,
    }),
    registry,
    permissions: new PermissionEngine({
      workspaceRoot: ws,
      mode: setup.mode ?? Mode.INTERACTIVE,
      allowedCommands: setup.allowedCommands ?? [],
    }),
    model: setup.model ?? "test-model",
    instructions: "You are a test agent.",
    maxIterations: setup.maxIterations,
    finalizeOnMaxIterations: setup.finalizeOnMaxIterations,
    networkRetryBaseMs: 10,
  });
}

function bodyOf(server: MockOpenAIServer, i: number): Record<string, unknown> {
  const body = server.requests[i]?.body;
  assert.ok(body && typeof body === "object", `request ${i} has a JSON body`);
  return body as Record<string, unknown>;
}

/** Text of the tool message answering `callId` in a recorded chat request. */
function toolResultIn(body: Record<string, unknown>, callId: string): string | undefined {
  const messages = body.messages as { role: string; tool_call_id?: string; content: string }[];
  return messages.find((m) => m.role === "tool" && m.tool_call_id === callId)?.content;
}

for (const apiMode of ["chat", "responses"] as const) {
  test(`a tool loop reads a file and feeds the result back to the model (${apiMode})`, async () => {
    const ws = workspace({ "notes.txt": "the secret word is pelican\n" });
    const server = await serve([
      { toolCalls: [{ id: "call_1", name: "read_file", arguments: { path: "notes.txt" } }] },
      { text: ["The word ", "is pelican."] },
    ]);
    const engine = engineFor(server, ws, { apiMode });
    const { events, error } = await collect(engine.run("What is the secret word?"));
    assert.equal(error, undefined);
    assert.deepEqual(types(events), [
      "turn_start",
      "llm_request",
      "assistant_message",
      "tool_proposed",
      "tool_started",
      "tool_finished",
      "iteration_end",
      "llm_request",
      "assistant_delta",
      "assistant_delta",
      "assistant_message",
      "iteration_end",
      "turn_end",
    ]);
    const finished = ofType(events, EventType.TOOL_FINISHED)[0].data;
    assert.equal(finished.reqId, "call_1");
    assert.equal(finished.status, "ok");
    const end = ofType(events, EventType.TURN_END)[0].data;
    assert.equal(end.status, "completed");
    assert.equal(end.iterations, 2);
    const second = JSON.stringify(bodyOf(server, 1));
    assert.match(second, /pelican/);
    assert.equal(engine.messages.at(-1)?.content, "The word is pelican.");
  });
}

test("every event carries a monotonic seq and the turn's taskId, and turn_end comes once", async () => {
  const ws = workspace({ "a.txt": "a" });
  const server = await serve([
    { toolCalls: [{ id: "c1", name: "read_file", arguments: { path: "a.txt" } }] },
    { text: "done" },
  ]);
  const engine = engineFor(server, ws);
  const { events } = await collect(engine.run("go", "task-42"));
  const seqs = events.map((e) => e.data.seq as number);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
  assert.equal(new Set(seqs).size, seqs.length);
  assert.ok(events.every((e) => e.data.taskId === "task-42"));
  assert.equal(ofType(events, EventType.TURN_END).length, 1);
  assert.equal(events.at(-1)?.type, EventType.TURN_END);
});

test("a second run() sends the first turn's history to the model", async () => {
  const ws = workspace();
  const server = await serve([{ text: "Hi Ana." }, { text: "Your name is Ana." }]);
  const engine = engineFor(server, ws);
  await collect(engine.run("My name is Ana."));
  await collect(engine.run("What is my name?"));
  const messages = bodyOf(server, 1).messages as { role: string; content: string }[];
  assert.deepEqual(messages.map((m) => [m.role, m.content]), [
    ["system", "You are a test agent."],
    ["user", "My name is Ana."],
    ["assistant", "Hi Ana."],
    ["user", "What is my name?"],
  ]);
});

test("nothing is sent to the model before the first read of the stream", async () => {
  const ws = workspace();
  const server = await serve([{ text: "ok" }]);
  const engine = engineFor(server, ws);
  const stream = engine.run("hello");
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(server.requests.length, 0);
  assert.equal(engine.messages.length, 1);
  const { events } = await collect(stream);
  assert.equal(server.requests.length, 1);
  assert.equal(events.at(-1)?.data.status, "completed");
});

test("consecutive low-risk calls run concurrently, approval-requiring calls one at a time", async () => {
  const ws = workspace();
  const registry = new ToolRegistry();
  let running = 0;
  const peaks: Record<string, number> = { probe: 0, change: 0 };
  const make = (name: "probe" | "change", low: boolean) =>
    registry.register(
      async () => {
        running++;
        peaks[name] = Math.max(peaks[name], running);
        // Wait until a second call is running, or give up after a while: concurrency shows
        // as a peak of 2, serial execution as a peak of 1.
        for (let i = 0; i < 40 && running < 2; i++) await new Promise((r) => setTimeout(r, 10));
        running--;
        return `${name} done`;
      },
      {
        category: "test",
        riskLevel: low ? "low" : "high",
        capabilities: [],
        requiresApproval: !low,
      },
      { type: "function", function: { name, parameters: { type: "object", properties: {} } } },
    );
  make("probe", true);
  make("change", false);
  const server = await serve([
    {
      toolCalls: [
        { id: "p1", name: "probe", arguments: {} },
        { id: "p2", name: "probe", arguments: {} },
        { id: "w1", name: "change", arguments: {} },
        { id: "w2", name: "change", arguments: {} },
      ],
    },
    { text: "ok" },
  ]);
  const engine = engineFor(server, ws, { registry });
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.ONCE));
  const { events } = await collect(engine.run("go"));
  assert.equal(peaks.probe, 2);
  assert.equal(peaks.change, 1);
  const order = ofType(events, EventType.TOOL_FINISHED).map((e) => e.data.reqId);
  assert.deepEqual(order.slice(2), ["w1", "w2"]);
  assert.equal(ofType(events, EventType.PERMISSION_REQUIRED).length, 2);
});

test("ONCE runs the call and asks again for the next one", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "a.txt", content: "1" } }] },
    { toolCalls: [{ id: "w2", name: "write_file", arguments: { path: "b.txt", content: "2" } }] },
    { text: "written" },
  ]);
  const engine = engineFor(server, ws);
  const asked: string[] = [];
  engine.setApprover((req) => {
    asked.push(`${req.toolName}:${req.toolCallId}`);
    return Promise.resolve(ApprovalOutcome.ONCE);
  });
  const { events } = await collect(engine.run("write two files"));
  assert.deepEqual(asked, ["write_file:w1", "write_file:w2"]);
  assert.equal(fs.readFileSync(path.join(ws, "a.txt"), "utf8"), "1");
  assert.equal(fs.readFileSync(path.join(ws, "b.txt"), "utf8"), "2");
  const end = ofType(events, EventType.TURN_END)[0].data;
  assert.deepEqual((end.produced_files as string[]).sort(), ["a.txt", "b.txt"]);
});

test("permission_required comes after tool_proposed and before tool_started", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "a.txt", content: "1" } }] },
    { text: "ok" },
  ]);
  const engine = engineFor(server, ws);
  let savedDuringApproval = "";
  engine.setApprover(() => {
    // The assistant message with its pending call is already in the history (DESIGN §6).
    savedDuringApproval = JSON.stringify(engine.messages.at(-1));
    return Promise.resolve(ApprovalOutcome.ONCE);
  });
  const { events } = await collect(engine.run("write"));
  const forCall = events.filter((e) => e.data.reqId === "w1").map((e) => e.type);
  assert.deepEqual(forCall, [
    "tool_proposed",
    "permission_required",
    "tool_started",
    "tool_finished",
  ]);
  const required = ofType(events, EventType.PERMISSION_REQUIRED)[0].data;
  assert.equal(required.name, "write_file");
  assert.equal(typeof required.reason, "string");
  assert.equal(required.category, "fs");
  assert.match(savedDuringApproval, /"w1"/);
});

test("ALWAYS_TOOL stops asking for that tool for the rest of the session", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "a.txt", content: "1" } }] },
    { text: "one" },
    { toolCalls: [{ id: "w2", name: "write_file", arguments: { path: "b.txt", content: "2" } }] },
    { text: "two" },
  ]);
  const engine = engineFor(server, ws);
  let asked = 0;
  engine.setApprover(() => {
    asked++;
    return Promise.resolve(ApprovalOutcome.ALWAYS_TOOL);
  });
  await collect(engine.run("first"));
  const { events } = await collect(engine.run("second"));
  assert.equal(asked, 1);
  assert.equal(ofType(events, EventType.PERMISSION_REQUIRED).length, 0);
  assert.ok(fs.existsSync(path.join(ws, "b.txt")));
});

test("ALWAYS_COMMAND allows that executable again but not another command", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "s1", name: "run_shell", arguments: { command: "echo first" } }] },
    { toolCalls: [{ id: "s2", name: "run_shell", arguments: { command: "echo second" } }] },
    { toolCalls: [{ id: "s3", name: "run_shell", arguments: { command: "pwd" } }] },
    { text: "done" },
  ]);
  const engine = engineFor(server, ws);
  const asked: string[] = [];
  engine.setApprover((req) => {
    asked.push(String(req.arguments.command));
    return Promise.resolve(ApprovalOutcome.ALWAYS_COMMAND);
  });
  const { events } = await collect(engine.run("run things"));
  assert.deepEqual(asked, ["echo first", "pwd"]);
  assert.ok(
    ofType(events, EventType.TOOL_FINISHED).every((e) => e.data.status === "ok"),
    JSON.stringify(ofType(events, EventType.TOOL_FINISHED).map((e) => e.data)),
  );
});

test("DENY skips the tool and tells the model it was denied", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "a.txt", content: "1" } }] },
    { text: "understood" },
  ]);
  const engine = engineFor(server, ws);
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.DENY));
  const { events } = await collect(engine.run("write"));
  const finished = ofType(events, EventType.TOOL_FINISHED)[0].data;
  assert.equal(finished.status, "denied");
  assert.equal(ofType(events, EventType.TOOL_STARTED).length, 0);
  assert.equal(fs.existsSync(path.join(ws, "a.txt")), false);
  assert.match(toolResultIn(bodyOf(server, 1), "w1") ?? "", /denied/i);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
});

test("without an approver the stream ends with error and turn_end, then throws", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "a.txt", content: "1" } }] },
  ]);
  const engine = engineFor(server, ws);
  const { events, error } = await collect(engine.run("write"));
  assert.ok(error instanceof ApprovalRequiredError, String(error));
  assert.match((error as Error).message, /write_file/);
  assert.deepEqual(types(events).slice(-2), ["error", "turn_end"]);
  assert.equal(events.at(-1)?.data.status, "error");
  // No tool call is left without a result.
  const last = engine.messages.at(-1);
  assert.equal(last?.role, "tool");
  assert.equal(last?.tool_call_id, "w1");
  assert.equal(fs.existsSync(path.join(ws, "a.txt")), false);
});

for (const [defaultApproval, expected] of [["deny", "denied"], ["allow", "ok"]] as const) {
  test(`defaultApproval "${defaultApproval}" makes an unanswered approval ${expected}`, async () => {
    const ws = workspace();
    const server = await serve([
      { toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "a.txt", content: "1" } }] },
      { text: "ok" },
    ]);
    const engine = createDefaultEngine({
      workspace: ws,
      model: "test-model",
      provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode: "chat" }),
      defaultApproval,
    });
    const { events, error } = await collect(engine.run("write"));
    assert.equal(error, undefined);
    assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, expected);
    assert.equal(fs.existsSync(path.join(ws, "a.txt")), expected === "ok");
  });
}

test('defaultApproval "error" throws ApprovalRequiredError out of the stream', async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "a.txt", content: "1" } }] },
  ]);
  const engine = createDefaultEngine({
    workspace: ws,
    model: "test-model",
    provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode: "chat" }),
  });
  const { error } = await collect(engine.run("write"));
  assert.ok(error instanceof ApprovalRequiredError);
});

test("maxIterations stops the loop with max_iterations_exceeded", async () => {
  const ws = workspace({ "a.txt": "a" });
  const read = { toolCalls: [{ name: "read_file", arguments: { path: "a.txt" } }] };
  const server = await serve([read, read, read]);
  const engine = engineFor(server, ws, { maxIterations: 2 });
  const { events } = await collect(engine.run("loop"));
  assert.equal(server.requests.length, 2);
  const end = ofType(events, EventType.TURN_END)[0].data;
  assert.equal(end.status, "max_iterations_exceeded");
  assert.equal(end.iterations, 2);
});

test("finalizeOnMaxIterations makes one last call without tools", async () => {
  const ws = workspace({ "a.txt": "a" });
  const read = { toolCalls: [{ name: "read_file", arguments: { path: "a.txt" } }] };
  const server = await serve([read, read, { text: "final report" }]);
  const engine = engineFor(server, ws, { maxIterations: 2, finalizeOnMaxIterations: true });
  const { events } = await collect(engine.run("loop"));
  assert.equal(server.requests.length, 3);
  const last = bodyOf(server, 2);
  assert.equal(last.tools, undefined);
  assert.equal(engine.messages.at(-1)?.content, "final report");
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "max_iterations_exceeded");
});

test("requestInterrupt during the model stream ends with interrupted then turn_end", async () => {
  const ws = workspace();
  const server = await serve([{ text: ["partial ", "answer"], holdOpen: true }]);
  const engine = engineFor(server, ws);
  const events: WsEvent[] = [];
  for await (const e of engine.run("talk")) {
    events.push(e);
    if (e.type === EventType.ASSISTANT_DELTA && e.data.text === "answer") {
      engine.requestInterrupt();
    }
  }
  assert.deepEqual(types(events).slice(-2), ["interrupted", "turn_end"]);
  assert.equal(events.at(-1)?.data.status, "interrupted");
  assert.equal(ofType(events, EventType.INTERRUPTED).length, 1);
  assert.equal(engine.running, false);
  assert.equal(engine.messages.at(-1)?.content, "partial answer");
});

function processesWith(marker: string): string {
  const out = execFileSync("ps", ["-eo", "pid,args"], { encoding: "utf8" });
  return out.split("\n").filter((l) => l.includes(marker) && !l.includes("ps -eo")).join("\n");
}

/**
 * Waits (a few seconds at most) until no live process matches: a sandboxed command's processes
 * die with their namespace a moment after the sandbox itself is killed. Returns what is left.
 */
async function gone(marker: string): Promise<string> {
  for (let i = 0; i < 100 && processesWith(marker) !== ""; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  return processesWith(marker);
}

test("requestInterrupt during run_shell kills the whole process tree", async () => {
  const ws = workspace();
  const marker = `zq_${Date.now()}_${Math.floor(Math.random() * 1e6)}`;
  const command = `sleep 300 & sleep 301; echo ${marker}`;
  const server = await serve([
    { toolCalls: [{ id: "s1", name: "run_shell", arguments: { command } }] },
    { text: "never" },
  ]);
  const engine = engineFor(server, ws, { mode: Mode.AUTO });
  const events: WsEvent[] = [];
  for await (const e of engine.run("sleep")) {
    events.push(e);
    if (e.type === EventType.TOOL_STARTED) {
      setTimeout(() => engine.requestInterrupt(), 300);
    }
  }
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "interrupted");
  assert.equal(events.at(-1)?.data.status, "interrupted");
  assert.equal(await gone(marker), "");
  assert.equal(await gone("sleep 301"), "");
  assert.equal(engine.messages.at(-1)?.role, "tool");
});

test("break out of for await interrupts the turn and kills its shell command", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "s1", name: "run_shell", arguments: { command: "sleep 302" } }] },
    { text: "never" },
  ]);
  const engine = engineFor(server, ws, { mode: Mode.AUTO });
  const seen: string[] = [];
  for await (const e of engine.run("sleep")) {
    seen.push(e.type);
    if (e.type === EventType.TOOL_STARTED) {
      await new Promise((r) => setTimeout(r, 200));
      break;
    }
  }
  assert.equal(engine.running, false);
  assert.equal(await gone("sleep 302"), "");
  assert.equal(engine.messages.at(-1)?.role, "tool");
  assert.equal(server.requests.length, 1);
});

test("a provider error yields error then turn_end with status error", async () => {
  const ws = workspace();
  const server = await serve([{ httpError: { status: 400, message: "bad request body" } }]);
  const engine = engineFor(server, ws);
  const { events, error } = await collect(engine.run("hi"));
  assert.equal(error, undefined);
  assert.deepEqual(types(events), ["turn_start", "llm_request", "error", "turn_end"]);
  const err = events[2].data;
  assert.match(String(err.error), /bad request body/);
  assert.equal(err.retriable, false);
  assert.equal(typeof err.reqId, "string");
  assert.equal(events[3].data.status, "error");
});

test("a cut stream is retried with llm_retry and then succeeds", async () => {
  const ws = workspace();
  const server = await serve([{ errorAfterDeltas: "cut" }, { text: "recovered" }]);
  const engine = engineFor(server, ws);
  const { events } = await collect(engine.run("hi"));
  const retry = ofType(events, EventType.LLM_RETRY);
  assert.equal(retry.length, 1);
  assert.equal(retry[0].data.attempt, 1);
  assert.equal(retry[0].data.max, 2);
  assert.equal(events.at(-1)?.data.status, "completed");
  assert.equal(engine.messages.at(-1)?.content, "recovered");
});

test("a missing model gives the manual's clear error", async () => {
  const ws = workspace();
  const server = await serve([{ text: "never" }]);
  const engine = engineFor(server, ws, { model: "" });
  const { events, error } = await collect(engine.run("hi"));
  assert.ok(error instanceof EngineConfigError);
  assert.match((error as Error).message, /no model specified/);
  assert.deepEqual(types(events), ["turn_start", "error", "turn_end"]);
  assert.equal(server.requests.length, 0);
});

test("a missing API key gives the manual's clear error", async () => {
  const ws = workspace();
  const engine = new TurnEngine({
    provider: new OpenAIProvider({ apiKey: "", baseURL: "http://127.0.0.1:9/v1" }),
    registry: new ToolRegistry(),
    permissions: new PermissionEngine({ workspaceRoot: ws }),
    model: "m",
    instructions: "",
  });
  const saved = process.env.OPENAI_API_KEY;
  delete process.env.OPENAI_API_KEY;
  try {
    const { events, error } = await collect(engine.run("hi"));
    assert.ok(error instanceof EngineConfigError, String(error));
    assert.match((error as Error).message, /OPENAI_API_KEY/);
    assert.equal(events.at(-1)?.data.status, "error");
  } finally {
    if (saved !== undefined) process.env.OPENAI_API_KEY = saved;
  }
});

test("a second concurrent turn is refused with TurnInProgressError", async () => {
  const ws = workspace();
  const server = await serve([{ text: ["slow"], holdOpen: true }]);
  const engine = engineFor(server, ws);
  const first = engine.run("one")[Symbol.asyncIterator]();
  await first.next(); // turn_start: the first turn is now running
  const { events, error } = await collect(engine.run("two"));
  assert.ok(error instanceof TurnInProgressError);
  assert.deepEqual(types(events), ["error", "turn_end"]);
  await first.return?.();
  assert.equal(engine.running, false);
});

test("a throwing hook never affects the turn", async () => {
  const ws = workspace();
  const server = await serve([{ text: "fine" }]);
  const engine = engineFor(server, ws);
  engine.hook = {
    onTurnStart: () => {
      throw new Error("hook bug");
    },
    onAssistantDelta: () => {
      throw new Error("hook bug");
    },
  };
  const { events, error } = await collect(engine.run("hi"));
  assert.equal(error, undefined);
  assert.equal(events.at(-1)?.data.status, "completed");
});

test("a tool that throws becomes an error result and the turn goes on", async () => {
  const ws = workspace();
  const registry = new ToolRegistry();
  registry.register(
    () => {
      throw new RangeError("order 7 not found");
    },
    { category: "biz", riskLevel: "low", capabilities: [], requiresApproval: false },
    { type: "function", function: { name: "query_order", parameters: { type: "object" } } },
  );
  const server = await serve([
    { toolCalls: [{ id: "q1", name: "query_order", arguments: { order_id: "7" } }] },
    { text: "That order does not exist." },
  ]);
  const engine = engineFor(server, ws, { registry });
  const { events } = await collect(engine.run("order 7?"));
  const finished = ofType(events, EventType.TOOL_FINISHED)[0].data;
  assert.equal(finished.status, "error");
  const result = JSON.parse(toolResultIn(bodyOf(server, 1), "q1") ?? "{}");
  assert.deepEqual(result, { error: "order 7 not found", error_type: "RangeError" });
  assert.equal(events.at(-1)?.data.status, "completed");
});

test("unknown tools and invalid JSON arguments get error results without running", async () => {
  const ws = workspace();
  const server = await serve([
    {
      toolCalls: [
        { id: "u1", name: "no_such_tool", arguments: {} },
        { id: "j1", name: "read_file", arguments: "{not json" },
      ],
    },
    { text: "ok" },
  ]);
  const engine = engineFor(server, ws);
  const { events } = await collect(engine.run("x"));
  const statuses = ofType(events, EventType.TOOL_FINISHED).map((e) => e.data.status);
  assert.deepEqual(statuses, ["error", "error"]);
  assert.match(toolResultIn(bodyOf(server, 1), "u1") ?? "", /no tool of that name/);
  assert.match(toolResultIn(bodyOf(server, 1), "j1") ?? "", /not valid JSON/);
});

test("steering queued during a turn is injected before the next iteration", async () => {
  const ws = workspace({ "a.txt": "a" });
  const server = await serve([
    { toolCalls: [{ id: "r1", name: "read_file", arguments: { path: "a.txt" } }] },
    { text: "ok" },
  ]);
  const engine = engineFor(server, ws);
  const events: WsEvent[] = [];
  for await (const e of engine.run("read")) {
    events.push(e);
    if (e.type === EventType.TOOL_PROPOSED) engine.queueSteering("also run the tests");
  }
  assert.equal(ofType(events, EventType.QUEUE_STEERING)[0].data.text, "also run the tests");
  const msgs = bodyOf(server, 1).messages as { role: string; content: string }[];
  assert.deepEqual(msgs.at(-1), { role: "user", content: "also run the tests" });
  assert.equal(engine.removeSteering("also run the tests"), false);
});
