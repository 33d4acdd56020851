/**
 * Every recorded-style wire case (tests/fixtures/wire, from ../shared/cases/wire) replayed over
 * real HTTP on 127.0.0.1 through the real openai SDK and OpenAIProvider (DESIGN §4, §7).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { MockOpenAIServer } from "../testing/mock_server.ts";
import { OpenAIProvider } from "./openai_provider.ts";
import { ProviderError } from "./errors.ts";
import { collect, OPTS } from "./_test_helpers.ts";

const here = dirname(fileURLToPath(import.meta.url));
const casesDir = join(here, "..", "tests", "fixtures", "wire");

interface Expected {
  mode: "chat" | "responses";
  outcome: "success" | "error";
  text: string;
  reasoning: string;
  tool_calls: { id: string; name: string; arguments: string; arguments_parsed: unknown }[];
  finish_reason: string;
  usage: Record<string, number> | null;
  error: { message_contains: string; code: unknown } | null;
  compare?: { trim_whitespace?: boolean };
}

const camel: Record<string, string> = {
  input_tokens: "inputTokens",
  output_tokens: "outputTokens",
  total_tokens: "totalTokens",
  reasoning_tokens: "reasoningTokens",
  cached_input_tokens: "cachedInputTokens",
};

const cases = readdirSync(casesDir, { withFileTypes: true }).filter((e) => e.isDirectory())
  .map((e) => e.name).sort();

test("the wire fixture folder holds the 15 shared cases", () => {
  assert.equal(cases.length, 15);
});

for (const name of cases) {
  const dir = join(casesDir, name);
  const exp: Expected = JSON.parse(readFileSync(join(dir, "expected.json"), "utf8"));
  const body = readFileSync(join(dir, "stream.sse"), "utf8");
  test(`wire case ${name} yields the expected uniform result`, async () => {
    const server = await new MockOpenAIServer({ turns: [{ rawSse: body }] }).start();
    try {
      const provider = new OpenAIProvider({
        apiKey: "test-key",
        baseURL: server.baseURL,
        apiMode: exp.mode,
        maxRetries: 0,
      });
      const got = await collect(
        await provider.stream("test-model", [{ role: "user", content: "hi" }], [], OPTS),
      );
      const norm = (s: string) => exp.compare?.trim_whitespace ? s.trim() : s;
      assert.equal(norm(got.text), norm(exp.text));
      assert.equal(norm(got.reasoning), norm(exp.reasoning));
      assert.equal(
        server.requests[0].path,
        exp.mode === "chat" ? "/v1/chat/completions" : "/v1/responses",
      );
      if (exp.outcome === "error") {
        assert.ok(got.error instanceof ProviderError, `expected a ProviderError, got ${got.error}`);
        assert.deepEqual(got.toolCalls, []);
        assert.equal(got.finish, null);
        if (exp.error?.code === "stream_incomplete") {
          assert.equal(got.error.code, "stream_incomplete");
          assert.equal(got.error.retriable, true);
          assert.equal(got.error.network, true);
        } else if (exp.error) {
          assert.match(
            got.error.message.toLowerCase(),
            new RegExp(
              exp.error.message_contains.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&"),
            ),
          );
        }
        return;
      }
      assert.equal(got.error, undefined, String(got.error));
      assert.equal(got.finish, exp.finish_reason);
      assert.deepEqual(
        got.toolCalls.map((c) => ({
          id: c.id,
          name: c.function.name,
          args: JSON.parse(c.function.arguments),
        })),
        exp.tool_calls.map((c) => ({ id: c.id, name: c.name, args: c.arguments_parsed })),
      );
      assert.deepEqual(
        got.toolCalls.map((c) => c.function.arguments),
        exp.tool_calls.map((c) => c.arguments),
      );
      const last = got.chunks.at(-1)!;
      assert.equal(
        last.finishReason,
        exp.finish_reason,
        "the final chunk carries the finish reason",
      );
      if (exp.usage) {
        for (const [k, v] of Object.entries(exp.usage)) {
          assert.equal((got.usage as unknown as Record<string, number>)?.[camel[k]], v, k);
        }
      } else assert.equal(got.usage, null);
    } finally {
      await server.close();
    }
  });
}
