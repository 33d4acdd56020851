// Manual §16.1 "Registro manual", as written; only the import specifier changed.
import {
  type EngineHook,
  EventType,
  OpenAIProvider,
  PermissionEngine,
  registerExploreTool,
  ToolRegistry,
  TurnEngine,
} from "../../mod.ts";

// Prelude (ours): the objects the sample leaves undefined.
const registry = new ToolRegistry();
const workspace = process.cwd();
const provider = new OpenAIProvider();
const model = process.env.OPENAI_MODEL!;
const toolResultDir = `${workspace}/.agent/tool-results`;
const seen: string[] = [];
const mySubagentHook: EngineHook = { onToolFinished: (name, status) => seen.push(`${name}:${status}`) };

registerExploreTool(registry, {
  workspace,
  provider,
  model,
  lang: "zh",
  hookFactory: () => mySubagentHook,
  toolResultDir,
});

// Epilogue (ours): a parent engine with this registry delegates once.
const engine = new TurnEngine({
  provider,
  registry,
  permissions: new PermissionEngine({ workspaceRoot: workspace }),
  model,
  instructions: "parent",
});
const forwarded: string[] = [];
let report = "";
for await (const event of engine.run("investigate")) {
  if (event.type === EventType.SUBAGENT_EVENT) {
    forwarded.push((event.data.event as { type: string }).type);
  }
  if (event.type === EventType.TOOL_FINISHED) report = String(event.data.result_preview);
}
console.log(JSON.stringify({ seen, report, forwardedTurnEnd: forwarded.at(-1) }));
