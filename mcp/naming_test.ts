import { test } from "node:test";
import assert from "node:assert/strict";
import { assignToolNames, mcpToolName, sanitizeNameSegment } from "./naming.ts";

const SERVER = "example-enterprise-knowledge-base-connector";
const EVERYTHING_TOOLS = [
  "echo",
  "get-annotated-message",
  "get-env",
  "get-resource-links",
  "get-resource-reference",
  "get-structured-content",
  "get-sum",
  "get-tiny-image",
  "gzip-file-as-resource",
  "toggle-simulated-logging",
  "toggle-subscriber-updates",
  "trigger-long-running-operation",
  "simulate-research-query",
];
const VALID = /^mcp__[a-zA-Z0-9_-]{1,59}$/;

// Case tool-name-over-64 (pure part; manager_test.ts registers the real server's tools).
test("case tool-name-over-64: every name is valid, short ones unchanged, long ones distinct", () => {
  const names = assignToolNames(EVERYTHING_TOOLS.map((tool) => ({ server: SERVER, tool })));
  for (const n of names) {
    assert.match(n, VALID);
    assert.ok(n.length <= 64, n);
  }
  assert.equal(names[0], `mcp__${SERVER}__echo`);
  assert.equal(names[7], `mcp__${SERVER}__get-tiny-image`);
  assert.equal(names[7].length, 64);
  assert.equal(new Set(names).size, names.length);
  const long = names[EVERYTHING_TOOLS.indexOf("trigger-long-running-operation")];
  assert.ok(long.endsWith("__trigger-long-running-operation"), long);
  assert.deepEqual(
    assignToolNames(EVERYTHING_TOOLS.map((tool) => ({ server: SERVER, tool }))),
    names,
  );
});

test("a name still too long after shortening the server keeps a head and a hash suffix", () => {
  const tool = "x".repeat(80);
  const name = mcpToolName("srv", tool);
  assert.equal(name.length, 64);
  assert.match(name, /^mcp__srv__x+_[0-9a-f]{8}$/);
  assert.equal(mcpToolName("srv", tool), name);
  assert.notEqual(mcpToolName("srv", tool + "y"), name);
});

test("names that sanitise alike get distinct deterministic names; the first keeps its name", () => {
  const req = ["read-file", "read_file", "read.file"].map((tool) => ({ server: "fs", tool }));
  const names = assignToolNames(req);
  assert.equal(names[0], "mcp__fs__read-file");
  assert.equal(names[1], "mcp__fs__read_file");
  assert.match(names[2], /^mcp__fs__read_file_[0-9a-f]{8}$/);
  assert.deepEqual(assignToolNames(req), names);
});

test("a name held by a non-MCP tool is never overwritten", () => {
  const [name] = assignToolNames([{ server: "a", tool: "b" }], (n) => n === "mcp__a__b");
  assert.match(name, /^mcp__a__b_[0-9a-f]{8}$/);
});

test("segments keep only letters, digits, _ and -", () => {
  assert.equal(sanitizeNameSegment("my server/v2.0"), "my_server_v2_0");
  assert.equal(sanitizeNameSegment(""), "_");
  assert.equal(mcpToolName("数据", "查询"), "mcp________");
});
