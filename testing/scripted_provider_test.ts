import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ApprovalOutcome,
  EventType,
  Mode,
  PermissionEngine,
  ProviderError,
  registerFileTools,
  ToolRegistry,
  TurnEngine,
} from "../mod.ts";
import { ScriptedProvider } from "./mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "../tests/_util.ts";

function engineWith(provider: ScriptedProvider, ws: string): TurnEngine {
  const registry = new ToolRegistry();
  registerFileTools(registry, ws);
  const engine = new TurnEngine({
    provider,
    registry,
    permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.INTERACTIVE }),
    model: "scripted",
    instructions: "test",
  });
  engine.setApprover(() => Promise.resolve(ApprovalOutcome.ONCE));
  return engine;
}

test("ScriptedProvider drives a full tool loop without HTTP and records each call", async () => {
  const ws = tempWorkspace({ "a.txt": "alpha\n" });
  try {
    const provider = new ScriptedProvider([
      {
        reasoning: "look first",
        toolCalls: [{ id: "r", name: "read_file", arguments: { path: "a.txt" } }],
      },
      { text: "It says alpha." },
    ]);
    const engine = engineWith(provider, ws);
    const { events } = await collect(engine.run("read a.txt"));
    assert.equal(events.at(-1)?.data.status, "completed");
    assert.equal(ofType(events, EventType.REASONING_DELTA).length > 0, true);
    assert.equal(provider.calls.length, 2);
    assert.match(JSON.stringify(provider.calls[1].messages), /alpha/);
    assert.equal(engine.messages.at(-1)?.content, "It says alpha.");
  } finally {
    removeDir(ws);
  }
});

test("ScriptedProvider turns httpError into a ProviderError with its status", async () => {
  const provider = new ScriptedProvider([{ httpError: { status: 503, message: "overloaded" } }]);
  await assert.rejects(
    provider.stream("m", [], [], { reqId: "r", logTime: "t" }),
    (e) => e instanceof ProviderError && e.status === 503 && e.retriable,
  );
});

test("ScriptedProvider stops a held-open stream when the signal aborts", async () => {
  const provider = new ScriptedProvider([{ text: "partial", holdOpen: true }]);
  const ac = new AbortController();
  const stream = await provider.stream("m", [], [], {
    reqId: "r",
    logTime: "t",
    signal: ac.signal,
  });
  const seen: string[] = [];
  await assert.rejects(async () => {
    for await (const c of stream) {
      if (c.content) seen.push(c.content);
      ac.abort();
    }
  }, { name: "AbortError" });
  assert.deepEqual(seen, ["partial"]);
});

test("ScriptedProvider.chat answers with the next turn's text or null", async () => {
  const provider = new ScriptedProvider([{ text: "A title" }, {}]);
  const opts = { reqId: "r", logTime: "t" };
  assert.equal(await provider.chat("m", [], {}, opts), "A title");
  assert.equal(await provider.chat("m", [], {}, opts), null);
  await assert.rejects(provider.chat("m", [], {}, opts), /no turn 3/);
});
