// The manual's §8.4 sample (shell approval exemption and the OS sandbox) runs as written, as a
// module under Deno (and Node 22), against a local MockOpenAIServer, in a fresh temporary
// workspace (DESIGN §7: §8.4 → sandbox issue).
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { resolveSandbox } from "../permissions/mod.ts";
import type { ScriptedTurn } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "./_util.ts";
import { cleanUpSamples, runSample as runManualSample, sampleSkip } from "./_manual.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await cleanUpSamples();
  for (const c of cleanups.splice(0).reverse()) await c();
});

const bwrapWorks = process.platform === "linux" && resolveSandbox({ mode: "auto" }).enforced;
const requireReal = process.env.CI_REQUIRE_REAL === "1";
const skip = sampleSkip
  ? sampleSkip
  : bwrapWorks || requireReal
  ? false
  : "the §8.4 sample is checked with a working bubblewrap sandbox";

function runSample(file: string, ws: string, turns: ScriptedTurn[]) {
  return runManualSample(file, { workspace: ws, turns });
}

test("§8.4: the sandbox sample runs; shellPolicy sandbox exempts confined commands", {
  skip,
}, async () => {
  assert.ok(bwrapWorks, "bubblewrap must work here (CI_REQUIRE_REAL=1)");
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  const outside = fs.realpathSync(fs.mkdtempSync(path.join("/var/tmp", "zqagent-84-")));
  cleanups.push(() => removeDir(outside));
  const command = `echo in > inside.txt; echo out > ${outside}/outside.txt`;
  const { code, out, err } = await runSample("sec08_4_sandbox.ts", ws, [
    { toolCalls: [{ id: "s", name: "run_shell", arguments: { command } }] },
    { text: "done" },
  ]);
  assert.equal(code, 0, out + err);
  const result = JSON.parse(out.trim().split("\n").at(-1)!);
  assert.equal(result.kind, "bwrap");
  assert.equal(result.enforced, true);
  assert.match(result.description, /bwrap sandbox enforced/);
  assert.equal(result.exempt, true);
  assert.deepEqual(result.finished, ["ok"], "ran without approval (defaultApproval is deny)");
  assert.equal(result.required, "ok", "required mode works where bwrap does");
  assert.equal(fs.readFileSync(path.join(ws, "inside.txt"), "utf8"), "in\n");
  assert.equal(fs.existsSync(path.join(outside, "outside.txt")), false);
});
