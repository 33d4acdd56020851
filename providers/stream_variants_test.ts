/**
 * Variants of the wire kinds (DESIGN §4) as other servers send them, replayed over real HTTP
 * through the real SDK: each test is one quirk.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MockOpenAIServer } from "../testing/mock_server.ts";
import { OpenAIProvider } from "./openai_provider.ts";
import { ProviderError } from "./errors.ts";
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

const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };

test("chat tool-call indexes that start at 1 still give one call each", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({
        tool_calls: [{
          index: 1,
          id: "c1",
          type: "function",
          function: { name: "a", arguments: "" },
        }],
      }),
      chatChunk({ tool_calls: [{ index: 1, function: { arguments: '{"x":' } }] }),
      chatChunk({ tool_calls: [{ index: 1, function: { arguments: "1}" } }] }),
      chatChunk({
        tool_calls: [{
          index: 2,
          id: "c2",
          type: "function",
          function: { name: "b", arguments: "{}" },
        }],
      }),
      chatChunk({}, "tool_calls", { usage }),
    ]),
  );
  assert.equal(got.error, undefined);
  assert.deepEqual(got.toolCalls.map((c) => [c.id, c.function.name, c.function.arguments]), [
    ["c1", "a", '{"x":1}'],
    ["c2", "b", "{}"],
  ]);
});

test("chat calls that repeat index 0 with a new id are separate calls", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({
        tool_calls: [{ index: 0, id: "c1", function: { name: "read", arguments: '{"p":"a"}' } }],
      }),
      chatChunk({
        tool_calls: [{ index: 0, id: "c2", function: { name: "read", arguments: '{"p":' } }],
      }),
      chatChunk({ tool_calls: [{ index: 0, function: { arguments: '"b"}' } }] }),
      chatChunk({}, "tool_calls"),
    ]),
  );
  assert.deepEqual(got.toolCalls.map((c) => [c.id, c.function.arguments]), [
    ["c1", '{"p":"a"}'],
    ["c2", '{"p":"b"}'],
  ]);
});

test("chat calls without id or index that name a new function start a new call", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({ tool_calls: [{ function: { name: "a", arguments: '{"n":1}' } }] }),
      chatChunk({ tool_calls: [{ function: { name: "b", arguments: '{"n":2}' } }] }),
      chatChunk({}, "stop"),
    ]),
  );
  assert.deepEqual(got.toolCalls.map((c) => c.function.name), ["a", "b"]);
  assert.equal(new Set(got.toolCalls.map((c) => c.id)).size, 2, "generated ids are distinct");
  assert.equal(got.finish, "tool_calls", "tool calls win over a raw stop");
});

test("chat arguments resent whole after their deltas are not doubled", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({
        tool_calls: [{ index: 0, id: "c1", function: { name: "a", arguments: '{"q":' } }],
      }),
      chatChunk({ tool_calls: [{ index: 0, function: { arguments: '"x"}' } }] }),
      chatChunk({ tool_calls: [{ index: 0, id: "c1", function: { arguments: '{"q":"x"}' } }] }),
      chatChunk({}, "tool_calls"),
    ]),
  );
  assert.deepEqual(got.toolCalls.map((c) => c.function.arguments), ['{"q":"x"}']);
});

test("a think tag split across three chunks is routed to reasoning", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({ content: "<" }),
      chatChunk({ content: "thi" }),
      chatChunk({ content: "nk>plan it</th" }),
      chatChunk({ content: "ink>Answer" }),
      chatChunk({}, "stop"),
    ]),
  );
  assert.equal(got.reasoning, "plan it");
  assert.equal(got.text, "Answer");
});

test("a think tag later in the answer stays answer text", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({ content: "Use the <think> tag" }),
      chatChunk({}, "stop"),
    ]),
  );
  assert.equal(got.text, "Use the <think> tag");
  assert.equal(got.reasoning, "");
});

test("usage sent cumulatively in every chunk is reported once, as the last value", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({ content: "a" }, null, {
        usage: { prompt_tokens: 7, completion_tokens: 1, total_tokens: 8 },
      }),
      chatChunk({ content: "b" }, null, {
        usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 },
      }),
      chatChunk({}, "stop", {
        usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
      }),
    ]),
  );
  assert.deepEqual(got.usage, { inputTokens: 7, outputTokens: 3, totalTokens: 10 });
  assert.equal(got.chunks.filter((c) => c.usage).length, 1);
});

test("a chat stream that never sends usage succeeds with usage null", async () => {
  const got = await replay("chat", chatSse([chatChunk({ content: "ok" }), chatChunk({}, "stop")]));
  assert.equal(got.error, undefined);
  assert.equal(got.usage, null);
  assert.equal(got.finish, "stop");
});

test("the OpenRouter-style reasoning field is reasoning", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({ reasoning: "think" }),
      chatChunk({ content: "done" }),
      chatChunk({}, "stop"),
    ]),
  );
  assert.equal(got.reasoning, "think");
  assert.equal(got.text, "done");
});

test("content-part arrays split thinking parts from text parts", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({ content: [{ type: "thinking", thinking: [{ type: "text", text: "hmm" }] }] }),
      chatChunk({ content: [{ type: "text", text: "Hi" }] }),
      chatChunk({}, "stop"),
    ]),
  );
  assert.equal(got.reasoning, "hmm");
  assert.equal(got.text, "Hi");
});

test("a chat error payload mid-stream fails after the partial text", async () => {
  const got = await replay(
    "chat",
    chatSse([
      chatChunk({ content: "Part" }),
      { error: { message: "upstream overloaded", type: "server_error", code: "overloaded" } },
    ]),
  );
  assert.equal(got.text, "Part");
  assert.ok(got.error instanceof ProviderError);
  assert.match(got.error.message, /upstream overloaded/);
  assert.equal(got.error.retriable, true);
});

test("a chat length finish without tool calls is length", async () => {
  const got = await replay("chat", chatSse([chatChunk({ content: "a" }), chatChunk({}, "length")]));
  assert.equal(got.finish, "length");
});

test("chat [DONE] without any finish_reason is stream_incomplete, not success", async () => {
  const got = await replay("chat", chatSse([chatChunk({ content: "a" })]));
  assert.equal(got.text, "a");
  assert.ok(got.error instanceof ProviderError);
  assert.equal(got.error.code, "stream_incomplete");
});

const fcItem = {
  id: "fc_1",
  type: "function_call",
  call_id: "call_1",
  name: "grep",
  arguments: "",
};

test("Responses arguments that arrive only in the .done event are used", async () => {
  const got = await replay(
    "responses",
    responsesSse([
      ["response.created", { response: { id: "r", status: "in_progress", output: [] } }],
      ["response.output_item.added", { output_index: 0, item: fcItem }],
      ["response.function_call_arguments.done", {
        output_index: 0,
        item_id: "x1",
        arguments: '{"q":"a"}',
      }],
      ["response.completed", {
        response: {
          id: "r",
          status: "completed",
          output: [],
          usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
        },
      }],
    ]),
  );
  assert.equal(got.error, undefined);
  assert.deepEqual(got.toolCalls, [{
    id: "call_1",
    type: "function",
    function: { name: "grep", arguments: '{"q":"a"}' },
  }]);
  assert.equal(got.finish, "tool_calls");
});

test("Responses calls found only in response.completed output are delivered", async () => {
  const got = await replay(
    "responses",
    responsesSse([
      ["response.completed", {
        response: { status: "completed", output: [{ ...fcItem, arguments: "{}" }] },
      }],
    ]),
  );
  assert.deepEqual(got.toolCalls.map((c) => c.id), ["call_1"]);
});

test("Responses text sent only in output_text.done is delivered once", async () => {
  const got = await replay(
    "responses",
    responsesSse([
      ["response.output_text.done", { output_index: 0, content_index: 0, text: "Hello" }],
      ["response.completed", {
        response: {
          status: "completed",
          output: [{ type: "message", content: [{ type: "output_text", text: "Hello" }] }],
        },
      }],
    ]),
  );
  assert.equal(got.text, "Hello");
});

test("response.failed with an overflow message is a context overflow", async () => {
  const got = await replay(
    "responses",
    responsesSse([
      ["response.created", { response: { status: "in_progress", output: [] } }],
      ["response.failed", {
        response: {
          status: "failed",
          error: {
            code: "server_error",
            message: "Your input exceeds the context window of this model.",
          },
        },
      }],
    ]),
  );
  assert.ok(got.error instanceof ProviderError);
  assert.equal(got.error.contextOverflow, true);
  assert.equal(got.error.retriable, false);
});

test("response.incomplete for content_filter finishes content_filter", async () => {
  const got = await replay(
    "responses",
    responsesSse([
      ["response.output_text.delta", { output_index: 0, content_index: 0, delta: "Par" }],
      ["response.incomplete", {
        response: {
          status: "incomplete",
          incomplete_details: { reason: "content_filter" },
          output: [],
        },
      }],
    ]),
  );
  assert.equal(got.text, "Par");
  assert.equal(got.finish, "content_filter");
});

test("a Responses stream without a terminal event is stream_incomplete and delivers no call", async () => {
  const got = await replay(
    "responses",
    responsesSse([
      ["response.output_text.delta", { output_index: 0, content_index: 0, delta: "Hi" }],
      ["response.output_item.added", { output_index: 1, item: fcItem }],
      ["response.function_call_arguments.done", { output_index: 1, arguments: "{}" }],
    ]),
  );
  assert.equal(got.text, "Hi");
  assert.deepEqual(got.toolCalls, []);
  assert.ok(got.error instanceof ProviderError);
  assert.equal(got.error.code, "stream_incomplete");
  assert.equal(got.error.retriable, true);
});

test("two Responses reasoning summary parts are separated by a blank line", async () => {
  const got = await replay(
    "responses",
    responsesSse([
      ["response.reasoning_summary_text.delta", {
        output_index: 0,
        summary_index: 0,
        delta: "One",
      }],
      ["response.reasoning_summary_text.delta", {
        output_index: 0,
        summary_index: 1,
        delta: "Two",
      }],
      ["response.completed", { response: { status: "completed", output: [] } }],
    ]),
  );
  assert.equal(got.reasoning, "One\n\nTwo");
});
