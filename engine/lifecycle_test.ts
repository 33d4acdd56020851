// Turn lifecycle (manual §9.4, §11.1, §12.3–12.5, §13, DESIGN §6): hooks, retry, resume,
// steering, attachments through the engine, the checkpoint guarantee and session naming, all
// over real HTTP against MockOpenAIServer with the real openai SDK.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  ApprovalOutcome,
  AttachmentError,
  type EngineHook,
  EventType,
  FileLogHook,
  type Message,
  Mode,
  OpenAIProvider,
  PermissionEngine,
  registerFileTools,
  RiskClass,
  saveAttachments,
  ToolRegistry,
  TurnEngine,
} from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace, types } from "../tests/_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function serve(turns: ScriptedTurn[]): Promise<MockOpenAIServer> {
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  return server;
}

function workspace(files: Record<string, string> = {}): string {
  const ws = tempWorkspace(files);
  cleanups.push(() => removeDir(ws));
  return ws;
}

const PNG =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/** A registry with the file tools and `count`, a low-risk tool that counts its runs in a file. */
function registryWithCounter(ws: string): ToolRegistry {
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  registry.register(
    (args: Record<string, unknown>) => {
      fs.appendFileSync(path.join(ws, "runs.log"), `${args.tag}\n`);
      return { ok: true, tag: args.tag };
    },
    { category: "test", riskLevel: "low", capabilities: [], requiresApproval: false },
    {
      type: "function",
      function: {
        name: "count",
        description: "count a run",
        parameters: { type: "object", properties: { tag: { type: "string" } } },
      },
    },
  );
  return registry;
}

function runs(ws: string): string[] {
  const p = path.join(ws, "runs.log");
  return fs.existsSync(p) ? fs.readFileSync(p, "utf8").trim().split("\n") : [];
}

function engineFor(
  server: MockOpenAIServer,
  ws: string,
  extra: Partial<ConstructorParameters<typeof TurnEngine>[0]> = {},
): TurnEngine {
  return new TurnEngine({
    provider: new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
    }),
    registry: registryWithCounter(ws),
    permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.INTERACTIVE }),
    model: "test-model",
    instructions: "You are a test agent.",
    networkRetryMax: 0,
    ...extra,
  });
}

function chatMessages(server: MockOpenAIServer, i: number): Record<string, unknown>[] {
  return (server.requests[i].body as { messages: Record<string, unknown>[] }).messages;
}

test("every EngineHook callback fires with its documented arguments", async () => {
  const ws = workspace({ "a.txt": "alpha\n" });
  const server = await serve([
    {
      reasoning: "think",
      toolCalls: [
        { id: "r", name: "read_file", arguments: { path: "a.txt" } },
        { id: "w", name: "write_file", arguments: { path: "b.txt", content: "b" } },
      ],
    },
    { text: "done", usage: { inputTokens: 50, outputTokens: 2 } },
  ]);
  const calls: unknown[][] = [];
  const rec = (name: string) => (...args: unknown[]) => void calls.push([name, ...args]);
  const hook: EngineHook = {
    onTurnStart: rec("onTurnStart"),
    onTurnEnd: rec("onTurnEnd"),
    onAssistantDelta: rec("onAssistantDelta"),
    onReasoningDelta: rec("onReasoningDelta"),
    onAssistantMessage: rec("onAssistantMessage"),
    onToolProposed: rec("onToolProposed"),
    onToolStarted: rec("onToolStarted"),
    onToolFinished: rec("onToolFinished"),
    onPermissionRequired: rec("onPermissionRequired"),
    onIterationEnd: rec("onIterationEnd"),
    onEvent: rec("onEvent"),
  };
  const engine = engineFor(server, ws, { hook });
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.ONCE));
  const { error } = await collect(engine.run("go"));
  assert.equal(error, undefined);
  const byName = (n: string) => calls.filter((c) => c[0] === n).map((c) => c.slice(1));
  assert.deepEqual(byName("onTurnStart"), [["go"]]);
  assert.deepEqual(byName("onTurnEnd"), [["completed", 2, ["b.txt"]]]);
  assert.deepEqual(byName("onReasoningDelta"), [["think"]]);
  assert.equal(byName("onAssistantDelta").map((a) => a[0]).join(""), "done");
  const am = byName("onAssistantMessage");
  assert.equal(am.length, 2);
  assert.deepEqual((am[0][1] as { id: string }[]).map((c) => c.id), ["r", "w"]);
  assert.deepEqual((am[1][2] as { inputTokens: number }).inputTokens, 50);
  assert.deepEqual(byName("onToolProposed"), [
    ["read_file", { path: "a.txt" }],
    ["write_file", { path: "b.txt", content: "b" }],
  ]);
  assert.deepEqual(byName("onToolStarted"), [["read_file"], ["write_file"]]);
  assert.deepEqual(byName("onToolFinished").map((a) => [a[0], a[1]]), [
    ["read_file", "ok"],
    ["write_file", "ok"],
  ]);
  assert.equal(byName("onPermissionRequired").length, 1);
  assert.equal(byName("onPermissionRequired")[0][0], "write_file");
  assert.deepEqual(byName("onIterationEnd"), [[1], [2]]);
  assert.ok(byName("onEvent").some((a) => a[0] === "llm_request"), "fallback gets the rest");
});

