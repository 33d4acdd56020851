// Manual §8.4 "Exención de aprobación para shell y sandbox del SO", as written; only the import
// specifier changed.
import process from "node:process";
import { createDefaultEngine, describeSandbox, EventType, Mode, type TurnEngine } from "../../mod.ts";

// Prelude (ours).
const workspace = process.cwd();

createDefaultEngine({
  workspace,
  sandbox: {
    mode: "auto",                  // auto / off / required
    extraWritable: ["/data/cache"], // 额外可写路径
  },
});

// Epilogue (ours): the same engine with shellPolicy "sandbox" runs a command without approval
// when the sandbox is enforced, and the command cannot write outside the workspace.
const engine: TurnEngine = createDefaultEngine({
  workspace,
  shellPolicy: "sandbox",
  defaultApproval: "deny",
  sandbox: {
    mode: "auto",
    extraWritable: ["/data/cache"],
  },
});
const meta = engine.registry.get("run_shell")!.metadata;
engine.permissions.mode = Mode.INTERACTIVE;
const shellDecision = engine.permissions.evaluate("run_shell", { command: "make test" }, meta);
const finished: string[] = [];
for await (const event of engine.run("write two files")) {
  if (event.type === EventType.TOOL_FINISHED) finished.push(String(event.data.status));
}
let required = "ok";
try {
  createDefaultEngine({ workspace, sandbox: { mode: "required" } });
} catch (e) {
  required = (e as Error).name;
}
console.log(
  JSON.stringify({
    kind: engine.permissions.sandbox.kind,
    enforced: engine.permissions.sandbox.enforced,
    description: describeSandbox(engine.permissions.sandbox),
    exempt: shellDecision.allowed,
    finished,
    required,
  }),
);
