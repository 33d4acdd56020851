// The reference server (manual §18.1, §18.4) over real HTTP and SSE, with each tenant's model
// behind its own local MockOpenAIServer (the real openai SDK talks to it).
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { FileLogHook } from "../../mod.ts";
import { call, type Frame, sse, startTestServer, type TestServer, until } from "./_test_util.ts";
import { configFromEnv } from "./config.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function start(...args: Parameters<typeof startTestServer>): Promise<TestServer> {
  const s = await startTestServer(...args);
  cleanups.push(() => s.close());
  return s;
}

async function newSession(s: TestServer, tenant: string): Promise<string> {
  const r = await call(`${s.url}/sessions`, s.tenants[tenant].token, "POST", {});
  assert.equal(r.status, 201);
  return String(r.body.id);
}

const types = (frames: Frame[]) => frames.map((f) => f.type);
const writeTurn = (id: string, file: string, content: string) => ({
  toolCalls: [{ id, name: "write_file", arguments: { path: file, content } }],
});

test("two tenants run turns in parallel and never see each other's files, sessions or model", async () => {
  const s = await start({
    acme: [writeTurn("a1", "acme.txt", "A"), { text: "acme done" }],
    beta: [writeTurn("b1", "beta.txt", "B"), { text: "beta done" }],
  });
  const a = await newSession(s, "acme");
  const b = await newSession(s, "beta");
  const approve = (tenant: string, id: string) => async (f: Frame) => {
    if (f.type === "permission_required") {
      const r = await call(
        `${s.url}/sessions/${id}/approvals/${f.data.reqId}`,
        s.tenants[tenant].token,
        "POST",
        { outcome: "once" },
      );
      assert.equal(r.status, 200);
    }
  };
  const [ra, rb] = await Promise.all([
    sse(
      `${s.url}/sessions/${a}/messages`,
      s.tenants.acme.token,
      { text: "write" },
      approve("acme", a),
    ),
    sse(
      `${s.url}/sessions/${b}/messages`,
      s.tenants.beta.token,
      { text: "write" },
      approve("beta", b),
    ),
  ]);
  assert.equal(ra.frames.at(-1)?.data.status, "completed");
  assert.equal(rb.frames.at(-1)?.data.status, "completed");
  assert.ok(
    ra.frames.some((f) => f.type === "assistant_delta" && /acme/.test(String(f.data.text))),
  );
  assert.ok(!ra.frames.some((f) => /beta/.test(JSON.stringify(f.data))));
  // Files: each tenant's workspace holds only its own.
  assert.deepEqual(fs.readdirSync(s.workspace("acme")).filter((f) => !f.startsWith(".")), [
    "acme.txt",
  ]);
  assert.deepEqual(fs.readdirSync(s.workspace("beta")).filter((f) => !f.startsWith(".")), [
    "beta.txt",
  ]);
  // Models: each tenant's requests went to its own provider with its own key.
  assert.ok(s.models.acme.requests.every((r) => r.headers.authorization === "Bearer key-of-acme"));
  assert.ok(s.models.beta.requests.every((r) => r.headers.authorization === "Bearer key-of-beta"));
  assert.equal(s.models.acme.requests.length, 2);
  const offered = JSON.stringify(s.models.acme.requests[0].body?.tools);
  assert.match(offered, /write_file/);
  assert.doesNotMatch(offered, /ask_user|propose_plan|request_directory/);
  // Sessions: each tenant lists only its own, and cannot open the other's.
  const list = await call(`${s.url}/sessions`, s.tenants.acme.token, "GET");
  assert.deepEqual((list.body.sessions as { id: string }[]).map((x) => x.id), [a]);
  assert.equal((await call(`${s.url}/sessions/${a}`, s.tenants.beta.token, "GET")).status, 404);
  // State: one stateDir per session, inside the tenant's folder.
  assert.ok(fs.existsSync(path.join(s.dataDir, "tenants", "acme", "sessions", a, "state")));
  assert.ok(!fs.existsSync(path.join(s.dataDir, "tenants", "beta", "sessions", a)));
});

