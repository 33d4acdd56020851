// Manual §16.1 "Subagente explore" (personalización), as written; only the import specifier
// changed.
import { createDefaultEngine, SubagentHook } from "../../mod.ts";

// Prelude (ours): the workspace the sample leaves undefined.
const workspace = process.cwd();

const engine = createDefaultEngine({
  workspace,
  subagentHookFactory: () => new SubagentHook("explore"), // 每个子代理一个实例
});

// Epilogue (ours): the parent delegates to explore; SubagentHook prints its tool calls.
for await (const event of engine.run("Where is the entry point?")) {
  if (event.type === "turn_end") console.log(`[parent] ${event.data.status}`);
}
