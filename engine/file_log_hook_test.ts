import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import {
  ApprovalOutcome,
  CompositeHook,
  EventType,
  FileLogHook,
  type Message,
  Mode,
  OpenAIProvider,
  PermissionEngine,
  registerFileTools,
  ToolRegistry,
  TurnEngine,
} from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect, removeDir, tempWorkspace } from "../tests/_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function dir(): string {
  const d = tempWorkspace();
  cleanups.push(() => removeDir(d));
  return d;
}

async function engineWith(
  turns: ScriptedTurn[],
  hook: FileLogHook,
  ws = dir(),
): Promise<TurnEngine> {
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  return new TurnEngine({
    provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode: "chat" }),
    registry,
    permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.INTERACTIVE }),
    model: "m",
    instructions: "sys",
    hook: new CompositeHook([hook]),
  });
}

test("FileLogHook writes one JSON event per line to <stateDir>/<sessionId>.jsonl", async () => {
  const stateDir = path.join(dir(), "nested", "sessions");
  const hook = new FileLogHook("s-1", stateDir);
  const engine = await engineWith([{ text: "hello" }], hook);
  const { events } = await collect(engine.run("hi"));
  const lines = fs.readFileSync(path.join(stateDir, "s-1.jsonl"), "utf8").trim().split("\n");
  assert.equal(lines.length, events.length);
  const parsed = lines.map((l) => JSON.parse(l));
  assert.deepEqual(parsed.map((e) => e.type), events.map((e) => e.type));
  assert.equal(parsed[0].data.input, "hi");
  assert.ok(typeof parsed[0].time === "string");
  assert.deepEqual(
    FileLogHook.readEvents("s-1", stateDir).map((e) => e.type),
    parsed.map((e) => e.type),
  );
});

test("saveState writes every SavedState field atomically and loadState reads it back", async () => {
  const stateDir = dir();
  const hook = new FileLogHook("s2", stateDir);
  const engine = await engineWith([{ text: "hello" }], hook);
  await collect(engine.run("hi"));
  engine.permissions.mode = Mode.AUTO;
  engine.permissions.allowToolForSession("write_file");
  engine.permissions.allowCommandForSession("npm test");
  const saved = hook.saveState(engine, { name: "Greeting", nameSource: "auto", taskCount: 1 });
  assert.deepEqual(fs.readdirSync(stateDir).sort(), ["s2.jsonl", "s2_state.json"], "no temp left");
  const loaded = FileLogHook.loadState("s2", stateDir)!;
  assert.equal(loaded.sessionId, "s2");
  assert.equal(loaded.model, "m");
  assert.deepEqual(loaded.messages.map((m) => m.role), ["system", "user", "assistant"]);
  assert.equal(loaded.name, "Greeting");
  assert.equal(loaded.nameSource, "auto");
  assert.equal(loaded.taskCount, 1);
  assert.equal(loaded.permissionMode, "auto");
  assert.deepEqual(loaded.allowTools, ["write_file"]);
  assert.deepEqual(loaded.allowCommands, ["npm"]);
  assert.equal(typeof loaded.savedAt, "string");
  assert.ok(loaded.compaction && "count" in loaded.compaction);
  assert.equal(saved.savedAt, loaded.savedAt);
});

test("restoring a session restores history and permissions", async () => {
  const stateDir = dir();
  const ws = dir();
  const hook = new FileLogHook("s3", stateDir);
  const engine = await engineWith(
    [
      { toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "a.txt", content: "1" } }] },
      { text: "done" },
    ],
    hook,
    ws,
  );
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.ALWAYS_TOOL));
  await collect(engine.run("write"));
  hook.saveState(engine);
  const state = FileLogHook.loadState("s3", stateDir)!;
  const fresh = await engineWith(
    [
      { toolCalls: [{ id: "w2", name: "write_file", arguments: { path: "b.txt", content: "2" } }] },
      { text: "again" },
    ],
    new FileLogHook("s3", stateDir),
    ws,
  );
  fresh.messages.splice(0, fresh.messages.length, ...state.messages);
  FileLogHook.applyState(fresh, state);
  let asked = 0;
  fresh.setApprover(() => {
    asked++;
    return Promise.resolve(ApprovalOutcome.DENY);
  });
  const { events } = await collect(fresh.run("write more"));
  assert.equal(asked, 0, "the earlier 'always allow write_file' survived the restart");
  assert.equal(events.find((e) => e.type === EventType.TOOL_FINISHED)?.data.status, "ok");
  assert.equal(fs.readFileSync(path.join(ws, "b.txt"), "utf8"), "2");
});

