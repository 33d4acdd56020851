// examples/desktop_sidecar.ts (manual §18.2) as a real process speaking JSON lines, with a real
// MCP server from npm and a restart that asks again for a pending approval.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcessWithoutNullStreams, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { MockOpenAIServer } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { alive, MEMORY_ENTRY, needReal, waitFor } from "../mcp/_test_util.ts";
import { skipExamples, spawnExample } from "./_test_util.ts";

const skip = skipExamples || needReal({ node: true, servers: true, programs: ["ps"] });

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Msg = Record<string, unknown> & { type: string };

/** A sidecar process with a line reader: `next(pred)` waits for the next matching message. */
function sidecar(ws: string, baseURL: string) {
  const child: ChildProcessWithoutNullStreams = spawnExample("desktop_sidecar.ts", {
    cwd: ws,
    baseURL,
    env: { WORKSPACE: ws, SESSION_ID: "main" },
  });
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const seen: Msg[] = [];
  const waiters: { pred: (m: Msg) => boolean; resolve: (m: Msg) => void }[] = [];
  let cursor = 0;
  readline.createInterface({ input: child.stdout }).on("line", (line) => {
    const msg = JSON.parse(line) as Msg;
    seen.push(msg);
    for (const w of [...waiters]) {
      if (w.pred(msg)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(msg);
      }
    }
  });
  const closed = new Promise<void>((resolve) => child.on("close", () => resolve()));
  return {
    child,
    seen,
    closed,
    stderr: () => err,
    send: (m: Record<string, unknown>) => child.stdin.write(JSON.stringify(m) + "\n"),
    /** The next message (after the last one returned) that matches. */
    next(pred: (m: Msg) => boolean): Promise<Msg> {
      for (; cursor < seen.length; cursor++) {
        if (pred(seen[cursor])) return Promise.resolve(seen[cursor++]);
      }
      return new Promise((resolve) => {
        waiters.push({
          pred,
          resolve: (m) => {
            cursor = seen.length;
            resolve(m);
          },
        });
      });
    },
  };
}

const isEvent = (type: string) => (m: Msg) =>
  m.type === "event" && (m.event as { type: string }).type === type;

test("the sidecar streams events, takes approvals over stdin and resumes after a restart", {
  skip,
}, async () => {
  const ws = tempWorkspace({
    ".agent/mcp.json": JSON.stringify({
      mcpServers: { memory: { command: "node", args: [MEMORY_ENTRY] } },
    }),
  });
  cleanups.push(() => removeDir(ws));
  const model = await new MockOpenAIServer({
    turns: [
      {
        toolCalls: [{ id: "w1", name: "write_file", arguments: { path: "one.txt", content: "1" } }],
      },
      { text: "first done" },
      {
        toolCalls: [{ id: "w2", name: "write_file", arguments: { path: "two.txt", content: "2" } }],
      },
      { text: "second done after restart" },
    ],
  }).start();
  cleanups.push(() => model.close());

  // First run: a full turn with an approval from the "UI".
  const a = sidecar(ws, model.baseURL);
  const ready = await a.next((m) => m.type === "ready");
  assert.equal(ready.restored, false);
  assert.deepEqual((ready.mcp as { connected: string[] }).connected, ["memory"]);
  a.send({ type: "message", text: "write one" });
  const ask1 = await a.next((m) => m.type === "approval_request");
  assert.equal(ask1.reqId, "w1");
  assert.deepEqual((ask1.fields as { key: string }[]).map((f) => f.key), [
    "tool",
    "reason",
    "args.path",
    "args.content",
  ]);
  a.send({ type: "approval", reqId: "w1", outcome: "once" });
  const end1 = await a.next(isEvent("turn_end"));
  assert.equal((end1.event as { data: { status: string } }).data.status, "completed");
  assert.equal(fs.readFileSync(path.join(ws, "one.txt"), "utf8"), "1");
  const tools = JSON.stringify(model.requests[0].body?.tools);
  assert.match(tools, /mcp__memory__/, "the workspace's MCP tools reach the model");

  // A second turn waits for approval when the app quits: graceful shutdown.
  a.send({ type: "message", text: "write two" });
  await a.next((m) => m.type === "approval_request" && m.reqId === "w2");
  const children = spawnSync("ps", ["-o", "pid=", "--ppid", String(a.child.pid)]).stdout
    .toString().trim().split(/\s+/).filter(Boolean).map(Number);
  assert.ok(children.length >= 1, "the MCP server runs as a child");
  a.send({ type: "shutdown" });
  const bye = await a.next((m) => m.type === "bye");
  assert.deepEqual(bye, { type: "bye", saved: true, pendingApprovals: ["w2"] });
  await a.closed;
  assert.ok(await waitFor(() => children.every((pid) => !alive(pid))), "no orphaned MCP server");
  assert.equal(fs.existsSync(path.join(ws, "two.txt")), false);

  // Restart: the session is restored and the pending approval asked again (resume()).
  const b = sidecar(ws, model.baseURL);
  const again = await b.next((m) => m.type === "ready");
  assert.equal(again.restored, true);
  assert.equal(again.pending, true);
  const ask2 = await b.next((m) => m.type === "approval_request");
  assert.equal(ask2.reqId, "w2");
  b.send({ type: "approval", reqId: "w2", outcome: "once" });
  const end2 = await b.next(isEvent("turn_end"));
  assert.equal((end2.event as { data: { status: string } }).data.status, "completed");
  assert.equal(fs.readFileSync(path.join(ws, "two.txt"), "utf8"), "2");
  b.send({ type: "bogus" });
  assert.match(String((await b.next((m) => m.type === "problem")).error), /bogus/);
  b.child.stdin.end(); // end of input: graceful exit too
  assert.equal((await b.next((m) => m.type === "bye")).saved, true);
  await b.closed;
  assert.equal(b.stderr(), "");
});
