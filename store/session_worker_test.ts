import { test } from "node:test";
import assert from "node:assert/strict";
import type { StoredEvent } from "./mod.ts";
import { store as target, testing } from "../tests/_target.ts";
import { cleanupsAfterEach, removeDir, tempWorkspace, until } from "../tests/_util.ts";
import {
  eachStore,
  makeEngine,
  modelAndWorkspace,
  startDyingOwner,
  testWorker,
} from "../tests/_store_engine.ts";
import { postgresForTests } from "../tests/_postgres.ts";

// The code under test: the source tree, or the npm build (tests/_target.ts).
const { LeaseLostError, MemorySessionStore, restoreSession, SessionWorker, StoreHook } = target;

const pg = await postgresForTests();

const cleanups = cleanupsAfterEach();

const setup = () => modelAndWorkspace(cleanups);

function assertContiguous(events: StoredEvent[]): void {
  events.forEach((e, i) => assert.equal(e.seq, i + 1));
}

eachStore(pg, "w", cleanups, (t) => {
  t("a worker runs submitted input to the end and stores every event in order", async (store) => {
    const { server, ws } = await setup();
    let runs = 0;
    const worker = testWorker(store, {
      baseURL: server.baseURL,
      workspace: ws,
      act: () => `ran ${++runs}`,
    });
    cleanups.push(() => worker.stop());
    await store.create("s1");
    await store.submit("s1", { kind: "user_input", payload: { text: "go" }, idemKey: "m1" });
    worker.start();
    await until(async () => (await store.load("s1"))?.status === "done", "the session to finish");
    assert.equal(runs, 1);
    const events = await store.read("s1", 0);
    assertContiguous(events);
    const kinds = events.map((e) => e.kind);
    for (const k of ["inbox", "turn_start", "tool_started", "tool_finished", "turn_end"]) {
      assert.ok(kinds.includes(k), `has ${k}`);
    }
    assert.ok(kinds.indexOf("tool_started") < kinds.indexOf("tool_finished"));
    const finished = events.find((e) => e.kind === "tool_finished")!;
    assert.equal(finished.idemKey, `tool_result:${finished.payload.reqId}`);
    // Deltas are coalesced: the four answer deltas are stored as fewer events, same text.
    const deltas = events.filter((e) => e.kind === "assistant_delta");
    assert.ok(deltas.length >= 1 && deltas.length < 4, `${deltas.length} delta events`);
    assert.equal(deltas.map((e) => e.payload.text).join(""), "done after ran 1");
    const loaded = await store.load("s1");
    assert.equal(loaded?.checkpoint?.schemaVersion, 1);
  });

  t("after a crash, a started non-idempotent tool is not run again", async (store) => {
    const { server, ws } = await setup();
    let runs = 0;
    await store.create("s1");
    // Process A: runs the turn until the tool starts, then "dies" (no heartbeat, lease lapses).
    const a = await startDyingOwner(store, "s1", {
      baseURL: server.baseURL,
      workspace: ws,
      onRun: () => runs++,
    });
    cleanups.push(() => a.finish());
    await a.started;
    await a.die();
    // Process B: a worker claims the session and finishes the turn without re-running the tool.
    const worker = testWorker(store, {
      baseURL: server.baseURL,
      workspace: ws,
      act: () => `B ${++runs}`,
    });
    cleanups.push(() => worker.stop());
    worker.start();
    await until(async () => (await store.load("s1"))?.status === "done", "the session to finish");
    assert.equal(runs, 1, "the tool ran once");
    // Its end is in the log, so viewers do not show it as running or never run.
    const ended = (await store.read("s1", 0)).filter((e) => e.kind === "tool_finished");
    assert.equal(ended.length, 1);
    assert.equal(ended[0].payload.status, "interrupted");
    assert.equal(ended[0].payload.name, "act");
    assert.equal(ended[0].idemKey, `tool_result:${ended[0].payload.reqId}`);
    const last = server.requests.at(-1)!.body!.messages as { role: string; content: string }[];
    assert.match(last.at(-1)!.content, /Interrupted, not re-run/);
    await a.finish();
    assert.ok(
      a.hook.error instanceof LeaseLostError,
      `A's late writes were fenced: ${a.hook.error}`,
    );
    const events = await store.read("s1", 0);
    assertContiguous(events);
    for (let i = 1; i < events.length; i++) {
      assert.ok(events[i].epoch >= events[i - 1].epoch, "no write under a stale epoch");
    }
  });

  t("after a crash, a started idempotent tool runs again with the same key", async (store) => {
    const { server, ws } = await setup();
    const keys: string[] = [];
    await store.create("s1");
    const a = await startDyingOwner(store, "s1", {
      baseURL: server.baseURL,
      workspace: ws,
      idempotent: true,
      onRun: (ctx) => keys.push(ctx!.idempotencyKey!),
    });
    cleanups.push(() => a.finish());
    await a.started;
    await a.die();
    const worker = testWorker(store, {
      baseURL: server.baseURL,
      workspace: ws,
      idempotent: true,
      act: (_a, ctx) => {
        keys.push(ctx!.idempotencyKey!);
        return "again";
      },
    });
    cleanups.push(() => worker.stop());
    worker.start();
    await until(async () => (await store.load("s1"))?.status === "done", "the session to finish");
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1]);
    assert.match(keys[0], /^tool_result:/);
    await a.finish();
  });

  t("an approval answered elsewhere wakes the turn holding its lease", async (store) => {
    const { server, ws } = await setup();
    let runs = 0;
    const worker = testWorker(store, {
      baseURL: server.baseURL,
      workspace: ws,
      approval: true,
      act: () => `ran ${++runs}`,
    }, {
      approvalHoldMs: 60_000,
      approvalPollMs: 5_000,
    });
    cleanups.push(() => worker.stop());
    worker.start();
    await store.create("s1");
    await store.submit("s1", { kind: "user_input", payload: { text: "go" }, idemKey: "m1" });
    let toolCallId = "";
    await until(async () => {
      const a = (await store.load("s1"))?.approvals[0];
      toolCallId = a?.toolCallId ?? "";
      return !!a;
    }, "the approval request");
    assert.equal((await store.load("s1"))?.status, "running", "held, not parked");
    assert.equal(
      await store.answerApproval("s1", { toolCallId, decision: { approve: true }, by: "ops" }),
      "applied",
    );
    await until(async () => (await store.load("s1"))?.status === "done", "the session to finish");
    assert.equal(runs, 1);
  });

  t("a parked session is resumed by a worker once the approval is answered", async (store) => {
    const { server, ws } = await setup();
    let runs = 0;
    const make = (id: string) =>
      testWorker(store, {
        baseURL: server.baseURL,
        workspace: ws,
        approval: true,
        act: () => `ran by ${id} ${++runs}`,
      }, {
        ownerId: id,
        approvalHoldMs: 100,
        approvalPollMs: 20,
      });
    const a = make("A");
    cleanups.push(() => a.stop());
    a.start();
    await store.create("s1");
    await store.submit("s1", { kind: "user_input", payload: { text: "go" }, idemKey: "m1" });
    await until(
      async () => (await store.load("s1"))?.status === "waiting_approval",
      "the session to park",
    );
    const parked = await store.load("s1");
    assert.equal(parked?.lease, undefined, "no lease held while parked");
    await a.stop();
    const b = make("B");
    cleanups.push(() => b.stop());
    b.start();
    await store.answerApproval("s1", {
      toolCallId: parked!.approvals[0].toolCallId,
      decision: { approve: true },
    });
    await until(async () => (await store.load("s1"))?.status === "done", "the session to finish");
    assert.equal(runs, 1);
    const events = await store.read("s1", 0);
    assertContiguous(events);
    const restored = restoreSession((await store.load("s1"))!);
    assert.match(String(restored.messages.at(-1)?.content), /done after ran by B 1/);
  });

  t(
    "a session whose engine cannot be built is marked failed, not claimed forever",
    async (store) => {
      const { server, ws } = await setup();
      let builds = 0;
      let broken = true;
      const worker = new SessionWorker(store, {
        pollMs: 20,
        onError: () => {},
        createEngine: ({ messages, meta }) => {
          builds++;
          if (broken) throw new Error(`tenant ${meta.tenant} is not configured`);
          return makeEngine({ baseURL: server.baseURL, workspace: ws, messages, act: () => "ok" });
        },
      });
      cleanups.push(() => worker.stop());
      await store.create("s1", { meta: { tenant: "ghost" } });
      await store.submit("s1", { kind: "user_input", payload: { text: "hi" }, idemKey: "m1" });
      worker.start();
      await until(async () => (await store.load("s1"))?.status === "failed", "the session to fail");
      assert.equal(builds, 1, "not rebuilt over and over");
      const error = (await store.read("s1", 0)).find((e) => e.kind === "error");
      assert.equal(error?.payload.error_type, "session_setup");
      assert.match(String(error?.payload.error), /tenant ghost is not configured/);
      // Once the host is fixed, new input makes the session runnable: both inputs run.
      broken = false;
      await store.submit("s1", { kind: "user_input", payload: { text: "again" }, idemKey: "m2" });
      await until(async () => (await store.load("s1"))?.status === "done", "the session to run");
      assert.equal(builds, 2);
    },
  );

  t("a retry item runs the last turn again after a retriable error, and nothing otherwise", async (
    store,
  ) => {
    const server = await new testing.MockOpenAIServer({
      turns: [{ text: ["par"], errorAfterDeltas: "cut" }, { text: "whole answer" }],
    }).start();
    const ws = tempWorkspace();
    cleanups.push(() => server.close(), () => removeDir(ws));
    const worker = testWorker(store, {
      baseURL: server.baseURL,
      workspace: ws,
      act: () => "unused",
    });
    cleanups.push(() => worker.stop());
    worker.start();
    const ends = async () =>
      (await store.read("s1", 0)).filter((e) => e.kind === "turn_end").map((e) => e.payload.status);
    await store.create("s1");
    await store.submit("s1", { kind: "user_input", payload: { text: "hi" }, idemKey: "m1" });
    await until(async () => (await ends()).length === 1, "the first turn");
    assert.deepEqual(await ends(), ["error"]);
    await store.submit("s1", { kind: "retry", payload: {}, idemKey: "r1" });
    await until(async () => (await ends()).length === 2, "the retried turn");
    assert.deepEqual(await ends(), ["error", "completed"]);
    const events = await store.read("s1", 0);
    assert.equal(events.filter((e) => e.kind === "turn_start").at(-1)?.payload.kind, "retry");
    assert.equal(server.requests.length, 2);
    // The model got the question once, not twice.
    const sent = server.requests[1].body!.messages as { role: string }[];
    assert.equal(sent.filter((m) => m.role === "user").length, 1);
    // A retry with nothing to retry is taken and runs nothing.
    await store.submit("s1", { kind: "retry", payload: {}, idemKey: "r2" });
    await until(async () => {
      const s = await store.load("s1");
      return s?.status === "done" && s.inbox.length === 0;
    }, "the second retry to be taken");
    assert.deepEqual(await ends(), ["error", "completed"]);
    assert.equal(server.requests.length, 2);
  });
});

test("a tool whose start cannot be made durable does not run", async () => {
  const { server, ws } = await setup();
  const store = new MemorySessionStore();
  cleanups.push(() => store.close());
  await store.create("s1");
  const lease = (await store.acquire("s1", { ownerId: "A", ttlMs: 30_000 }))!;
  let runs = 0;
  const engine = makeEngine({ baseURL: server.baseURL, workspace: ws, act: () => ++runs });
  engine.hook = new StoreHook(store, lease).attach(engine);
  // Another worker takes over before the tool starts.
  const events: string[] = [];
  for await (const e of engine.run("go")) {
    events.push(e.type);
    if (e.type === "assistant_message" && events.filter((t) => t === e.type).length === 1) {
      await store.release(lease, "runnable");
      await store.acquire("s1", { ownerId: "B" });
    }
  }
  assert.equal(runs, 0);
  assert.ok(events.includes("tool_finished"));
});
