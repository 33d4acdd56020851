import assert from "node:assert/strict";
import { mean, median, mode } from "../src/stats.js";

assert.equal(mean([1, 2, 3]), 2);
assert.equal(median([3, 1, 2]), 2);
assert.equal(median([4, 1, 3, 2]), 2.5);
assert.equal(mode([1, 2, 2, 3]), 2);
// TODO: add tests for empty arrays.
console.log("all tests passed");
