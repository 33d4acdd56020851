// Repeat ("doom loop") detection in the turn loop (engine/_loop_guard.ts), end to end: the real
// openai SDK over real HTTP against MockOpenAIServer, tools that count their executions.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import {
  createDefaultEngine,
  EngineConfigError,
  EventType,
  type LoopDetectionOptions,
  type Message,
  Mode,
  OpenAIProvider,
  PermissionEngine,
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

function workspace(): string {
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  return ws;
}

/** A read-only `probe` tool that always answers the same and counts its runs per query. */
function probeRegistry(runs: string[], onRun?: (q: string) => void): ToolRegistry {
  const registry = new ToolRegistry();
  registry.register(
    (args) => {
      const q = String(args.q);
      runs.push(q);
      onRun?.(q);
      return `probe result for ${q}`;
    },
    { category: "test", riskLevel: "low", capabilities: [], requiresApproval: false },
    {
      type: "function",
      function: {
        name: "probe",
        description: "Look something up",
        parameters: {
          type: "object",
          properties: { q: { type: "string" }, n: { type: "integer" } },
        },
      },
    },
  );
  return registry;
}

interface Setup {
  loopDetection?: LoopDetectionOptions | false;
  messages?: Message[];
  onRun?: (q: string) => void;
}

function engineFor(
  server: MockOpenAIServer,
  runs: string[],
  setup: Setup = {},
): TurnEngine {
  const ws = workspace();
  return new TurnEngine({
    provider: new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
    }),
    registry: probeRegistry(runs, setup.onRun),
    permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.INTERACTIVE }),
    model: "test-model",
    instructions: "You are a test agent.",
    networkRetryMax: 0,
    messages: setup.messages,
    ...(setup.loopDetection !== undefined ? { loopDetection: setup.loopDetection } : {}),
  });
}

/** A reply calling probe once. */
function probe(id: string, args: Record<string, unknown> = { q: "x" }): ScriptedTurn {
  return { toolCalls: [{ id, name: "probe", arguments: args }] };
}

/** The parsed result of the tool message answering `id`. */
function resultOf(messages: Message[], id: string): Record<string, unknown> | string | undefined {
  const m = messages.find((x) => x.role === "tool" && x.tool_call_id === id);
  if (!m) return undefined;
  try {
    return JSON.parse(String(m.content));
  } catch {
    return String(m.content);
  }
}

/** Every tool call in the history has exactly one result (the history stays valid). */
function assertNoOrphans(messages: Message[]): void {
  const calls = messages.flatMap((m) => m.tool_calls ?? []).map((c) => c.id);
  const results = messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id);
  assert.deepEqual([...results].sort(), [...calls].sort());
}

test("a call repeated a 4th time in a row is not run; the model gets a repeated_call error", async () => {
  const server = await serve([probe("c1"), probe("c2"), probe("c3"), probe("c4"), {
    text: "I have what I need.",
  }]);
  const runs: string[] = [];
  const engine = engineFor(server, runs);
  const { events, error } = await collect(engine.run("look it up"));
  assert.equal(error, undefined);
  assert.deepEqual(runs, ["x", "x", "x"], "the 4th identical call was not executed");
  const warning = resultOf(engine.messages, "c4") as Record<string, unknown>;
  assert.equal(warning.error_type, "repeated_call");
  assert.match(String(warning.error), /3 times in a row/);
  assert.match(String(warning.error), /probe result for x/, "it quotes what the call returned");
  // The warning reached the model over the wire.
  const sent = (server.requests[4].body as { messages: Message[] }).messages;
  assert.equal((resultOf(sent, "c4") as Record<string, unknown>).error_type, "repeated_call");
  const forC4 = events.filter((e) => e.data.reqId === "c4").map((e) => e.type);
  assert.deepEqual(forC4, ["tool_proposed", "tool_finished"], "no tool_started: it never ran");
  assert.equal(ofType(events, EventType.TOOL_FINISHED).at(-1)?.data.status, "error");
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
});

test("a model that changes approach after the warning finishes the turn normally", async () => {
  const server = await serve([
    probe("c1"),
    probe("c2"),
    probe("c3"),
    probe("c4"),
    probe("c5", { q: "y" }),
    { text: "Found it with another query." },
  ]);
  const runs: string[] = [];
  const engine = engineFor(server, runs);
  const { events } = await collect(engine.run("look it up"));
  assert.deepEqual(runs, ["x", "x", "x", "y"]);
  assert.equal(ofType(events, EventType.ERROR).length, 0);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
  assert.equal(engine.messages.at(-1)?.content, "Found it with another query.");
});

