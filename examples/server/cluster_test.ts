// The reference server's multi-worker mode (issue 11) as real processes on one machine: a real
// PostgreSQL, two front ends and three workers started from main.ts, MockOpenAIServer as each
// tenant's model. A worker is killed (SIGKILL) while a tool runs; every session still completes,
// every client sees every event once and in order across a reconnect to the other front end,
// and no tool runs twice.
import { test } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { MockOpenAIServer, type RecordedRequest, type ScriptedTurn } from "../../testing/mod.ts";
import { PostgresSessionStore } from "../../store/mod.ts";
import { postgresForTests, uniquePrefix } from "../../tests/_postgres.ts";
import { ClusterFrontEnd, createClusterWorker, openClusterStore } from "./cluster.ts";
import { configFromEnv, type ServerConfig, type TenantConfig } from "./config.ts";
import { call, testConfig } from "./_test_util.ts";
import { sleeping } from "./_browser.ts";
import { cleanupsAfterEach, until } from "../../tests/_util.ts";
import { EVERYTHING_ENTRY, needReal } from "../../mcp/_test_util.ts";

const MAIN = fileURLToPath(new URL("./main.ts", import.meta.url));
const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const nodeFlags = process.execArgv.filter((a) => /^--(experimental|no-warnings)/.test(a));
const runtimeSkip = isDeno || nodeFlags.some((a) => a.includes("transform-types"))
  ? false
  : "the server is TypeScript: run with Deno or node --experimental-transform-types";
const pg = await postgresForTests(runtimeSkip);
const skip = "skip" in pg ? pg.skip : false;
const mcpSkip = needReal({ node: true, servers: true });

const cleanups = cleanupsAfterEach();

interface Proc {
  child: ChildProcess;
  out: () => string;
  exited: Promise<void>;
}

/** Starts main.ts; resolves once it printed `ready` or `listening on`. */
function startMain(env: Record<string, string>, args: string[] = []): Promise<Proc> {
  const argv = isDeno ? ["run", "-A", MAIN, ...args] : [...nodeFlags, MAIN, ...args];
  const child = spawn(process.execPath, argv, {
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  });
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      if (/listening on http|worker \S+ ready/.test(out)) {
        resolve({
          child,
          out: () => out,
          exited,
        });
      }
    });
    child.stderr!.on("data", (d) => {
      out += d;
      if (process.env.SERVER_TEST_DEBUG) process.stderr.write(d);
    });
    child.once("exit", (code) => reject(new Error(`main.ts exited ${code}: ${out}`)));
  });
}

/**
 * Each tenant's model: a request with a tool result gets the final answer; any other gets one
 * `run_shell` call that appends the session's tag to `ran.log` (one line per real run), then
 * sleeps so a worker can be killed while the tool runs. Works for Responses and Chat bodies.
 */
function script(req: RecordedRequest): ScriptedTurn {
  const items = (req.body?.input ?? req.body?.messages ?? []) as Record<string, unknown>[];
  const last = items.at(-1);
  const tag = /job-[a-z]+-\d+/.exec(JSON.stringify(items))?.[0] ?? "job-none-0";
  if (last?.role === "tool" || last?.type === "function_call_output") {
    return { text: ["done ", tag] };
  }
  return {
    toolCalls: [{ name: "run_shell", arguments: { command: `echo ${tag} >> ran.log; sleep 2` } }],
  };
}

interface Frame {
  id: number;
  type: string;
  data: Record<string, unknown>;
}

/**
 * GETs a session's event stream from `after` (as `Last-Event-ID`) and reads frames until
 * `onFrame` returns "stop" (then the client disconnects).
 */
async function readEvents(
  base: string,
  token: string,
  id: string,
  after: number,
  onFrame: (f: Frame) => unknown,
): Promise<void> {
  const ac = new AbortController();
  const res = await fetch(`${base}/sessions/${id}/events`, {
    headers: { authorization: `Bearer ${token}`, "last-event-id": String(after) },
    signal: ac.signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the event stream ended");
      buffer += value;
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const f: Frame = { id: 0, type: "", data: {} };
        for (const line of raw.split("\n")) {
          if (line.startsWith("id: ")) f.id = Number(line.slice(4));
          else if (line.startsWith("event: ")) f.type = line.slice(7);
          else if (line.startsWith("data: ")) f.data = JSON.parse(line.slice(6));
        }
        if (!f.type) continue;
        if (await onFrame(f) === "stop") return;
      }
    }
  } finally {
    ac.abort();
    await reader.cancel().catch(() => {});
  }
}

