import { test } from "node:test";
import assert from "node:assert/strict";
import { storable, storableJson } from "./_json.ts";

test("NUL and unpaired surrogates become U+FFFD; pairs and escaped text stay", () => {
  const emoji = "😀";
  const value = {
    nul: "a\u0000b",
    high: `cut ${emoji.slice(0, 1)}`,
    low: `${emoji.slice(1)} end`,
    pair: emoji,
    literal: "\\u0000 and \\ud800 as text",
    nested: [{ k: "\u0000" }],
  };
  assert.deepEqual(storable(value, "test"), {
    nul: "a\ufffdb",
    high: "cut \ufffd",
    low: "\ufffd end",
    pair: emoji,
    literal: "\\u0000 and \\ud800 as text",
    nested: [{ k: "\ufffd" }],
  });
  const { literal: _, ...escapes } = value;
  assert.doesNotMatch(storableJson(escapes, "test"), /\\u0000|\\ud[89a-f]/i);
});

test("data that is not JSON is refused with the operation named", () => {
  assert.throws(() => storableJson({ n: 1n }, "submit"), /Cannot submit: the data is not JSON/);
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  assert.throws(() => storable(cycle, "append events"), /Cannot append events: the data is not/);
  assert.throws(() => storableJson(undefined, "x"), TypeError);
});