test("an approval answered over HTTP decides the tool call", async () => {
  const s = await start({ acme: [writeTurn("w1", "no.txt", "x"), { text: "ok" }] });
  const id = await newSession(s, "acme");
  const token = s.tenants.acme.token;
  let card: Record<string, unknown> | undefined;
  const r = await sse(`${s.url}/sessions/${id}/messages`, token, { text: "go" }, async (f) => {
    if (f.type !== "permission_required") return;
    card = f.data;
    // While pending, the session shows it (a reloaded page redraws the card).
    const state = await call(`${s.url}/sessions/${id}`, token, "GET");
    assert.deepEqual(
      (state.body.pendingApprovals as { reqId: string }[]).map((p) => p.reqId),
      ["w1"],
    );
    assert.equal(
      (await call(`${s.url}/sessions/${id}/approvals/w1`, token, "POST", { outcome: "maybe" }))
        .status,
      400,
    );
    assert.equal(
      (await call(`${s.url}/sessions/${id}/approvals/nope`, token, "POST", { outcome: "deny" }))
        .status,
      404,
    );
    await call(`${s.url}/sessions/${id}/approvals/w1`, token, "POST", { outcome: "deny" });
  });
  assert.equal(card?.name, "write_file");
  assert.ok(Array.isArray(card?.fields), "the frame carries the card's rows");
  const finished = r.frames.find((f) => f.type === "tool_finished");
  assert.equal(finished?.data.status, "denied");
  assert.equal(fs.existsSync(path.join(s.workspace("acme"), "no.txt")), false);
  assert.equal(r.frames.at(-1)?.data.status, "completed");
});

test("an approval nobody answers is denied when it times out", async () => {
  const s = await start({ acme: [writeTurn("w1", "late.txt", "x"), { text: "ok" }] }, {
    approvalTimeoutMs: 30,
  });
  const id = await newSession(s, "acme");
  const r = await sse(`${s.url}/sessions/${id}/messages`, s.tenants.acme.token, { text: "go" });
  assert.equal(r.frames.find((f) => f.type === "tool_finished")?.data.status, "denied");
  assert.equal(fs.existsSync(path.join(s.workspace("acme"), "late.txt")), false);
});

test("a client disconnect interrupts the turn and aborts the model request", async () => {
  const s = await start({ acme: [{ stallForever: true }] });
  const id = await newSession(s, "acme");
  const token = s.tenants.acme.token;
  await sse(
    `${s.url}/sessions/${id}/messages`,
    token,
    { text: "think forever" },
    (f) => f.type === "llm_request" ? "stop" : undefined,
  );
  await s.models.acme.waitForClientClose(0);
  await until(async () =>
    (await call(`${s.url}/sessions/${id}`, token, "GET")).body.running === false
  );
  const logged = FileLogHook.readEvents(
    id,
    path.join(s.dataDir, "tenants", "acme", "sessions", id, "state"),
  );
  assert.equal(logged.at(-1)?.type, "turn_end");
  assert.equal(logged.at(-1)?.data.status, "interrupted");
});

test("a client disconnect while an approval is pending denies it", async () => {
  const s = await start({ acme: [writeTurn("w1", "gone.txt", "x"), { text: "never" }] });
  const id = await newSession(s, "acme");
  const token = s.tenants.acme.token;
  await sse(
    `${s.url}/sessions/${id}/messages`,
    token,
    { text: "go" },
    (f) => f.type === "permission_required" ? "stop" : undefined,
  );
  await until(async () =>
    (await call(`${s.url}/sessions/${id}`, token, "GET")).body.running === false
  );
  const state = await call(`${s.url}/sessions/${id}`, token, "GET");
  assert.deepEqual(state.body.pendingApprovals, []);
  assert.equal(state.body.needsResume, false);
  assert.equal(fs.existsSync(path.join(s.workspace("acme"), "gone.txt")), false);
  assert.equal(s.models.acme.requests.length, 1, "the turn did not go on after the disconnect");
});

