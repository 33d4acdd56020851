import { test } from "node:test";
import assert from "node:assert/strict";
import { estimateTokens } from "../mod.ts";
import { IMAGE_TOKENS, loadTokenCounter, messageTokens } from "./token_estimate.ts";

test("estimateTokens counts with the real o200k tokenizer, not a character ratio", async () => {
  assert.equal(await estimateTokens("Hello, world"), 3);
  assert.equal(await estimateTokens(""), 0);
  // 1,000 repetitions of a common word are far fewer tokens than characters / 4.
  const text = "the ".repeat(1000);
  const n = await estimateTokens(text);
  assert.ok(n >= 900 && n <= 1100, String(n));
});

test("an image counts as a fixed cost, never by its base64 bytes", async () => {
  const count = await loadTokenCounter();
  const n = messageTokens({
    role: "user",
    content: [
      { type: "text", text: "look" },
      { type: "image_url", image_url: { url: `data:image/png;base64,${"A".repeat(200_000)}` } },
    ],
  }, count);
  assert.ok(n >= IMAGE_TOKENS && n < IMAGE_TOKENS + 20, String(n));
});

test("tool-call arguments count toward a message", async () => {
  const count = await loadTokenCounter();
  const bare = messageTokens({ role: "assistant", content: null }, count);
  const withCall = messageTokens({
    role: "assistant",
    content: null,
    tool_calls: [{
      id: "c",
      type: "function",
      function: { name: "read_file", arguments: '{"path":"a/very/long/path/name.txt"}' },
    }],
  }, count);
  assert.ok(withCall > bare + 8);
});

test("a long run of one character is counted in linear time, close to the exact count", async () => {
  const count = await loadTokenCounter();
  // Without slicing, BPE on one 300,000-character piece takes minutes and blocks the event loop.
  const run = "x".repeat(300_000);
  const n = count(run);
  assert.ok(n > 0 && n <= run.length, String(n));
  const exactSmall = count("x".repeat(256));
  assert.ok(Math.abs(n - exactSmall * (300_000 / 256)) <= 300_000 / 256 + 1, String(n));
});

test("slicing long runs leaves ordinary text counted exactly", async () => {
  const count = await loadTokenCounter();
  const prose = "The quick brown fox jumps over the lazy dog. ".repeat(2000);
  const { countTokens } = await import("gpt-tokenizer/encoding/o200k_base");
  assert.equal(count(prose), countTokens(prose));
  const emoji = "😀".repeat(400); // 800 UTF-16 units: slices must not split a pair
  assert.ok(count(emoji) > 0);
});
