import { test } from "node:test";
import assert from "node:assert/strict";
import { formatBytes, formatOverLimit } from "./size.ts";

const MIB = 1024 * 1024;

test("formatBytes uses bytes, KiB and MiB with one decimal, dropped when it is 0", () => {
  assert.equal(formatBytes(0), "0 bytes");
  assert.equal(formatBytes(1), "1 byte");
  assert.equal(formatBytes(1023), "1023 bytes");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(MIB - 1), "1 MiB", "never 1024 KiB");
  assert.equal(formatBytes(10 * MIB), "10 MiB");
  assert.equal(formatBytes(13_000_000), "12.4 MiB");
});

test("a size whose rounded figure differs from the limit's is shown rounded", () => {
  assert.deepEqual(formatOverLimit(13_000_000, 10 * MIB), { size: "12.4 MiB", limit: "10 MiB" });
  assert.deepEqual(formatOverLimit(4096, 1024), { size: "4 KiB", limit: "1 KiB" });
});

test("a size that rounds to the limit's figure is shown in exact bytes", () => {
  assert.deepEqual(formatOverLimit(10 * MIB + 1, 10 * MIB), {
    size: "10485761 bytes",
    limit: "10485760-byte (10 MiB)",
  });
  assert.deepEqual(formatOverLimit(MIB, MIB - 1), {
    size: "1048576 bytes",
    limit: "1048575-byte (1 MiB)",
  });
});
