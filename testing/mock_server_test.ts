import { test } from "node:test";
import assert from "node:assert/strict";
import { MockOpenAIServer, type RecordedRequest, textTurn, toolCallTurn } from "./mock_server.ts";

async function post(server: MockOpenAIServer, path: string, body: unknown): Promise<Response> {
  return await fetch(`${server.baseURL}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

function dataLines(sse: string): unknown[] {
  return sse.split("\n").filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
    .map((l) => JSON.parse(l.slice(6)));
}

test("the server listens on 127.0.0.1 and exposes a /v1 base URL", async () => {
  const server = await new MockOpenAIServer().start();
  try {
    assert.match(server.baseURL, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    assert.ok(server.port > 0);
  } finally {
    await server.close();
  }
});

test("a streamed chat turn is Chat Completions SSE ending in [DONE]", async () => {
  const server = await new MockOpenAIServer({ turns: [textTurn(["He", "llo"])] }).start();
  try {
    const res = await post(server, "/chat/completions", { model: "m", messages: [], stream: true });
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const body = await res.text();
    assert.ok(body.trimEnd().endsWith("data: [DONE]"));
    const chunks = dataLines(body) as {
      choices: { delta: { content?: string }; finish_reason: string | null }[];
      usage?: unknown;
    }[];
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), "Hello");
    assert.equal(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason, "stop");
    assert.ok(chunks.at(-1)?.usage, "usage rides on a final empty-choices chunk");
  } finally {
    await server.close();
  }
});

test("a streamed Responses turn has named events and ends with response.completed", async () => {
  const server = await new MockOpenAIServer({
    turns: [toolCallTurn("grep", { q: "x" }, { id: "c1" })],
  }).start();
  try {
    const body = await (await post(server, "/responses", { model: "m", input: [], stream: true }))
      .text();
    const types = (dataLines(body) as { type: string }[]).map((e) => e.type);
    assert.equal(types[0], "response.created");
    assert.equal(types.at(-1), "response.completed");
    assert.ok(body.includes("event: response.function_call_arguments.done"));
  } finally {
    await server.close();
  }
});

test("responses:false answers 404 on /v1/responses", async () => {
  const server = await new MockOpenAIServer({ turns: [textTurn("x")], responses: false }).start();
  try {
    const res = await post(server, "/responses", { model: "m", input: [] });
    assert.equal(res.status, 404);
    await res.body?.cancel();
  } finally {
    await server.close();
  }
});

test("an exhausted script answers 500 with a clear message", async () => {
  const server = await new MockOpenAIServer().start();
  try {
    const res = await post(server, "/chat/completions", { model: "m", messages: [] });
    assert.equal(res.status, 500);
    const body = await res.json() as { error: { message: string } };
    assert.match(body.error.message, /no turn left/);
  } finally {
    await server.close();
  }
});

test("requests are recorded with path, parsed body and headers", async () => {
  const server = await new MockOpenAIServer({ turns: [textTurn("x")] }).start();
  try {
    await (await post(server, "/chat/completions", { model: "m1", messages: [] })).body?.cancel();
    assert.equal(server.requests.length, 1);
    assert.equal(server.requests[0].path, "/v1/chat/completions");
    assert.equal(server.requests[0].body?.model, "m1");
    assert.equal(server.requests[0].headers["content-type"], "application/json");
  } finally {
    await server.close();
  }
});

test("a function script sees each request and its index", async () => {
  const seen: number[] = [];
  const server = await new MockOpenAIServer({
    turns: (req: RecordedRequest, i: number) => {
      seen.push(i);
      return textTurn(`${req.body?.model}#${i}`);
    },
  }).start();
  try {
    const a = await (await post(server, "/chat/completions", { model: "a", messages: [] })).json();
    const b = await (await post(server, "/chat/completions", { model: "b", messages: [] })).json();
    assert.equal(a.choices[0].message.content, "a#0");
    assert.equal(b.choices[0].message.content, "b#1");
    assert.deepEqual(seen, [0, 1]);
  } finally {
    await server.close();
  }
});

test("enqueue appends turns to the script", async () => {
  const server = await new MockOpenAIServer().start();
  try {
    server.enqueue(textTurn("later"));
    const r = await (await post(server, "/responses", { model: "m", input: [] })).json();
    assert.equal(r.output[0].content[0].text, "later");
  } finally {
    await server.close();
  }
});

test("close() ends a connection held open by holdOpen", async () => {
  const server = await new MockOpenAIServer({ turns: [{ text: "a", holdOpen: true }] }).start();
  const res = await post(server, "/chat/completions", { model: "m", messages: [], stream: true });
  const reader = res.body!.getReader();
  await reader.read();
  await server.close();
  await assert.rejects(async () => {
    while (!(await reader.read()).done) { /* drain */ }
  });
});
