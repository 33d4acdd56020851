// Tenant isolation of shell commands in the reference server: DATA_DIR is hidden in the
// bubblewrap sandbox, so one tenant's approved command cannot read another tenant's workspace.
// Needs a working bwrap; skipped without one unless CI_REQUIRE_REAL=1.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { resolveSandbox } from "../../permissions/mod.ts";
import { call, type Frame, sse, startTestServer } from "./_test_util.ts";

const requireReal = process.env.CI_REQUIRE_REAL === "1";
const probe = process.platform === "linux" ? resolveSandbox({ mode: "auto" }) : null;
const skip = probe?.enforced || requireReal
  ? false
  : `bubblewrap is not usable here: ${probe?.reason ?? "not Linux"}`;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

test("tenant A's approved command cannot read tenant B's workspace", { skip }, async () => {
  assert.ok(probe?.enforced, `bubblewrap must work here (CI_REQUIRE_REAL=1): ${probe?.reason}`);
  // Outside /tmp: the sandbox's private /tmp would hide a data folder there anyway.
  const base = fs.existsSync("/var/tmp") ? "/var/tmp" : process.cwd();
  const dataDir = fs.realpathSync(fs.mkdtempSync(path.join(base, "zqagent-tenants-")));
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const secret = path.join(dataDir, "tenants", "beta", "workspace", "secret.txt");
  const command = `cat ../../beta/workspace/secret.txt; cat ${secret}; cat own.txt`;
  const s = await startTestServer({
    acme: [
      { toolCalls: [{ id: "c1", name: "run_shell", arguments: { command } }] },
      { text: "done" },
    ],
    beta: [],
  }, { dataDir });
  cleanups.push(() => s.close());
  fs.mkdirSync(path.dirname(secret), { recursive: true });
  fs.writeFileSync(secret, "beta-secret\n");
  const created = await call(`${s.url}/sessions`, s.tenants.acme.token, "POST", {});
  assert.equal(created.status, 201);
  const id = String(created.body.id);
  fs.writeFileSync(path.join(s.workspace("acme"), "own.txt"), "acme-own\n");
  const token = s.tenants.acme.token;
  const r = await sse(`${s.url}/sessions/${id}/messages`, token, { text: "go" }, async (f) => {
    if (f.type !== "permission_required") return;
    await call(`${s.url}/sessions/${id}/approvals/${f.data.reqId}`, token, "POST", {
      outcome: "once",
    });
  });
  assert.equal(r.frames.find((f: Frame) => f.type === "tool_finished")?.data.status, "ok");
  assert.equal(r.frames.at(-1)?.data.status, "completed");
  // What the command printed went back to the model as the tool result.
  const sent = JSON.stringify(s.models.acme.requests[1].body);
  assert.match(sent, /acme-own/, "the tenant's own workspace stays readable");
  assert.doesNotMatch(sent, /beta-secret/);
  assert.equal(fs.readFileSync(secret, "utf8"), "beta-secret\n");
});
