// Context compaction (manual §14, DESIGN §6): the pure helpers, and every path through the
// engine driven by scripted long conversations and by the local server answering
// context_length_exceeded.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import process from "node:process";
import {
  EventType,
  type Message,
  Mode,
  OpenAIProvider,
  PermissionEngine,
  registerFileTools,
  ToolRegistry,
  TurnEngine,
  type WsEvent,
} from "../mod.ts";
import { MockOpenAIServer, type RecordedRequest, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "../tests/_util.ts";
import {
  capTokensOf,
  planSplit,
  softCompact,
  SUMMARY_HEADER,
  SUMMARY_MAX_TOKENS,
  thresholds,
} from "./compaction.ts";
import { loadTokenCounter, messagesTokens } from "./token_estimate.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const words = (n: number, seed = "alpha") =>
  Array.from({ length: n }, (_, i) => `${seed}${i % 97}`).join(" ");

function isSummaryRequest(r: RecordedRequest): boolean {
  const msgs = (r.body?.messages ?? []) as { role: string; content: string }[];
  return r.body?.stream !== true && /compact a conversation/i.test(String(msgs[0]?.content));
}

/** A server whose summary requests get `summary`; the other requests follow `turns`. */
async function serve(
  turns: ScriptedTurn[],
  summary: ScriptedTurn = { text: "SUMMARY: goal X, files a.txt" },
): Promise<MockOpenAIServer> {
  const queue = [...turns];
  const server = new MockOpenAIServer({
    turns: (req) => isSummaryRequest(req) ? summary : queue.shift() ?? { text: "end" },
  });
  await server.start();
  cleanups.push(() => server.close());
  return server;
}

function engineFor(
  server: MockOpenAIServer,
  opts: Partial<ConstructorParameters<typeof TurnEngine>[0]> & { model?: string } = {},
): TurnEngine {
  const ws = tempWorkspace({ "a.txt": words(400) });
  cleanups.push(() => removeDir(ws));
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  return new TurnEngine({
    provider: new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
    }),
    registry,
    permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.AUTO }),
    model: "test-model",
    instructions: "You are a test agent.",
    networkRetryMax: 0,
    lang: "en",
    ...opts,
  });
}

/** A long history: `turns` user turns, each with a read_file call and a big result. */
function longHistory(turns: number, resultWords = 300): Message[] {
  const out: Message[] = [{ role: "system", content: "You are a test agent." }];
  for (let t = 0; t < turns; t++) {
    out.push({ role: "user", content: `request number ${t}: ${words(20, "ask")}` });
    out.push({
      role: "assistant",
      content: null,
      tool_calls: [{
        id: `c${t}`,
        type: "function",
        function: { name: "read_file", arguments: JSON.stringify({ path: `f${t}.txt` }) },
      }],
    });
    out.push({
      role: "tool",
      tool_call_id: `c${t}`,
      name: "read_file",
      content: words(resultWords),
    });
    out.push({ role: "assistant", content: `answer ${t}` });
  }
  return out;
}

/** A long plain chat (no tool results, so the soft pass has nothing to elide). */
function chatHistory(turns: number, size = 200): Message[] {
  const out: Message[] = [{ role: "system", content: "You are a test agent." }];
  for (let t = 0; t < turns; t++) {
    out.push({ role: "user", content: `question ${t}: ${words(size, "ask")}` });
    out.push({ role: "assistant", content: `answer ${t}: ${words(size, "reply")}` });
  }
  return out;
}

function summaryRequests(server: MockOpenAIServer): RecordedRequest[] {
  return server.requests.filter(isSummaryRequest);
}

test("thresholds: soft is a fraction of hard, hard a fraction of the window, capTokens caps", () => {
  assert.deepEqual(thresholds(100_000, 0.8, 0.75, null), {
    contextWindow: 100_000,
    hard: 80_000,
    soft: 60_000,
  });
  assert.equal(thresholds(100_000, 0.8, 0.75, 50_000).hard, 50_000);
  assert.equal(thresholds(100_000, 0.8, 0.75, 50_000).soft, 37_500);
});

test("planSplit splits only at a user message and keeps about a quarter of recent history", async () => {
  const count = await loadTokenCounter();
  const history = longHistory(8);
  const plan = planSplit(history, count)!;
  assert.equal(history[plan.boundaryIndex].role, "user");
  const total = messagesTokens(history.slice(1), count);
  const kept = messagesTokens(plan.tail, count);
  assert.ok(kept / total > 0.15 && kept / total < 0.4, `kept ${kept}/${total}`);
  assert.equal(plan.head.length + plan.tail.length, history.length - 1);
  assert.ok(plan.keptUsers.every((m) => m.role === "user"));
  assert.equal(plan.keptUsers.length + plan.droppedUserMessages, 8 - 2);
});

