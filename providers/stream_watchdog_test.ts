/**
 * The idle watchdog and the fast iteration path of `OpenAIProvider.stream` (issue 9's
 * performance changes: one re-arming timer per stream, a plain iterator, `for await` without the
 * ReadableStream machinery) keep the behaviour hosts rely on.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mock_server.ts";
import { OpenAIProvider } from "./openai_provider.ts";
import { ProviderError } from "./errors.ts";
import { OPTS } from "./_test_helpers.ts";
import type { StreamChunk } from "./types.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function serve(turns: ScriptedTurn[]): Promise<MockOpenAIServer> {
  return await new MockOpenAIServer({ turns }).start();
}

test("a reader that pauses longer than the idle limit is not an idle stream", async () => {
  const server = await serve([{ text: ["a", "b", "c"] }]);
  try {
    const provider = new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
      streamIdleMs: 60,
    });
    const stream = await provider.stream("m", [{ role: "user", content: "hi" }], [], OPTS);
    let text = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      if (chunk.content) {
        text += chunk.content;
        await sleep(150); // the consumer is slow; the server is not idle
      }
      if (chunk.finishReason) finish = chunk.finishReason;
    }
    assert.equal(text, "abc");
    assert.equal(finish, "stop");
  } finally {
    await server.close();
  }
});

test("a server that stops sending mid-stream fails with stream_idle_timeout", async () => {
  const server = await serve([{ text: ["a", "b"], holdOpen: true }]);
  try {
    const provider = new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
      streamIdleMs: 80,
    });
    const stream = await provider.stream("m", [{ role: "user", content: "hi" }], [], OPTS);
    const got: StreamChunk[] = [];
    const err = await (async () => {
      try {
        for await (const chunk of stream) got.push(chunk);
      } catch (e) {
        return e;
      }
    })();
    assert.ok(err instanceof ProviderError);
    assert.equal(err.code, "stream_idle_timeout");
    assert.equal(got.map((c) => c.content).join(""), "ab");
    await server.waitForClientClose(0);
  } finally {
    await server.close();
  }
});

test("breaking out of for await closes the connection", async () => {
  const server = await serve([{ text: ["a", "b", "c"], holdOpen: true }]);
  try {
    const provider = new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
    });
    const stream = await provider.stream("m", [{ role: "user", content: "hi" }], [], OPTS);
    for await (const chunk of stream) if (chunk.content) break;
    await server.waitForClientClose(0);
    assert.equal(server.requests[0].clientClosed, true);
  } finally {
    await server.close();
  }
});

test("the stream is still a ReadableStream that pipes and reads", async () => {
  const server = await serve([{ text: ["x", "y"] }]);
  try {
    const provider = new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
    });
    const stream = await provider.stream("m", [{ role: "user", content: "hi" }], [], OPTS);
    assert.ok(stream instanceof ReadableStream);
    const texts = (stream as ReadableStream<StreamChunk>).pipeThrough(
      new TransformStream<StreamChunk, string>({
        transform: (c, ctl) => void (c.content && ctl.enqueue(c.content)),
      }),
    );
    let text = "";
    const reader = texts.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
    assert.equal(text, "xy");
  } finally {
    await server.close();
  }
});
