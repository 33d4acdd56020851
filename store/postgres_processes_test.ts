import { test } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { store as target, testing } from "../tests/_target.ts";
import { cleanupsAfterEach, removeDir, tempWorkspace, until, wait } from "../tests/_util.ts";
import { actThenAnswer } from "../tests/_store_engine.ts";
import { postgresForTests, uniquePrefix } from "../tests/_postgres.ts";

// The code under test: the source tree, or the npm build (tests/_target.ts); the child
// processes inherit the environment, so tests/_store_process.ts runs against the same target.
const { PostgresSessionStore } = target;
const { MockOpenAIServer } = testing;

const pg = await postgresForTests();
const skip = "skip" in pg ? pg.skip : false;

const cleanups = cleanupsAfterEach();

const SCRIPT = fileURLToPath(new URL("../tests/_store_process.ts", import.meta.url));

interface Child {
  proc: ChildProcess;
  out: string[];
  exited: Promise<number | null>;
}

/** Starts tests/_store_process.ts under the current runtime (Deno or Node 22). */
function child(env: Record<string, string>): Child {
  const isDeno = "Deno" in globalThis;
  const args = isDeno
    ? ["run", "-A", SCRIPT]
    : ["--experimental-transform-types", "--no-warnings", SCRIPT];
  const proc = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out: string[] = [];
  let buf = "";
  proc.stdout!.on("data", (d: Buffer) => {
    buf += d.toString();
    const lines = buf.split("\n");
    buf = lines.pop()!;
    out.push(...lines);
  });
  proc.stderr!.on("data", (d: Buffer) => {
    if (process.env.STORE_TEST_DEBUG) process.stderr.write(d);
  });
  const exited = new Promise<number | null>((r) => proc.on("exit", (code) => r(code)));
  cleanups.push(async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
    await exited;
  });
  return { proc, out, exited };
}

async function env(turns = actThenAnswer) {
  const url = "skip" in pg ? "" : pg.url;
  const prefix = uniquePrefix("p");
  const store = new PostgresSessionStore({
    connectionString: url,
    tablePrefix: prefix,
    pollMs: 200,
  });
  cleanups.push(() => store.close());
  await store.setup();
  const pool = await sql(url);
  await pool.query(`CREATE TABLE ${prefix}exec (tool_call_id text NOT NULL, pid int NOT NULL)`);
  const server = await new MockOpenAIServer({ turns }).start();
  const ws = tempWorkspace();
  cleanups.push(() => server.close(), () => removeDir(ws));
  const vars = { DATABASE_URL: url, PREFIX: prefix, MOCK_URL: server.baseURL, WS: ws };
  return { store, pool, prefix, vars, server };
}

