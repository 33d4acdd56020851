import { after, afterEach, test } from "node:test";
import assert from "node:assert/strict";
import type { SessionStore, StoredEvent } from "./mod.ts";
import type { MockOpenAIServer as MockServer } from "../testing/mod.ts";
import { store as target, testing } from "../tests/_target.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { actThenAnswer, makeEngine } from "../tests/_store_engine.ts";
import { startPostgres, uniquePrefix } from "../tests/_postgres.ts";

// The code under test: the source tree, or the npm build (tests/_target.ts).
const {
  LeaseLostError,
  MemorySessionStore,
  PostgresSessionStore,
  restoreSession,
  SessionWorker,
  StoreHook,
} = target;
const { MockOpenAIServer } = testing;

const pg = await startPostgres();
after(() => {
  if (!("skip" in pg)) pg.stop();
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function setup(): Promise<{ server: MockServer; ws: string }> {
  const server = await new MockOpenAIServer({ turns: actThenAnswer }).start();
  const ws = tempWorkspace();
  cleanups.push(() => server.close(), () => removeDir(ws));
  return { server, ws };
}

async function until(fn: () => Promise<boolean> | boolean, what: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (await fn()) return;
    await wait(25);
  }
  throw new Error(`Timed out waiting for ${what}`);
}

function assertContiguous(events: StoredEvent[]): void {
  events.forEach((e, i) => assert.equal(e.seq, i + 1));
}

const stores: [string, () => SessionStore, string | undefined][] = [
  ["memory", () => new MemorySessionStore({ pollMs: 50 }), undefined],
  [
    "postgres",
    () =>
      new PostgresSessionStore({
        connectionString: "skip" in pg ? "postgres://unused" : pg.url,
        tablePrefix: uniquePrefix("w"),
        pollMs: 100,
      }),
    "skip" in pg ? pg.skip : undefined,
  ],
];

for (const [label, makeStore, skip] of stores) {
  const t = (name: string, fn: (store: SessionStore) => Promise<void>) =>
    test(`${label}: ${name}`, { skip: skip ?? false }, async () => {
      const store = makeStore();
      cleanups.push(() => store.close());
      await fn(store);
    });

  t("a worker runs submitted input to the end and stores every event in order", async (store) => {
    const { server, ws } = await setup();
    let runs = 0;
    const worker = new SessionWorker(store, {
      pollMs: 20,
      createEngine: ({ messages }) =>
        makeEngine({
          baseURL: server.baseURL,
          workspace: ws,
          messages,
          act: () => `ran ${++runs}`,
        }),
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
    let unblock!: () => void;
    const blocked = new Promise<void>((r) => (unblock = r));
    cleanups.push(() => unblock());
    await store.create("s1");
    // Process A: runs the turn until the tool starts, then "dies" (no heartbeat, lease lapses).
    const lease = (await store.acquire("s1", { ownerId: "A", ttlMs: 200 }))!;
    // A heartbeats until it "dies" (a slow first turn must not lose the lease early).
    const beat = setInterval(
      () => store.heartbeat({ ownerId: "A", ttlMs: 200 }).catch(() => {}),
      40,
    );
    cleanups.push(() => clearInterval(beat));
    const engineA = makeEngine({
      baseURL: server.baseURL,
      workspace: ws,
      act: async () => {
        runs++;
        await blocked;
        return "A finished late";
      },
    });
    const hookA = new StoreHook(store, lease).attach(engineA);
    engineA.hook = hookA;
    const streamA = (async () => {
      for await (const _ of engineA.run("go")) { /* drain */ }
    })();
    await until(() => runs === 1, "the tool to start");
    clearInterval(beat); // A dies
    await wait(300); // its lease lapses
    // Process B: a worker claims the session and finishes the turn without re-running the tool.
    const worker = new SessionWorker(store, {
      pollMs: 20,
      createEngine: ({ messages }) =>
        makeEngine({ baseURL: server.baseURL, workspace: ws, messages, act: () => `B ${++runs}` }),
    });
    cleanups.push(() => worker.stop());
    worker.start();
    await until(async () => (await store.load("s1"))?.status === "done", "the session to finish");
    assert.equal(runs, 1, "the tool ran once");
    const last = server.requests.at(-1)!.body!.messages as { role: string; content: string }[];
    assert.match(last.at(-1)!.content, /Interrupted, not re-run/);
    unblock();
    await streamA;
    await hookA.flush().catch(() => {});
    assert.ok(hookA.error instanceof LeaseLostError, `A's late writes were fenced: ${hookA.error}`);
    const events = await store.read("s1", 0);
    assertContiguous(events);
    for (let i = 1; i < events.length; i++) {
      assert.ok(events[i].epoch >= events[i - 1].epoch, "no write under a stale epoch");
    }
  });

  t("after a crash, a started idempotent tool runs again with the same key", async (store) => {
    const { server, ws } = await setup();
    const keys: string[] = [];
    let unblock!: () => void;
    const blocked = new Promise<void>((r) => (unblock = r));
    cleanups.push(() => unblock());
    await store.create("s1");
    const lease = (await store.acquire("s1", { ownerId: "A", ttlMs: 200 }))!;
    // A heartbeats until it "dies" (a slow first turn must not lose the lease early).
    const beat = setInterval(
      () => store.heartbeat({ ownerId: "A", ttlMs: 200 }).catch(() => {}),
      40,
    );
    cleanups.push(() => clearInterval(beat));
    const engineA = makeEngine({
      baseURL: server.baseURL,
      workspace: ws,
      idempotent: true,
      act: async (_a, ctx) => {
        keys.push(ctx!.idempotencyKey!);
        await blocked;
        return "late";
      },
    });
    engineA.hook = new StoreHook(store, lease).attach(engineA);
    const streamA = (async () => {
      for await (const _ of engineA.run("go")) { /* drain */ }
    })();
    await until(() => keys.length === 1, "the tool to start");
    clearInterval(beat); // A dies
    await wait(300); // its lease lapses
    const worker = new SessionWorker(store, {
      pollMs: 20,
      createEngine: ({ messages }) =>
        makeEngine({
          baseURL: server.baseURL,
          workspace: ws,
          messages,
          idempotent: true,
          act: (_a, ctx) => {
            keys.push(ctx!.idempotencyKey!);
            return "again";
          },
        }),
    });
    cleanups.push(() => worker.stop());
    worker.start();
    await until(async () => (await store.load("s1"))?.status === "done", "the session to finish");
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1]);
    assert.match(keys[0], /^tool_result:/);
    unblock();
    await streamA;
  });

  t("an approval answered elsewhere wakes the turn holding its lease", async (store) => {
    const { server, ws } = await setup();
    let runs = 0;
    const worker = new SessionWorker(store, {
      pollMs: 20,
      approvalHoldMs: 60_000,
      approvalPollMs: 5_000,
      createEngine: ({ messages }) =>
        makeEngine({
          baseURL: server.baseURL,
          workspace: ws,
          messages,
          approval: true,
          act: () => `ran ${++runs}`,
        }),
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
      new SessionWorker(store, {
        ownerId: id,
        pollMs: 20,
        approvalHoldMs: 100,
        approvalPollMs: 20,
        createEngine: ({ messages }) =>
          makeEngine({
            baseURL: server.baseURL,
            workspace: ws,
            messages,
            approval: true,
            act: () => `ran by ${id} ${++runs}`,
          }),
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
}

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
