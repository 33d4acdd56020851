import { test } from "node:test";
import assert from "node:assert/strict";
import type { SessionStore, StoredEvent } from "./mod.ts";
import { store as target, testing } from "../tests/_target.ts";
import { cleanupsAfterEach, removeDir, tempWorkspace, until } from "../tests/_util.ts";
import { actThenAnswer, makeEngine, testWorker } from "../tests/_store_engine.ts";

// The code under test: the source tree, or the npm build (tests/_target.ts).
const { MemorySessionStore, restoreSession, StoreHook } = target;
const { MockOpenAIServer } = testing;

const cleanups = cleanupsAfterEach();

/** `data.seq` of the engine's events in the log (host lines such as `inbox` have none). */
function engineSeqs(events: StoredEvent[]): number[] {
  return events.map((e) => e.payload.seq).filter((s): s is number => typeof s === "number");
}

test("a session restored by a new worker numbers its events after the stored ones", async () => {
  const server = await new MockOpenAIServer({ turns: actThenAnswer }).start();
  const ws = tempWorkspace();
  const store: SessionStore = new MemorySessionStore({ pollMs: 20 });
  cleanups.push(() => server.close(), () => removeDir(ws), () => store.close());
  const worker = () =>
    testWorker(store, { baseURL: server.baseURL, workspace: ws, act: () => "ok" });
  await store.create("s1");
  const turnEnds = async () =>
    (await store.read("s1", 0)).filter((e) => e.kind === "turn_end").length;

  const first = worker();
  first.start();
  await store.submit("s1", { kind: "user_input", payload: { text: "one" }, idemKey: "m1" });
  await until(async () => (await turnEnds()) === 1, "the first turn to end");
  await first.stop();
  const before = engineSeqs(await store.read("s1", 0));

  const second = worker();
  cleanups.push(() => second.stop());
  second.start();
  await store.submit("s1", { kind: "user_input", payload: { text: "two" }, idemKey: "m2" });
  await until(async () => (await turnEnds()) === 2, "the second turn to end");

  const seqs = engineSeqs(await store.read("s1", 0));
  assert.ok(seqs.length > before.length, "the second turn emitted events");
  const after = seqs.slice(before.length);
  assert.ok(
    after[0] > Math.max(...before),
    `the restored engine went on from ${Math.max(...before)}, not from ${after[0]}`,
  );
  seqs.forEach((s, i) => {
    if (i > 0) assert.ok(s > seqs[i - 1], `seq ${s} follows ${seqs[i - 1]}`);
  });
});

test("restoreSession gives state.eventSeq the highest stored event seq, past the checkpoint", async () => {
  const store: SessionStore = new MemorySessionStore();
  cleanups.push(() => store.close());
  await store.create("s1");
  const lease = (await store.acquire("s1", { ownerId: "w1" }))!;
  await store.append(lease, [{ kind: "turn_start", payload: { input: "hi", seq: 1 } }]);
  await store.putCheckpoint(lease, {
    seq: 1,
    schemaVersion: 1,
    state: { messages: [{ role: "user", content: "hi" }], eventSeq: 1 },
  });
  await store.append(lease, [
    { kind: "assistant_delta", payload: { text: "he", seq: 7 } },
    { kind: "assistant_message", payload: { text: "hello", seq: 9 } },
    { kind: "paused", payload: {} },
  ]);
  const restored = restoreSession((await store.load("s1"))!);
  assert.equal(restored.state.eventSeq, 9);
});

test("a coalesced delta is stored with the seq of its last part", async () => {
  const store: SessionStore = new MemorySessionStore();
  cleanups.push(() => store.close());
  await store.create("s1");
  const lease = (await store.acquire("s1", { ownerId: "w1" }))!;
  const hook = new StoreHook(store, lease, { deltaFlushMs: 60_000 });
  hook.onEvent("assistant_delta", { reqId: "r1", text: "a", seq: 5 });
  hook.onEvent("assistant_delta", { reqId: "r1", text: "b", seq: 6 });
  hook.onEvent("assistant_delta", { reqId: "r1", text: "c", seq: 7 });
  await hook.flush();
  const events = await store.read("s1", 0);
  assert.deepEqual(events.map((e) => [e.kind, e.payload.text, e.payload.seq]), [
    ["assistant_delta", "abc", 7],
  ]);
});

test("a detached hook says so and records nothing more", async () => {
  const store: SessionStore = new MemorySessionStore();
  cleanups.push(() => store.close());
  await store.create("s1");
  const lease = (await store.acquire("s1", { ownerId: "w1" }))!;
  const hook = new StoreHook(store, lease);
  hook.onEvent("turn_start", { input: "hi", seq: 1 });
  await hook.flush();
  assert.equal(hook.detached, false);
  hook.detach();
  assert.equal(hook.detached, true);
  hook.onEvent("turn_end", { status: "interrupted", seq: 2 });
  await hook.flush();
  assert.deepEqual((await store.read("s1", 0)).map((e) => e.kind), ["turn_start"]);
});

test("a tool result stored with tool_finished comes back whole after a crash", async () => {
  const server = await new MockOpenAIServer({ turns: actThenAnswer }).start();
  const ws = tempWorkspace();
  const store: SessionStore = new MemorySessionStore();
  cleanups.push(() => server.close(), () => removeDir(ws), () => store.close());
  await store.create("s1");
  const lease = (await store.acquire("s1", { ownerId: "A", ttlMs: 60_000 }))!;
  const long = "line of output\n".repeat(100); // far past the 200-char preview
  const engine = makeEngine({ baseURL: server.baseURL, workspace: ws, act: () => long });
  const hook = new StoreHook(store, lease).attach(engine);
  engine.hook = hook;
  for await (const _ of engine.run("go")) { /* to the store */ }
  await hook.flush();
  const events = await store.read("s1", 0);
  const finished = events.find((e) => e.kind === "tool_finished")!;
  const stored = engine.messages.find((m) => m.role === "tool")!;
  assert.equal(finished.payload.content, stored.content);
  // Rebuilt from the events alone (as when the checkpoint after the tool was never written).
  const upToTool = events.slice(0, events.indexOf(finished) + 1);
  const { messages } = restoreSession({
    sessionId: "s1",
    status: "running",
    meta: {},
    events: upToTool,
    approvals: [],
    inbox: [],
    lastSeq: finished.seq,
  });
  const recovered = messages.find((m) => m.role === "tool")!;
  assert.equal(recovered.content, stored.content);
  assert.ok(String(recovered.content).includes(long.trim()));
  // A log from before results were stored still gives the preview, marked as partial.
  const { content: _, ...old } = finished.payload;
  const legacy = restoreSession({
    sessionId: "s1",
    status: "running",
    meta: {},
    events: [...upToTool.slice(0, -1), { ...finished, payload: old }],
    approvals: [],
    inbox: [],
    lastSeq: finished.seq,
  });
  assert.match(String(legacy.messages.find((m) => m.role === "tool")!.content), /result_preview/);
});