test("a throwing hook never affects the turn", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "c", name: "count", arguments: { tag: "x" } }] },
    {
      text: "ok",
    },
  ]);
  const boom = () => {
    throw new Error("hook failure");
  };
  const engine = engineFor(server, ws, {
    hook: {
      onTurnStart: boom,
      onToolStarted: boom,
      onToolFinished: boom,
      onIterationEnd: boom,
      onEvent: boom,
      onTurnEnd: boom,
    },
  });
  const { events, error } = await collect(engine.run("go"));
  assert.equal(error, undefined);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
  assert.deepEqual(runs(ws), ["x"]);
});

test("retry() re-runs the model only after a turn that ended with a retriable error", async () => {
  const ws = workspace();
  const server = await serve([
    { httpError: { status: 500, message: "upstream broke", code: "server_error" } },
    { text: "recovered" },
  ]);
  const engine = engineFor(server, ws);
  const first = await collect(engine.run("hello"));
  const err = ofType(first.events, EventType.ERROR)[0].data;
  assert.equal(err.retriable, true);
  const second = await collect(engine.retry());
  assert.equal(ofType(second.events, EventType.TURN_END)[0].data.status, "completed");
  assert.equal(engine.messages.filter((m) => m.role === "user").length, 1, "no second user msg");
  // After a completed turn there is nothing to retry.
  const third = await collect(engine.retry());
  assert.deepEqual(third.events, []);
  assert.equal(server.requests.length, 2);
});

test("retry() does nothing after a non-retriable error", async () => {
  const ws = workspace();
  const server = await serve([{ httpError: { status: 401, message: "bad key" } }]);
  const engine = engineFor(server, ws);
  const first = await collect(engine.run("hello"));
  assert.equal(ofType(first.events, EventType.ERROR)[0].data.retriable, false);
  assert.deepEqual((await collect(engine.retry())).events, []);
});

test("retry() works in a fresh engine restored from a checkpoint of the failed turn", async () => {
  const ws = workspace();
  const stateDir = workspace();
  const server = await serve([
    { httpError: { status: 503, message: "overloaded" } },
    { text: "second time lucky" },
  ]);
  const hook = new FileLogHook("s1", stateDir);
  const engine = engineFor(server, ws, { hook });
  hook.attach(engine);
  await collect(engine.run("hello"));
  const saved = FileLogHook.loadState("s1", stateDir)!;
  const fresh = engineFor(server, ws, { messages: saved.messages });
  const { events } = await collect(fresh.retry());
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
  assert.equal(fresh.messages.at(-1)?.content, "second time lucky");
});

test("resume() without pending work yields no events", async () => {
  const ws = workspace();
  const server = await serve([{ text: "hi" }]);
  const engine = engineFor(server, ws);
  assert.deepEqual((await collect(engine.resume())).events, []);
  await collect(engine.run("hello"));
  assert.deepEqual((await collect(engine.resume())).events, []);
  assert.equal(server.requests.length, 1);
});