test(
  "two front ends and three workers complete every session when a worker is killed mid-turn",
  { skip },
  async () => {
    if ("skip" in pg) return;
    const dataDir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-cluster-")));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const models: Record<string, MockOpenAIServer> = {};
    const tenants = [];
    for (const t of ["acme", "globex"]) {
      models[t] = await new MockOpenAIServer({ turns: script }).start();
      cleanups.push(() => models[t].close());
      tenants.push({
        id: t,
        token: `token-of-${t}-0123456789`,
        apiKey: `key-of-${t}`,
        baseURL: models[t].baseURL,
      });
      fs.mkdirSync(path.join(dataDir, "tenants", t, "workspace"), { recursive: true });
    }
    const token = (t: string) => `token-of-${t}-0123456789`;
    fs.writeFileSync(path.join(dataDir, "tenants.json"), JSON.stringify(tenants));
    const env = {
      DATABASE_URL: pg.url,
      DATA_DIR: dataDir,
      TENANTS_FILE: path.join(dataDir, "tenants.json"),
      OPENAI_MODEL: "mock-model",
      VCS_MODE: "off",
      HOST: "127.0.0.1",
      PORT: "0",
      LEASE_TTL_MS: "1500",
      APPROVAL_HOLD_MS: "60000",
    };
    const fronts = await Promise.all([startMain(env), startMain(env)]);
    const urls = fronts.map((f) => /listening on (http:\/\/\S+)/.exec(f.out())![1]);
    const workers = new Map<string, Proc>();
    await Promise.all(["w1", "w2", "w3"].map(async (w) => {
      workers.set(w, await startMain({ ...env, WORKER_ID: w }, ["--worker"]));
    }));
    const store = new PostgresSessionStore({ connectionString: pg.url, pollMs: 200 });
    cleanups.push(() => store.close());

    // Six sessions of two tenants, created and fed through both front ends.
    const jobs: { tenant: string; id: string; tag: string; i: number }[] = [];
    for (let i = 0; i < 6; i++) {
      const tenant = i < 4 ? "acme" : "globex";
      const r = await call(`${urls[i % 2]}/sessions`, token(tenant), "POST", {});
      assert.equal(r.status, 201);
      jobs.push({ tenant, id: String(r.body.id), tag: `job-${tenant}-${i}`, i });
    }

    // Tenancy: another tenant's session is not found, on either front end.
    const acme0 = jobs[0].id;
    for (const u of urls) {
      assert.equal((await call(`${u}/sessions/${acme0}`, token("globex"), "GET")).status, 404);
      const peek = await fetch(`${u}/sessions/${acme0}/events`, {
        headers: { authorization: `Bearer ${token("globex")}` },
      });
      await peek.body?.cancel();
      assert.equal(peek.status, 404);
      const answer = await call(`${u}/sessions/${acme0}/approvals/x`, token("globex"), "POST", {
        outcome: "once",
      });
      assert.equal(answer.status, 404);
      const msg = await call(`${u}/sessions/${acme0}/messages`, token("globex"), "POST", {
        text: "hi",
      });
      assert.equal(msg.status, 404);
      assert.equal((await call(`${u}/sessions/${acme0}`, null, "GET")).status, 401);
    }
    const listed = await call(`${urls[1]}/sessions`, token("globex"), "GET");
    assert.deepEqual(
      (listed.body.sessions as { id: string }[]).map((s) => s.id).sort(),
      jobs.filter((j) => j.tenant === "globex").map((j) => j.id).sort(),
    );

    // Kill the worker whose tool has had its effect and still runs, once.
    let killed: { worker: string; session: string } | undefined;
    const killer = (async () => {
      await until(async () => {
        for (const j of jobs) {
          const events = await store.read(j.id, 0);
          const started = events.filter((e) => e.kind === "tool_started").length;
          const finished = events.filter((e) => e.kind === "tool_finished").length;
          let ran = "";
          try {
            ran = fs.readFileSync(
              path.join(dataDir, "tenants", j.tenant, "workspace", "ran.log"),
              "utf8",
            );
          } catch {
            // not yet
          }
          // The tool has run its side effect and is still going (its `sleep`).
          if (started > finished && ran.includes(j.tag)) {
            const owner = (await store.load(j.id))?.lease?.ownerId;
            const w = owner ? workers.get(owner) : undefined;
            if (!w) continue;
            w.child.kill("SIGKILL");
            await w.exited;
            killed = { worker: owner!, session: j.id };
            return true;
          }
        }
        return false;
      }, "a tool to start");
    })();

    // A client per session: events from seq 0 on one front end, the message through the other,
    // approvals answered through both at once (the first answer wins), and after a few events a
    // reconnect to the other front end with Last-Event-ID.
    const seen = new Map<string, Frame[]>();
    const answers = new Map<string, number[]>();
    const client = async (j: typeof jobs[number]) => {
      const frames: Frame[] = [];
      seen.set(j.id, frames);
      let ended = false;
      let round = 0;
      let submitted = false;
      while (!ended) {
        const base = urls[(j.i + round) % 2];
        const after = frames.at(-1)?.id ?? 0;
        let inRound = 0;
        const reading = readEvents(base, token(j.tenant), j.id, after, async (f) => {
          frames.push(f);
          inRound++;
          if (f.type === "approval.requested") {
            const reqId = String(f.data.toolCallId);
            const statuses = await Promise.all(
              urls.map((u) =>
                call(`${u}/sessions/${j.id}/approvals/${reqId}`, token(j.tenant), "POST", {
                  outcome: "once",
                }).then((r) => r.status)
              ),
            );
            answers.set(`${j.id}/${reqId}`, statuses.sort());
          }
          if (f.type === "turn_end") {
            ended = true;
            return "stop";
          }
          if (round === 0 && inRound === 3) return "stop"; // reconnect elsewhere
        });
        if (!submitted) {
          submitted = true;
          const r = await call(
            `${urls[(j.i + 1) % 2]}/sessions/${j.id}/messages`,
            token(j.tenant),
            "POST",
            {
              text: `Please run ${j.tag}`,
            },
          );
          assert.equal(r.status, 202);
          assert.equal(r.body.status, "queued");
        }
        await reading;
        round++;
      }
      return round;
    };
    const rounds = await Promise.all(jobs.map(client));
    await killer;
    assert.ok(killed, "a worker was killed while a tool ran");
    assert.ok(rounds.every((r) => r >= 2), "every client reconnected to the other front end");

    for (const j of jobs) {
      // The worker releases the session as done right after its turn_end.
      await until(async () => (await store.load(j.id))?.status === "done", `${j.id} to be done`);
      const stored = await store.read(j.id, 0);
      const frames = seen.get(j.id)!;
      // Every event once, in order, exactly as stored (up to the turn's end).
      assert.deepEqual(frames.map((f) => f.id), frames.map((_, k) => k + 1), `${j.id} ids`);
      assert.deepEqual(
        frames.map((f) => f.type),
        stored.slice(0, frames.length).map((e) => e.kind),
        `${j.id} kinds`,
      );
      // The client read up to the turn's end (the store may hold bookkeeping after it).
      assert.equal(stored.findIndex((e) => e.kind === "turn_end"), frames.length - 1);
      assert.match(String(frames.at(-1)!.data.status), /completed/);
    }
    // First answer wins: one front end applied each approval, the other got 409.
    assert.equal(answers.size, jobs.length);
    for (const s of answers.values()) assert.deepEqual(s, [200, 409]);
    // No tool ran twice: each tag at most once in its tenant's ran.log; exactly once where the
    // tool finished, and for the session whose worker was killed after the tool's effect. (Tools
    // another session of the killed worker had started but not yet run stay unrun.)
    const runs = new Map<string, number>();
    for (const t of ["acme", "globex"]) {
      const log = path.join(dataDir, "tenants", t, "workspace", "ran.log");
      for (const line of fs.readFileSync(log, "utf8").split("\n").filter(Boolean)) {
        runs.set(line, (runs.get(line) ?? 0) + 1);
      }
    }
    for (const j of jobs) {
      // A tool that ran to its end (a call a dead worker left is recorded as `recovered`).
      const finished = (await store.read(j.id, 0)).some((e) =>
        e.kind === "tool_finished" && !e.payload.recovered
      );
      const n = runs.get(j.tag) ?? 0;
      assert.ok(n <= 1, `${j.tag} ran ${n} times`);
      if (finished || j.id === killed!.session) assert.equal(n, 1, `${j.tag} ran once`);
    }
    // The killed session was taken over by another worker, and its tool was not re-run.
    const victim = await store.read(killed!.session, 0);
    assert.ok(new Set(victim.map((e) => e.epoch)).size >= 2, "the session changed owner");
    const tenantOf = jobs.find((j) => j.id === killed!.session)!.tenant;
    assert.ok(
      models[tenantOf].requests.some((r) => /Interrupted, not re-run/.test(JSON.stringify(r.body))),
      "the model was told the tool was interrupted",
    );
    // Graceful stops of what is still running.
    for (const p of [...fronts, ...workers.values()]) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        const closed = new Promise((r) => p.child.once("close", r));
        p.child.kill("SIGTERM");
        await closed;
      }
    }
  },
);

