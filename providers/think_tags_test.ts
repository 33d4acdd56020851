import { test } from "node:test";
import assert from "node:assert/strict";
import { ThinkTagSplitter } from "./_think_tags.ts";

function run(deltas: string[]): { content: string; reasoning: string } {
  const s = new ThinkTagSplitter();
  let content = "";
  let reasoning = "";
  for (const d of [...deltas.map((x) => s.push(x)), s.flush()]) {
    content += d.content;
    reasoning += d.reasoning;
  }
  return { content, reasoning };
}

test("a closing tag split one character at a time is still found", () => {
  const r = run(["<think>abc", "<", "/", "t", "h", "i", "n", "k", ">", "Hi"]);
  assert.deepEqual(r, { content: "Hi", reasoning: "abc" });
});

test("text that only looks like the start of a tag is released as text", () => {
  assert.deepEqual(run(["<th", "ere>"]), { content: "<there>", reasoning: "" });
});

test("an unclosed think block stays reasoning at the end of the stream", () => {
  assert.deepEqual(run(["<think>still thinking <", "/thi"]), {
    content: "",
    reasoning: "still thinking </thi",
  });
});

test("a lone < at the end of a plain answer is not lost", () => {
  assert.deepEqual(run(["1 ", "<"]), { content: "1 <", reasoning: "" });
});