test("a model that repeats the call after the warning ends the turn with loop_detected", async () => {
  const server = await serve([
    probe("c1"),
    probe("c2"),
    probe("c3"),
    probe("c4"),
    probe("c5"),
    probe("c6"),
  ]);
  const runs: string[] = [];
  const engine = engineFor(server, runs);
  const { events, error } = await collect(engine.run("look it up"));
  assert.equal(error, undefined, "an operational failure is events only, never thrown");
  assert.deepEqual(runs, ["x", "x", "x"]);
  assert.equal(server.requests.length, 5, "no model request after the loop was detected");
  assert.deepEqual(types(events).slice(-2), ["error", "turn_end"]);
  const err = ofType(events, EventType.ERROR)[0].data;
  assert.equal(err.error_type, "loop_detected");
  assert.equal(err.retriable, false);
  assert.equal(err.toolName, "probe");
  assert.match(String(err.error), /^Cannot continue the turn: the model repeated probe/);
  assert.equal(err.stack, undefined);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "error");
  assert.equal(
    (resultOf(engine.messages, "c5") as Record<string, unknown>).error_type,
    "loop_detected",
  );
  assertNoOrphans(engine.messages);
  // Not retriable: retry() has nothing to do; resume() neither.
  assert.deepEqual((await collect(engine.retry())).events, []);
  assert.deepEqual((await collect(engine.resume())).events, []);
  assert.equal(server.requests.length, 5);
});

test("the other calls of a reply that ends the turn still get a result", async () => {
  const server = await serve([
    probe("c1"),
    probe("c2"),
    probe("c3"),
    probe("c4"),
    {
      toolCalls: [
        { id: "c5", name: "probe", arguments: { q: "x" } },
        { id: "c6", name: "probe", arguments: { q: "other" } },
      ],
    },
  ]);
  const runs: string[] = [];
  const engine = engineFor(server, runs);
  const { events } = await collect(engine.run("look it up"));
  assert.equal(ofType(events, EventType.ERROR)[0].data.error_type, "loop_detected");
  assert.equal(runs.filter((q) => q === "x").length, 3);
  assertNoOrphans(engine.messages);
  assert.ok(resultOf(engine.messages, "c6") !== undefined);
});

test("loopDetection: false runs every repeat until the model stops", async () => {
  const turns = Array.from({ length: 6 }, (_, i) => probe(`c${i}`));
  const server = await serve([...turns, { text: "done" }]);
  const runs: string[] = [];
  const engine = engineFor(server, runs, { loopDetection: false });
  const { events } = await collect(engine.run("look it up"));
  assert.equal(runs.length, 6);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
});

test("maxRepeats sets how many identical calls may run", async () => {
  const server = await serve([probe("c1"), probe("c2"), { text: "ok" }]);
  const runs: string[] = [];
  const engine = engineFor(server, runs, { loopDetection: { maxRepeats: 1 } });
  await collect(engine.run("look it up"));
  assert.deepEqual(runs, ["x"]);
  assert.equal(
    (resultOf(engine.messages, "c2") as Record<string, unknown>).error_type,
    "repeated_call",
  );
});

test("the same tool with different arguments is never a loop", async () => {
  const turns = Array.from({ length: 6 }, (_, i) => probe(`c${i}`, { q: `q${i}` }));
  const server = await serve([...turns, { text: "done" }]);
  const runs: string[] = [];
  const engine = engineFor(server, runs);
  const { events } = await collect(engine.run("look everything up"));
  assert.equal(runs.length, 6);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
});

test("the order of the argument keys does not hide a repeat", async () => {
  const server = await serve([
    { toolCalls: [{ id: "c1", name: "probe", arguments: '{"q":"x","n":1}' }] },
    { toolCalls: [{ id: "c2", name: "probe", arguments: '{"n":1,"q":"x"}' }] },
    { toolCalls: [{ id: "c3", name: "probe", arguments: '{ "n": 1, "q": "x" }' }] },
    { toolCalls: [{ id: "c4", name: "probe", arguments: '{"q":"x","n":1}' }] },
    { text: "ok" },
  ]);
  const runs: string[] = [];
  const engine = engineFor(server, runs);
  await collect(engine.run("look it up"));
  assert.equal(runs.length, 3);
  assert.equal(
    (resultOf(engine.messages, "c4") as Record<string, unknown>).error_type,
    "repeated_call",
  );
});

test("a new user message starts a new count", async () => {
  const server = await serve([
    probe("c1"),
    probe("c2"),
    probe("c3"),
    { text: "first answer" },
    probe("c4"),
    { text: "second answer" },
  ]);
  const runs: string[] = [];
  const engine = engineFor(server, runs);
  await collect(engine.run("look it up"));
  const { events } = await collect(engine.run("look it up again"));
  assert.equal(runs.length, 4, "the call of the new turn ran");
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
});