test("the multi-worker settings come from the environment and are checked", () => {
  const c = configFromEnv({
    OPENAI_MODEL: "m",
    SERVER_TOKEN: "a-long-enough-token",
    DATABASE_URL: "postgres://u@db/agent",
    DATABASE_TABLE_PREFIX: "zq_",
    WORKER_ID: "w7",
    WORKER_CONCURRENCY: "3",
    LEASE_TTL_MS: "5000",
    APPROVAL_HOLD_MS: "9000",
  });
  assert.deepEqual(
    [c.databaseUrl, c.tablePrefix, c.workerId, c.workerConcurrency, c.leaseTtlMs, c.approvalHoldMs],
    ["postgres://u@db/agent", "zq_", "w7", 3, 5000, 9000],
  );
  assert.equal(
    configFromEnv({ OPENAI_MODEL: "m", SERVER_TOKEN: "x".repeat(20) }).databaseUrl,
    undefined,
  );
  assert.throws(
    () => configFromEnv({ OPENAI_MODEL: "m", SERVER_TOKEN: "x".repeat(20), LEASE_TTL_MS: "soon" }),
    /LEASE_TTL_MS="soon" is not a positive integer/,
  );
});

test("a worker does not start without DATABASE_URL", { skip: runtimeSkip }, async () => {
  const env = { ...process.env, OPENAI_MODEL: "m", SERVER_TOKEN: "x".repeat(20) } as Record<
    string,
    string
  >;
  delete env.DATABASE_URL;
  const argv = isDeno ? ["run", "-A", MAIN, "--worker"] : [...nodeFlags, MAIN, "--worker"];
  const child = spawn(process.execPath, argv, { env, stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const code = await new Promise((r) => child.on("exit", r));
  assert.equal(code, 2);
  assert.match(err, /Cannot start a worker: set DATABASE_URL/);
});

test(
  "a front end checks its input and treats a retried message as a duplicate",
  { skip },
  async () => {
    if ("skip" in pg) return;
    const tenants = [
      { id: "acme", token: "token-of-acme-0123456789" },
      { id: "globex", token: "token-of-globex-0123456789" },
    ];
    const config = {
      ...testConfig("/nonexistent", tenants),
      databaseUrl: pg.url,
      tablePrefix: uniquePrefix("f"),
    };
    const cluster = await openClusterStore(config);
    cleanups.push(() => cluster.close());
    const front = new ClusterFrontEnd({
      ...config,
      store: cluster.store,
      listSessions: cluster.listSessions,
    });
    const url = await front.listen();
    cleanups.push(() => front.close());
    const acme = tenants[0].token;
    const id = String((await call(`${url}/sessions`, acme, "POST", {})).body.id);
    const send = (key: string, text = "hi") =>
      fetch(`${url}/sessions/${id}/messages`, {
        method: "POST",
        headers: { authorization: `Bearer ${acme}`, "idempotency-key": key },
        body: JSON.stringify({ text }),
      }).then(async (r) => ({ status: r.status, body: await r.json() }));
    assert.deepEqual(await send("k1"), { status: 202, body: { status: "queued" } });
    assert.deepEqual(await send("k1"), { status: 202, body: { status: "duplicate" } });
    assert.equal((await send("bad key")).status, 400);
    assert.equal((await send("k2", " ")).status, 400);
    const state = await call(`${url}/sessions/${id}`, acme, "GET");
    assert.equal(state.body.status, "runnable");
    assert.deepEqual(state.body.pendingApprovals, []);
    const bad = await fetch(`${url}/sessions/${id}/events`, {
      headers: { authorization: `Bearer ${acme}`, "last-event-id": "-1" },
    });
    await bad.body?.cancel();
    assert.equal(bad.status, 400);
    const approval = (outcome: string) =>
      call(`${url}/sessions/${id}/approvals/call_x`, acme, "POST", { outcome });
    // Nothing to retry: the session has not run a turn.
    const retry = await call(`${url}/sessions/${id}/retry`, acme, "POST", {});
    assert.equal(retry.status, 409);
    assert.match(String(retry.body.error), /nothing to retry/);
    assert.equal((await approval("maybe")).status, 400);
    assert.equal((await approval("once")).status, 404);
    assert.equal((await call(`${url}/sessions/s-0000000000000000`, acme, "GET")).status, 404);
    assert.deepEqual((await call(`${url}/sessions`, tenants[1].token, "GET")).body, {
      sessions: [],
    });
    assert.deepEqual(
      (await call(`${url}/sessions`, acme, "GET")).body,
      { sessions: [{ id, status: "runnable", running: false }] },
    );
  },
);

test(
  "POST /interrupt stops a running turn on whichever worker runs it and kills its command",
  { skip },
  async () => {
    if ("skip" in pg) return;
    const dataDir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-cluster-")));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    // A unique sleep length names the command's process, so the test can see it die.
    const nap = `${30 + Math.floor(Math.random() * 1000) / 1000}`;
    const model = await new MockOpenAIServer({
      turns: (req) => {
        const items = (req.body?.input ?? req.body?.messages ?? []) as Record<string, unknown>[];
        const last = items.at(-1);
        if (last?.role === "tool" || last?.type === "function_call_output") {
          return { text: ["done"] };
        }
        return {
          toolCalls: [{
            name: "run_shell",
            arguments: { command: `sleep ${nap} && echo late > late.txt` },
          }],
        };
      },
    }).start();
    cleanups.push(() => model.close());
    const tenants = [{
      id: "acme",
      token: "token-of-acme-0123456789",
      apiKey: "key-of-acme",
      baseURL: model.baseURL,
    }];
    const ws = path.join(dataDir, "tenants", "acme", "workspace");
    fs.mkdirSync(ws, { recursive: true });
    const config = {
      ...testConfig(dataDir, tenants),
      databaseUrl: pg.url,
      tablePrefix: uniquePrefix("i"),
    };
    const cluster = await openClusterStore(config);
    cleanups.push(() => cluster.close());
    const front = new ClusterFrontEnd({ ...config, store: cluster.store });
    const url = await front.listen();
    cleanups.push(() => front.close());
    const worker = createClusterWorker(config, cluster.store, { pollMs: 50, onError: () => {} });
    worker.start();
    cleanups.push(() => worker.stop({ graceMs: 1000 }));
    const acme = tenants[0].token;
    const id = String((await call(`${url}/sessions`, acme, "POST", {})).body.id);
    assert.equal(
      (await call(`${url}/sessions/${id}/messages`, acme, "POST", { text: "go" })).status,
      202,
    );

    const seen: Frame[] = [];
    const answered = new Set<string>();
    let interrupted = false;
    const reading = readEvents(url, acme, id, 0, async (f) => {
      seen.push(f);
      // A turn resumed by a worker (a lease that lapsed on a loaded machine) asks again for a
      // call already answered: that second answer gets 409, the first one counts.
      if (f.type === "permission_required" && !answered.has(String(f.data.reqId))) {
        answered.add(String(f.data.reqId));
        const r = await call(`${url}/sessions/${id}/approvals/${f.data.reqId}`, acme, "POST", {
          outcome: "once",
        });
        assert.equal(r.status, 200);
      }
      if (f.type === "tool_started" && !interrupted) {
        interrupted = true;
        await until(() => sleeping(nap), "the command to start");
        const r = await fetch(`${url}/sessions/${id}/interrupt`, {
          method: "POST",
          headers: { authorization: `Bearer ${acme}`, "idempotency-key": "stop-1" },
        });
        assert.deepEqual([r.status, await r.json()], [202, { status: "queued" }]);
      }
      if (f.type === "turn_end") return "stop";
    });
    await reading;
    const types = seen.map((f) => f.type);
    assert.ok(types.includes("interrupted"), types.join(","));
    assert.equal(seen.at(-1)?.data.status, "interrupted");
    assert.equal(seen.find((f) => f.type === "tool_finished")?.data.status, "interrupted");
    await until(() => !sleeping(nap), "the command's process to be killed", 10_000);
    await until(
      async () => (await call(`${url}/sessions/${id}`, acme, "GET")).body.status === "done",
      "the session to be done",
    );
    assert.equal(fs.existsSync(path.join(ws, "late.txt")), false);
    // A retried interrupt is a duplicate; another tenant cannot interrupt the session.
    const again = await fetch(`${url}/sessions/${id}/interrupt`, {
      method: "POST",
      headers: { authorization: `Bearer ${acme}`, "idempotency-key": "stop-1" },
    });
    assert.deepEqual(await again.json(), { status: "duplicate" });
    const other = await call(`${url}/sessions/${id}/interrupt`, "token-of-none-0123456789", "POST");
    assert.equal(other.status, 401);
  },
);

// --- per-turn snapshots and per-tenant MCP servers on workers ---

/**
 * A model script: `calls(req, body, answered)` gives the next step (`body` is the request's
 * history as JSON; `answered` is true when it ends with a tool result), or `null` for "done".
 */
function scripted(
  calls: (req: RecordedRequest, body: string, answered: boolean) => ScriptedTurn | null,
): (req: RecordedRequest) => ScriptedTurn {
  return (req) => {
    const items = (req.body?.input ?? req.body?.messages ?? []) as Record<string, unknown>[];
    const last = items.at(-1);
    const answered = last?.role === "tool" || last?.type === "function_call_output";
    return calls(req, JSON.stringify(items), answered) ?? { text: ["done"] };
  };
}

/** `write_file` of `Please write <name>.txt` (the last such request), content `<name>.txt\n`. */
const writeRequested = scripted((_req, body, answered) => {
  const file = [...body.matchAll(/Please write ([a-z]+\.txt)/g)].at(-1)?.[1];
  return file && !answered
    ? { toolCalls: [{ name: "write_file", arguments: { path: file, content: `${file}\n` } }] }
    : null;
});

/**
 * Sends `text` through the front end and reads the session's events until the turn ends,
 * answering each approval "once" unless `approve` says not to (then it stays pending).
 */
async function runTurn(
  url: string,
  token: string,
  id: string,
  text: string,
  approve: (f: Frame) => boolean = () => true,
): Promise<Frame[]> {
  const after = Number((await call(`${url}/sessions/${id}`, token, "GET")).body.lastSeq ?? 0);
  const sent = await call(`${url}/sessions/${id}/messages`, token, "POST", { text });
  assert.equal(sent.status, 202);
  const frames: Frame[] = [];
  await readEvents(url, token, id, after, async (f) => {
    frames.push(f);
    if (f.type === "permission_required" && approve(f)) {
      const r = await call(`${url}/sessions/${id}/approvals/${f.data.reqId}`, token, "POST", {
        outcome: "once",
      });
      assert.equal(r.status, 200);
    }
    if (f.type === "turn_end") return "stop";
  });
  return frames;
}

/** A real PostgreSQL store with a front end, for the tests below (workers are added by each). */
async function clusterSetup(
  tenants: { id: string; script: (req: RecordedRequest) => ScriptedTurn }[],
  extra: Partial<ServerConfig> = {},
) {
  if ("skip" in pg) throw new Error(pg.skip);
  const dataDir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-cluster-")));
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const models: Record<string, MockOpenAIServer> = {};
  const list: TenantConfig[] = [];
  for (const t of tenants) {
    models[t.id] = await new MockOpenAIServer({ turns: t.script }).start();
    cleanups.push(() => models[t.id].close());
    list.push({
      id: t.id,
      token: `token-of-${t.id}-0123456789`,
      apiKey: `key-of-${t.id}`,
      baseURL: models[t.id].baseURL,
    });
  }
  const config = {
    ...testConfig(dataDir, list, extra),
    databaseUrl: pg.url,
    tablePrefix: uniquePrefix("v"),
  };
  const cluster = await openClusterStore(config, { pollMs: 200 });
  cleanups.push(() => cluster.close());
  const front = new ClusterFrontEnd({ ...config, store: cluster.store });
  const url = await front.listen();
  cleanups.push(() => front.close());
  const errors: string[] = [];
  const worker = (id: string) => {
    const w = createClusterWorker({ ...config, workerId: id }, cluster.store, {
      pollMs: 50,
      onError: (err, session) => errors.push(`${id}: ${session}: ${(err as Error).message}`),
    });
    w.start();
    cleanups.push(() => w.stop({ graceMs: 1000 }));
    return w;
  };
  const token = (t: string) => `token-of-${t}-0123456789`;
  const session = async (t: string) =>
    String((await call(`${url}/sessions`, token(t), "POST", {})).body.id);
  const turns = async (t: string, id: string) =>
    (await call(`${url}/sessions/${id}/turns`, token(t), "GET")).body as {
      enabled: boolean;
      turns: { turn: number; status: string; time: number; files: { path: string }[] }[];
    };
  return { dataDir, config, cluster, url, models, worker, token, session, turns, errors };
}

test(
  "each turn is snapshotted by whichever worker runs it, numbered on across workers",
  { skip },
  async () => {
    const c = await clusterSetup([{ id: "acme", script: writeRequested }, {
      id: "globex",
      script: writeRequested,
    }], { vcsMode: "auto" });
    const acme = c.token("acme");
    const id = await c.session("acme");
    // Before any turn: snapshots are on, nothing recorded, nothing created in the workspace.
    assert.deepEqual(await c.turns("acme", id), { enabled: true, turns: [] });
    const ws = path.join(c.dataDir, "tenants", "acme", "workspace");

    // 1. Worker w1 runs the first turn.
    const w1 = c.worker("w1");
    await runTurn(c.url, acme, id, "Please write one.txt");
    await until(async () => (await c.turns("acme", id)).turns.length === 1, "turn 1's snapshot");
    const [first] = (await c.turns("acme", id)).turns;
    assert.deepEqual(
      { ...first, time: typeof first.time },
      {
        turn: 1,
        status: "completed",
        time: "number",
        files: [{ path: "one.txt", change: "added" }],
      },
    );
    const diff = await call(`${c.url}/sessions/${id}/turns/1/diff`, acme, "GET");
    assert.equal(diff.status, 200);
    assert.equal(diff.body.turn, 1);
    assert.match(String(diff.body.patch), /\+\+\+ b\/one\.txt\n@@ -0,0 \+1 @@\n\+one\.txt/);
    for (const bad of ["2", "0", "x"]) {
      assert.equal(
        (await call(`${c.url}/sessions/${id}/turns/${bad}/diff`, acme, "GET")).status,
        404,
      );
    }
    // Another tenant's session: not found, like a missing one.
    const globex = c.token("globex");
    assert.equal((await call(`${c.url}/sessions/${id}/turns`, globex, "GET")).status, 404);
    assert.equal((await call(`${c.url}/sessions/${id}/turns/1/diff`, globex, "GET")).status, 404);
    // The second turn, on w1 too, is waited for in git, not through this process's front end
    // (it reads the refs afresh, and shares this process's memory of them with the workers).
    await runTurn(c.url, acme, id, "Please write two.txt");
    const shadow = path.join(ws, ".agent", "vcs");
    await until(() => hasRef(shadow, `refs/agent/${id}/turns/2`), "turn 2's snapshot");
    await until(async () => (await c.cluster.store.load(id))?.status === "done", "release");
    await w1.stop();

    // 2. A worker in another process (main.ts --worker) runs the third turn.
    fs.writeFileSync(path.join(c.dataDir, "tenants.json"), JSON.stringify(c.config.tenants));
    const other = await startMain({
      DATABASE_URL: c.config.databaseUrl,
      DATABASE_TABLE_PREFIX: c.config.tablePrefix,
      DATA_DIR: c.dataDir,
      TENANTS_FILE: path.join(c.dataDir, "tenants.json"),
      OPENAI_MODEL: "mock-model",
      VCS_MODE: "auto",
      WORKER_ID: "w2",
    }, ["--worker"]);
    await runTurn(c.url, acme, id, "Please write three.txt");
    await until(() => hasRef(shadow, `refs/agent/${id}/turns/3`), "turn 3's snapshot");
    await until(async () => (await c.cluster.store.load(id))?.status === "done", "release");
    const closed = new Promise((r) => other.child.once("close", r));
    other.child.kill("SIGTERM");
    await closed;

    // 3. A new worker in this process, which remembers the session as w1 left it (two turns),
    // runs the fourth: its number and "before" state come from git, not from that memory.
    c.worker("w3");
    await runTurn(c.url, acme, id, "Please write four.txt");
    await until(
      async () => c.errors.length > 0 || (await c.turns("acme", id)).turns.length >= 4,
      "turn 4's snapshot",
    );
    assert.deepEqual(c.errors, []);
    const all = (await c.turns("acme", id)).turns;
    assert.deepEqual(all.map((t) => [t.turn, t.files.map((f) => f.path)]), [
      [1, ["one.txt"]],
      [2, ["two.txt"]],
      [3, ["three.txt"]],
      [4, ["four.txt"]],
    ]);
    const fourth = await call(`${c.url}/sessions/${id}/turns/4/diff`, acme, "GET");
    assert.match(String(fourth.body.patch), /\+\+\+ b\/four\.txt/);
    assert.doesNotMatch(String(fourth.body.patch), /three\.txt/);
    // Three owners ran the session's turns.
    const owners = new Set((await c.cluster.store.read(id, 0)).map((e) => e.epoch));
    assert.ok(owners.size >= 3, `epochs ${[...owners]}`);
    assert.ok(fs.existsSync(path.join(ws, ".agent", "vcs")), "a shadow repository");
    assert.deepEqual(c.errors, []);
  },
);

test(
  "a turn parked for an approval and finished by another worker keeps all its changes",
  { skip },
  async () => {
    // One turn, two writes: a.txt approved at once, b.txt only after the session parked.
    const script = scripted((_req, body) => {
      if (!/Please write both/.test(body)) return null;
      const results = (body.match(/"(tool|function_call_output)"/g) ?? []).length;
      if (results === 0) {
        return {
          toolCalls: [{
            id: "wa",
            name: "write_file",
            arguments: { path: "a.txt", content: "a\n" },
          }],
        };
      }
      if (results === 1) {
        return {
          toolCalls: [{
            id: "wb",
            name: "write_file",
            arguments: { path: "b.txt", content: "b\n" },
          }],
        };
      }
      return null;
    });
    const c = await clusterSetup([{ id: "acme", script }], {
      vcsMode: "auto",
      approvalHoldMs: 300,
    });
    const acme = c.token("acme");
    const id = await c.session("acme");
    const w1 = c.worker("w1");
    const sent = await call(`${c.url}/sessions/${id}/messages`, acme, "POST", {
      text: "Please write both",
    });
    assert.equal(sent.status, 202);
    const reading = readEvents(c.url, acme, id, 0, async (f) => {
      if (f.type === "permission_required" && f.data.reqId === "wa") {
        await call(`${c.url}/sessions/${id}/approvals/wa`, acme, "POST", { outcome: "once" });
      }
      if (f.type === "parked") return "stop";
    });
    await reading;
    // Parked on `wb` (on a loaded machine it may first park on `wa`, whose answer then makes it
    // runnable again).
    await until(async () => {
      const s = await c.cluster.store.load(id);
      return s?.status === "waiting_approval" &&
        s.approvals.some((a) => a.toolCallId === "wb" && a.status === "pending");
    }, "the session to park on wb");
    await w1.stop();
    c.worker("w2");
    const r = await call(`${c.url}/sessions/${id}/approvals/wb`, acme, "POST", { outcome: "once" });
    assert.equal(r.status, 200);
    await until(async () => (await c.turns("acme", id)).turns.length > 0, "the turn's snapshot");
    await until(async () => (await c.cluster.store.load(id))?.status === "done", "release");
    const { turns } = await c.turns("acme", id);
    assert.deepEqual(turns.map((t) => [t.turn, t.status, t.files.map((f) => f.path)]), [
      [1, "completed", ["a.txt", "b.txt"]],
    ]);
    assert.deepEqual(c.errors, []);
  },
);

/** Whether the repository at `gitDir` has `ref`. */
function hasRef(gitDir: string, ref: string): boolean {
  try {
    execFileSync("git", ["--git-dir", gitDir, "rev-parse", "-q", "--verify", ref]);
    return true;
  } catch {
    return false;
  }
}

/** Processes below this one whose command line contains `part` (Linux: /proc). */
function descendants(part: string): number[] {
  const parent = new Map<number, number>();
  const cmd = new Map<number, string>();
  for (const p of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, "utf8");
      parent.set(Number(p), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
      cmd.set(Number(p), fs.readFileSync(`/proc/${p}/cmdline`, "utf8"));
    } catch {
      // gone
    }
  }
  const mine = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) {
      if (p === process.pid) return true;
    }
    return false;
  };
  return [...cmd].filter(([pid, c]) => c.includes(part) && mine(pid)).map(([pid]) => pid);
}

