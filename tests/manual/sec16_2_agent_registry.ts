// Manual §16.2 "AgentRegistry", as written; only the import specifier changed.
import { createDefaultEngine } from "../../mod.ts";

// Prelude (ours): the engine, workspace and date the sample leaves undefined.
const workspace = process.cwd();
const today = "2026-11-29";
const engine = createDefaultEngine({ workspace, model: "gpt-4o-mini" });

import { AgentRegistry } from "../../mod.ts";

const agents = new AgentRegistry(); // 默认内置 code / cowork
agents.add({ name: "analyst", description: "数据分析", prompt: "你是数据分析师…" });
agents.update("analyst", { model: "deepseek-chat" });
agents.switch("analyst");

const prompt = agents.buildSystemPrompt("analyst", workspace, today, "zh");
engine.setSystemPrompt(prompt); // 切换角色
engine.model = agents.currentDef.model ?? engine.model;

// Epilogue (ours).
console.log(
  JSON.stringify({
    names: agents.list().map((a) => a.name),
    current: agents.current,
    model: engine.model,
    systemStart: String(engine.messages[0].content).split("\n")[0],
    hasRules: String(engine.messages[0].content).includes("不可信的数据"),
  }),
);
