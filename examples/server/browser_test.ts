// The browser page of the reference server, driven by Playwright (playwright-core) in Debian's
// headless Chromium against the server on 127.0.0.1: send a message, see streamed text and
// reasoning, approve a write from the card, see the tool result and the turn's diff, interrupt
// a long command. The approval card's screenshot is saved as a CI artifact
// (.ci/artifacts/approval_card.png).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { RecordedRequest, ScriptedTurn } from "../../testing/mod.ts";
import { startTestServer, type TestServer } from "./_test_util.ts";
import { loadPlaywright, missingForBrowser, openPage } from "./_browser.ts";
import { cleanupsAfterEach } from "../../tests/_util.ts";

const ARTIFACTS = fileURLToPath(new URL("../../.ci/artifacts/", import.meta.url));

const playwright = await loadPlaywright();
const hasGit = spawnSync("git", ["--version"]).status === 0;
const missing = missingForBrowser(playwright, [hasGit ? "" : "git"]);
const skip = missing.length ? `missing ${missing.join(", ")}` : false;

const cleanups = cleanupsAfterEach();

let flaky = 0;

/**
 * The model: a write that needs approval, then a long shell command, then an answer whose first
 * stream is cut off (a retriable error) and whose retry succeeds.
 */
function script(request: RecordedRequest): ScriptedTurn {
  const body = JSON.stringify(request.body ?? {});
  const lastUser = [...body.matchAll(/(Write a greeting|Run the long job|Answer shakily)/g)].at(-1)
    ?.[1];
  if (lastUser === "Answer shakily") {
    return flaky++ === 0
      ? { text: ["Partial"], errorAfterDeltas: "cut" }
      : { text: ["Recovered ", "answer."] };
  }
  const hasResult = (id: string) =>
    body.includes(`"${id}"`) && /function_call_output|"tool"/.test(body);
  if (lastUser === "Write a greeting") {
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
  }
  return {
    text: "Starting the job.",
    toolCalls: [{ id: "s1", name: "run_shell", arguments: { command: "sleep 300" } }],
  };
}

test("the page streams a turn, approves a write from the card and interrupts a long command", {
  skip,
}, async () => {
  const s: TestServer = await startTestServer({ acme: script }, { vcsMode: "auto" });
  cleanups.push(() => s.close());
  const { page, outside, problems } = await openPage(playwright!, cleanups);

  await page.goto(`${s.url}/#token=${s.tenants.acme.token}`);
  await page.locator("#session-bar").waitFor();
  assert.equal(new URL(page.url()).hash, "", "the token is taken out of the address bar");

  // 1. Send a message; the text and the reasoning stream in.
  await page.fill("#input", "Write a greeting file");
  await page.click("#send");
  await page.locator(".msg.user", { hasText: "Write a greeting file" }).waitFor();
  await page.locator(".msg.assistant", { hasText: "I will write the file." }).waitFor();
  await page.locator("details.reasoning", { hasText: "a greeting file." }).waitFor();

  // 2. The approval card shows every argument as text; save its picture.
  const card = page.locator('.approval-card[data-req="w1"]');
  await card.waitFor();
  assert.equal(await card.locator("table.approval b").count(), 0, "arguments are escaped");
  assert.match(
    await card.locator('tr[data-key="args.content"] pre').innerText(),
    /<b>hi<\/b> & welcome/,
  );
  assert.deepEqual(
    await card.locator("button").evaluateAll((bs) => bs.map((b) => b.getAttribute("data-outcome"))),
    ["once", "always_tool", "deny"],
  );
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await card.screenshot({ path: path.join(ARTIFACTS, "approval_card.png") });

  // 3. Approve once; the tool runs and its result shows; the turn completes.
  await card.locator('button[data-outcome="once"]').click();
  await page.locator('.tool[data-req="w1"][data-status="ok"] .result').waitFor();
  await page.locator(".msg.assistant", { hasText: "Wrote hello.txt for you." }).waitFor();
  await page.locator('.turn-end[data-status="completed"]').waitFor();
  assert.equal(
    fs.readFileSync(path.join(s.workspace("acme"), "hello.txt"), "utf8"),
    "<b>hi</b> & welcome\n",
  );

  // 4. The turn list has the turn; its diff shows the new file.
  await page.locator("#turns li button").first().click();
  await page.locator("#diff", { hasText: "hello.txt" }).waitFor();

  // 5. A long command: approve it, then interrupt it.
  await page.fill("#input", "Run the long job");
  await page.click("#send");
  const shell = page.locator('.approval-card[data-req="s1"]');
  await shell.waitFor();
  assert.equal(await shell.locator('button[data-outcome="always_command"]').count(), 1);
  await shell.locator('button[data-outcome="once"]').click();
  await page.locator('.tool[data-req="s1"][data-status="running"]').waitFor();
  await page.click("#interrupt");
  await page.locator('.turn-end[data-status="interrupted"]').waitFor();
  await page.locator('.tool[data-req="s1"][data-status="interrupted"]').waitFor();
  assert.equal(await page.locator("#send").isDisabled(), false);

  // 6. A stream cut off mid-answer is a retriable error: Retry runs the turn again.
  await page.fill("#input", "Answer shakily");
  await page.click("#send");
  const retry = page.locator(".msg.error button.retry");
  await retry.waitFor();
  await page.locator('.turn-end[data-status="error"]').waitFor();
  await retry.click();
  await page.locator(".msg.assistant", { hasText: "Recovered answer." }).waitFor();
  await page.locator('.turn-end[data-status="completed"]').last().waitFor();
  assert.equal(await retry.isDisabled(), true);
  await page.screenshot({ path: path.join(ARTIFACTS, "page.png"), fullPage: true });

  assert.deepEqual(problems, []);
  assert.deepEqual(outside, []);
});