test("a steering message starts a new count", async () => {
  const server = await serve([probe("c1"), probe("c2"), probe("c3"), probe("c4"), { text: "ok" }]);
  const runs: string[] = [];
  const engine: TurnEngine = engineFor(server, runs, {
    onRun: () => {
      if (runs.length === 3) engine.queueSteering("the data changed, look again");
    },
  });
  await collect(engine.run("look it up"));
  assert.equal(runs.length, 4, "after the user's steering message the call ran again");
});

test("retry() goes on counting the calls of the failed turn", async () => {
  const server = await serve([
    probe("c1"),
    probe("c2"),
    probe("c3"),
    { httpError: { status: 500, message: "upstream broke", code: "server_error" } },
    probe("c4"),
    { text: "answer from what I have" },
  ]);
  const runs: string[] = [];
  const engine = engineFor(server, runs);
  const first = await collect(engine.run("look it up"));
  assert.equal(ofType(first.events, EventType.ERROR)[0].data.retriable, true);
  const { events } = await collect(engine.retry());
  assert.deepEqual(runs, ["x", "x", "x"], "the retried turn's repeat was not executed");
  assert.equal(
    (resultOf(engine.messages, "c4") as Record<string, unknown>).error_type,
    "repeated_call",
  );
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
});

test("resume() in a fresh engine does not run a pending call that repeats a loop", async () => {
  // A saved session: the call was made 3 times, and a 4th identical call was pending (approval
  // or a crash) when the process stopped.
  const call = (id: string) => ({
    id,
    type: "function" as const,
    function: { name: "probe", arguments: '{"q":"x"}' },
  });
  const messages: Message[] = [
    { role: "system", content: "You are a test agent." },
    { role: "user", content: "look it up" },
  ];
  for (const id of ["c1", "c2", "c3"]) {
    messages.push({ role: "assistant", content: null, tool_calls: [call(id)] });
    messages.push({ role: "tool", tool_call_id: id, name: "probe", content: "probe result for x" });
  }
  messages.push({ role: "assistant", content: null, tool_calls: [call("c4")] });
  const server = await serve([{ text: "answer from what I have" }]);
  const runs: string[] = [];
  const engine = engineFor(server, runs, { messages });
  const { events } = await collect(engine.resume());
  assert.deepEqual(runs, [], "the pending repeat was not executed");
  const warning = resultOf(engine.messages, "c4") as Record<string, unknown>;
  assert.equal(warning.error_type, "repeated_call");
  assert.match(String(warning.error), /probe result for x/);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
  assertNoOrphans(engine.messages);
});

test("resume() runs a pending call that does not repeat a loop", async () => {
  const messages: Message[] = [
    { role: "system", content: "You are a test agent." },
    { role: "user", content: "look it up" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{
        id: "c1",
        type: "function",
        function: { name: "probe", arguments: '{"q":"x"}' },
      }],
    },
  ];
  const server = await serve([{ text: "done" }]);
  const runs: string[] = [];
  const engine = engineFor(server, runs, { messages });
  await collect(engine.resume());
  assert.deepEqual(runs, ["x"]);
});

test("a bad maxRepeats fails when the engine is created", () => {
  const server = { baseURL: "http://127.0.0.1:9/v1" } as MockOpenAIServer;
  assert.throws(
    () => engineFor(server, [], { loopDetection: { maxRepeats: 0 } }),
    (e: unknown) => e instanceof TypeError && /maxRepeats must be an integer/.test(e.message),
  );
  assert.throws(
    () =>
      createDefaultEngine({
        workspace: workspace(),
        model: "m",
        provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL }),
        loopDetection: { maxRepeats: 1.5 },
      }),
    (e: unknown) => e instanceof EngineConfigError && e.code === "bad_option",
  );
});

test("createDefaultEngine passes loopDetection to the engine", async () => {
  const server = await serve([
    ...Array.from({ length: 5 }, (_, i) => ({
      toolCalls: [{ id: `c${i}`, name: "list_files", arguments: { path: "." } }],
    })),
    { text: "done" },
  ]);
  const provider = new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode: "chat" });
  const on = createDefaultEngine({ workspace: workspace(), model: "m", provider });
  const a = await collect(on.run("list"));
  assert.equal(ofType(a.events, EventType.ERROR)[0]?.data.error_type, "loop_detected");
  const server2 = await serve([
    ...Array.from({ length: 5 }, (_, i) => ({
      toolCalls: [{ id: `c${i}`, name: "list_files", arguments: { path: "." } }],
    })),
    { text: "done" },
  ]);
  const off = createDefaultEngine({
    workspace: workspace(),
    model: "m",
    provider: new OpenAIProvider({ apiKey: "k", baseURL: server2.baseURL, apiMode: "chat" }),
    loopDetection: false,
  });
  const b = await collect(off.run("list"));
  assert.equal(ofType(b.events, EventType.TURN_END)[0].data.status, "completed");
  assert.equal(
    off.messages.filter((m) => m.role === "tool" && /repeated_call/.test(String(m.content)))
      .length,
    0,
  );
});