test("loadState returns null on a missing, unreadable or malformed checkpoint", () => {
  const stateDir = dir();
  assert.equal(FileLogHook.loadState("nope", stateDir), null);
  fs.writeFileSync(path.join(stateDir, "bad_state.json"), "{ not json");
  assert.equal(FileLogHook.loadState("bad", stateDir), null);
  fs.writeFileSync(path.join(stateDir, "odd_state.json"), JSON.stringify({ messages: "x" }));
  assert.equal(FileLogHook.loadState("odd", stateDir), null);
  assert.equal(FileLogHook.loadState("../etc/passwd", stateDir), null);
  assert.equal(FileLogHook.loadState("x", path.join(stateDir, "missing-dir")), null);
});

test("a torn last line is skipped on load and never glued to the next event", () => {
  const stateDir = dir();
  const log = path.join(stateDir, "t.jsonl");
  fs.writeFileSync(log, '{"type":"turn_start","data":{},"time":"x"}\n{"type":"assistant_del');
  assert.deepEqual(FileLogHook.readEvents("t", stateDir).map((e) => e.type), ["turn_start"]);
  const hook = new FileLogHook("t", stateDir);
  hook.onPaused({ reason: "maintenance" });
  hook.onResumed({});
  const events = FileLogHook.readEvents("t", stateDir);
  assert.deepEqual(events.map((e) => e.type), ["turn_start", "paused", "resumed"]);
  assert.equal(events[1].data.reason, "maintenance");
});

test("the constructor rejects a sessionId that is not a safe file name", () => {
  assert.throws(() => new FileLogHook("../x", dir()), /sessionId/);
  assert.throws(() => new FileLogHook("a/b", dir()), /sessionId/);
  assert.throws(() => new FileLogHook("..", dir()), /sessionId/);
  assert.throws(() => new FileLogHook("ok", ""), /stateDir/);
});

test("attach() checkpoints at turn_start, so the user message survives a crash before the reply", async () => {
  const stateDir = dir();
  const hook = new FileLogHook("a1", stateDir);
  const engine = await engineWith([{ text: ["x", "y"], holdOpen: true }], hook);
  hook.attach(engine, { name: "kept" });
  const reader = engine.run("question").getReader();
  for (;;) {
    const { value } = await reader.read();
    if (value?.type === EventType.ASSISTANT_DELTA) break;
  }
  const mid = FileLogHook.loadState("a1", stateDir)!;
  assert.deepEqual(mid.messages.map((m) => m.role), ["system", "user"]);
  assert.equal(mid.name, "kept");
  await reader.cancel();
});

test("loadState gives a finished-but-unsaved call its logged outcome and an unfinished one 'interrupted'", () => {
  const stateDir = dir();
  const messages: Message[] = [
    { role: "system", content: "s" },
    { role: "user", content: "u" },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "a", type: "function", function: { name: "read_file", arguments: "{}" } },
        { id: "b", type: "function", function: { name: "run_shell", arguments: "{}" } },
        { id: "c", type: "function", function: { name: "write_file", arguments: "{}" } },
      ],
    },
  ];
  fs.writeFileSync(
    path.join(stateDir, "r_state.json"),
    JSON.stringify({ sessionId: "r", model: "m", messages, compaction: null, savedAt: "t" }),
  );
  const log = [
    { type: "assistant_message", data: { toolCallsFull: messages[2].tool_calls } },
    { type: "tool_started", data: { reqId: "a", name: "read_file" } },
    {
      type: "tool_finished",
      data: { reqId: "a", name: "read_file", status: "ok", result_preview: "hello" },
    },
    { type: "tool_started", data: { reqId: "b", name: "run_shell" } },
  ].map((e) => JSON.stringify({ ...e, time: "t" })).join("\n");
  fs.writeFileSync(path.join(stateDir, "r.jsonl"), log + "\n");
  const state = FileLogHook.loadState("r", stateDir)!;
  const tools = state.messages.filter((m) => m.role === "tool");
  assert.deepEqual(tools.map((m) => m.tool_call_id), ["a", "b"], "c never started: still pending");
  assert.match(String(tools[0].content), /"recovered":true/);
  assert.match(String(tools[0].content), /hello/);
  assert.match(String(tools[1].content), /may have partly run/);
});

