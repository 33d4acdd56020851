import { test } from "node:test";
import assert from "node:assert/strict";
import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  AuthenticationError,
  InternalServerError,
  RateLimitError,
} from "openai";
import {
  isAbortError,
  isContextOverflowMessage,
  ProviderError,
  toProviderError,
} from "./errors.ts";

const headers = new Headers();

test("401 and 403 are not retriable", () => {
  const e = toProviderError(
    new AuthenticationError(401, { message: "bad key" }, undefined, headers),
  );
  assert.equal(e.status, 401);
  assert.equal(e.retriable, false);
  assert.equal(
    toProviderError(APIError.generate(403, { error: { message: "no" } }, undefined, headers))
      .retriable,
    false,
  );
});

test("408, 409, 429 and 5xx are retriable", () => {
  for (const status of [408, 409, 429, 500, 502, 503]) {
    const e = toProviderError(
      APIError.generate(status, { error: { message: "x" } }, undefined, headers),
    );
    assert.equal(e.retriable, true, String(status));
    assert.equal(e.status, status);
  }
  assert.ok(
    toProviderError(new RateLimitError(429, { message: "slow" }, undefined, headers)).retriable,
  );
  assert.ok(toProviderError(new InternalServerError(500, undefined, undefined, headers)).retriable);
});

test("SDK connection errors and low-level network failures are retriable network errors", () => {
  const errs: unknown[] = [
    new APIConnectionError({ message: "Connection error." }),
    new APIConnectionTimeoutError(),
    new TypeError("fetch failed"),
    Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }),
    new TypeError("error reading a body from connection"),
  ];
  for (const err of errs) {
    const e = toProviderError(err);
    assert.equal(e.network, true, String(err));
    assert.equal(e.retriable, true, String(err));
  }
});

test("status 413 and code context_length_exceeded are context overflows", () => {
  assert.ok(toProviderError(APIError.generate(413, undefined, undefined, headers)).contextOverflow);
  const e = toProviderError(
    APIError.generate(
      400,
      { error: { message: "too big", code: "context_length_exceeded" } },
      undefined,
      headers,
    ),
  );
  assert.equal(e.contextOverflow, true);
  assert.equal(e.retriable, false);
});

test("the overflow messages of the major providers are recognised", () => {
  const messages = [
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.", // OpenAI, DeepSeek, vLLM
    "Your input exceeds the context window of this model.", // OpenAI Responses
    "prompt is too long: 210000 tokens > 200000 maximum", // Anthropic-compatible
    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", // Gemini
    "This endpoint's maximum context length is 65536 tokens.", // OpenRouter
    "the request exceeds the available context size, try increasing it", // llama.cpp
    "This model's maximum prompt length is 131072 but the request contains 140000 tokens.", // xAI
    "Please reduce the length of the messages or completion.", // Groq, Azure
    "Input length 9000 exceeds the model's context length 8192", // vLLM
    "prompt too long; exceeded max context length by 100 tokens", // Ollama
    "Invalid request: Your request exceeded model token limit: 131072", // Moonshot
  ];
  for (const m of messages) assert.ok(isContextOverflowMessage(m), m);
  assert.equal(isContextOverflowMessage("Rate limit reached for requests"), false);
  assert.equal(isContextOverflowMessage("Incorrect API key provided"), false);
});

test("a mid-stream error payload with a fatal code is not retriable", () => {
  const e = toProviderError(
    new APIError(undefined, { message: "quota", code: "insufficient_quota" }, undefined, undefined),
  );
  assert.equal(e.code, "insufficient_quota");
  assert.equal(e.retriable, false);
  const o = toProviderError(
    new APIError(undefined, { message: "overloaded", code: "server_error" }, undefined, undefined),
  );
  assert.equal(o.retriable, true);
});

test("a numeric error code in a stream payload becomes the status", () => {
  const e = toProviderError({
    error: { object: "error", message: "Internal server error", code: 500 },
  });
  assert.equal(e.status, 500);
  assert.equal(e.retriable, true);
  assert.match(e.message, /^Cannot get a model response: Internal server error/);
});

test("aborts stay recognisable as aborts", () => {
  for (const err of [new APIUserAbortError(), new DOMException("aborted", "AbortError")]) {
    const e = toProviderError(err);
    assert.equal(e.name, "AbortError");
    assert.equal(e.code, "aborted");
    assert.ok(e instanceof ProviderError);
    assert.ok(isAbortError(e));
  }
});

test("a ProviderError passes through unchanged", () => {
  const original = new ProviderError("Cannot x: y", { code: "stream_incomplete", retriable: true });
  assert.equal(toProviderError(original), original);
});
