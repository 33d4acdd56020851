/**
 * Figures of the PostgreSQL session store (issue 11): events/s, p50/p99 of one append, takeover
 * time after an owner dies (TTL + claim), and approval wake time (answer in one store instance →
 * waiting turn woken in another). Starts its own PostgreSQL on 127.0.0.1 (as the tests do);
 * prints a skip line when it is not installed.
 *
 * ```sh
 * deno task bench store            # BENCH_QUICK=1 for a short run
 * ```
 *
 * @module
 */
import process from "node:process";
import { PostgresSessionStore } from "../store/mod.ts";
import { startPostgres } from "../tests/_postgres.ts";

const quick = process.env.BENCH_QUICK === "1";
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const round = (n: number) => Math.round(n * 100) / 100;

const pg = await startPostgres();
if ("skip" in pg) {
  console.log(JSON.stringify({ bench: "store", skipped: pg.skip }));
  process.exit(0);
}
const a = new PostgresSessionStore({ connectionString: pg.url, max: 20 });
const b = new PostgresSessionStore({ connectionString: pg.url, max: 4 });
try {
  await a.setup();
  // 1. Appends: one event per transaction, 20 sessions written concurrently.
  const sessions = quick ? 5 : 20;
  const perSession = quick ? 50 : 250;
  const lat: number[] = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: sessions }, async (_, i) => {
    await a.create(`bench-${i}`);
    const lease = (await a.acquire(`bench-${i}`, { ownerId: "bench", ttlMs: 60_000 }))!;
    for (let n = 0; n < perSession; n++) {
      const s = performance.now();
      await a.append(lease, [{ kind: "assistant_delta", payload: { text: "x".repeat(40), n } }]);
      lat.push(performance.now() - s);
    }
  }));
  const secs = (performance.now() - t0) / 1000;
  const eventsPerSec = (sessions * perSession) / secs;

  // 2. Takeover: the owner stops heartbeating; how long until another worker holds it.
  const ttl = 500;
  await a.create("bench-takeover");
  await a.acquire("bench-takeover", { ownerId: "dead", ttlMs: ttl });
  const t1 = performance.now();
  let took = 0;
  while (took === 0) {
    const got = await b.claimRunnable({ ownerId: "alive", ttlMs: 30_000 });
    if (got.some((l) => l.sessionId === "bench-takeover")) took = performance.now() - t1;
    else await new Promise((r) => setTimeout(r, 20));
  }

  // 3. Approval wake: a waiter in store A, the answer given through store B.
  const wakes: number[] = [];
  for (let i = 0; i < (quick ? 3 : 20); i++) {
    const id = `bench-appr-${i}`;
    await a.create(id);
    const lease = (await a.acquire(id, { ownerId: "bench", ttlMs: 60_000 }))!;
    await a.openApproval(lease, "call", {});
    const waiting = a.waitForWake(id, { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 30));
    const s = performance.now();
    await b.answerApproval(id, { toolCallId: "call", decision: { approve: true } });
    await waiting;
    wakes.push(performance.now() - s);
  }
  const result = {
    bench: "store",
    eventsPerSec: Math.round(eventsPerSec),
    appendP50Ms: round(pct(lat, 50)),
    appendP99Ms: round(pct(lat, 99)),
    takeoverMs: Math.round(took),
    takeoverTtlMs: ttl,
    approvalWakeP50Ms: round(pct(wakes, 50)),
  };
  console.log(
    `store: ${result.eventsPerSec} events/s (1 event per append, ${sessions} sessions), append ` +
      `p50 ${result.appendP50Ms} ms p99 ${result.appendP99Ms} ms; takeover ${result.takeoverMs} ms ` +
      `after a ${ttl} ms TTL; approval wake p50 ${result.approvalWakeP50Ms} ms`,
  );
  console.log(JSON.stringify(result));
} finally {
  await a.close();
  await b.close();
  pg.stop();
}