test(
  "a tenant's MCP servers give tools to its sessions only, one set per worker, closed on stop",
  { skip: skip || mcpSkip },
  async () => {
    // The model calls the echo tool when it is offered one, and answers otherwise.
    const script = scripted((req, _body, answered) => {
      const tools = JSON.stringify(req.body?.tools ?? []);
      return !answered && tools.includes("mcp__everything__echo")
        ? { toolCalls: [{ name: "mcp__everything__echo", arguments: { message: "hi" } }] }
        : null;
    });
    const c = await clusterSetup([{ id: "acme", script }, { id: "globex", script }]);
    fs.mkdirSync(path.join(c.dataDir, "tenants", "acme"), { recursive: true });
    fs.writeFileSync(
      path.join(c.dataDir, "tenants", "acme", "mcp.json"),
      JSON.stringify({
        mcpServers: { everything: { command: "node", args: [EVERYTHING_ENTRY, "stdio"] } },
      }),
    );
    const w = c.worker("w1");
    const acme = c.token("acme");
    const globex = c.token("globex");
    for (const text of ["Echo something", "Echo again"]) {
      const id = await c.session("acme");
      const frames = await runTurn(c.url, acme, id, text);
      const asked = frames.find((f) => f.type === "permission_required");
      assert.equal(asked?.data.name, "mcp__everything__echo", "the call needs approval");
      const done = frames.find((f) => f.type === "tool_finished");
      assert.deepEqual([done?.data.status, done?.data.result_preview], ["ok", "Echo: hi"]);
      assert.equal(frames.at(-1)?.data.status, "completed");
    }
    // Two sessions of the tenant, one server process on the worker (waited for: on a loaded
    // machine a connect that timed out may still be shutting its process down).
    await until(() => descendants(EVERYTHING_ENTRY).length === 1, "one MCP server process");
    // The other tenant's model is offered no MCP tool, and no server runs for it.
    const other = await c.session("globex");
    const frames = await runTurn(c.url, globex, other, "Echo something");
    assert.equal(frames.some((f) => f.type.startsWith("tool_")), false);
    assert.equal(c.models.globex.requests.length, 1);
    assert.doesNotMatch(JSON.stringify(c.models.globex.requests[0].body?.tools ?? []), /mcp__/);
    assert.match(
      JSON.stringify(c.models.acme.requests[0].body?.tools ?? []),
      /mcp__everything__echo/,
    );
    await until(() => descendants(EVERYTHING_ENTRY).length === 1, "still one MCP server process");
    await w.stop();
    await until(() => descendants(EVERYTHING_ENTRY).length === 0, "the MCP server to close");
    assert.deepEqual(c.errors, []);
  },
);
