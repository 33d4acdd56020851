import { test } from "node:test";
import assert from "node:assert/strict";
import { headOf } from "./text.ts";

test("headOf never ends in half a surrogate pair", () => {
  const text = "ab😀cd";
  assert.equal(headOf(text, 10), text);
  assert.equal(headOf(text, 2), "ab");
  assert.equal(headOf(text, 3), "ab", "the emoji's first half is left out");
  assert.equal(headOf(text, 4), "ab😀");
  assert.equal(headOf(text, 0), "");
});
