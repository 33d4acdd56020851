/**
 * A child process for the cross-process store tests (issue 11). `MODE` selects the role:
 * - `worker`: a SessionWorker on PostgreSQL whose `act` tool records each run in
 *   `<prefix>exec` (toolCallId, pid) before returning;
 * - `tail`: prints every event of session `SESSION` as a JSON line until `turn_end`;
 * - `setup`: runs `setup()` and prints `ok`.
 * Env: DATABASE_URL, PREFIX, MOCK_URL, WS, TTL_MS, APPROVAL (1 = `act` needs approval),
 * HOLD_MS, SESSION; ZQAGENT_TEST_PACKAGE_DIR selects the code under test (tests/_target.ts).
 *
 * @module
 */
import process from "node:process";
import { store as target } from "./_target.ts";
import { makeEngine } from "./_store_engine.ts";

const { PostgresSessionStore, SessionWorker } = target;

const env = process.env;
const prefix = env.PREFIX!;
const store = new PostgresSessionStore({
  connectionString: env.DATABASE_URL,
  tablePrefix: prefix,
  pollMs: 200,
  max: 4,
});
const mode = env.MODE ?? "worker";

if (mode === "setup") {
  await store.setup();
  console.log("ok");
  await store.close();
} else if (mode === "tail") {
  for await (const e of store.tail(env.SESSION!, 0, { pollMs: 500 })) {
    console.log(JSON.stringify({ seq: e.seq, kind: e.kind }));
    if (e.kind === "turn_end") break;
  }
  await store.close();
} else {
  const pg = (await import("pg")).default as unknown as {
    Pool: new (c: Record<string, unknown>) => {
      query(t: string, v?: unknown[]): Promise<unknown>;
      on(e: string, f: () => void): void;
    };
  };
  const side = new pg.Pool({ connectionString: env.DATABASE_URL, max: 2 });
  side.on("error", () => {});
  const worker = new SessionWorker(store, {
    ttlMs: Number(env.TTL_MS ?? 1000),
    pollMs: 50,
    maxConcurrent: 16,
    approvalHoldMs: Number(env.HOLD_MS ?? 30_000),
    approvalPollMs: 1000,
    onError: () => {},
    createEngine: ({ messages }) =>
      makeEngine({
        baseURL: env.MOCK_URL!,
        workspace: env.WS!,
        messages,
        approval: env.APPROVAL === "1",
        act: async (_args, ctx) => {
          await side.query(`INSERT INTO ${prefix}exec (tool_call_id, pid) VALUES ($1, $2)`, [
            ctx?.idempotencyKey,
            process.pid,
          ]);
          return "acted";
        },
      }),
  });
  worker.start();
  console.log("ready");
  const stop = async () => {
    await worker.stop({ graceMs: 0 });
    await store.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop());
}
