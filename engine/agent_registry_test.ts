import { test } from "node:test";
import assert from "node:assert/strict";
import { AgentRegistry, BUILTIN_AGENTS } from "./agent_registry.ts";
import { buildInstructions, getPrompts } from "./prompts.ts";

test("a new registry holds the built-in code and cowork roles, code current", () => {
  const agents = new AgentRegistry();
  assert.deepEqual(BUILTIN_AGENTS.map((a) => a.name), ["code", "cowork"]);
  assert.deepEqual(agents.list().map((a) => a.name), ["code", "cowork"]);
  assert.equal(agents.current, "code");
  assert.equal(agents.currentDef.builtin, true);
});

test("add, update and switch change the current role and its model", () => {
  const agents = new AgentRegistry();
  agents.add({ name: "analyst", description: "数据分析", prompt: "你是数据分析师…" });
  agents.update("analyst", { model: "deepseek-chat" });
  agents.switch("analyst");
  assert.equal(agents.current, "analyst");
  assert.deepEqual(agents.currentDef, {
    name: "analyst",
    description: "数据分析",
    prompt: "你是数据分析师…",
    model: "deepseek-chat",
  });
  agents.update("analyst", { model: undefined });
  assert.equal(agents.currentDef.model, undefined);
});

test("a custom role's prompt gets the language's rules and environment block", () => {
  const agents = new AgentRegistry();
  agents.add({ name: "analyst", description: "", prompt: "You analyse data." });
  const prompt = agents.buildSystemPrompt("analyst", "/srv/ws", "2026-11-29", "ja");
  assert.ok(prompt.startsWith("You analyse data.\n\n"));
  assert.ok(prompt.includes(getPrompts("ja").rules));
  assert.match(prompt, /- ワークスペース: \/srv\/ws/);
});

test("a built-in role's prompt is the language's own code or cowork prompt", () => {
  const agents = new AgentRegistry();
  assert.equal(
    agents.buildSystemPrompt("cowork", "/srv/ws", "2026-11-29", "es"),
    buildInstructions("cowork", "/srv/ws", "2026-11-29", "es"),
  );
  agents.update("code", { prompt: "Custom coder." });
  assert.ok(agents.buildSystemPrompt("code", "/w", "2026-11-29", "en").startsWith("Custom coder."));
});

test("bad names, duplicates, empty prompts and unknown roles are refused clearly", () => {
  const agents = new AgentRegistry();
  assert.throws(() => agents.add({ name: "a b", description: "", prompt: "x" }), /a name is/);
  assert.throws(() => agents.add({ name: "code", description: "", prompt: "x" }), /name exists/);
  assert.throws(() => agents.add({ name: "x", description: "", prompt: " " }), /prompt is empty/);
  assert.throws(() => agents.switch("ghost"), /Cannot switch to agent ghost: no such agent/);
  assert.throws(() => agents.update("ghost", {}), /Cannot update agent ghost/);
  assert.throws(() => agents.buildSystemPrompt("ghost", "/w"), /no such agent/);
  assert.throws(() => agents.remove("code"), /it is built in/);
});

test("removing the current custom role falls back to code; copies do not leak", () => {
  const agents = new AgentRegistry({
    agents: [{ name: "writer", description: "d", prompt: "p" }],
    current: "writer",
  });
  const def = agents.currentDef;
  def.prompt = "changed";
  assert.equal(agents.get("writer")?.prompt, "p");
  assert.equal(agents.remove("writer"), true);
  assert.equal(agents.current, "code");
  assert.equal(agents.remove("writer"), false);
});
