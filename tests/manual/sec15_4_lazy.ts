// Manual §15.4 "Carga perezosa", as written; only the import specifier changed.
import process from "node:process";
import { loadMcpConfigFile, McpManager, ToolRegistry } from "../../mod.ts";

// Prelude (ours): the registry and the workspace's configs.
const registry = new ToolRegistry();
const { configs } = loadMcpConfigFile(`${process.cwd()}/.agent/mcp.json`);

const manager =
new McpManager(registry, configs, {
  lazy: {
    enabled: true,       // 或交给阈值自动判断
    thresholdTools: 16,
    thresholdChars: 24_000,
    maxLoaded: 40,
  },
});

// Epilogue (ours): connect, search, call through the meta tool.
await manager.connectAll();
const offered = registry.schemas().map((s) => s.function.name);
const search = await registry.get("mcp_search_tools")!.func({ query: "echo message" });
const afterSearch = registry.schemas().map((s) => s.function.name);
const called = await registry.get("mcp_call_tool")!.func({
  name: "mcp__everything__echo",
  arguments: { message: "lazy" },
});
await manager.closeAll();
console.log(JSON.stringify({ offered, search, afterSearch, called }));