test("after a restart, a pending approval is asked again through resume()", async () => {
  const first = await startTestServer({ acme: [writeTurn("w1", "resumed.txt", "R")] });
  const id = await newSession(first, "acme");
  const token = first.tenants.acme.token;
  await sse(`${first.url}/sessions/${id}/messages`, token, { text: "write it" }, async (f) => {
    if (f.type === "permission_required") {
      await first.close({ keepData: true }); // graceful stop while the approval is pending
      return "stop";
    }
  });
  const second = await start({ acme: [{ text: "written after restart" }] }, {
    dataDir: first.dataDir,
  });
  const state = await call(`${second.url}/sessions/${id}`, token, "GET");
  assert.equal(state.status, 200);
  assert.equal(state.body.needsResume, true);
  const r = await sse(`${second.url}/sessions/${id}/resume`, token, {}, async (f) => {
    if (f.type === "permission_required") {
      assert.equal(f.data.reqId, "w1");
      await call(`${second.url}/sessions/${id}/approvals/w1`, token, "POST", { outcome: "once" });
    }
  });
  assert.deepEqual(
    types(r.frames).filter((t) => /^(permission_required|tool_|turn_end)/.test(t)),
    ["tool_proposed", "permission_required", "tool_started", "tool_finished", "turn_end"],
  );
  assert.equal(fs.readFileSync(path.join(second.workspace("acme"), "resumed.txt"), "utf8"), "R");
  assert.equal(r.frames.at(-1)?.data.status, "completed");
  const after = await call(`${second.url}/sessions/${id}`, token, "GET");
  assert.equal(after.body.needsResume, false);
});

test("a missing or wrong token gets 401 and another tenant's session 404, telling nothing", async () => {
  const s = await start({ acme: [], beta: [] });
  const a = await newSession(s, "acme");
  const noToken = await call(`${s.url}/sessions`, null, "GET");
  const wrong = await call(`${s.url}/sessions/${a}`, "token-of-acme-01234567890", "GET");
  assert.equal(noToken.status, 401);
  assert.equal(wrong.status, 401);
  assert.equal(noToken.text, wrong.text);
  assert.ok(!wrong.text.includes("acme"));
  const beta = s.tenants.beta.token;
  const missing = await call(`${s.url}/sessions/s-0123456789abcdef`, beta, "GET");
  for (
    const [method, route, body] of [
      ["GET", "", undefined],
      ["POST", "/messages", { text: "hi" }],
      ["POST", "/approvals/x", { outcome: "once" }],
      ["POST", "/interrupt", {}],
      ["POST", "/resume", {}],
      ["GET", "/turns", undefined],
    ] as const
  ) {
    const r = await call(`${s.url}/sessions/${a}${route}`, beta, method, body);
    assert.equal(r.status, 404, `${method} ${route}`);
    assert.equal(r.text, missing.text);
  }
  assert.equal(s.models.acme.requests.length, 0);
});

test("request bodies are bounded and must be JSON objects", async () => {
  const s = await start({ acme: [] }, { maxBodyBytes: 1024 });
  const id = await newSession(s, "acme");
  const token = s.tenants.acme.token;
  const big = await call(`${s.url}/sessions/${id}/messages`, token, "POST", {
    text: "x".repeat(5000),
  });
  assert.equal(big.status, 413);
  assert.equal(
    (await call(`${s.url}/sessions/${id}/messages`, token, "POST", "not json")).status,
    400,
  );
  assert.equal(
    (await call(`${s.url}/sessions/${id}/messages`, token, "POST", { text: "" })).status,
    400,
  );
  assert.equal(s.models.acme.requests.length, 0);
});

test("turns of one session run one after another, in the order sent", async () => {
  const s = await start({
    acme: [{ text: "first answer", delayPerDeltaMs: 20 }, { text: "second" }],
  });
  const id = await newSession(s, "acme");
  const token = s.tenants.acme.token;
  // Frames of two connections may arrive in any order; the engine's seq numbers do not lie.
  const seen: Frame[] = [];
  const keep = (f: Frame) => {
    if (f.type === "turn_start" || f.type === "turn_end") seen.push(f);
  };
  const one = sse(`${s.url}/sessions/${id}/messages`, token, { text: "one" }, keep);
  await until(() => seen.length > 0);
  const two = sse(`${s.url}/sessions/${id}/messages`, token, { text: "two" }, keep);
  const [r1, r2] = await Promise.all([one, two]);
  const order = seen.sort((x, y) => Number(x.data.seq) - Number(y.data.seq))
    .map((f) => `${f.data.input ?? ""}${f.type}`);
  assert.deepEqual(order, ["oneturn_start", "turn_end", "twoturn_start", "turn_end"]);
  assert.equal(r1.frames.at(-1)?.data.status, "completed");
  assert.equal(r2.frames.at(-1)?.data.status, "completed");
  const users = s.models.acme.requests[1].body?.input ?? s.models.acme.requests[1].body?.messages;
  assert.match(JSON.stringify(users), /one[\s\S]*first answer[\s\S]*two/);
});