test("planSplit cuts between iterations when the current turn is most of the context", async () => {
  const count = await loadTokenCounter();
  const history: Message[] = [{ role: "system", content: "s" }, { role: "user", content: "go" }];
  for (let i = 0; i < 6; i++) {
    history.push({
      role: "assistant",
      content: null,
      tool_calls: [{
        id: `k${i}`,
        type: "function",
        function: { name: "read_file", arguments: "{}" },
      }],
    });
    history.push({ role: "tool", tool_call_id: `k${i}`, content: words(300) });
  }
  const plan = planSplit(history, count)!;
  assert.equal(history[plan.boundaryIndex].role, "assistant");
  assert.equal(history[plan.boundaryIndex - 1].role, "tool", "no call/result pair is split");
  assert.deepEqual(plan.keptUsers.map((m) => m.content), ["go"], "the turn's request is kept");
});

test("planSplit returns null when nothing can be summarised", async () => {
  const count = await loadTokenCounter();
  assert.equal(
    planSplit([{ role: "system", content: "s" }, { role: "user", content: words(3000) }], count),
    null,
  );
});

test("softCompact dedupes repeated reads and elides old results but keeps the recent ones", () => {
  const history = longHistory(4);
  // Turn 3 reads the same file as turn 0.
  history[14].tool_calls![0].function.arguments = JSON.stringify({ path: "f0.txt" });
  const r = softCompact(history, { elide: true, dedup: true, protectFrom: 13 })!;
  assert.equal(r.deduped, 1);
  assert.match(String(r.messages[3].content), /superseded: f0\.txt/);
  assert.match(
    String(r.messages[7].content),
    /^\[elided to save context: an older result of read_file/,
  );
  assert.equal(r.messages[15].content, history[15].content, "the latest read stays");
  assert.equal(r.messages[3].tool_call_id, "c0", "results stay paired with their calls");
  assert.equal(history[7].compacted, undefined, "the input is not modified");
  assert.equal(softCompact(history, { elide: false, dedup: false, protectFrom: 13 }), null);
});

test("capTokensOf cuts a text to the token cap", async () => {
  const count = await loadTokenCounter();
  const long = words(9000);
  const cut = capTokensOf(long, SUMMARY_MAX_TOKENS, count);
  assert.ok(count(cut) <= SUMMARY_MAX_TOKENS);
  assert.ok(count(cut) > SUMMARY_MAX_TOKENS * 0.8);
});

test("the soft threshold elides old tool results without calling the model for a summary", async () => {
  const server = await serve([{ text: "fine" }]);
  const history = longHistory(6);
  const engine = engineFor(server, { messages: history, contextWindow: 6_000 });
  const count = await loadTokenCounter();
  const before = messagesTokens(history, count);
  assert.ok(before > 3_600 && before < 4_800, `history is between soft and hard: ${before}`);
  const { events } = await collect(engine.run("next"));
  assert.equal(summaryRequests(server).length, 0);
  const compacting = ofType(events, EventType.COMPACTING)[0].data;
  assert.equal(compacting.level, "soft");
  assert.equal(compacting.trigger, "threshold");
  assert.equal(compacting.thresholdTokens, 3_600);
  assert.equal(compacting.contextWindow, 6_000);
  assert.equal(compacting.estimated, true);
  const compacted = ofType(events, EventType.COMPACTED)[0].data;
  assert.equal(compacted.method, "trimmed");
  assert.ok(Number(compacted.elided) > 0);
  assert.ok(Number(compacted.tokensAfter) < Number(compacted.tokensBefore));
  const sent = JSON.stringify(server.requests[0].body);
  assert.match(sent, /elided to save context/);
  assert.equal(engine.compactionState.count, 1);
});

test("COMPACTION_ELIDE=0 and COMPACTION_DEDUP=0 turn the soft pass off", async () => {
  process.env.COMPACTION_ELIDE = "0";
  process.env.COMPACTION_DEDUP = "0";
  cleanups.push(() => {
    delete process.env.COMPACTION_ELIDE;
    delete process.env.COMPACTION_DEDUP;
  });
  const server = await serve([{ text: "fine" }]);
  const engine = engineFor(server, { messages: longHistory(6), contextWindow: 6_000 });
  const { events } = await collect(engine.run("next"));
  assert.equal(ofType(events, EventType.COMPACTING).length, 0);
  assert.doesNotMatch(JSON.stringify(server.requests[0].body), /elided/);
});

test("the hard threshold summarises with the model, keeps recent history and recent user messages", async () => {
  const server = await serve([{ text: "continuing" }]);
  const hooked: string[] = [];
  const engine = engineFor(server, {
    messages: chatHistory(10),
    contextWindow: 8_000,
    hook: {
      onCompacting: (info) => void hooked.push(`compacting:${info.trigger}`),
      onCompacted: (text, info) => void hooked.push(`compacted:${info.method}:${text}`),
    },
  });
  const { events } = await collect(engine.run("what next?"));
  assert.equal(summaryRequests(server).length, 1);
  const hard = ofType(events, EventType.COMPACTING).find((e) => e.data.level === "hard")!.data;
  for (
    const k of [
      "taskId",
      "trigger",
      "tokens",
      "estimated",
      "contextWindow",
      "thresholdPct",
      "thresholdTokens",
      "outboundMessages",
    ]
  ) {
    assert.ok(k in hard, `compacting.${k}`);
  }
  assert.equal(hard.trigger, "threshold");
  assert.equal(hard.thresholdTokens, 6_400);
  const done = ofType(events, EventType.COMPACTED).find((e) => e.data.level === "hard")!.data;
  for (
    const k of [
      "reqId",
      "taskId",
      "method",
      "messagesBefore",
      "messagesAfter",
      "boundaryIndex",
      "model",
      "summaryPreview",
      "keptUserMessages",
      "droppedUserMessages",
    ]
  ) {
    assert.ok(k in done, `compacted.${k}`);
  }
  assert.equal(done.method, "summarized");
  assert.equal(done.model, "test-model");
  assert.ok(Number(done.messagesAfter) < Number(done.messagesBefore));
  assert.ok(hooked.includes("compacting:threshold"));
  assert.ok(hooked.includes("compacted:summarized:SUMMARY: goal X, files a.txt"));
  // The compaction request is audited as an llm_request with compact: true.
  assert.ok(ofType(events, EventType.LLM_REQUEST).some((e) => e.data.compact === true));
  // The request after compaction: system, kept users, summary, tail, the new message.
  const sent = (server.requests.at(-1)!.body as { messages: { role: string; content: string }[] })
    .messages;
  assert.equal(sent[0].role, "system");
  const summaryAt = sent.findIndex((m) => String(m.content).startsWith(SUMMARY_HEADER));
  assert.ok(summaryAt > 0);
  assert.ok(sent.slice(1, summaryAt).every((m) => m.role === "user"), "kept user messages first");
  assert.equal(sent[summaryAt + 1].role, "user", "the kept tail starts at a user message");
  assert.equal(sent.at(-1)!.content, "what next?");
  assert.equal(engine.compactionState.summaries, 1);
  assert.equal(engine.compactionState.lastMethod, "summarized");
});

test("the summary is capped at 3,000 tokens even when the model writes more", async () => {
  const server = await serve([{ text: "ok" }], { text: words(6000, "sum") });
  const engine = engineFor(server, { messages: chatHistory(10), contextWindow: 8_000 });
  await collect(engine.run("go on"));
  const count = await loadTokenCounter();
  const summary = engine.messages.find((m) => m.compactionSummary)!;
  assert.ok(count(String(summary.content)) <= SUMMARY_MAX_TOKENS + 40);
  const req = summaryRequests(server)[0].body as { max_tokens?: number };
  assert.equal(req.max_tokens, SUMMARY_MAX_TOKENS);
});

test("COMPACTION_MODEL and COMPACTION_REASONING_EFFORT pick the summary model and its effort", async () => {
  process.env.COMPACTION_MODEL = "gpt-5-mini";
  process.env.COMPACTION_REASONING_EFFORT = "medium";
  cleanups.push(() => {
    delete process.env.COMPACTION_MODEL;
    delete process.env.COMPACTION_REASONING_EFFORT;
  });
  const server = await serve([{ text: "ok" }]);
  const engine = engineFor(server, { messages: chatHistory(10), contextWindow: 8_000 });
  const { events } = await collect(engine.run("go on"));
  const body = summaryRequests(server)[0].body as { model: string; reasoning_effort?: string };
  assert.equal(body.model, "gpt-5-mini");
  assert.equal(body.reasoning_effort, "medium");
  assert.equal(ofType(events, EventType.COMPACTED).at(-1)!.data.model, "gpt-5-mini");
});

test("a summary request that fails falls back to trimming; the turn goes on", async () => {
  const server = await serve([{ text: "still here" }], {
    httpError: { status: 500, message: "summary broke" },
  });
  const engine = engineFor(server, { messages: chatHistory(10), contextWindow: 8_000 });
  const { events } = await collect(engine.run("go on"));
  assert.equal(ofType(events, EventType.ERROR).length, 0);
  assert.equal(ofType(events, EventType.COMPACTED).at(-1)!.data.method, "trimmed");
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
});

test("token accounting uses the provider's reported usage for the history it has seen", async () => {
  // The text is tiny, but the server reports 9,000 input tokens of a 10,000 window.
  const server = await serve([
    {
      toolCalls: [{ id: "r", name: "read_file", arguments: { path: "a.txt" } }],
      usage: { inputTokens: 9_000, outputTokens: 10 },
    },
    { text: "done" },
  ]);
  const engine = engineFor(server, { contextWindow: 10_000 });
  const { events } = await collect(engine.run("read a.txt"));
  const c = ofType(events, EventType.COMPACTING);
  assert.ok(c.length > 0, "a compaction was triggered by the reported usage");
  assert.ok(Number(c[0].data.tokens) >= 9_000);
  assert.equal(c[0].data.estimated, true, "usage plus a tokenizer estimate of the tool result");
  assert.equal(engine.compactionState.lastInputTokens, engine.compactionState.lastInputTokens);
});

test("a provider overflow error is compacted and retried once without surfacing an error", async () => {
  let overflowed = false;
  const server = new MockOpenAIServer({
    turns: (req) => {
      if (isSummaryRequest(req)) return { text: "short summary" };
      if (!overflowed) {
        overflowed = true;
        return {
          httpError: {
            status: 400,
            message: "This model's maximum context length is 8192 tokens.",
            code: "context_length_exceeded",
          },
        };
      }
      return { text: "fits now" };
    },
  });
  await server.start();
  cleanups.push(() => server.close());
  // The window is large, so no threshold triggers: only the provider's error does.
  const engine = engineFor(server, { messages: longHistory(10), contextWindow: 1_000_000 });
  const { events, error } = await collect(engine.run("go on"));
  assert.equal(error, undefined);
  assert.equal(ofType(events, EventType.ERROR).length, 0);
  assert.equal(ofType(events, EventType.COMPACTING)[0].data.trigger, "overflow");
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "completed");
  assert.equal(engine.messages.at(-1)!.content, "fits now");
});

