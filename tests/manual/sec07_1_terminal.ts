// Manual §7.1 "Las 21 herramientas que registra createDefaultEngine", the terminal sample, as
// written; only the import specifier changed. The prelude defines the host's terminal manager
// (the PTYs of the console's "Terminal" panel, for two tenants) and the engine whose registry
// the sample fills; the epilogue runs a turn in which the model lists and reads terminals.
import { createDefaultEngine, type TerminalInfo } from "../../mod.ts";

// Prelude (ours).
const engine = createDefaultEngine({ workspace: process.cwd(), defaultApproval: "deny" });
const registry = engine.registry;
const ptys = [
  { id: "pty-1", projectId: "tenant-42", title: "dev server", output: "\x1b[32mready\x1b[0m on :3000\n" },
  { id: "pty-2", projectId: "tenant-7", title: "other tenant", output: "tenant-7 secret\n" },
];
const myTerminalManager = {
  list: (projectId: string): TerminalInfo[] =>
    ptys.filter((p) => p.projectId === projectId).map(({ id, projectId, title }) => ({ id, projectId, title })),
  read: (_projectId: string, id: string) => ptys.find((p) => p.id === id)?.output ?? null,
};
const beforeTerminal = registry.has("terminal_list");

import { registerTerminalTools, type TerminalSource } from "../../mod.ts";

registerTerminalTools(registry, {
  terminals: myTerminalManager, // 实现 TerminalSource
  projectId: "tenant-42",
});

// Epilogue (ours).
const source: TerminalSource = myTerminalManager;
void source;
const results: Record<string, string> = {};
for await (const event of engine.run("终端里的开发服务器起来了吗?")) {
  if (event.type === "tool_finished") {
    results[String(event.data.reqId)] = String(event.data.status);
  }
}
const toolMessages = engine.messages.filter((m) => m.role === "tool");
console.log(
  JSON.stringify({
    beforeTerminal,
    registered: ["terminal_list", "terminal_read"].every((n) => registry.has(n)),
    results,
    outputs: Object.fromEntries(toolMessages.map((m) => [m.tool_call_id, m.content])),
  }),
);