test("MAX_ITERATIONS from the environment bounds a turn", async () => {
  const config = configFromEnv({
    OPENAI_MODEL: "m",
    SERVER_TOKEN: "a-long-enough-token",
    MAX_ITERATIONS: "1",
    CONTEXT_WINDOW: "64000",
    COMPACTION_THRESHOLD_PCT: "0.7",
    COMPACTION_SOFT_THRESHOLD_PCT: "0.5",
    COMPACTION_CAP_TOKENS: "30000",
  });
  assert.deepEqual(config.limits, {
    maxIterations: 1,
    contextWindow: 64000,
    thresholdPct: 0.7,
    softThresholdPct: 0.5,
    capTokens: 30000,
  });
  const s = await start({
    acme: [{ toolCalls: [{ id: "l", name: "list_files", arguments: { path: "." } }] }],
  }, { limits: config.limits });
  const id = await newSession(s, "acme");
  const r = await sse(`${s.url}/sessions/${id}/messages`, s.tenants.acme.token, { text: "go" });
  assert.equal(r.frames.at(-1)?.data.status, "max_iterations_exceeded");
});

test("the configuration rejects bad values and a missing model at start", () => {
  assert.throws(
    () => configFromEnv({ SERVER_TOKEN: "a-long-enough-token" }),
    /no model for local/,
  );
  assert.throws(
    () => configFromEnv({ OPENAI_MODEL: "m", SERVER_TOKEN: "x".repeat(20), MAX_ITERATIONS: "0" }),
    /MAX_ITERATIONS="0" is not a positive integer/,
  );
  assert.throws(
    () => configFromEnv({ OPENAI_MODEL: "m", SERVER_TOKENS: "a:short" }),
    /under 16 characters/,
  );
  const c = configFromEnv({ OPENAI_MODEL: "m" });
  assert.equal(c.host, "127.0.0.1");
  assert.equal(c.port, 8787);
  assert.equal(c.generatedToken, true);
  assert.ok(c.tenants[0].token.length >= 16);
});

test("the page and its scripts are served without auth, types stripped", async () => {
  const s = await start({ acme: [] });
  const page = await fetch(`${s.url}/`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get("content-security-policy") ?? "", /script-src 'self'/);
  assert.match(await page.text(), /<script type="module" src="\/assets\/app.js">/);
  const app = await (await fetch(`${s.url}/assets/app.js`)).text();
  assert.match(app, /from "\.\/approval_view\.js"/);
  assert.ok(!/: HTMLElement/.test(app), "types are stripped");
  const view = await (await fetch(`${s.url}/assets/approval_view.js`)).text();
  assert.match(view, /export function approvalToHtmlTable/);
  assert.ok(!/import type/.test(view));
  assert.equal((await fetch(`${s.url}/assets/../config.ts`)).status, 404);
});

test("POST /retry runs a turn that ended with a retriable error again, and only then", async () => {
  const s = await start({
    acme: [{ text: ["partial"], errorAfterDeltas: "cut" }, { text: "whole answer" }],
  });
  const id = await newSession(s, "acme");
  const token = s.tenants.acme.token;
  const first = await sse(`${s.url}/sessions/${id}/messages`, token, { text: "hi" });
  const error = first.frames.find((f) => f.type === "error");
  assert.equal(error?.data.retriable, true);
  assert.equal(first.frames.at(-1)?.data.status, "error");
  assert.equal((await call(`${s.url}/sessions/${id}`, token, "GET")).body.canRetry, true);
  const again = await sse(`${s.url}/sessions/${id}/retry`, token, {});
  assert.equal(again.status, 200);
  assert.equal(again.frames.at(-1)?.data.status, "completed");
  assert.match(
    again.frames.filter((f) => f.type === "assistant_delta").map((f) => f.data.text).join(""),
    /whole answer/,
  );
  assert.equal((await call(`${s.url}/sessions/${id}`, token, "GET")).body.canRetry, false);
  const twice = await call(`${s.url}/sessions/${id}/retry`, token, "POST", {});
  assert.equal(twice.status, 409);
  assert.match(String(twice.body.error), /nothing to retry/);
  const other = await call(`${s.url}/sessions/${id}/retry`, "token-of-none-0123456789", "POST");
  assert.equal(other.status, 401);
});
