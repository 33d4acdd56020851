// The browser page in the reference server's multi-worker mode, driven by Playwright
// (playwright-core) in Debian's headless Chromium: a real PostgreSQL, a ClusterFrontEnd and a
// worker in this process, MockOpenAIServer as the tenant's model. The page learns the mode from
// the server, sends messages with an Idempotency-Key, streams the answer from GET /events,
// answers an approval from its card, reconnects after its front end restarts (an approval
// answered elsewhere meanwhile; no event shown twice), stops a running command, closes an
// approval card that a Stop cancelled, and lists the turns the worker snapshotted, with diffs.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import type { Request } from "playwright-core";
import { MockOpenAIServer, type RecordedRequest, type ScriptedTurn } from "../../testing/mod.ts";
import { postgresForTests, uniquePrefix } from "../../tests/_postgres.ts";
import { ClusterFrontEnd, createClusterWorker, openClusterStore } from "./cluster.ts";
import { testConfig } from "./_test_util.ts";
import { loadPlaywright, missingForBrowser, openPage, sleeping } from "./_browser.ts";
import { cleanupsAfterEach, until } from "../../tests/_util.ts";

const ARTIFACTS = fileURLToPath(new URL("../../.ci/artifacts/", import.meta.url));

const playwright = await loadPlaywright();
const missing = missingForBrowser(playwright);
// startPostgres throws under CI_REQUIRE_REAL=1 when PostgreSQL is missing.
const pg = await postgresForTests(missing.length ? `missing ${missing.join(", ")}` : false);
const skip = "skip" in pg ? pg.skip : false;

const cleanups = cleanupsAfterEach();

/**
 * The model: two writes that need approval, then two shell commands (a unique `sleep` length,
 * so the test can see the command's process die).
 */
function script(nap: string): (request: RecordedRequest) => ScriptedTurn {
  return (request) => {
    const body = JSON.stringify(request.body ?? {});
    const asks = /(Write a greeting|Write a farewell|Run the long job|Run another job)/g;
    const lastUser = [...body.matchAll(asks)].at(-1)?.[1];
    const hasResult = (id: string) =>
      body.includes(`"${id}"`) && /function_call_output|"tool"/.test(body);
    switch (lastUser) {
      case "Write a greeting":
        if (hasResult("w1")) return { text: ["Wrote ", "hello.txt ", "for you."] };
        return {
          reasoning: ["The user wants ", "a greeting file."],
          text: ["I will ", "write ", "the file."],
          delayPerDeltaMs: 30,
          toolCalls: [{
            id: "w1",
            name: "write_file",
            arguments: { path: "hello.txt", content: "<b>hi</b> & welcome\n" },
          }],
        };
      case "Write a farewell":
        if (hasResult("w2")) return { text: ["Wrote ", "farewell.txt ", "too."] };
        return {
          text: ["Writing ", "the farewell."],
          toolCalls: [{
            id: "w2",
            name: "write_file",
            arguments: { path: "farewell.txt", content: "bye\n" },
          }],
        };
      case "Run the long job":
        return {
          text: "Starting the job.",
          toolCalls: [{ id: "s1", name: "run_shell", arguments: { command: `sleep ${nap}` } }],
        };
      default:
        return {
          text: "Starting another job.",
          toolCalls: [{ id: "s2", name: "run_shell", arguments: { command: `sleep ${nap}` } }],
        };
    }
  };
}

