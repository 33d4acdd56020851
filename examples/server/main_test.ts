// The server's entry point (`deno task server`) as a real process: configuration from the
// environment, and recovery after a crash (SIGKILL) with an approval pending.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { MockOpenAIServer } from "../../testing/mod.ts";
import { call, sse } from "./_test_util.ts";

const MAIN = fileURLToPath(new URL("./main.ts", import.meta.url));
const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const nodeFlags = process.execArgv.filter((a) => /^--(experimental|no-warnings)/.test(a));
const skip = isDeno || nodeFlags.some((a) => a.includes("transform-types"))
  ? false
  : "the server is TypeScript: run with Deno or node --experimental-transform-types";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const TOKEN = "token-of-acme-0123456789";

/** Starts main.ts; resolves with its URL once it printed "listening on". */
function startMain(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; url: string; out: () => string }> {
  const args = isDeno ? ["run", "-A", MAIN] : [...nodeFlags, MAIN];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve({ child, url: m[1], out: () => out });
    });
    child.stderr!.on("data", (d) => (out += d));
    child.on("exit", (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

test("the entry point fails at start without a model", { skip }, async () => {
  const env = { ...process.env } as Record<string, string>;
  delete env.OPENAI_MODEL;
  const args = isDeno ? ["run", "-A", MAIN] : [...nodeFlags, MAIN];
  const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const code = await new Promise((r) => child.on("exit", r));
  assert.equal(code, 2);
  assert.match(err, /Cannot configure the server: no model for local/);
});

test(
  "after a crash, the restarted server asks again for the approval that was pending",
  { skip },
  async () => {
    const dataDir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-main-")));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const model = await new MockOpenAIServer({
      turns: [
        {
          toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "k.txt", content: "K" } }],
        },
        { text: "done after the crash" },
      ],
    }).start();
    cleanups.push(() => model.close());
    const env = {
      HOST: "127.0.0.1",
      PORT: "0",
      DATA_DIR: dataDir,
      SERVER_TOKENS: `acme:${TOKEN}`,
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: "k",
      OPENAI_MODEL: "m",
      VCS_MODE: "off",
    };
    const first = await startMain(env);
    const created = await call(`${first.url}/sessions`, TOKEN, "POST", {});
    const id = String(created.body.id);
    await sse(`${first.url}/sessions/${id}/messages`, TOKEN, { text: "write k" }, (f) => {
      if (f.type === "permission_required") {
        first.child.kill("SIGKILL"); // a crash: nothing is cleaned up, nothing is denied
        return "stop";
      }
    });
    await exited(first.child);

    const second = await startMain(env);
    const state = await call(`${second.url}/sessions/${id}`, TOKEN, "GET");
    assert.equal(state.body.needsResume, true);
    const r = await sse(`${second.url}/sessions/${id}/resume`, TOKEN, {}, async (f) => {
      if (f.type === "permission_required") {
        await call(`${second.url}/sessions/${id}/approvals/${f.data.reqId}`, TOKEN, "POST", {
          outcome: "once",
        });
      }
    });
    assert.equal(r.frames.find((f) => f.type === "tool_finished")?.data.status, "ok");
    assert.equal(r.frames.at(-1)?.data.status, "completed");
    const ws = path.join(dataDir, "tenants", "acme", "workspace");
    assert.equal(fs.readFileSync(path.join(ws, "k.txt"), "utf8"), "K");
    // A graceful stop (SIGTERM) runs the shutdown path and says so. (Deno's child_process
    // reports the signal sent even when the child handled it and exited 0, so the output is
    // what is checked, after every stream closed.)
    const closed = new Promise((resolve) => second.child.once("close", resolve));
    second.child.kill("SIGTERM");
    await closed;
    assert.match(second.out(), /stopped/);
  },
);
