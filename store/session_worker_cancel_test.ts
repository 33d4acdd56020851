// Cancel in distributed sessions (issue 11): `store.submit(id, {kind: "cancel"})` from any
// process interrupts the running turn, closes its open approvals, drops the inputs queued before
// it, and ends a parked or crashed turn without running anything.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { SessionStore, StoredEvent } from "./mod.ts";
import { store as target } from "../tests/_target.ts";
import { cleanupsAfterEach, until } from "../tests/_util.ts";
import {
  eachStore,
  modelAndWorkspace,
  startDyingOwner,
  testWorker,
} from "../tests/_store_engine.ts";
import { postgresForTests } from "../tests/_postgres.ts";

// The code under test: the source tree, or the npm build (tests/_target.ts).
const { restoreSession } = target;

const pg = await postgresForTests();

const cleanups = cleanupsAfterEach();

/** A mock model server, a workspace, and the texts of the user messages the model was sent. */
async function setup() {
  const { server, ws } = await modelAndWorkspace(cleanups);
  const asked = () =>
    server.requests.map((r) => {
      const messages = (r.body?.messages ?? []) as { role: string; content?: unknown }[];
      return String(messages.findLast((m) => m.role === "user")?.content ?? "");
    });
  return { server, ws, asked };
}

const kinds = (events: StoredEvent[]) => events.map((e) => e.kind);
const turnEnds = (events: StoredEvent[]) =>
  events.filter((e) => e.kind === "turn_end").map((e) => e.payload.status);

const input = (store: SessionStore, text: string, key = text) =>
  store.submit("s1", { kind: "user_input", payload: { text }, idemKey: key });
const cancel = (store: SessionStore, key = "c1") =>
  store.submit("s1", { kind: "cancel", payload: {}, idemKey: key });

