// The manual's samples owned by the engine foundation (DESIGN §7: §4, §6.1–6.3, §7.2, §7.3,
// §8.5, §10, §12.1–12.2) run as written, as modules under Deno (and Node 22), against a local
// MockOpenAIServer, each in a fresh temporary workspace.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { cleanUpSamples, lastJson, runSample, sampleSkip } from "./_manual.ts";

afterEach(cleanUpSamples);
const skip = sampleSkip;

test(
  "§4: the five-minute script runs a turn with a tool, a question and an approval",
  { skip },
  async () => {
    const { code, out, err } = await runSample("sec04_quickstart.ts", {
      turns: [
        { toolCalls: [{ id: "l", name: "list_files", arguments: { path: "." } }] },
        {
          toolCalls: [{
            id: "q",
            name: "ask_user",
            arguments: { question: "中文还是英文?", options: ["中文", "English"] },
          }],
        },
        {
          toolCalls: [{
            id: "w",
            name: "write_file",
            arguments: { path: "SUMMARY.md", content: "x" },
          }],
        },
        { text: ["这是一个", "示例项目。"] },
      ],
      files: { "README.md": "# demo\n" },
    });
    assert.equal(code, 0, out + err);
    assert.match(out, /\[工具\] list_files/);
    assert.match(out, /\[工具结束\] list_files: ok/);
    assert.match(out, /模型提问: 中文还是英文\?/);
    assert.match(out, /\[工具结束\] ask_user: ok/);
    assert.match(out, /需要审批: write_file/);
    assert.match(out, /这是一个示例项目。/);
    assert.match(out, /\[结束\] completed/);
  },
);

test("§6.1: createDefaultEngine assembles model, mode, workspace and tools", { skip }, async () => {
  const { code, out, err } = await runSample("sec06_1_default_engine.ts");
  assert.equal(code, 0, out + err);
  const r = lastJson(out);
  assert.equal(r.model, "deepseek-chat");
  assert.equal(r.mode, "interactive");
  assert.equal(r.workspace, "/srv/workspaces/tenant-42");
  for (const t of ["read_file", "write_file", "run_shell", "grep", "ask_user"]) {
    assert.ok((r.tools as string[]).includes(t), t);
  }
});

test(
  "§6.2: a hand-assembled TurnEngine runs allowlisted commands and asks for writes",
  { skip },
  async () => {
    const { code, out, err, server } = await runSample("sec06_2_manual_engine.ts", {
      turns: [
        { toolCalls: [{ id: "s", name: "run_shell", arguments: { command: "ls" } }] },
        {
          toolCalls: [{ id: "w", name: "write_file", arguments: { path: "a.txt", content: "a" } }],
        },
        { text: "done" },
      ],
      files: { "data.csv": "a,b\n" },
    });
    assert.equal(code, 0, out + err);
    assert.equal(out.trim(), "run_shell:ok write_file:denied turn_end:completed");
    const system = (server.requests[0].body as { messages?: { content: string }[] }).messages
      ?.[0]?.content ?? JSON.stringify(server.requests[0].body);
    assert.match(system, /只处理数据分析任务/);
  },
);

test("§6.3: runtime properties and methods change the engine", { skip }, async () => {
  const { code, out, err } = await runSample("sec06_3_runtime.ts");
  assert.equal(code, 0, out + err);
  assert.deepEqual(lastJson(out), {
    model: "another-model",
    mode: "auto",
    approverSet: true,
    system: "顺便把测试也跑一下",
    steeringLeft: false,
  });
});

test("§7.2: a custom tool is registered, approved and called", { skip }, async () => {
  const { code, out, err, server } = await runSample("sec07_2_custom_tool.ts", {
    turns: [
      { toolCalls: [{ id: "o", name: "query_order", arguments: { order_id: "A-7" } }] },
      { text: "已发货" },
    ],
  });
  assert.equal(code, 0, out + err);
  assert.deepEqual(lastJson(out), { source: "myapp", asked: ["query_order"], status: "ok" });
  assert.match(JSON.stringify(server.requests[1].body), /shipped/);
});

test("§7.3: the read-only tool set has read_file and list_files only", { skip }, async () => {
  const { code, out, err } = await runSample("sec07_3_readonly.ts");
  assert.equal(code, 0, out + err);
  assert.equal(out.trim(), "read_file,list_files");
});

test("§8.5: allowlist rules: word boundary, no compound commands", { skip }, async () => {
  const { code, out, err } = await runSample("sec08_5_allowlist.ts");
  assert.equal(code, 0, out + err);
  assert.deepEqual(lastJson(out), {
    risk: true,
    ls: true,
    lsof: false,
    compound: false,
    gitStatus: true,
  });
});

test(
  "§10: OpenAIProvider, a host provider on the §10.2 contract, reasoningEffort",
  { skip },
  async () => {
    const { code, out, err, server } = await runSample("sec10_provider.ts", {
      turns: [
        { text: "real provider" },
      ],
    });
    assert.equal(code, 0, out + err);
    assert.deepEqual(lastJson(out), {
      text: "custom provider works",
      status: "completed",
      realText: "real provider",
    });
    assert.equal(
      (server.requests[0].body as { reasoning?: { effort?: string } }).reasoning?.effort,
      "high",
    );
  },
);

test("§12.1–12.2: multi-turn history and an interrupt from elsewhere", { skip }, async () => {
  const { code, out, err } = await runSample("sec12_turn_control.ts", {
    turns: [
      { text: "结构如下" },
      { text: "已修改" },
      { toolCalls: [{ id: "s", name: "run_shell", arguments: { command: "sleep 303" } }] },
    ],
  });
  assert.equal(code, 0, out + err);
  assert.deepEqual(lastJson(out), {
    users: ["先看一下项目结构", "把 README 里的示例改成 TypeScript", "run a long command"],
    statuses: ["interrupted", "turn_end:interrupted"],
  });
});