test("a context that cannot shrink ends the turn with a typed retriable error, not a loop", async () => {
  const server = await serve(Array.from({ length: 20 }, () => ({
    httpError: {
      status: 400,
      message: "This model's maximum context length is 1000 tokens.",
      code: "context_length_exceeded",
    },
  })));
  const engine = engineFor(server, { contextWindow: 1_000_000 });
  const { events, error } = await collect(engine.run(words(3000)));
  assert.equal(error, undefined, "an operational failure is an event, not a throw");
  const err = ofType(events, EventType.ERROR)[0].data;
  assert.equal(err.error_type, "context_overflow");
  assert.equal(err.retriable, true);
  assert.equal(ofType(events, EventType.TURN_END)[0].data.status, "error");
  assert.equal(server.requests.length, 1, "no retry after a compaction that could not shrink");
});

test("repeated threshold compactions that do not shrink the context stop after a bound", async () => {
  const server = await serve(Array.from({ length: 10 }, (_, i) => ({
    toolCalls: [{ id: `r${i}`, name: "list_files", arguments: { path: "." } }],
  })));
  const engine = engineFor(server, { contextWindow: 1_000 });
  const { events } = await collect(engine.run(words(2000)));
  const err = ofType(events, EventType.ERROR)[0]?.data;
  assert.equal(err?.error_type, "context_overflow");
  assert.equal(err?.retriable, true);
  assert.equal(
    ofType(events, EventType.COMPACTING).filter((e) => e.data.level === "hard").length,
    3,
  );
  const modelRequests = server.requests.filter((r) => !isSummaryRequest(r)).length;
  assert.equal(modelRequests, 2, "the third stalled compaction ends the turn before a request");
});

test("compaction state survives a restore through restoreCompactionState", async () => {
  const server = await serve([{ text: "ok", usage: { inputTokens: 1234, outputTokens: 5 } }]);
  const engine = engineFor(server);
  await collect(engine.run("hi"));
  const saved = JSON.parse(JSON.stringify(engine.compactionState));
  const fresh = engineFor(server, { messages: engine.messages });
  fresh.restoreCompactionState(saved);
  assert.equal(fresh.compactionState.lastInputTokens, 1234);
  assert.equal(fresh.compactionState.usageTokens, 1239);
  assert.equal(fresh.compactionState.usageMessageCount, engine.messages.length);
});

test("events of a compaction reach the stream in order before the request they prepare", async () => {
  const server = await serve([{ text: "continuing" }]);
  const engine = engineFor(server, { messages: chatHistory(10), contextWindow: 8_000 });
  const { events } = await collect(engine.run("next"));
  const order = events.map((e: WsEvent) =>
    e.type === EventType.LLM_REQUEST ? (e.data.compact ? "compact_request" : "request") : e.type
  ).filter((t) => ["compacting", "compacted", "compact_request", "request"].includes(t));
  assert.deepEqual(order.slice(-4), ["compacting", "compact_request", "compacted", "request"]);
});
