/**
 * The conformance suite every {@link SessionStore} passes (issue 11): order, seq contiguity,
 * idempotency, checkpoint + tail, approval first-wins, fencing after takeover, prune, and the
 * concurrency cases (50 appenders on one session, 20 racing acquires, two racing answers).
 *
 * @module
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Lease, SessionStore, StoredEvent } from "../store/mod.ts";
import { store as target } from "./_target.ts";

const { CHECKPOINT_SCHEMA_VERSION, LeaseLostError } = target;

/** Makes a fresh, empty store for one test; `close` is called after it. */
export type StoreFactory = () => Promise<SessionStore>;

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

function assertContiguous(events: StoredEvent[], from = 1): void {
  events.forEach((e, i) => assert.equal(e.seq, from + i, `seq ${e.seq} at position ${i}`));
}

/**
 * Registers the suite for one store.
 *
 * @param name Label in test names.
 * @param make Fresh store per test.
 * @param skip A reason to skip every test (the store's server is missing).
 */
export function storeConformance(name: string, make: StoreFactory, skip?: string): void {
  const t = (title: string, fn: (store: SessionStore) => Promise<void>) =>
    test(`${name}: ${title}`, { skip: skip ?? false }, async () => {
      const store = await make();
      try {
        await fn(store);
      } finally {
        await store.close();
      }
    });

  const owned = async (store: SessionStore, id = "s1", ttlMs = 30_000): Promise<Lease> => {
    await store.create(id);
    const lease = await store.acquire(id, { ownerId: "w1", ttlMs });
    assert.ok(lease, "acquired");
    return lease;
  };

  t("appended events come back in order with seq 1, 2, 3 … and no gaps", async (store) => {
    const lease = await owned(store);
    const a = await store.append(lease, [
      { kind: "a", payload: { n: 1 } },
      { kind: "b", payload: { n: 2 } },
    ]);
    assert.deepEqual([a.firstSeq, a.lastSeq, a.deduped], [1, 2, 0]);
    await store.append(lease, [{ kind: "c", payload: { n: 3 } }]);
    const all = await store.read("s1", 0);
    assert.deepEqual(all.map((e) => e.kind), ["a", "b", "c"]);
    assertContiguous(all);
    assert.deepEqual(all.map((e) => e.payload.n), [1, 2, 3]);
    assert.ok(all.every((e) => e.epoch === lease.epoch));
    assert.deepEqual((await store.read("s1", 1, 1)).map((e) => e.seq), [2]);
  });

  t("an event whose idempotency key is already stored is dropped, without a gap", async (store) => {
    const lease = await owned(store);
    await store.append(lease, [{ kind: "tool_finished", payload: {}, idemKey: "tool_result:c1" }]);
    const r = await store.append(lease, [
      { kind: "tool_finished", payload: {}, idemKey: "tool_result:c1" },
      { kind: "x", payload: {}, idemKey: "k2" },
      { kind: "x", payload: {}, idemKey: "k2" },
      { kind: "y", payload: {} },
    ]);
    assert.equal(r.deduped, 2);
    const all = await store.read("s1", 0);
    assert.deepEqual(all.map((e) => e.kind), ["tool_finished", "x", "y"]);
    assertContiguous(all);
  });

  t("load returns the latest checkpoint and only the events after it", async (store) => {
    const lease = await owned(store);
    await store.append(lease, [{ kind: "a", payload: {} }, { kind: "b", payload: {} }]);
    await store.putCheckpoint(lease, {
      seq: 2,
      schemaVersion: CHECKPOINT_SCHEMA_VERSION,
      state: { messages: [{ role: "user", content: "hi" }] },
    });
    await store.append(lease, [{ kind: "c", payload: {} }]);
    const loaded = await store.load("s1");
    assert.ok(loaded);
    assert.equal(loaded.checkpoint?.seq, 2);
    assert.equal(loaded.checkpoint?.schemaVersion, CHECKPOINT_SCHEMA_VERSION);
    assert.deepEqual(loaded.checkpoint?.state.messages, [{ role: "user", content: "hi" }]);
    assert.deepEqual(loaded.events.map((e) => [e.seq, e.kind]), [[3, "c"]]);
    assert.equal(loaded.lastSeq, 3);
    assert.equal(loaded.lease?.epoch, lease.epoch);
    assert.equal(await store.load("missing"), null);
  });

  t("a checkpoint ahead of the log is refused", async (store) => {
    const lease = await owned(store);
    await assert.rejects(
      store.putCheckpoint(lease, { seq: 5, schemaVersion: 1, state: {} }),
      /ahead of the log/,
    );
  });

  t("a tail yields stored events, then new ones, each once and in order", async (store) => {
    const lease = await owned(store);
    await store.append(lease, [{ kind: "a", payload: {} }, { kind: "b", payload: {} }]);
    const ac = new AbortController();
    const seen: StoredEvent[] = [];
    const reading = (async () => {
      for await (const e of store.tail("s1", 1, { signal: ac.signal, pollMs: 100 })) {
        seen.push(e);
        if (e.kind === "end") ac.abort();
      }
    })();
    for (let i = 0; i < 5; i++) {
      await store.append(lease, [{ kind: "n", payload: { i } }]);
      await wait(5);
    }
    await store.append(lease, [{ kind: "end", payload: {} }]);
    await reading;
    assert.deepEqual(seen.map((e) => e.kind), ["b", "n", "n", "n", "n", "n", "end"]);
    assertContiguous(seen, 2);
  });

  t("the first approval answer wins and later ones are told so", async (store) => {
    const lease = await owned(store);
    await store.openApproval(lease, "call_1", { toolName: "run_shell" });
    await store.openApproval(lease, "call_1", { toolName: "run_shell" }); // idempotent
    const first = await store.answerApproval("s1", {
      toolCallId: "call_1",
      decision: { approve: true },
      by: "alice",
    });
    const second = await store.answerApproval("s1", {
      toolCallId: "call_1",
      decision: { approve: false },
      by: "bob",
    });
    assert.equal(first, "applied");
    assert.equal(second, "already-decided");
    assert.equal(
      await store.answerApproval("s1", { toolCallId: "nope", decision: { approve: true } }),
      "unknown",
    );
    const loaded = await store.load("s1");
    assert.equal(loaded?.approvals.length, 1);
    assert.equal(loaded?.approvals[0].status, "approved");
    assert.equal(loaded?.approvals[0].decidedBy, "alice");
    const requested = loaded!.events.filter((e) => e.kind === "approval.requested");
    assert.equal(requested.length, 1, "one approval.requested event");
  });

  t("two racing answers: exactly one is applied", async (store) => {
    const lease = await owned(store);
    await store.openApproval(lease, "call_1", {});
    const results = await Promise.all([
      store.answerApproval("s1", { toolCallId: "call_1", decision: { approve: true }, by: "a" }),
      store.answerApproval("s1", { toolCallId: "call_1", decision: { approve: false }, by: "b" }),
    ]);
    assert.deepEqual(results.sort(), ["already-decided", "applied"]);
  });

  t("a write under a lease another worker took over throws LeaseLostError", async (store) => {
    const old = await owned(store, "s1", 150);
    await store.append(old, [{ kind: "a", payload: {} }]);
    assert.equal(await store.acquire("s1", { ownerId: "w2" }), null, "held");
    await wait(300);
    const next = await store.acquire("s1", { ownerId: "w2", ttlMs: 30_000 });
    assert.ok(next);
    assert.equal(next.epoch, old.epoch + 1);
    await assert.rejects(store.append(old, [{ kind: "late", payload: {} }]), LeaseLostError);
    await assert.rejects(
      store.putCheckpoint(old, { seq: 1, schemaVersion: 1, state: {} }),
      LeaseLostError,
    );
    await assert.rejects(store.release(old, "done"), LeaseLostError);
    await store.append(next, [{ kind: "b", payload: {} }]);
    const all = await store.read("s1", 0);
    assert.deepEqual(all.map((e) => [e.kind, e.epoch]), [["a", old.epoch], ["b", next.epoch]]);
  });

  t("20 racing acquires: exactly one wins", async (store) => {
    await store.create("s1");
    const leases = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.acquire("s1", { ownerId: `w${i}` })),
    );
    assert.equal(leases.filter(Boolean).length, 1);
  });

  t("50 concurrent appenders on one session get contiguous seqs", async (store) => {
    const lease = await owned(store);
    await Promise.all(
      Array.from({ length: 50 }, async (_, w) => {
        for (let i = 0; i < 4; i++) await store.append(lease, [{ kind: "e", payload: { w, i } }]);
      }),
    );
    const all = await store.read("s1", 0);
    assert.equal(all.length, 200);
    assertContiguous(all);
  });

  t("submit queues input once per key and makes the session runnable", async (store) => {
    await store.create("s1");
    const item = { kind: "user_input" as const, payload: { text: "hi" }, idemKey: "m1" };
    assert.equal(await store.submit("s1", item), "queued");
    assert.equal(await store.submit("s1", item), "duplicate");
    assert.equal(await store.submit("nope", item), "unknown");
    assert.equal((await store.load("s1"))?.status, "runnable");
    const [lease] = await store.claimRunnable({ ownerId: "w1", max: 5 });
    assert.equal(lease?.sessionId, "s1");
    assert.deepEqual(await store.claimRunnable({ ownerId: "w2" }), [], "claimed once");
    const items = await store.takeInbox(lease);
    assert.deepEqual(items.map((i) => [i.kind, i.payload.text]), [["user_input", "hi"]]);
    assert.deepEqual(await store.takeInbox(lease), []);
    const events = await store.read("s1", 0);
    assert.deepEqual(events.map((e) => e.kind), ["inbox"]);
    assert.equal(await store.submit("s1", item), "duplicate", "still a duplicate once taken");
  });

  t("peekInbox lists the untaken items in order without taking them", async (store) => {
    await store.create("s1");
    assert.deepEqual(await store.peekInbox("s1"), []);
    assert.deepEqual(await store.peekInbox("nope"), []);
    await store.submit("s1", { kind: "user_input", payload: { text: "a" }, idemKey: "m1" });
    await store.submit("s1", { kind: "cancel", payload: {}, idemKey: "c1" });
    const peeked = await store.peekInbox("s1");
    assert.deepEqual(peeked.map((i) => [i.id, i.kind, i.idemKey]), [
      [1, "user_input", "m1"],
      [2, "cancel", "c1"],
    ]);
    assert.deepEqual(await store.peekInbox("s1"), peeked, "peeking takes nothing");
    assert.deepEqual(await store.read("s1", 0), [], "peeking records nothing");
    const [lease] = await store.claimRunnable({ ownerId: "w1" });
    assert.deepEqual((await store.takeInbox(lease)).map((i) => i.id), [1, 2]);
    assert.deepEqual(await store.peekInbox("s1"), []);
  });

  t("a release with a submitted item waiting leaves the session runnable", async (store) => {
    for (const [kind, next] of [["retry", "done"], ["cancel", "waiting_approval"]] as const) {
      const id = `s-${kind}`;
      await store.create(id);
      const lease = (await store.acquire(id, { ownerId: "w1" }))!;
      if (next === "waiting_approval") await store.openApproval(lease, "call_1", {});
      // Submitted while the session runs, after the worker last looked at its inbox.
      await store.submit(id, { kind, payload: {}, idemKey: "k" });
      await store.release(lease, next);
      assert.equal((await store.load(id))?.status, "runnable", `${kind} then ${next}`);
    }
  });

  t("an expired running lease is claimed by another worker", async (store) => {
    await owned(store, "s1", 100);
    await wait(250);
    const [lease] = await store.claimRunnable({ ownerId: "w2" });
    assert.equal(lease?.sessionId, "s1");
    assert.equal(lease?.epoch, 2);
  });

  t("heartbeat renews live leases and leaves out lost ones", async (store) => {
    const a = await owned(store, "s1", 200);
    await store.create("s2");
    await store.acquire("s2", { ownerId: "w1", ttlMs: 100 });
    await wait(150);
    const held = await store.heartbeat({ ownerId: "w1", ttlMs: 30_000 });
    assert.deepEqual(held.map((l) => l.sessionId), ["s1"]);
    await wait(100);
    await store.append(a, [{ kind: "still-mine", payload: {} }]);
  });

  t(
    "release as waiting_approval parks the session until an answer makes it runnable",
    async (store) => {
      const lease = await owned(store);
      await store.openApproval(lease, "call_1", {});
      await store.release(lease, "waiting_approval");
      assert.equal((await store.load("s1"))?.status, "waiting_approval");
      assert.deepEqual(await store.claimRunnable({ ownerId: "w2" }), []);
      await store.answerApproval("s1", { toolCallId: "call_1", decision: { approve: true } });
      assert.equal((await store.load("s1"))?.status, "runnable");
      assert.equal((await store.claimRunnable({ ownerId: "w2" }))[0]?.sessionId, "s1");
    },
  );

  t(
    "release after an answer arrived, or with input waiting, leaves the session runnable",
    async (store) => {
      const lease = await owned(store);
      await store.openApproval(lease, "call_1", {});
      await store.answerApproval("s1", { toolCallId: "call_1", decision: { approve: false } });
      await store.release(lease, "waiting_approval");
      assert.equal((await store.load("s1"))?.status, "runnable");
      const again = await store.acquire("s1", { ownerId: "w1" });
      await store.submit("s1", { kind: "user_input", payload: { text: "x" }, idemKey: "m" });
      await store.release(again!, "done");
      assert.equal((await store.load("s1"))?.status, "runnable");
    },
  );

  t("an answer wakes a waiter on the session", async (store) => {
    const lease = await owned(store);
    await store.openApproval(lease, "call_1", {});
    const waiting = store.waitForWake("s1", { timeoutMs: 10_000 });
    await wait(50);
    await store.answerApproval("s1", { toolCallId: "call_1", decision: { approve: true } });
    assert.equal(await waiting, true);
    assert.equal(await store.waitForWake("s1", { timeoutMs: 20 }), false);
  });

  t("prune removes finished sessions past their age and keeps the others", async (store) => {
    const a = await owned(store, "old");
    await store.append(a, [{ kind: "x", payload: {} }]);
    await store.release(a, "done");
    await store.create("busy");
    await store.acquire("busy", { ownerId: "w1" });
    await store.create("ttl", { ttlMs: 1 });
    await wait(60);
    await store.create("fresh");
    assert.equal(await store.prune({ finishedOlderThanMs: 40 }), 2); // old + ttl
    assert.equal(await store.load("old"), null);
    assert.deepEqual(await store.read("old", 0), []);
    assert.ok(await store.load("busy"));
    assert.ok(await store.load("fresh"));
    await store.delete("busy");
    assert.equal(await store.load("busy"), null);
  });

  t("bad input is refused with a clear error", async (store) => {
    await assert.rejects(() => store.create("../etc"), /sessionId/);
    const lease = await owned(store);
    await assert.rejects(() => store.append(lease, [{ kind: "", payload: {} }]), /kind/);
    await assert.rejects(
      () => store.submit("s1", { kind: "user_input", payload: {}, idemKey: "" }),
      /idemKey/,
    );
    await assert.rejects(
      () => store.acquire("s1", { ownerId: "w", ttlMs: -1 }),
      /ttlMs/,
    );
    assert.deepEqual(await store.read("s1", 0), [], "nothing written");
    await assert.rejects(() => store.release(lease, "bogus" as "done"), /status "bogus"/);
    await assert.rejects(() => store.read("s1", Number.NaN), /afterSeq NaN/);
    await assert.rejects(() => store.read("s1", 0, -1), /limit -1/);
    await assert.rejects(
      () => store.submit("s1", { kind: "user_input", payload: { n: 1n }, idemKey: "b" }),
      /Cannot submit: the data is not JSON/,
    );
    assert.deepEqual(await store.peekInbox("s1"), [], "a refused submit leaves nothing behind");
    await assert.rejects(
      () => store.append(lease, [{ kind: "a", payload: { n: 1n } }]),
      /Cannot append events: the data is not JSON/,
    );
    assert.equal((await store.load("s1"))?.lastSeq, 0);
  });

  t("NUL and unpaired surrogates are stored as U+FFFD everywhere, the rest as written", async (
    store,
  ) => {
    const emoji = "😀";
    const odd = `a\u0000b ${emoji.slice(0, 1)}|${emoji}`;
    const kept = "a\ufffdb \ufffd|" + emoji;
    await store.create("s1", { meta: { note: odd } });
    assert.equal(
      await store.submit("s1", { kind: "user_input", payload: { text: odd }, idemKey: "m1" }),
      "queued",
    );
    assert.equal((await store.peekInbox("s1"))[0].payload.text, kept);
    const [lease] = await store.claimRunnable({ ownerId: "w1" });
    await store.takeInbox(lease);
    await store.append(lease, [{ kind: "tool_finished", payload: { content: odd } }]);
    await store.openApproval(lease, "call_1", { arguments: { command: odd } });
    await store.putCheckpoint(lease, {
      seq: 3,
      schemaVersion: CHECKPOINT_SCHEMA_VERSION,
      state: { messages: [{ role: "tool", content: odd }] },
    });
    await store.answerApproval("s1", {
      toolCallId: "call_1",
      decision: { approve: false, note: odd },
    });
    const loaded = (await store.load("s1"))!;
    assert.equal(loaded.meta.note, kept);
    assert.deepEqual((loaded.checkpoint?.state.messages as { content: string }[])[0].content, kept);
    const events = await store.read("s1", 0);
    assert.equal(events.find((e) => e.kind === "tool_finished")?.payload.content, kept);
    assert.equal(
      (events.find((e) => e.kind === "inbox")?.payload.payload as { text: string }).text,
      kept,
    );
    const approval = loaded.approvals[0];
    assert.equal((approval.request.arguments as { command: string }).command, kept);
    assert.equal(approval.decision?.note, kept);
  });
}
