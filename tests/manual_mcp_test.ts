// The manual's §15 samples (DESIGN §7: §15 → MCP) run as written, as modules under Deno, each in a
// fresh temporary workspace whose .agent/mcp.json points at real servers from npm.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { loadMcpConfigFile, normalizeMcpConfigs } from "../mcp/mod.ts";
import { EVERYTHING_ENTRY, FIXTURES, MEMORY_ENTRY, needReal } from "../mcp/_test_util.ts";
import { cleanUpSamples, lastJson, runSample as runManualSample } from "./_manual.ts";

afterEach(cleanUpSamples);

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const skip = isDeno
  ? needReal({ node: true, servers: true })
  : "the samples are run by the Deno binary";

async function runSample(file: string, mcpJson: unknown): Promise<Record<string, unknown>> {
  const { code, out, err } = await runManualSample(file, {
    files: { ".agent/mcp.json": JSON.stringify(mcpJson) },
    env: { EVERYTHING_ENTRY, MEMORY_ENTRY },
  });
  assert.equal(code, 0, out + err);
  return lastJson(out);
}

test(
  "§15.1: the minimal setup connects the workspace's servers and the OCR preset",
  { skip },
  async () => {
    const r = await runSample("sec15_1_minimal.ts", {
      mcpServers: { everything: { command: "node", args: ["${EVERYTHING_ENTRY}", "stdio"] } },
    });
    assert.deepEqual(r.warnings, []);
    assert.deepEqual(r.connected, ["everything", "ocr"]);
    assert.deepEqual(r.failed, []);
    const names = r.names as string[];
    assert.ok(names.includes("mcp__everything__echo"));
    assert.ok(names.includes("mcp__ocr__recognize"));
  },
);

test("§15.2: the manual's bare-array config normalises as described", () => {
  const { configs, warnings } = loadMcpConfigFile(
    path.join(FIXTURES, "manual-15-2-bare-array.json"),
  );
  assert.deepEqual(warnings, []);
  assert.deepEqual(configs.map((c) => [c.name, c.type]), [["filesystem", "stdio"], [
    "remote",
    "http",
  ]]);
  assert.deepEqual(configs[1].headers, { Authorization: "Bearer ${TOKEN}" });
  const claude = normalizeMcpConfigs({
    mcpServers: { name: { command: "npx -y pkg", args: ["..."] } },
  });
  assert.deepEqual(claude.configs[0].command, "npx -y pkg");
  assert.equal(fs.existsSync(path.join(FIXTURES, "manual-15-2-bare-array.json")), true);
});

test("§15.4: lazy mode offers only the meta tools; a search loads matches; mcp_call_tool calls", {
  skip,
}, async () => {
  const r = await runSample("sec15_4_lazy.ts", {
    servers: { everything: { command: "node", args: ["${EVERYTHING_ENTRY}", "stdio"] } },
  });
  assert.deepEqual(r.offered, ["mcp_search_tools", "mcp_call_tool"]);
  assert.ok((r.afterSearch as string[]).includes("mcp__everything__echo"));
  assert.equal(r.called, "Echo: lazy");
});

test("§15.5: connectServer, refresh, attach, closeAll; config edits need saveMcpConfigFile", {
  skip,
}, async () => {
  const r = await runSample("sec15_5_lifecycle.ts", {
    servers: {
      github: {
        command: "node",
        args: ["${MEMORY_ENTRY}"],
        env: { MEMORY_FILE_PATH: "${workspaceFolder}/m.jsonl" },
      },
    },
  });
  assert.deepEqual(r, { moved: 0, left: 0, before: ["github"], after: ["github", "extra"] });
});
