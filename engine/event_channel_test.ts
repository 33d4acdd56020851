/**
 * The rendezvous channel behind `run()` (engine/_event_channel.ts) and the engine's delivery of
 * streamed deltas through it (DESIGN §3: pull-based, one event per delta, every event numbered
 * and seen by hooks), after the performance work of bench/turn_bench.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventChannel } from "./_event_channel.ts";
import {
  EventType,
  Mode,
  PermissionEngine,
  type ProviderClient,
  type StreamChunk,
  ToolRegistry,
  TurnEngine,
  type WsEvent,
} from "../mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";

/** Lets every pending promise job run (several macrotask turns). */
const settle = () => new Promise((r) => setTimeout(r, 20));

test("values pushed while no read waits are read in order, each push settling when read", async () => {
  const channel = new EventChannel<number>();
  const taken: number[] = [];
  const pushes = [1, 2, 3].map((n) => channel.push(n)?.then(() => taken.push(n)));
  assert.ok(pushes.every((p) => p instanceof Promise), "nobody was reading: every push waits");
  await settle();
  assert.deepEqual(taken, []);
  assert.deepEqual(await channel.next(), { value: 1, done: false });
  await settle();
  assert.deepEqual(taken, [1]);
  assert.deepEqual([await channel.next(), await channel.next()].map((r) => r.value), [2, 3]);
  await Promise.all(pushes);
  assert.deepEqual(taken, [1, 2, 3]);
});

test("reads made before any push get the pushed values in order, and those pushes do not wait", async () => {
  const channel = new EventChannel<string>();
  const reads = [channel.next(), channel.next(), channel.next()];
  assert.equal(channel.push("a"), undefined);
  assert.equal(channel.push("b"), undefined);
  assert.equal(channel.push("c"), undefined);
  assert.deepEqual((await Promise.all(reads)).map((r) => r.value), ["a", "b", "c"]);
});

test("close(error) rejects every waiting read with it; detach() releases every waiting push", async () => {
  const closing = new EventChannel<number>();
  const reads = [closing.next(), closing.next()];
  const boom = new Error("boom");
  closing.close(boom);
  for (const r of await Promise.allSettled(reads)) {
    assert.deepEqual(r, { status: "rejected", reason: boom });
  }
  await assert.rejects(closing.next(), boom);

  const leaving = new EventChannel<number>();
  const pushes = [leaving.push(1), leaving.push(2)];
  leaving.detach();
  await Promise.all(pushes); // would hang if a push were still waiting for a reader
  assert.equal(leaving.push(3), undefined);
});

/** A provider whose one answer streams `chunks`, counting how many the engine has asked for. */
function countingProvider(chunks: StreamChunk[]): ProviderClient & { pulled: number } {
  const provider = {
    pulled: 0,
    stream(): Promise<AsyncIterable<StreamChunk>> {
      return Promise.resolve((async function* () {
        for (const c of chunks) {
          provider.pulled++;
          yield c;
        }
      })());
    },
    chat: () => Promise.resolve(null),
  };
  return provider;
}

const piece = (fields: Partial<StreamChunk>): StreamChunk => ({
  content: null,
  reasoning: null,
  toolCalls: null,
  usage: null,
  finishReason: null,
  ...fields,
});

function engineWith(provider: ProviderClient, ws: string, hook?: TurnEngine["hook"]): TurnEngine {
  return new TurnEngine({
    provider,
    registry: new ToolRegistry(),
    permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.AUTO }),
    model: "m",
    instructions: "test",
    hook,
  });
}

test("the engine reads at most one chunk past the delta its reader holds", async () => {
  const ws = tempWorkspace();
  try {
    const chunks = Array.from({ length: 50 }, (_, i) => piece({ content: `d${i} ` }));
    chunks.push(piece({ finishReason: "stop" }));
    const provider = countingProvider(chunks);
    const it = engineWith(provider, ws).run("go")[Symbol.asyncIterator]();
    let deltas = 0;
    while (deltas < 3) {
      const r = await it.next();
      if (r.value.type === EventType.ASSISTANT_DELTA) deltas++;
    }
    await settle(); // the reader holds the third delta; the engine must not run ahead
    assert.ok(provider.pulled <= 4, `the engine pulled ${provider.pulled} chunks`);
    let rest = 0;
    for (let r = await it.next(); !r.done; r = await it.next()) {
      if (r.value.type === EventType.ASSISTANT_DELTA) rest++;
    }
    assert.equal(deltas + rest, 50);
  } finally {
    removeDir(ws);
  }
});

test("a chunk with reasoning and text gives reasoning_delta then assistant_delta, both numbered and hooked", async () => {
  const ws = tempWorkspace();
  try {
    const provider = countingProvider([
      piece({ reasoning: "why ", content: "what " }),
      piece({ content: "else" }),
      piece({ finishReason: "stop" }),
    ]);
    const hooked: string[] = [];
    const engine = engineWith(provider, ws, {
      onReasoningDelta: (t) => hooked.push(`r:${t}`),
      onAssistantDelta: (t) => hooked.push(`a:${t}`),
    });
    const events: WsEvent[] = [];
    for await (const e of engine.run("go", "task-9")) events.push(e);
    const deltas = events.filter((e) =>
      e.type === EventType.ASSISTANT_DELTA || e.type === EventType.REASONING_DELTA
    );
    assert.deepEqual(deltas.map((e) => [e.type, e.data.text]), [
      ["reasoning_delta", "why "],
      ["assistant_delta", "what "],
      ["assistant_delta", "else"],
    ]);
    const request = events.find((e) => e.type === EventType.LLM_REQUEST)!;
    for (const d of deltas) {
      assert.deepEqual(Object.keys(d.data), ["text", "reqId", "taskId", "seq"]);
      assert.equal(d.data.reqId, request.data.reqId);
      assert.equal(d.data.taskId, "task-9");
    }
    const seqs = events.map((e) => e.data.seq as number);
    assert.deepEqual(seqs, seqs.map((_, i) => seqs[0] + i));
    assert.deepEqual(hooked, ["r:why ", "a:what ", "a:else"]);
    const last = engine.messages.at(-1)!;
    assert.equal(last.content, "what else");
    assert.equal(last.reasoning_content, "why ");
  } finally {
    removeDir(ws);
  }
});