test("resume() in a fresh engine asks the approver again for a pending call and runs it once", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "out.txt", content: "v" } }] },
    { text: "written" },
  ]);
  // First engine: the approver never answers (the server "restarts" while a person decides);
  // the checkpoint is taken inside the approver, as DESIGN §6 promises it can be.
  let checkpoint: Message[] = [];
  let asking!: () => void;
  const approverCalled = new Promise<void>((r) => (asking = r));
  const first = engineFor(server, ws);
  const reader = first.run("write it").getReader();
  first.setApprover(() => {
    checkpoint = structuredClone(first.messages);
    asking();
    return new Promise(() => {});
  });
  void (async () => {
    while (!(await reader.read()).done) { /* drain */ }
  })().catch(() => {});
  await approverCalled;
  assert.deepEqual(
    (checkpoint.at(-1)?.tool_calls ?? []).map((c) => c.id),
    ["w1"],
    "pending call is in the history before the approver is called",
  );
  await reader.cancel();
  assert.equal(fs.existsSync(path.join(ws, "out.txt")), false);

  const asked: string[] = [];
  const fresh = engineFor(server, ws, { messages: checkpoint });
  fresh.setApprover((req) => {
    asked.push(`${req.toolName}:${req.toolCallId}`);
    return Promise.resolve(ApprovalOutcome.ONCE);
  });
  const { events, error } = await collect(fresh.resume());
  assert.equal(error, undefined);
  assert.deepEqual(asked, ["write_file:w1"]);
  assert.deepEqual(types(events).slice(0, 5), [
    "turn_start",
    "tool_proposed",
    "permission_required",
    "tool_started",
    "tool_finished",
  ]);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
  assert.equal(fs.readFileSync(path.join(ws, "out.txt"), "utf8"), "v");
  assert.deepEqual((await collect(fresh.resume())).events, [], "nothing left to resume");
});

test("resume() never runs again a tool call that already has a result", async () => {
  const ws = workspace();
  const server = await serve([{ text: "both done" }]);
  const history: Message[] = [
    { role: "system", content: "sys" },
    { role: "user", content: "count twice" },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "a", type: "function", function: { name: "count", arguments: '{"tag":"a"}' } },
        { id: "b", type: "function", function: { name: "count", arguments: '{"tag":"b"}' } },
      ],
    },
    { role: "tool", tool_call_id: "a", content: '{"ok":true,"tag":"a"}' },
  ];
  const engine = engineFor(server, ws, { messages: history });
  const { events } = await collect(engine.resume());
  assert.deepEqual(runs(ws), ["b"]);
  assert.deepEqual(ofType(events, EventType.TOOL_STARTED).map((e) => e.data.reqId), ["b"]);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
});

test("resume() re-evaluates a pending call through the permission engine", async () => {
  const ws = workspace();
  const server = await serve([{ text: "ok" }]);
  const history: Message[] = [
    { role: "system", content: "sys" },
    { role: "user", content: "write outside" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{
        id: "x",
        type: "function",
        function: { name: "write_file", arguments: '{"path":"/etc/zq-evil","content":"x"}' },
      }],
    },
  ];
  const engine = engineFor(server, ws, { messages: history });
  let asked = 0;
  engine.setApprover(() => {
    asked++;
    return Promise.resolve(ApprovalOutcome.ONCE);
  });
  const { events } = await collect(engine.resume());
  assert.equal(asked, 0, "a write outside the workspace is denied, never asked");
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "denied");
});

test("resume() continues a turn whose model answer was lost (history ends with a user message)", async () => {
  const ws = workspace();
  const server = await serve([{ text: "answer" }]);
  const engine = engineFor(server, ws, {
    messages: [{ role: "system", content: "s" }, { role: "user", content: "question" }],
  });
  const { events } = await collect(engine.resume());
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
  assert.equal(engine.messages.at(-1)?.content, "answer");
});

test("resume() does not restart a turn the user interrupted", async () => {
  const ws = workspace();
  const server = await serve([{ text: ["a", "b"], holdOpen: true }]);
  const engine = engineFor(server, ws);
  const events: string[] = [];
  for await (const e of engine.run("go")) {
    events.push(e.type);
    if (e.type === EventType.ASSISTANT_DELTA) engine.requestInterrupt();
  }
  assert.equal(events.at(-1), "turn_end");
  assert.deepEqual((await collect(engine.resume())).events, []);
});