type Pool = {
  query(t: string, v?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
  end(): Promise<void>;
  on(e: string, f: () => void): void;
};

async function sql(url: string): Promise<Pool> {
  const mod = (await import("pg")).default as unknown as { Pool: new (c: unknown) => Pool };
  const pool = new mod.Pool({ connectionString: url, max: 3 });
  pool.on("error", () => {});
  cleanups.push(() => pool.end());
  return pool;
}

/** Every invariant of the chaos run, checked in SQL. */
async function assertInvariants(pool: Pool, p: string, sessions: number): Promise<void> {
  const done = await pool.query(
    `SELECT count(*)::int AS n FROM ${p}sessions WHERE status = 'done'`,
  );
  assert.equal(done.rows[0].n, sessions, "every session completed");
  const gaps = await pool.query(
    `SELECT s.session_id FROM ${p}sessions s LEFT JOIN ${p}events e USING (session_id)
     GROUP BY s.session_id, s.next_seq
     HAVING count(e.seq) <> s.next_seq OR coalesce(max(e.seq), 0) <> s.next_seq`,
  );
  assert.deepEqual(gaps.rows, [], "no seq gaps or duplicates");
  const stale = await pool.query(
    `SELECT count(*)::int AS n FROM (SELECT lease_epoch < lag(lease_epoch) OVER
       (PARTITION BY session_id ORDER BY seq) AS bad FROM ${p}events) x WHERE bad`,
  );
  assert.equal(stale.rows[0].n, 0, "no write under a stale epoch");
  const twice = await pool.query(
    `SELECT tool_call_id, count(*)::int AS n FROM ${p}exec GROUP BY 1 HAVING count(*) > 1`,
  );
  assert.deepEqual(twice.rows, [], "no non-idempotent tool executed twice");
  const ends = await pool.query(
    `SELECT count(DISTINCT session_id)::int AS n FROM ${p}events WHERE kind = 'turn_end'`,
  );
  if (ends.rows[0].n !== sessions) {
    const bad = await pool.query(
      `SELECT session_id, string_agg(kind || '@' || lease_epoch, ' ' ORDER BY seq) AS k
       FROM ${p}events GROUP BY 1 HAVING NOT bool_or(kind = 'turn_end') LIMIT 3`,
    );
    assert.fail(`sessions without turn_end: ${JSON.stringify(bad.rows)}`);
  }
}

test(
  "an approval answered in process B wakes the turn in process A; a tail in C sees every event once, in order",
  {
    skip,
  },
  async () => {
    const { store, pool, prefix, vars } = await env();
    const a = child({ ...vars, APPROVAL: "1", HOLD_MS: "60000", TTL_MS: "5000" });
    await store.create("s1");
    const c = child({ ...vars, MODE: "tail", SESSION: "s1" });
    await store.submit("s1", { kind: "user_input", payload: { text: "go" }, idemKey: "m1" });
    let toolCallId = "";
    await until(async () => {
      toolCallId = (await store.load("s1"))?.approvals[0]?.toolCallId ?? "";
      return toolCallId !== "";
    }, "the approval request");
    assert.equal((await store.load("s1"))?.status, "running", "A holds the lease");
    // This test process is B.
    assert.equal(
      await store.answerApproval("s1", { toolCallId, decision: { approve: true }, by: "B" }),
      "applied",
    );
    await until(async () => (await store.load("s1"))?.status === "done", "the turn to finish");
    const exec = await pool.query(`SELECT pid FROM ${prefix}exec`);
    assert.deepEqual(exec.rows.map((r) => r.pid), [a.proc.pid], "run once, in A");
    await c.exited;
    const seen = c.out.map((l) => JSON.parse(l) as { seq: number; kind: string });
    const turnEnd = (await store.read("s1", 0)).find((e) => e.kind === "turn_end")!;
    assert.deepEqual(seen.map((e) => e.seq), Array.from({ length: turnEnd.seq }, (_, i) => i + 1));
  },
);

test("an approval answered after A parked is resumed by another worker", { skip }, async () => {
  const { store, pool, prefix, vars } = await env();
  const a = child({ ...vars, APPROVAL: "1", HOLD_MS: "300", TTL_MS: "5000" });
  await store.create("s1");
  await store.submit("s1", { kind: "user_input", payload: { text: "go" }, idemKey: "m1" });
  await until(async () => (await store.load("s1"))?.status === "waiting_approval", "A to park");
  a.proc.kill("SIGKILL");
  await a.exited;
  const d = child({ ...vars, APPROVAL: "1", HOLD_MS: "300", TTL_MS: "5000" });
  const toolCallId = (await store.load("s1"))!.approvals[0].toolCallId;
  await store.answerApproval("s1", { toolCallId, decision: { approve: true } });
  await until(async () => (await store.load("s1"))?.status === "done", "the turn to finish");
  const exec = await pool.query(`SELECT pid FROM ${prefix}exec`);
  assert.deepEqual(exec.rows.map((r) => r.pid), [d.proc.pid]);
});

test("chaos: sessions finish across worker processes killed with kill -9", { skip }, async () => {
  const sessions = Number(process.env.STORE_CHAOS_SESSIONS ?? 1000); // the figure
  const { store, pool, prefix, vars } = await env();
  for (let i = 0; i < sessions; i++) {
    await store.create(`c${i}`);
    await store.submit(`c${i}`, { kind: "user_input", payload: { text: "go" }, idemKey: "m" });
  }
  const workers = Array.from({ length: 4 }, () => child({ ...vars, TTL_MS: "1000" }));
  let kills = 0;
  const done = async () => {
    const r = await pool.query(
      `SELECT count(*)::int AS n FROM ${prefix}sessions WHERE status = 'done'`,
    );
    return r.rows[0].n === sessions;
  };
  const end = Date.now() + 600_000;
  while (!(await done())) {
    assert.ok(Date.now() < end, "timed out");
    await wait(400);
    if (kills < 8) {
      const i = kills % workers.length;
      workers[i].proc.kill("SIGKILL");
      await workers[i].exited;
      workers[i] = child({ ...vars, TTL_MS: "1000" });
      kills++;
    }
  }
  assert.equal(kills, 8);
  await assertInvariants(pool, prefix, sessions);
});

test("six processes running setup() at once all succeed", { skip }, async () => {
  const url = "skip" in pg ? "" : pg.url;
  const prefix = uniquePrefix("m");
  const kids = Array.from(
    { length: 6 },
    () => child({ MODE: "setup", DATABASE_URL: url, PREFIX: prefix }),
  );
  const codes = await Promise.all(kids.map((k) => k.exited));
  assert.deepEqual(codes, [0, 0, 0, 0, 0, 0]);
  assert.ok(kids.every((k) => k.out.includes("ok")));
  const pool = await sql(url);
  const v = await pool.query(`SELECT array_agg(v) AS v FROM ${prefix}schema_version`);
  assert.deepEqual(v.rows[0].v, [1], "migrated once");
});

test("a tail keeps every event when its LISTEN connection is terminated", { skip }, async () => {
  const { store, pool } = await env();
  await store.create("s1");
  const lease = (await store.acquire("s1", { ownerId: "w", ttlMs: 60_000 }))!;
  const ac = new AbortController();
  const seen: number[] = [];
  const reading = (async () => {
    for await (const e of store.tail("s1", 0, { signal: ac.signal, pollMs: 300 })) {
      seen.push(e.seq);
      if (e.kind === "end") ac.abort();
    }
  })();
  await until(async () => (await store.listenerPid()) !== undefined, "the LISTEN connection");
  for (let i = 0; i < 20; i++) {
    if (i === 10) {
      const pid = await store.listenerPid();
      await pool.query("SELECT pg_terminate_backend($1)", [pid]);
    }
    await store.append(lease, [{ kind: "n", payload: { i } }]);
    await wait(10);
  }
  await store.append(lease, [{ kind: "end", payload: {} }]);
  await reading;
  assert.deepEqual(seen, Array.from({ length: 21 }, (_, i) => i + 1));
});

test("sessions finish when the server restarts under load", { skip }, async () => {
  if ("skip" in pg) return;
  const sessions = 40;
  const { store, pool, prefix, vars } = await env();
  for (let i = 0; i < sessions; i++) {
    await store.create(`r${i}`);
    await store.submit(`r${i}`, { kind: "user_input", payload: { text: "go" }, idemKey: "m" });
  }
  child({ ...vars, TTL_MS: "1500" });
  child({ ...vars, TTL_MS: "1500" });
  await until(async () => {
    const r = await pool.query(`SELECT count(*)::int AS n FROM ${prefix}exec`);
    return Number(r.rows[0].n) >= 5;
  }, "work to start");
  pg.restart();
  await until(
    async () => {
      try {
        const r = await pool.query(
          `SELECT count(*)::int AS n FROM ${prefix}sessions WHERE status = 'done'`,
        );
        return r.rows[0].n === sessions;
      } catch {
        return false;
      }
    },
    "every session to finish",
    60_000,
  ).catch(async (err) => {
    const r = await pool.query(
      `SELECT status, owner_id, count(*) FROM ${prefix}sessions GROUP BY 1, 2`,
    );
    throw new Error(`${err.message}: ${JSON.stringify(r.rows)}`);
  });
  await assertInvariants(pool, prefix, sessions);
});
