// Manual §6.2 "Ruta B: montaje manual de TurnEngine", as written; only the import specifier
// changed. The epilogue runs a turn against the local test server.
import {
  ApprovalOutcome,
  Mode,
  OpenAIProvider,
  PermissionEngine,
  ToolRegistry,
  TurnEngine,
  registerFileTools,
  registerShellTool,
  registerSearchTool,
} from "../../mod.ts";

const workspace = process.cwd();

// 1) 工具表:只注册你需要的
const registry = new ToolRegistry();
registerFileTools(registry, workspace);
registerShellTool(registry, workspace);
registerSearchTool(registry, workspace);

// 2) 权限:工作区 + 模式 + 白名单
const permissions = new PermissionEngine({
  workspaceRoot: workspace,
  mode: Mode.INTERACTIVE,
  allowedCommands: ["git status", "ls", "cat"],
});

// 3) Provider:任意 OpenAI 兼容端点
const provider = new OpenAIProvider({
  apiKey: process.env.OPENAI_API_KEY,
  baseURL: process.env.OPENAI_BASE_URL,
});

// 4) 引擎
const engine = new TurnEngine({
  provider,
  registry,
  permissions,
  model: process.env.OPENAI_MODEL!,
  instructions: "你是一个只处理数据分析任务的助手。",
  lang: "zh",
  maxIterations: 50,
});

engine.setApprover(async () => ApprovalOutcome.DENY); // 别忘了

// Epilogue (ours): an allowlisted command runs without asking; a write is denied by the approver.
const seen: string[] = [];
for await (const event of engine.run("list the files, then write one")) {
  if (event.type === "tool_finished") seen.push(`${event.data.name}:${event.data.status}`);
  if (event.type === "turn_end") seen.push(`turn_end:${event.data.status}`);
}
console.log(seen.join(" "));