test("steering messages are injected in order between iterations with queue_steering events", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "c1", name: "count", arguments: { tag: "1" } }] },
    { text: "done" },
  ]);
  const engine = engineFor(server, ws);
  const seen: string[] = [];
  for await (const e of engine.run("start")) {
    seen.push(e.type === EventType.QUEUE_STEERING ? `steer:${e.data.text}` : e.type);
    if (e.type === EventType.TOOL_STARTED) {
      engine.queueSteering("first");
      engine.queueSteering("second");
      engine.queueSteering("third");
      assert.equal(engine.removeSteering("second"), true);
    }
  }
  const i = seen.indexOf("steer:first");
  assert.ok(i > seen.indexOf("iteration_end"), "after the first iteration");
  assert.deepEqual(seen.slice(i, i + 3), ["steer:first", "steer:third", "llm_request"]);
  assert.equal(engine.removeSteering("first"), false, "already injected");
  const sent = chatMessages(server, 1).filter((m) => m.role === "user").map((m) => m.content);
  assert.deepEqual(sent, ["start", "first", "third"]);
});

test("a steering message queued while the model gives its final answer continues the turn", async () => {
  const ws = workspace();
  const server = await serve([{ text: ["almost ", "done"] }, { text: "also ran tests" }]);
  const engine = engineFor(server, ws);
  const { events } = await (async () => {
    const out = [];
    for await (const e of engine.run("do it")) {
      out.push(e);
      if (e.type === EventType.ASSISTANT_DELTA && e.data.text === "almost ") {
        engine.queueSteering("run the tests too");
      }
    }
    return { events: out };
  })();
  assert.equal(ofType(events, EventType.QUEUE_STEERING).length, 1);
  assert.equal(server.requests.length, 2);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
});

test("a steering message left when a turn ends is delivered at the start of the next turn", async () => {
  const ws = workspace();
  const server = await serve([{ httpError: { status: 400, message: "bad request" } }, {
    text: "ok",
  }]);
  const engine = engineFor(server, ws);
  engine.queueSteering("remember the tests");
  // The first turn fails before its first iteration could inject... it injects at iteration 1,
  // so queue after the failure instead to leave one behind.
  await collect(engine.run("first"));
  engine.queueSteering("left over");
  const { events } = await collect(engine.run("second"));
  assert.equal(ofType(events, EventType.QUEUE_STEERING)[0].data.text, "left over");
  const users = chatMessages(server, 1).filter((m) => m.role === "user").map((m) => m.content);
  assert.deepEqual(users.slice(-2), ["second", "left over"]);
});

test("attachment bytes reach the model only in their own turn; later requests carry the reference", async () => {
  const ws = workspace();
  const sessionDir = workspace();
  const server = await serve([{ text: "a red dot" }, { text: "yes" }]);
  const engine = engineFor(server, ws);
  const attachments = [{ name: "dot.png", mimeType: "image/png", dataUrl: PNG }];
  const refs = saveAttachments(sessionDir, attachments);
  const { events } = await collect(engine.run("what is this?", "t1", attachments, refs));
  const start = ofType(events, EventType.TURN_START)[0].data;
  assert.equal(start.attachmentCount, 1);
  assert.deepEqual(start.attachments, refs);
  assert.match(JSON.stringify(chatMessages(server, 0)), /data:image\/png;base64,iVBOR/);
  await collect(engine.run("are you sure?"));
  const later = JSON.stringify(chatMessages(server, 1));
  assert.doesNotMatch(later, /base64/);
  assert.match(later, new RegExp(refs[0].path.replace(/[.]/g, "\\.")));
  assert.doesNotMatch(JSON.stringify(engine.messages), /base64,/, "history keeps no bytes");
});

test("run() with invalid attachments ends with error events and throws AttachmentError", async () => {
  const ws = workspace();
  const server = await serve([]);
  const engine = engineFor(server, ws);
  const five = Array.from({ length: 5 }, (_, i) => ({
    name: `${i}.png`,
    mimeType: "image/png",
    dataUrl: PNG,
  }));
  const { events, error } = await collect(engine.run("look", undefined, five));
  assert.ok(error instanceof AttachmentError);
  assert.equal((error as AttachmentError).code, "too_many");
  assert.deepEqual(types(events), ["turn_start", "error", "turn_end"]);
  assert.equal(server.requests.length, 0);
  assert.equal(engine.messages.filter((m) => m.role === "user").length, 0);
});

