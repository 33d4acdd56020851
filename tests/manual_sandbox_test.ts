// The manual's §8.4 sample (shell approval exemption and the OS sandbox) runs as written, as a
// module under Deno (and Node 22), against a local MockOpenAIServer, in a fresh temporary
// workspace (DESIGN §7: §8.4 → sandbox issue).
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { resolveSandbox } from "../permissions/mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "./_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const nodeFlags = process.execArgv.filter((a) => /^--(experimental|no-warnings)/.test(a));
const bwrapWorks = process.platform === "linux" && resolveSandbox({ mode: "auto" }).enforced;
const requireReal = process.env.CI_REQUIRE_REAL === "1";
const skip = !(isDeno || nodeFlags.some((a) => a.includes("transform-types")))
  ? "the samples are TypeScript modules: run with Deno or node --experimental-transform-types"
  : bwrapWorks || requireReal
  ? false
  : "the §8.4 sample is checked with a working bubblewrap sandbox";

async function runSample(
  file: string,
  ws: string,
  turns: ScriptedTurn[],
): Promise<{ code: number | null; out: string; err: string }> {
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  const sample = new URL(`./manual/${file}`, import.meta.url).pathname;
  return await new Promise((resolve, reject) => {
    const args = isDeno ? ["run", "-A", sample] : [...nodeFlags, sample];
    const child = spawn(process.execPath, args, {
      cwd: ws,
      env: {
        ...process.env,
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "sample-key",
        OPENAI_MODEL: "sample-model",
        NO_COLOR: "1",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out, err }));
  });
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
