/**
 * The fast paths of the stream reader and normalisers (providers/_sdk_stream.ts,
 * _chat_stream.ts, _responses_stream.ts; bench/turn_bench.ts) keep the uniform result: replayed
 * over real HTTP on 127.0.0.1 through the real SDK and `OpenAIProvider`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MockOpenAIServer } from "../testing/mock_server.ts";
import { OpenAIProvider } from "./openai_provider.ts";
import {
  chatChunk,
  chatSse,
  collect,
  type Collected,
  OPTS,
  responsesSse,
} from "./_test_helpers.ts";

async function replay(mode: "chat" | "responses", rawSse: string): Promise<Collected> {
  const server = await new MockOpenAIServer({ turns: [{ rawSse }] }).start();
  try {
    const provider = new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: mode,
      maxRetries: 0,
    });
    return await collect(await provider.stream("m", [{ role: "user", content: "hi" }], [], OPTS));
  } finally {
    await server.close();
  }
}

test("one SSE event that yields several chunks delivers them all, in order", async () => {
  // A Responses server that sends only the final response: reasoning, text and the final chunk
  // all come from its one response.completed event.
  const got = await replay(
    "responses",
    responsesSse([
      ["response.completed", {
        response: {
          status: "completed",
          output: [
            { type: "reasoning", summary: [{ type: "summary_text", text: "Thinking." }] },
            { type: "message", content: [{ type: "output_text", text: "Answer." }] },
          ],
          usage: { input_tokens: 4, output_tokens: 2, total_tokens: 6 },
        },
      }],
    ]),
  );
  assert.equal(got.error, undefined);
  assert.deepEqual(
    got.chunks.map((c) => [c.reasoning, c.content, c.finishReason]),
    [["Thinking.", null, null], [null, "Answer.", null], [null, null, "stop"]],
  );
  assert.equal(got.usage?.totalTokens, 6);
});

test("the .done events of two streamed Responses text parts repeat neither part", async () => {
  const got = await replay(
    "responses",
    responsesSse([
      ["response.output_text.delta", { output_index: 0, content_index: 0, delta: "One, " }],
      ["response.output_text.delta", { output_index: 0, content_index: 0, delta: "two. " }],
      ["response.output_text.done", { output_index: 0, content_index: 0, text: "One, two. " }],
      ["response.output_text.delta", { output_index: 0, content_index: 1, delta: "Three." }],
      ["response.output_text.done", { output_index: 0, content_index: 1, text: "Three." }],
      ["response.completed", { response: { status: "completed", output: [] } }],
    ]),
  );
  assert.equal(got.error, undefined);
  assert.equal(got.text, "One, two. Three.");
});

test("a Responses part sent only in its .done after another part's deltas is delivered", async () => {
  const got = await replay(
    "responses",
    responsesSse([
      ["response.output_text.delta", { output_index: 0, content_index: 0, delta: "Streamed. " }],
      ["response.output_text.done", { output_index: 1, content_index: 0, text: "Whole." }],
      ["response.completed", { response: { status: "completed", output: [] } }],
    ]),
  );
  assert.equal(got.text, "Streamed. Whole.");
});

test("chat text after a leading think block streams unchanged, a later <think> included", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({ role: "assistant", content: "" }),
      chatChunk({ content: "<think>plan" }),
      chatChunk({ content: " it</think>" }),
      chatChunk({ content: "\n\n" }),
      chatChunk({ content: "Use " }),
      chatChunk({ content: "<think> tags " }),
      chatChunk({ content: "  freely." }),
      chatChunk({}, "stop"),
    ]),
  );
  assert.equal(got.error, undefined);
  assert.equal(got.reasoning, "plan it");
  assert.equal(got.text, "Use <think> tags   freely.");
  assert.deepEqual(
    got.chunks.filter((c) => c.content).map((c) => c.content),
    ["Use ", "<think> tags ", "  freely."],
  );
});

test("chat reasoning_content and content of one delta come as one chunk", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({ reasoning_content: "why", content: "what" }),
      chatChunk({}, "stop"),
    ]),
  );
  assert.equal(got.error, undefined);
  assert.deepEqual(
    got.chunks.map((c) => [c.reasoning, c.content]),
    [["why", "what"], [null, null]],
  );
});

test("a server whose every event comes well within the idle limit is never idle, however long it streams", async () => {
  // 15 deltas 40 ms apart: 600 ms in all, longer than the 400 ms limit, never 400 ms silent.
  const pieces = Array.from({ length: 15 }, (_, i) => `${i} `);
  const server = await new MockOpenAIServer({
    turns: [{ text: pieces, delayPerDeltaMs: 40 }],
  }).start();
  try {
    const provider = new OpenAIProvider({
      apiKey: "k",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
      streamIdleMs: 400,
    });
    const got = await collect(
      await provider.stream("m", [{ role: "user", content: "hi" }], [], OPTS),
    );
    assert.equal(got.error, undefined);
    assert.equal(got.text, pieces.join(""));
    assert.equal(got.finish, "stop");
  } finally {
    await server.close();
  }
});