test(
  "in multi-worker mode the page streams from /events, answers approvals, reconnects and stops",
  {
    skip,
  },
  async () => {
    if ("skip" in pg) return;
    const dataDir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-cluster-")));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const nap = `${300 + Math.floor(Math.random() * 1000) / 1000}`;
    const model = await new MockOpenAIServer({ turns: script(nap) }).start();
    cleanups.push(() => model.close());
    const tenant = {
      id: "acme",
      token: "token-of-acme-0123456789",
      apiKey: "key-of-acme",
      baseURL: model.baseURL,
    };
    const ws = path.join(dataDir, "tenants", "acme", "workspace");
    fs.mkdirSync(ws, { recursive: true });
    const config = {
      ...testConfig(dataDir, [tenant], { approvalHoldMs: 120_000, vcsMode: "auto" }),
      databaseUrl: pg.url,
      tablePrefix: uniquePrefix("b"),
    };
    const cluster = await openClusterStore(config, { pollMs: 200 });
    cleanups.push(() => cluster.close());
    const worker = createClusterWorker(config, cluster.store, {
      pollMs: 50,
      onError: (err, id) => {
        if (process.env.SERVER_TEST_DEBUG) console.error(`worker: ${id}: ${err}`);
      },
    });
    worker.start();
    cleanups.push(() => worker.stop({ graceMs: 1000 }));
    const frontOptions = { ...config, store: cluster.store, listSessions: cluster.listSessions };
    let front = new ClusterFrontEnd(frontOptions);
    const url = await front.listen();
    cleanups.push(() => front.close());
    const { page, outside, problems } = await openPage(playwright!, cleanups);
    const posts: Request[] = [];
    page.on("request", (r) => {
      if (r.method() === "POST") posts.push(r);
    });
    const keyOf = (route: string) =>
      posts.filter((r) => new URL(r.url()).pathname.endsWith(route)).map((r) =>
        r.headers()["idempotency-key"]
      );

    await page.goto(`${url}/#token=${tenant.token}`);
    await page.locator("#session-bar").waitFor();
    await page.locator("#sessions option").first().waitFor({ state: "attached" });
    const id = await page.locator("#sessions").inputValue();
    assert.match(id, /^s-[a-f0-9]{16}$/);
    const events = () => cluster.store.read(id, 0);
    const stored = async (call: string) =>
      (await cluster.store.load(id))?.approvals.some((a) => a.toolCallId === call) ?? false;
    const turnEnds = async () =>
      (await events()).filter((e) => e.kind === "turn_end").map((e) => e.payload.status);

    // 1. A message goes out with an Idempotency-Key (the one the store recorded); the answer and
    // the reasoning stream in from the session's event stream.
    await page.fill("#input", "Write a greeting file");
    await page.click("#send");
    await page.locator(".msg.user:not(.pending)", { hasText: "Write a greeting file" }).waitFor();
    await page.locator(".msg.assistant", { hasText: "I will write the file." }).waitFor();
    await page.locator("details.reasoning", { hasText: "a greeting file." }).waitFor();
    const [messageKey] = keyOf("/messages");
    assert.match(messageKey ?? "", /^[0-9a-f]{32}$/);
    const inbox = (await events()).find((e) => e.kind === "inbox");
    assert.equal(inbox?.payload.idemKey, messageKey);

    // 2. The approval card shows the arguments as text; "Allow once" answers it.
    const card = page.locator('.approval-card[data-req="w1"]');
    await card.waitFor();
    assert.equal(await card.locator("table.approval b").count(), 0, "arguments are escaped");
    assert.match(
      await card.locator('tr[data-key="args.content"] pre').innerText(),
      /<b>hi<\/b> & welcome/,
    );
    await card.locator('button[data-outcome="once"]').click();
    await page.locator('.tool[data-req="w1"][data-status="ok"] .result').waitFor();
    await page.locator(".msg.assistant", { hasText: "Wrote hello.txt for you." }).waitFor();
    await page.locator('.turn-end[data-status="completed"]').waitFor();
    assert.equal(fs.readFileSync(path.join(ws, "hello.txt"), "utf8"), "<b>hi</b> & welcome\n");
    assert.equal(await page.locator("#send").isDisabled(), false);
    // The turns panel shows the worker's snapshot of the turn (the front end reads it from git).
    await page.locator("#turns li button", { hasText: "Turn 1 — completed, 1 file(s)" }).click();
    await page.locator("#diff", { hasText: "+<b>hi</b> & welcome" }).waitFor();
    assert.equal(await page.locator("#turns-off").isHidden(), true);

    // 3. The front end goes away while a card waits; the approval is answered elsewhere and the
    // turn ends meanwhile; a front end comes back on the same address and the page catches up
    // from the last event it showed, showing nothing twice.
    await page.fill("#input", "Write a farewell file");
    await page.click("#send");
    const farewell = page.locator('.approval-card[data-req="w2"]');
    await farewell.locator('button[data-outcome="once"]').waitFor();
    await page.locator(".msg.assistant", { hasText: "Writing the farewell." }).waitFor();
    await front.close();
    await page.locator('#stream-status[data-state="reconnecting"]').waitFor();
    // The card shows on permission_required; the worker opens the request in the store next.
    await until(() => stored("w2"), "the approval to be stored");
    const answer = await cluster.store.answerApproval(id, {
      toolCallId: "w2",
      decision: { approve: true },
      by: "another page",
    });
    assert.equal(answer, "applied");
    await until(async () => (await turnEnds()).length === 2, "the second turn to end");
    front = new ClusterFrontEnd({ ...frontOptions, port: Number(new URL(url).port) });
    assert.equal(await front.listen(), url);
    await page.locator(".msg.assistant", { hasText: "Wrote farewell.txt too." }).waitFor();
    await page.locator('#stream-status[data-state="live"]').waitFor({ state: "attached" });
    assert.equal(await page.locator('.turn-end[data-status="completed"]').count(), 2);
    assert.equal(await farewell.locator("button").count(), 0, "the answered card has no buttons");
    assert.equal(await farewell.getAttribute("data-state"), "closed");
    assert.equal(await farewell.locator(".answered").innerText(), "Approved.");
    assert.equal(await page.locator('.tool[data-req="w2"]').count(), 1);
    assert.equal(await page.locator('.tool[data-req="w2"][data-status="ok"]').count(), 1);
    assert.equal(
      await page.locator(".msg.assistant", { hasText: "Writing the farewell." }).count(),
      1,
    );
    assert.equal(await page.locator(".msg.user", { hasText: "Write a farewell file" }).count(), 1);
    assert.equal(fs.readFileSync(path.join(ws, "farewell.txt"), "utf8"), "bye\n");

    // 4. Stop interrupts a running command: its process is killed, the turn ends interrupted.
    await page.fill("#input", "Run the long job");
    await page.click("#send");
    const shell = page.locator('.approval-card[data-req="s1"]');
    await shell.waitFor();
    assert.equal(await shell.locator('button[data-outcome="always_command"]').count(), 1);
    await shell.locator('button[data-outcome="once"]').click();
    await page.locator('.tool[data-req="s1"][data-status="running"]').waitFor();
    await until(() => sleeping(nap), "the command to start");
    await page.click("#interrupt");
    await page.locator('.turn-end[data-status="interrupted"]').waitFor();
    await page.locator('.tool[data-req="s1"][data-status="interrupted"]').waitFor();
    assert.equal(await page.locator("#send").isDisabled(), false);
    await until(() => !sleeping(nap), "the command's process to be killed", 10_000);
    assert.match(keyOf("/interrupt")[0] ?? "", /^[0-9a-f]{32}$/);

    // 5. A reload while a card waits shows the session from its history, the card once, and a
    // Stop that works; the cancel closes the approval, and the card goes.
    await page.fill("#input", "Run another job");
    await page.click("#send");
    const pending = page.locator('.approval-card[data-req="s2"]');
    await pending.locator('button[data-outcome="once"]').waitFor();
    await until(() => stored("s2"), "the approval to be stored");
    await page.reload();
    await page.locator('.tool[data-req="s2"] .approval-card button[data-outcome="once"]').waitFor();
    await page.locator(".msg.user", { hasText: "Write a greeting file" }).waitFor();
    await page.locator('#stream-status[data-state="live"]').waitFor({ state: "attached" });
    assert.equal(await pending.count(), 1, "one card for the call");
    assert.equal(await page.locator('.approval-card[data-state="open"]').count(), 1);
    assert.equal(
      await page.locator(".msg.assistant", { hasText: "Starting another job." }).count(),
      1,
    );
    assert.equal(await page.locator("#send").isDisabled(), true, "the turn is still running");
    await page.click("#interrupt");
    await page.locator('.approval-card[data-req="s2"][data-state="closed"]').waitFor();
    assert.equal(await pending.locator("button").count(), 0);
    await page.locator('.tool[data-req="s2"][data-status="interrupted"]').waitFor();
    await until(async () => (await turnEnds()).length === 4, "the fourth turn to end");
    await page.locator('.turn-end[data-status="interrupted"]').waitFor();
    await until(
      async () =>
        (await cluster.store.load(id))?.approvals.find((a) => a.toolCallId === "s2")
          ?.decidedBy === "cancel",
      "the cancel to close the approval",
    );
    assert.equal(await page.locator("#send").isDisabled(), false);
    assert.equal(sleeping(nap), false, "the denied command never ran");
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, "cluster_page.png"), fullPage: true });

    assert.deepEqual(await turnEnds(), ["completed", "completed", "interrupted", "interrupted"]);
    assert.equal(await page.locator(".turn-end").count(), 1, "the end shown once after the reload");
    assert.deepEqual(problems, []);
    assert.deepEqual(outside, []);
  },
);
