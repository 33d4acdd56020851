import { test } from "node:test";
import assert from "node:assert/strict";
import { contextWindowFor, isDeepSeek, supportsReasoningEffort } from "./models.ts";

test("known families get their context windows", () => {
  assert.equal(contextWindowFor("gpt-4o-mini"), 128_000);
  assert.equal(contextWindowFor("gpt-4.1-mini"), 1_047_576);
  assert.equal(contextWindowFor("gpt-5"), 400_000);
  assert.equal(contextWindowFor("o3-mini"), 200_000);
  assert.equal(contextWindowFor("deepseek-reasoner"), 128_000);
  assert.equal(contextWindowFor("claude-sonnet-4"), 200_000);
  assert.equal(contextWindowFor("gemini-2.5-pro"), 1_048_576);
  assert.equal(contextWindowFor("qwen3-coder-plus"), 262_144);
  assert.equal(contextWindowFor("meta-llama/llama-3.1-70b-instruct"), 131_072);
});

test("gateway prefixes are ignored when matching a family", () => {
  assert.equal(contextWindowFor("openai/gpt-4.1"), contextWindowFor("gpt-4.1"));
});

test("an unknown model gets 128,000 tokens", () => {
  assert.equal(contextWindowFor("my-local-model"), 128_000);
});

test("DeepSeek is recognised by model name or base URL", () => {
  assert.equal(isDeepSeek("deepseek-chat"), true);
  assert.equal(isDeepSeek("chat", "https://api.deepseek.com/v1"), true);
  assert.equal(isDeepSeek("gpt-4o", "https://api.openai.com/v1"), false);
});

test("reasoning effort is supported by OpenAI reasoning models and never by DeepSeek", () => {
  assert.equal(supportsReasoningEffort("o3-mini"), true);
  assert.equal(supportsReasoningEffort("gpt-5-mini"), true);
  assert.equal(supportsReasoningEffort("gpt-4o"), false);
  assert.equal(supportsReasoningEffort("deepseek-reasoner"), false);
  assert.equal(supportsReasoningEffort("o3-mini", "https://gw.deepseek.example/v1"), false);
});
