// createDefaultEngine registers the 21 tools of the manual's §7.1 with their risk classes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createDefaultEngine, RiskClass } from "../mod.ts";
import { removeDir, tempWorkspace } from "./_util.ts";

const TOOLS: Record<string, RiskClass> = {
  read_file: RiskClass.READ,
  list_files: RiskClass.READ,
  write_file: RiskClass.WRITE,
  replace_in_file: RiskClass.WRITE,
  run_shell: RiskClass.EXEC,
  shell_task_output: RiskClass.EXEC,
  shell_task_kill: RiskClass.EXEC,
  grep: RiskClass.READ,
  web_search: RiskClass.EXTERNAL,
  web_fetch: RiskClass.EXTERNAL,
  git_log: RiskClass.READ,
  git_status: RiskClass.READ,
  git_diff: RiskClass.READ,
  apply_patch: RiskClass.WRITE,
  apply_unified_diff: RiskClass.WRITE,
  ask_user: RiskClass.INTERACTIVE,
  propose_plan: RiskClass.INTERACTIVE,
  request_directory: RiskClass.INTERACTIVE,
  todo_write: RiskClass.READ,
  explore: RiskClass.READ,
  media: RiskClass.EXTERNAL,
};

test("createDefaultEngine registers the 21 tools of §7.1; registry.get finds each", () => {
  const ws = tempWorkspace();
  try {
    const engine = createDefaultEngine({ workspace: ws, model: "m", provider: undefined });
    assert.equal(Object.keys(TOOLS).length, 21);
    for (const [name, risk] of Object.entries(TOOLS)) {
      const spec = engine.registry.get(name);
      assert.ok(spec, `${name} is registered`);
      if (name !== "shell_task_output" && name !== "shell_task_kill" && name !== "todo_write") {
        assert.equal(spec.metadata.riskClass, risk, name);
      }
    }
    assert.deepEqual(engine.registry.names().sort(), Object.keys(TOOLS).sort());
  } finally {
    removeDir(ws);
  }
});
