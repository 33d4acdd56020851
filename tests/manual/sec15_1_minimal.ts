// Manual §15.1 "Uso mínimo", as written; only the import specifier changed.
// The prelude defines the host's values the manual leaves undefined; the epilogue prints a summary.
import process from "node:process";

// Prelude (ours): the workspace is the current folder; the model settings come from the env.
const workspace = process.cwd();
const apiKey = process.env.OPENAI_API_KEY;
const baseURL = process.env.OPENAI_BASE_URL;
const model = process.env.OPENAI_MODEL;

import {
  McpManager,
  ToolRegistry,
  defaultMcpConfigPath,
  loadMcpConfigFile,
  withBuiltinMcpConfigs,
} from "../../mod.ts";

const registry = new ToolRegistry();
const { configs, warnings } = loadMcpConfigFile(
  defaultMcpConfigPath(workspace), // <workspace>/.agent/mcp.json
);
const manager = new McpManager(registry, withBuiltinMcpConfigs(configs), {
  builtin: {
    workspace,
    env: process.env,
    llm: { apiKey, baseURL, model }, // 内置 OCR 的多模态兜底
  },
});

const { connected, failed } = await manager.connectAll();

// Epilogue (ours).
const names = registry.schemas().map((s) => s.function.name);
await manager.closeAll();
console.log(JSON.stringify({ warnings, connected, failed, names }));
