// The manual's samples owned by the tool suite, part B (DESIGN §7: §16.1 subagentHookFactory and
// registerExploreTool, §16.2 AgentRegistry) run as written, as modules under Deno, against a
// local MockOpenAIServer, each in a fresh temporary workspace.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import type { RecordedRequest, ScriptedTurn } from "../testing/mod.ts";
import { cleanUpSamples, runSample as runManualSample } from "./_manual.ts";

afterEach(cleanUpSamples);

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const skip = isDeno ? false : "the samples are run as modules by the Deno binary";

/** True for requests of the explore subagent (its zh prompt). */
function isSubagent(req: RecordedRequest): boolean {
  const messages = (req.body as { messages?: { content: unknown }[] })?.messages ?? [];
  return String(messages[0]?.content ?? "").includes("只读的调研子代理");
}

function runSample(
  file: string,
  parent: ScriptedTurn[],
  sub: ScriptedTurn[],
  files: Record<string, string> = {},
) {
  let p = 0;
  let s = 0;
  return runManualSample(file, {
    turns: (req) => (isSubagent(req) ? sub[s++] : parent[p++]) ?? { text: "(script done)" },
    files,
    env: { OPENAI_FORCE_API_MODE: "chat" },
  });
}

const explore: ScriptedTurn = {
  toolCalls: [{ id: "ex", name: "explore", arguments: { task: "找入口文件" } }],
};

test(
  "§16.1: subagentHookFactory gives each explore call a SubagentHook that prints its tools",
  { skip },
  async () => {
    const { code, out, err, server } = await runSample(
      "sec16_1_subagent_hook.ts",
      [explore, { text: "入口是 main.ts" }],
      [
        { toolCalls: [{ id: "r", name: "read_file", arguments: { path: "main.ts" } }] },
        { text: "报告:入口是 main.ts" },
      ],
      { "main.ts": "console.log('hi');\n" },
    );
    assert.equal(code, 0, out + err);
    assert.match(out, /^ {4}↳ \[explore\] 找入口文件$/m);
    assert.match(out, /^ {4}▸ read_file \{"path":"main\.ts"\}$/m);
    assert.match(out, /^ {6}✓ read_file ok$/m);
    assert.match(out, /^ {4}↳ \[explore\] completed \(2 iteration\(s\)\)$/m);
    assert.match(out, /\[parent\] completed/);
    assert.equal(server.requests.filter(isSubagent).length, 2);
  },
);

test(
  "§16.1: registerExploreTool by hand, with hookFactory and toolResultDir",
  { skip },
  async () => {
    const { code, out, err } = await runSample(
      "sec16_1_register_explore.ts",
      [explore, { text: "好的" }],
      [
        { toolCalls: [{ id: "g", name: "grep", arguments: { pattern: "hi" } }] },
        { text: "报告:main.ts 打印 hi" },
      ],
      { "main.ts": "console.log('hi');\n" },
    );
    assert.equal(code, 0, out + err);
    assert.deepEqual(JSON.parse(out.trim().split("\n").at(-1)!), {
      seen: ["grep:ok"],
      report: "报告:main.ts 打印 hi",
      forwardedTurnEnd: "turn_end",
    });
  },
);

test(
  "§16.2: AgentRegistry adds, updates and switches a role; the engine follows",
  { skip },
  async () => {
    const { code, out, err } = await runSample("sec16_2_agent_registry.ts", [], []);
    assert.equal(code, 0, out + err);
    assert.deepEqual(JSON.parse(out.trim().split("\n").at(-1)!), {
      names: ["code", "cowork", "analyst"],
      current: "analyst",
      model: "deepseek-chat",
      systemStart: "你是数据分析师…",
      hasRules: true,
    });
  },
);
