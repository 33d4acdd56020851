// Manual §6.1 "Ruta A: createDefaultEngine", as written; only the import specifier changed.
import { createDefaultEngine, Mode } from "../../mod.ts";

const engine = createDefaultEngine({
  workspace: "/srv/workspaces/tenant-42",
  model: "deepseek-chat",
  mode: Mode.INTERACTIVE,
});

// Epilogue (ours): what §6.1 says the call assembled.
console.log(
  JSON.stringify({
    model: engine.model,
    mode: engine.permissions.mode,
    workspace: engine.permissions.workspaceRoot,
    tools: engine.registry.names(),
  }),
);
