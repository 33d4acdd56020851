// Manual §15.5 "Ciclo de vida", as written; only the import specifier changed.
import process from "node:process";
import { loadMcpConfigFile, McpManager, saveMcpConfigFile, ToolRegistry } from "../../mod.ts";

// Prelude (ours): a server named "github" (server-memory stands in for it) and a second registry.
const file = `${process.cwd()}/.agent/mcp.json`;
const registry = new ToolRegistry();
const manager = new McpManager(registry, loadMcpConfigFile(file).configs);
const newRegistry = new ToolRegistry();

await manager.connectServer("github");
await manager.refresh("github");   // 断开 → 重连 → 重新注册
manager.attach(newRegistry);       // 引擎重建时迁移已加载工具
await manager.closeAll();          // 进程退出时

// Epilogue (ours): the tools moved; config edits stay in memory until saved.
const moved = newRegistry.names().filter((n) => n.startsWith("mcp__github__")).length;
const left = registry.names().length;
manager.addConfig({ name: "extra", command: "node", args: ["server.js"] });
const before = loadMcpConfigFile(file).configs.map((c) => c.name);
saveMcpConfigFile(file, manager.configs);
const after = loadMcpConfigFile(file).configs.map((c) => c.name);
console.log(JSON.stringify({ moved, left, before, after }));