test("queueSteering() validates attachments and sends their images with the message", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "c", name: "count", arguments: { tag: "1" } }] },
    { text: "seen" },
  ]);
  const engine = engineFor(server, ws);
  assert.throws(
    () =>
      engine.queueSteering("x", [{
        name: "a.txt",
        mimeType: "text/plain",
        dataUrl: "data:text/plain;base64,eA==",
      }]),
    AttachmentError,
  );
  for await (const e of engine.run("go")) {
    if (e.type === EventType.TOOL_STARTED) {
      engine.queueSteering("and this", [{ name: "d.png", mimeType: "image/png", dataUrl: PNG }]);
    }
  }
  assert.match(JSON.stringify(chatMessages(server, 1)), /data:image\/png/);
});

test("generateSessionName() asks the model through chat() and returns null when it gives nothing", async () => {
  const ws = workspace();
  const server = await serve([{ text: "hi" }, { text: '"Fix the login bug."' }, { text: "" }]);
  const engine = engineFor(server, ws);
  assert.equal(await engine.generateSessionName(), null, "no user message yet");
  await collect(engine.run("the login page throws a 500"));
  const before = structuredClone(engine.messages);
  assert.equal(await engine.generateSessionName(), "Fix the login bug");
  const body = server.requests[1].body as { stream?: boolean; messages: { content: string }[] };
  assert.notEqual(body.stream, true);
  assert.match(body.messages.at(-1)!.content, /login page/);
  assert.equal(await engine.generateSessionName(), null);
  assert.deepEqual(engine.messages, before, "naming changes nothing in the session");
});

test("the pending tool calls are in engine.messages when permission_required is emitted", async () => {
  const ws = workspace();
  const server = await serve([
    { toolCalls: [{ id: "w", name: "write_file", arguments: { path: "f", content: "1" } }] },
    { text: "k" },
  ]);
  let seenAtEvent: string[] = [];
  const engine = engineFor(server, ws, {
    hook: {
      onPermissionRequired: () => {
        seenAtEvent = (engine.messages.at(-1)?.tool_calls ?? []).map((c) => c.id);
      },
    },
  });
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.DENY));
  await collect(engine.run("go"));
  assert.deepEqual(seenAtEvent, ["w"]);
});

test("a tool with riskClass EXEC is still processed on resume as a pending call", async () => {
  // Regression guard for resume + serial tools: the approver sees the exact call id.
  const ws = workspace();
  const server = await serve([{ text: "fine" }]);
  const registry = registryWithCounter(ws);
  registry.register(
    () => "ran",
    {
      category: "shell",
      riskLevel: "high",
      capabilities: [],
      requiresApproval: true,
      riskClass: RiskClass.EXEC,
    },
    { type: "function", function: { name: "exec_thing", parameters: { type: "object" } } },
  );
  const engine = engineFor(server, ws, {
    registry,
    messages: [
      { role: "system", content: "s" },
      { role: "user", content: "u" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{
          id: "e1",
          type: "function",
          function: { name: "exec_thing", arguments: "{}" },
        }],
      },
    ],
  });
  const ids: (string | undefined)[] = [];
  engine.setApprover((r) => {
    ids.push(r.toolCallId);
    return Promise.resolve(ApprovalOutcome.DENY);
  });
  await collect(engine.resume());
  assert.deepEqual(ids, ["e1"]);
});

test("run() after a crash left calls pending closes them first, so no call is orphaned", async () => {
  const ws = workspace();
  const server = await serve([{ text: "fresh start" }]);
  const engine = engineFor(server, ws, {
    messages: [
      { role: "system", content: "s" },
      { role: "user", content: "u" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "p", type: "function", function: { name: "count", arguments: "{}" } }],
      },
    ],
  });
  const { events } = await collect(engine.run("never mind, do something else"));
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
  assert.deepEqual(runs(ws), [], "the pending call did not run");
  const sentMsgs = chatMessages(server, 0);
  const toolMsg = sentMsgs.find((m) => m.role === "tool" && m.tool_call_id === "p");
  assert.match(String(toolMsg?.content), /not run/);
});