test("the event log and checkpoint are not writable by other users", {
  skip: process.platform === "win32",
}, async () => {
  const stateDir = dir();
  const hook = new FileLogHook("s-mode", stateDir);
  const engine = await engineWith([{ text: "hello" }], hook);
  await collect(engine.run("hi"));
  hook.saveState(engine);
  for (const file of ["s-mode.jsonl", "s-mode_state.json"]) {
    const mode = fs.statSync(path.join(stateDir, file)).mode;
    assert.equal(mode & 0o022, 0, `${file} is ${(mode & 0o777).toString(8)}`);
  }
});

test("the event log, the checkpoint and the folder the hook creates are private to their owner", {
  skip: process.platform === "win32" ? "no POSIX modes on Windows" : false,
}, async () => {
  const stateDir = path.join(dir(), "sessions");
  const hook = new FileLogHook("s-private", stateDir);
  const engine = await engineWith([{ text: "hello" }], hook);
  hook.attach(engine);
  await collect(engine.run("hi"));
  hook.saveState(engine);
  const modeOf = (p: string) => (fs.statSync(p).mode & 0o777).toString(8);
  assert.equal(modeOf(stateDir), "700");
  for (const file of ["s-private.jsonl", "s-private_state.json"]) {
    assert.equal(modeOf(path.join(stateDir, file)), "600", file);
  }
});

test("a session restored with loadState and applyState numbers its events after the logged ones", async () => {
  const stateDir = dir();
  const ws = dir();
  const hook = new FileLogHook("seq1", stateDir);
  const engine = await engineWith([{ text: "hello" }], hook, ws);
  hook.attach(engine);
  const first = await collect(engine.run("hi"));
  const last = first.events.at(-1)!.data.seq as number;

  const saved = FileLogHook.loadState("seq1", stateDir)!;
  assert.equal(saved.eventSeq, last);
  const hook2 = new FileLogHook("seq1", stateDir);
  const fresh = await engineWith([{ text: "again" }], hook2, ws);
  fresh.messages.splice(0, fresh.messages.length, ...saved.messages);
  FileLogHook.applyState(fresh, saved);
  const second = await collect(fresh.run("more"));
  assert.equal(second.events[0].data.seq, last + 1);
  const logged = FileLogHook.readEvents("seq1", stateDir).map((e) => e.data.seq as number);
  logged.forEach((s, i) => {
    if (i > 0) assert.ok(s > logged[i - 1], `seq ${s} follows ${logged[i - 1]} in the log`);
  });
});

test("loadState takes eventSeq from the event log when the checkpoint is older", async () => {
  const stateDir = dir();
  const hook = new FileLogHook("seq2", stateDir);
  const engine = await engineWith([{ text: "one" }, { text: "two" }], hook);
  await collect(engine.run("first"));
  const checkpointed = hook.saveState(engine).eventSeq!;
  const { events } = await collect(engine.run("second")); // no checkpoint after this turn
  const last = events.at(-1)!.data.seq as number;
  assert.ok(last > checkpointed);
  assert.equal(FileLogHook.loadState("seq2", stateDir)!.eventSeq, last);
});

test("applyState never moves event numbering backwards and ignores a malformed eventSeq", async () => {
  const hook = new FileLogHook("seq3", dir());
  const engine = await engineWith([], hook);
  const state = { sessionId: "seq3", model: "m", messages: [], compaction: null, savedAt: "" };
  FileLogHook.applyState(engine, { ...state, eventSeq: 41 });
  assert.equal(engine.eventSeq, 41);
  FileLogHook.applyState(engine, { ...state, eventSeq: 3 });
  FileLogHook.applyState(engine, { ...state, eventSeq: "99" as unknown as number });
  assert.equal(engine.eventSeq, 41);
});