eachStore(pg, "c", cleanups, (t) => {
  t("a cancel interrupts a running tool and the turn ends interrupted", async (store) => {
    const { server, ws } = await setup();
    let started = 0;
    let aborted = 0;
    const worker = testWorker(store, {
      baseURL: server.baseURL,
      workspace: ws,
      act: (_args, ctx) =>
        new Promise((_resolve, reject) => {
          started++;
          const signal = (ctx as { signal?: AbortSignal }).signal!;
          signal.addEventListener("abort", () => {
            aborted++;
            reject(signal.reason);
          });
        }),
    }, {
      // A long poll: the submit's wake notification is what finds the cancel.
      cancelPollMs: 60_000,
    });
    cleanups.push(() => worker.stop({ graceMs: 100 }));
    await store.create("s1");
    await input(store, "go");
    worker.start();
    await until(() => started === 1, "the tool to start");
    assert.equal(await cancel(store), "queued");
    await until(async () => (await store.load("s1"))?.status === "done", "the session to end");
    const events = await store.read("s1", 0);
    assert.deepEqual(turnEnds(events), ["interrupted"]);
    assert.ok(kinds(events).includes("interrupted"));
    const finished = events.find((e) => e.kind === "tool_finished");
    assert.equal(finished?.payload.status, "interrupted");
    assert.equal(aborted, 1, "the tool saw the abort");
    assert.equal(server.requests.length, 1, "no model call after the cancel");
    // The history is valid for the next turn: the call has its result.
    const restored = restoreSession((await store.load("s1"))!);
    const call = restored.messages.find((m) => m.tool_calls?.length)!.tool_calls![0];
    assert.ok(restored.messages.some((m) => m.role === "tool" && m.tool_call_id === call.id));
    assert.equal(restored.cancelled, false);
  });

  t("a cancel while the turn waits for approval closes the approval", async (store) => {
    const { server, ws } = await setup();
    let runs = 0;
    const worker = testWorker(store, {
      baseURL: server.baseURL,
      workspace: ws,
      approval: true,
      act: () => `ran ${++runs}`,
    }, {
      cancelPollMs: 60_000,
      approvalHoldMs: 60_000,
    });
    cleanups.push(() => worker.stop({ graceMs: 100 }));
    await store.create("s1");
    await input(store, "go");
    worker.start();
    await until(
      async () => (await store.load("s1"))?.approvals.some((a) => a.status === "pending") ?? false,
      "the approval request",
    );
    await cancel(store);
    await until(async () => (await store.load("s1"))?.status === "done", "the session to end");
    const loaded = (await store.load("s1"))!;
    assert.equal(loaded.approvals.length, 1);
    assert.equal(loaded.approvals[0].status, "denied");
    assert.equal(loaded.approvals[0].decidedBy, "cancel");
    // A late answer from a viewer that still showed the card changes nothing.
    const late = await store.answerApproval("s1", {
      toolCallId: loaded.approvals[0].toolCallId,
      decision: { approve: true },
    });
    assert.equal(late, "already-decided");
    assert.equal(runs, 0);
    assert.deepEqual(turnEnds(await store.read("s1", 0)), ["interrupted"]);
  });

  t("a cancel sent to a parked session ends its turn without running the tool", async (store) => {
    const { server, ws } = await setup();
    let runs = 0;
    const make = (id: string) =>
      testWorker(store, {
        baseURL: server.baseURL,
        workspace: ws,
        approval: true,
        act: () => `ran ${++runs}`,
      }, {
        ownerId: id,
        approvalHoldMs: 50,
        approvalPollMs: 20,
      });
    const a = make("A");
    cleanups.push(() => a.stop({ graceMs: 100 }));
    await store.create("s1");
    await input(store, "go");
    a.start();
    await until(
      async () => (await store.load("s1"))?.status === "waiting_approval",
      "the session to park",
    );
    await a.stop();
    await cancel(store);
    assert.equal((await store.load("s1"))?.status, "runnable");
    const b = make("B");
    cleanups.push(() => b.stop({ graceMs: 100 }));
    b.start();
    await until(async () => (await store.load("s1"))?.status === "done", "the session to end");
    const loaded = (await store.load("s1"))!;
    assert.equal(runs, 0);
    assert.equal(loaded.approvals[0].status, "denied");
    assert.equal(loaded.approvals[0].decidedBy, "cancel");
    const events = await store.read("s1", 0);
    assert.deepEqual(turnEnds(events), ["interrupted"]);
    assert.equal(server.requests.length, 1, "the model was not asked again");
    const restored = restoreSession(loaded);
    const call = restored.messages.find((m) => m.tool_calls?.length)!.tool_calls![0];
    assert.ok(restored.messages.some((m) => m.role === "tool" && m.tool_call_id === call.id));
  });

  t("a cancel drops the inputs queued before it; later inputs run", async (store) => {
    const { server, ws, asked } = await setup();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    cleanups.push(() => release());
    let started = 0;
    const worker = testWorker(store, {
      baseURL: server.baseURL,
      workspace: ws,
      act: async (_args, ctx) => {
        if (++started === 1) {
          const signal = (ctx as { signal?: AbortSignal }).signal!;
          await Promise.race([
            gate,
            new Promise((_r, reject) => signal.addEventListener("abort", reject)),
          ]);
        }
        return "ok";
      },
    }, {
      cancelPollMs: 60_000,
    });
    cleanups.push(() => worker.stop({ graceMs: 100 }));
    await store.create("s1");
    await input(store, "first");
    worker.start();
    await until(() => started === 1, "the first turn's tool to start");
    await input(store, "second");
    await cancel(store);
    await input(store, "third");
    await until(async () => {
      const ends = turnEnds(await store.read("s1", 0));
      return ends.length === 2;
    }, "two turns to end");
    await until(async () => (await store.load("s1"))?.status === "done", "the session to end");
    const events = await store.read("s1", 0);
    assert.deepEqual(turnEnds(events), ["interrupted", "completed"]);
    const inputs = events.filter((e) => e.kind === "turn_start").map((e) => e.payload.input);
    assert.deepEqual(inputs, ["first", "third"]);
    assert.ok(!asked().includes("second"), "the input before the cancel never reached the model");
  });

  t(
    "a worker that died after taking a cancel leaves the turn to be ended, not resumed",
    async (store) => {
      const { server, ws } = await setup();
      let runs = 0;
      await store.create("s1");
      // Process A runs the turn until the tool starts, takes the cancel, and dies before the
      // interrupt is recorded (its lease lapses).
      const a = await startDyingOwner(store, "s1", {
        baseURL: server.baseURL,
        workspace: ws,
        onRun: () => runs++,
      });
      cleanups.push(() => a.finish());
      await a.started;
      await a.hook.flush();
      await cancel(store);
      assert.equal((await store.takeInbox(a.lease)).map((i) => i.kind).join(), "cancel");
      a.hook.detach();
      await a.die();
      const worker = testWorker(store, {
        baseURL: server.baseURL,
        workspace: ws,
        act: () => `B ${++runs}`,
      });
      cleanups.push(() => worker.stop({ graceMs: 100 }));
      worker.start();
      await until(async () => (await store.load("s1"))?.status === "done", "the session to end");
      assert.equal(runs, 1, "the tool was not run again");
      assert.equal(server.requests.length, 1, "the model was not asked to go on");
      assert.deepEqual(turnEnds(await store.read("s1", 0)), ["interrupted"]);
      await a.finish();
    },
  );

  t("a cancel with no turn running changes nothing and the next input runs", async (store) => {
    const { server, ws } = await setup();
    let runs = 0;
    const worker = testWorker(store, {
      baseURL: server.baseURL,
      workspace: ws,
      act: () => `ran ${++runs}`,
    });
    cleanups.push(() => worker.stop({ graceMs: 100 }));
    await store.create("s1");
    await input(store, "go");
    worker.start();
    await until(async () => (await store.load("s1"))?.status === "done", "the first turn");
    await cancel(store);
    await until(async () => {
      const s = await store.load("s1");
      return s?.status === "done" && s.inbox.length === 0;
    }, "the cancel to be taken");
    await input(store, "again");
    await until(async () => turnEnds(await store.read("s1", 0)).length === 2, "the second turn");
    assert.deepEqual(turnEnds(await store.read("s1", 0)), ["completed", "completed"]);
    assert.equal(runs, 2);
  });
});

