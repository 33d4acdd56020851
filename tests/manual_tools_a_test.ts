// The manual's samples owned by the tool suite, part A (DESIGN §7: §7.1 terminal) run as
// written, as modules under Deno, against a local MockOpenAIServer, in a fresh temporary
// workspace. Also checks that createDefaultEngine registers part A's tools (manual §7.1).
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { createDefaultEngine, RiskClass, TodoList } from "../mod.ts";
import type { ScriptedTurn } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "./_util.ts";
import { cleanUpSamples, lastJson, runSample as runManualSample } from "./_manual.ts";

afterEach(cleanUpSamples);

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const skip = isDeno ? false : "the samples are run as modules by the Deno binary";

function runSample(file: string, turns: ScriptedTurn[], files: Record<string, string> = {}) {
  return runManualSample(file, { turns, files });
}

test(
  "§7.1 terminal: registerTerminalTools adds terminal_list and terminal_read for one project",
  { skip },
  async () => {
    const { code, out, err } = await runSample("sec07_1_terminal.ts", [
      { toolCalls: [{ id: "l", name: "terminal_list", arguments: {} }] },
      {
        toolCalls: [
          { id: "r", name: "terminal_read", arguments: { terminal_id: "pty-1" } },
          { id: "x", name: "terminal_read", arguments: { terminal_id: "pty-2" } },
        ],
      },
      { text: "开发服务器已经在 3000 端口启动。" },
    ]);
    assert.equal(code, 0, out + err);
    const r = lastJson(out) as {
      beforeTerminal: boolean;
      registered: boolean;
      results: Record<string, string>;
      outputs: Record<string, string>;
    };
    assert.equal(r.beforeTerminal, false, "createDefaultEngine must not register terminal tools");
    assert.equal(r.registered, true);
    assert.deepEqual(r.results, { l: "ok", r: "ok", x: "error" });
    assert.match(r.outputs.l, /pty-1\s+"dev server"/);
    assert.doesNotMatch(r.outputs.l, /pty-2/);
    assert.equal(r.outputs.r, "ready on :3000");
    assert.match(r.outputs.x, /no such terminal in this project/);
    assert.doesNotMatch(r.outputs.x, /secret/);
  },
);

test("createDefaultEngine registers the git, patch and todo tools with §7.1's risk classes", () => {
  const ws = tempWorkspace();
  try {
    checkRegistrations(createDefaultEngine({ workspace: ws, model: "m" }));
  } finally {
    removeDir(ws);
  }
});

function checkRegistrations(engine: ReturnType<typeof createDefaultEngine>): void {
  const expected: Record<string, RiskClass> = {
    git_log: RiskClass.READ,
    git_status: RiskClass.READ,
    git_diff: RiskClass.READ,
    apply_patch: RiskClass.WRITE,
    apply_unified_diff: RiskClass.WRITE,
    todo_write: RiskClass.READ,
  };
  for (const [name, cls] of Object.entries(expected)) {
    const spec = engine.registry.get(name);
    assert.ok(spec, `${name} is registered`);
    assert.equal(spec.metadata.riskClass, cls, name);
    assert.equal(spec.metadata.requiresApproval, cls === RiskClass.WRITE, name);
  }
  assert.ok(TodoList.of(engine.registry) instanceof TodoList);
}
