/**
 * OpenAIProvider behaviour over real HTTP against MockOpenAIServer (manual §10.1, DESIGN §4).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mock_server.ts";
import { OpenAIProvider, type OpenAIProviderOptions } from "./openai_provider.ts";
import { ProviderError } from "./errors.ts";
import { collect, OPTS } from "./_test_helpers.ts";
import type { Message } from "./types.ts";

const USER: Message[] = [{ role: "user", content: "hi" }];

async function withServer(
  turns: ScriptedTurn[] | ((req: unknown, i: number) => ScriptedTurn),
  fn: (
    server: MockOpenAIServer,
    make: (o?: OpenAIProviderOptions) => OpenAIProvider,
  ) => Promise<void>,
  responses = true,
): Promise<void> {
  const server = await new MockOpenAIServer({ turns: turns as ScriptedTurn[], responses }).start();
  try {
    await fn(
      server,
      (o = {}) => new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, maxRetries: 0, ...o }),
    );
  } finally {
    await server.close();
  }
}

test("a scripted text answer streams over Responses with usage and stop", async () => {
  await withServer(
    [{ text: "Hello there", usage: { inputTokens: 5, outputTokens: 2 } }],
    async (server, make) => {
      const got = await collect(await make().stream("gpt-4.1", USER, [], OPTS));
      assert.equal(got.text, "Hello there");
      assert.equal(got.finish, "stop");
      assert.deepEqual(got.usage, { inputTokens: 5, outputTokens: 2, totalTokens: 7 });
      assert.equal(server.requests[0].path, "/v1/responses");
    },
  );
});

test("a 404 on /responses falls back to Chat and is remembered per model", async () => {
  await withServer([{ text: "one" }, { text: "two" }, { text: "three" }], async (server, make) => {
    const provider = make();
    assert.equal((await collect(await provider.stream("model-a", USER, [], OPTS))).text, "one");
    assert.equal((await collect(await provider.stream("model-a", USER, [], OPTS))).text, "two");
    assert.equal((await collect(await provider.stream("model-b", USER, [], OPTS))).text, "three");
    assert.deepEqual(server.requests.map((r) => r.path), [
      "/v1/responses",
      "/v1/chat/completions",
      "/v1/chat/completions",
      "/v1/responses",
      "/v1/chat/completions",
    ]);
  }, false);
});

test("an incompatible-parameter 400 falls back to Chat for that request only", async () => {
  let responsesCalls = 0;
  const script = (req: unknown): ScriptedTurn => {
    const r = req as { path: string };
    if (r.path.endsWith("/responses") && responsesCalls++ === 0) {
      return { httpError: { status: 400, message: "Unsupported parameter: 'store'" } };
    }
    return { text: "ok" };
  };
  await withServer(script, async (server, make) => {
    const provider = make();
    assert.equal((await collect(await provider.stream("m", USER, [], OPTS))).text, "ok");
    assert.equal((await collect(await provider.stream("m", USER, [], OPTS))).text, "ok");
    assert.deepEqual(server.requests.map((r) => r.path), [
      "/v1/responses",
      "/v1/chat/completions",
      "/v1/responses",
    ]);
  });
});

test("a 401 is thrown as is: no retry, no fallback", async () => {
  await withServer([{
    httpError: { status: 401, message: "Incorrect API key", code: "invalid_api_key" },
  }], async (server, make) => {
    const provider = make({ maxRetries: 2 });
    await assert.rejects(provider.stream("m", USER, [], OPTS), (err: unknown) => {
      assert.ok(err instanceof ProviderError);
      assert.equal(err.status, 401);
      assert.equal(err.retriable, false);
      return true;
    });
    assert.equal(server.requests.length, 1);
  });
});

test("a 500 is retried by the SDK and not fallen back to Chat", async () => {
  await withServer([
    { httpError: { status: 500, message: "boom" } },
    { text: "recovered" },
  ], async (server, make) => {
    const got = await collect(await make({ maxRetries: 1 }).stream("m", USER, [], OPTS));
    assert.equal(got.text, "recovered");
    assert.deepEqual(server.requests.map((r) => r.path), ["/v1/responses", "/v1/responses"]);
  });
});

test("aborting the signal ends the stream with an AbortError and closes the connection", async () => {
  await withServer([{ text: ["a", "b"], holdOpen: true }], async (server, make) => {
    const ac = new AbortController();
    const stream = await make({ apiMode: "chat" }).stream("m", USER, [], {
      ...OPTS,
      signal: ac.signal,
    });
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const c of stream) {
        if (c.content) seen.push(c.content);
        if (seen.length === 2) ac.abort();
      }
    }, (err: unknown) => {
      assert.equal((err as Error).name, "AbortError");
      assert.equal((err as ProviderError).code, "aborted");
      return true;
    });
    assert.deepEqual(seen, ["a", "b"]);
    await server.waitForClientClose(0);
    assert.equal(server.requests[0].clientClosed, true);
  });
});

test("an already-aborted signal rejects before any request is sent", async () => {
  await withServer([{ text: "x" }], async (server, make) => {
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(make().stream("m", USER, [], { ...OPTS, signal: ac.signal }), {
      name: "AbortError",
    });
    assert.equal(server.requests.length, 0);
  });
});

test("the idle watchdog fails a stalled stream and closes the connection", async () => {
  await withServer([{ stallForever: true }], async (server, make) => {
    const got = await collect(await make({ streamIdleMs: 100 }).stream("m", USER, [], OPTS));
    assert.ok(got.error instanceof ProviderError);
    assert.equal(got.error.code, "stream_idle_timeout");
    assert.equal(got.error.retriable, true);
    assert.equal(got.error.network, true);
    await server.waitForClientClose(0);
  });
});

test("a missing API key never throws from the constructor, only from requests", async () => {
  const saved = process.env.OPENAI_API_KEY;
  delete process.env.OPENAI_API_KEY;
  try {
    const provider = new OpenAIProvider({ baseURL: "http://127.0.0.1:9/v1" });
    for (
      const call of [
        () => provider.stream("m", USER, [], OPTS),
        () => provider.chat("m", USER, {}, OPTS),
      ]
    ) {
      await assert.rejects(call(), (err: unknown) => {
        assert.ok(err instanceof ProviderError);
        assert.equal(err.code, "missing_api_key");
        assert.match(err.message, /^Cannot call the model: OPENAI_API_KEY is not set/);
        return true;
      });
    }
  } finally {
    if (saved !== undefined) process.env.OPENAI_API_KEY = saved;
  }
});

test("reasoning effort is sent to OpenAI reasoning models on both APIs", async () => {
  await withServer([{ text: "a" }, { text: "b" }], async (server, make) => {
    await collect(await make().stream("o3-mini", USER, [], { ...OPTS, reasoningEffort: "high" }));
    await collect(
      await make({ apiMode: "chat" }).stream("o3-mini", USER, [], {
        ...OPTS,
        reasoningEffort: "low",
      }),
    );
    assert.deepEqual(server.requests[0].body?.reasoning, { effort: "high" });
    assert.equal(server.requests[1].body?.reasoning_effort, "low");
  });
});

test("reasoning effort is omitted for DeepSeek by model name or base URL", async () => {
  await withServer([{ text: "a" }, { text: "b" }], async (server, make) => {
    await collect(
      await make({ apiMode: "chat" }).stream("deepseek-reasoner", USER, [], {
        ...OPTS,
        reasoningEffort: "high",
      }),
    );
    await collect(await make({ reasoningEffort: "high" }).stream("deepseek-chat", USER, [], OPTS));
    assert.equal("reasoning_effort" in (server.requests[0].body ?? {}), false);
    assert.equal("reasoning" in (server.requests[1].body ?? {}), false);
  });
});

test("DeepSeek on Responses gets the server-side web_search tool instead of the local one", async () => {
  await withServer([{ text: "a" }], async (server, make) => {
    const tools = [
      {
        type: "function" as const,
        function: { name: "web_search", parameters: { type: "object" } },
      },
      {
        type: "function" as const,
        function: { name: "read_file", parameters: { type: "object" } },
      },
    ];
    await collect(await make().stream("deepseek-chat", USER, tools, OPTS));
    assert.deepEqual(server.requests[0].body?.tools, [
      {
        type: "function",
        name: "read_file",
        description: "",
        parameters: { type: "object" },
        strict: false,
      },
      { type: "web_search" },
    ]);
  });
});

const HISTORY: Message[] = [
  { role: "system", content: "Be brief." },
  {
    role: "user",
    content: [
      { type: "text", text: "What is in this picture?" },
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
    ],
  },
  {
    role: "assistant",
    content: "Let me look.",
    reasoning_content: "I should read the file.",
    tool_calls: [{
      id: "call_1",
      type: "function",
      function: { name: "read_file", arguments: "" },
    }],
    hostOnly: "not for the wire",
  },
  { role: "tool", tool_call_id: "call_1", name: "read_file", content: "file text" },
  { role: "assistant", content: "It is a cat." },
  { role: "user", content: "Thanks" },
];

test("a full tool-call history is converted to Responses input items", async () => {
  await withServer([{ text: "ok" }], async (server, make) => {
    await collect(await make().stream("gpt-4.1", HISTORY, [], OPTS));
    const body = server.requests[0].body!;
    assert.equal(body.instructions, "Be brief.");
    assert.deepEqual(body.input, [
      {
        role: "user",
        content: [
          { type: "input_text", text: "What is in this picture?" },
          { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "auto" },
        ],
      },
      { role: "assistant", content: "Let me look." },
      { type: "function_call", call_id: "call_1", name: "read_file", arguments: "{}" },
      { type: "function_call_output", call_id: "call_1", output: "file text" },
      { role: "assistant", content: "It is a cat." },
      { role: "user", content: "Thanks" },
    ]);
    assert.equal(body.stream, true);
  });
});

test("Chat requests keep reasoning_content on tool-call messages and drop host-only fields", async () => {
  await withServer([{ text: "ok" }], async (server, make) => {
    await collect(await make({ apiMode: "chat" }).stream("deepseek-reasoner", HISTORY, [], OPTS));
    const messages = server.requests[0].body!.messages as Record<string, unknown>[];
    assert.equal(messages[2].reasoning_content, "I should read the file.");
    assert.equal("hostOnly" in messages[2], false);
    assert.deepEqual(messages[2].tool_calls, [{
      id: "call_1",
      type: "function",
      function: { name: "read_file", arguments: "{}" },
    }]);
    assert.deepEqual(server.requests[0].body!.stream_options, { include_usage: true });
  });
});

test("scripted tool calls arrive complete on the final chunk in both API modes", async () => {
  for (const apiMode of ["responses", "chat"] as const) {
    await withServer([{
      text: "Looking.",
      toolCalls: [{ id: "c9", name: "grep", arguments: { q: "x" } }],
    }], async (_server, make) => {
      const got = await collect(await make({ apiMode }).stream("m", USER, [], OPTS));
      assert.equal(got.text, "Looking.", apiMode);
      assert.deepEqual(got.toolCalls, [{
        id: "c9",
        type: "function",
        function: { name: "grep", arguments: '{"q":"x"}' },
      }]);
      assert.equal(got.finish, "tool_calls");
      const withCalls = got.chunks.filter((c) => c.toolCalls);
      assert.equal(withCalls.length, 1);
      assert.equal(withCalls[0], got.chunks.at(-1));
    });
  }
});

test("an error event after deltas fails the stream after delivering the partial text", async () => {
  for (const apiMode of ["responses", "chat"] as const) {
    await withServer([{
      text: ["Par", "tial"],
      errorAfterDeltas: { message: "model overloaded", code: "server_error" },
    }], async (_s, make) => {
      const got = await collect(await make({ apiMode }).stream("m", USER, [], OPTS));
      assert.equal(got.text, "Partial", apiMode);
      assert.ok(got.error instanceof ProviderError);
      assert.match(got.error.message, /model overloaded/);
      assert.equal(got.error.retriable, true);
    });
  }
});

test("a connection cut after the deltas is a retriable network error", async () => {
  for (const apiMode of ["responses", "chat"] as const) {
    await withServer([{
      text: "Half",
      toolCalls: [{ name: "a", arguments: "{}" }],
      errorAfterDeltas: "cut",
    }], async (_s, make) => {
      const got = await collect(await make({ apiMode }).stream("m", USER, [], OPTS));
      assert.equal(got.text, "Half", "text before the cut is delivered");
      assert.ok(got.error instanceof ProviderError, apiMode);
      assert.equal(got.error.retriable, true);
      assert.equal(got.error.network, true);
      assert.deepEqual(got.toolCalls, []);
    });
  }
});

test("a context-overflow HTTP error is flagged contextOverflow", async () => {
  await withServer([{
    httpError: {
      status: 400,
      message:
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
      code: "context_length_exceeded",
    },
  }], async (_s, make) => {
    await assert.rejects(make().stream("m", USER, [], OPTS), (err: unknown) => {
      assert.ok(err instanceof ProviderError);
      assert.equal(err.contextOverflow, true);
      assert.equal(err.status, 400);
      return true;
    });
  });
});

test("chat() returns the text of a non-streaming answer on both APIs", async () => {
  await withServer(
    [{ text: "Session name" }, { text: "<think>hmm</think>Other name" }],
    async (server, make) => {
      assert.equal(
        await make().chat("m", USER, { temperature: 0.2 }, OPTS, { maxTokens: 8 }),
        "Session name",
      );
      assert.equal(
        await make({ apiMode: "chat" }).chat("m", USER, {}, OPTS, { maxTokens: 8 }),
        "Other name",
      );
      assert.equal(server.requests[0].body?.max_output_tokens, 16, "the Responses minimum");
      assert.equal(server.requests[0].body?.temperature, 0.2);
      assert.equal(server.requests[1].body?.max_tokens, 8);
      assert.equal(server.requests[1].body?.stream, undefined);
    },
  );
});

test("chat() returns null when the model produced no text", async () => {
  await withServer([{ text: "" }], async (_s, make) => {
    assert.equal(await make().chat("m", USER, {}, OPTS), null);
  });
});

test("logDir gets a dated request and response file per request", async () => {
  const dir = await mkdtemp(join(tmpdir(), "zq-audit-"));
  try {
    await withServer([{ text: "logged" }], async (_s, make) => {
      await collect(
        await make({ logDir: dir }).stream("m", USER, [], {
          reqId: "req/7",
          logTime: "2026-03-04T10:00:00Z",
        }),
      );
    });
    const files = (await readdir(join(dir, "2026-03-04"))).sort();
    assert.deepEqual(files, ["req_7.responses.request.json", "req_7.responses.response.json"]);
    const request = JSON.parse(await readFile(join(dir, "2026-03-04", files[0]), "utf8"));
    assert.deepEqual(request.input, [{ role: "user", content: "hi" }]);
    const response = JSON.parse(await readFile(join(dir, "2026-03-04", files[1]), "utf8"));
    assert.equal(response.content, "logged");
    assert.equal(response.finishReason, "stop");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("OPENAI_FORCE_API_MODE=chat sends straight to Chat Completions", async () => {
  const saved = process.env.OPENAI_FORCE_API_MODE;
  process.env.OPENAI_FORCE_API_MODE = "chat";
  try {
    await withServer([{ text: "x" }], async (server, make) => {
      const provider = make();
      assert.equal(provider.apiMode, "chat");
      await collect(await provider.stream("m", USER, [], OPTS));
      assert.equal(server.requests[0].path, "/v1/chat/completions");
    });
  } finally {
    if (saved === undefined) delete process.env.OPENAI_FORCE_API_MODE;
    else process.env.OPENAI_FORCE_API_MODE = saved;
  }
});

test("defaultHeaders reach the server", async () => {
  await withServer([{ text: "x" }], async (server, make) => {
    await collect(await make({ defaultHeaders: { "x-tenant": "t1" } }).stream("m", USER, [], OPTS));
    assert.equal(server.requests[0].headers["x-tenant"], "t1");
  });
});

test("the socksProxy option routes requests through a SOCKS5 handshake", async () => {
  // A local TCP listener stands in for the proxy: it records the first bytes and hangs up.
  const first: number[] = [];
  const sockets = new Set<Socket>();
  const proxy = createServer((socket) => {
    sockets.add(socket);
    socket.once("data", (data) => {
      first.push(...data.subarray(0, 2));
      socket.destroy();
    });
  });
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
  const port = (proxy.address() as { port: number }).port;
  try {
    const provider = new OpenAIProvider({
      apiKey: "k",
      baseURL: "http://127.0.0.1:65500/v1", // never reached: the proxy hangs up
      socksProxy: `socks5://127.0.0.1:${port}`,
      maxRetries: 0,
    });
    await assert.rejects(provider.stream("m", USER, [], OPTS), ProviderError);
    assert.equal(first[0], 5, "SOCKS version 5 greeting");
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => proxy.close(() => r()));
  }
});