test("restoreSession: a cancel taken in a turn that never ended asks for an interrupt", () => {
  const at = new Date().toISOString();
  const ev = (seq: number, kind: string, payload: Record<string, unknown>): StoredEvent => ({
    seq,
    kind,
    payload,
    at,
    epoch: 1,
  });
  const events = [
    ev(1, "inbox", { id: 1, kind: "user_input", payload: { text: "a" }, idemKey: "a" }),
    ev(2, "turn_start", { taskId: "in_1", input: "a" }),
    ev(3, "inbox", { id: 2, kind: "user_input", payload: { text: "b" }, idemKey: "b" }),
    ev(4, "inbox", { id: 3, kind: "cancel", payload: {}, idemKey: "c" }),
    ev(5, "inbox", { id: 4, kind: "user_input", payload: { text: "d" }, idemKey: "d" }),
  ];
  const loaded = {
    sessionId: "s1",
    status: "running" as const,
    meta: {},
    events,
    approvals: [],
    inbox: [],
    lastSeq: 5,
  };
  const r = restoreSession(loaded);
  assert.equal(r.cancelled, true);
  assert.deepEqual(r.pendingInputs.map((i) => i.payload.text), ["d"]);
  const ended = restoreSession({
    ...loaded,
    events: [...events, ev(6, "turn_end", { status: "interrupted" })],
    lastSeq: 6,
  });
  assert.equal(ended.cancelled, false);
});
