// A full turn under exactly the least-privilege Deno flags the README documents (DESIGN §5,
// issue 8): file tools and a sandboxed shell command work, and a read the flags do not grant
// ends as `denied` naming the missing flag instead of a prompt or a crash.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import process from "node:process";
import { resolveSandbox } from "../permissions/mod.ts";
import { MockOpenAIServer } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "./_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const bwrapWorks = process.platform === "linux" && resolveSandbox({ mode: "auto" }).enforced;
const requireReal = process.env.CI_REQUIRE_REAL === "1";

/** The flags between the README's `least-privilege-flags` markers, without `deno run` and host.ts. */
function readmeFlags(): string[] {
  const readme = fs.readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const block = /<!-- least-privilege-flags -->\s*```sh\n([\s\S]*?)\n```/.exec(readme);
  assert.ok(block, "README has the least-privilege flags block");
  const words = block[1].replace(/\\\n/g, " ").trim().split(/\s+/);
  assert.deepEqual(words.slice(0, 2), ["deno", "run"]);
  assert.equal(words.at(-1), "host.ts");
  return words.slice(2, -1);
}

test("a full turn runs under exactly the README's least-privilege Deno flags", {
  skip: bwrapWorks || requireReal ? false : "the documented turn runs a shell command in bwrap",
}, async () => {
  assert.ok(bwrapWorks, "bubblewrap must work here (CI_REQUIRE_REAL=1)");
  const ws = tempWorkspace({ "a.txt": "hello\n" });
  cleanups.push(() => removeDir(ws));
  const server = new MockOpenAIServer({
    turns: [
      {
        toolCalls: [
          { id: "r", name: "read_file", arguments: { path: "a.txt" } },
          { id: "w", name: "write_file", arguments: { path: "b.txt", content: "B" } },
        ],
      },
      { toolCalls: [{ id: "s", name: "run_shell", arguments: { command: "echo hi > c.txt" } }] },
      { toolCalls: [{ id: "o", name: "read_file", arguments: { path: "/etc/hostname" } }] },
      { text: "done" },
    ],
  });
  await server.start();
  cleanups.push(() => server.close());
  const port = new URL(server.baseURL).port;
  const flags = readmeFlags().map((f) =>
    f.replaceAll("/srv/ws", ws).replace("api.openai.com:443", `127.0.0.1:${port}`)
  );
  const { code, out, err } = await runHost(flags, ws, server.baseURL);
  assert.equal(code, 0, out + err);
  const result = JSON.parse(out.trim().split("\n").at(-1)!);
  assert.equal(result.status, "completed");
  assert.equal(result.sandbox.kind, "bwrap");
  assert.deepEqual(
    result.finished.map((f: { name: string; status: string }) => `${f.name}:${f.status}`),
    ["read_file:ok", "write_file:ok", "run_shell:ok", "read_file:denied"],
  );
  assert.match(result.finished[3].reason, /--allow-read=\/etc\/hostname/);
  assert.equal(fs.readFileSync(`${ws}/b.txt`, "utf8"), "B");
  assert.equal(fs.readFileSync(`${ws}/c.txt`, "utf8"), "hi\n");
});

test("with sandbox.deno and no grant to run deno, every tool of the child process is denied naming the flag", async () => {
  const ws = tempWorkspace({ "a.txt": "hello\n" });
  cleanups.push(() => removeDir(ws));
  const server = new MockOpenAIServer({
    turns: [
      {
        toolCalls: [
          { id: "r", name: "read_file", arguments: { path: "a.txt" } },
          {
            id: "p",
            name: "apply_unified_diff",
            arguments: { diff: "--- a/a.txt\n+++ b/a.txt\n" },
          },
          { id: "m", name: "media", arguments: { path: "a.txt" } },
        ],
      },
      { text: "done" },
    ],
  });
  await server.start();
  cleanups.push(() => server.close());
  const port = new URL(server.baseURL).port;
  // The README's flags (bwrap may run, not deno).
  const flags = readmeFlags().map((f) =>
    f.replaceAll("/srv/ws", ws).replace("api.openai.com:443", `127.0.0.1:${port}`)
  );
  const { code, out, err } = await runHost(flags, ws, server.baseURL, ["deno"]);
  assert.equal(code, 0, out + err);
  const result = JSON.parse(out.trim().split("\n").at(-1)!);
  assert.equal(result.status, "completed");
  assert.deepEqual(
    result.finished.map((f: { name: string; status: string }) => `${f.name}:${f.status}`),
    ["read_file:denied", "apply_unified_diff:denied", "media:denied"],
  );
  for (const f of result.finished) assert.match(f.reason, /--allow-run=/);
});

/** Runs tests/_least_privilege_host.ts under `flags` against the mock model. */
function runHost(
  flags: string[],
  ws: string,
  baseURL: string,
  extra: string[] = [],
): Promise<{ code: number | null; out: string; err: string }> {
  const host = new URL("./_least_privilege_host.ts", import.meta.url).pathname;
  return new Promise(
    (resolve, reject) => {
      const child = spawn(process.execPath, ["run", ...flags, host, ws, ...extra], {
        env: {
          OPENAI_API_KEY: "test-key",
          OPENAI_BASE_URL: baseURL,
          OPENAI_MODEL: "test-model",
          PATH: process.env.PATH ?? "/usr/bin:/bin",
          HOME: process.env.HOME ?? "/root",
          ...(process.env.DENO_DIR ? { DENO_DIR: process.env.DENO_DIR } : {}),
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
    },
  );
}
