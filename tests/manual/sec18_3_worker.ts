// Manual §18.3, as written; only the import specifier changed. The prelude makes the job's
// workspace; the epilogue runs a job and checks the static rules.
import { ApprovalOutcome, createDefaultEngine, Mode } from "../../mod.ts";

// Prelude (ours).
const jobWorkspace = process.cwd();

// §18.3
const engine = createDefaultEngine({
  workspace: jobWorkspace,
  mode: Mode.INTERACTIVE,
  defaultApproval: "deny", // 没人可问:默认拒绝
  allowedCommands: ["npm test", "npm run build"],
});

engine.setApprover(async (req) => {
  // 用业务规则做静态审批,而不是问人
  if (req.toolName === "run_shell" && String(req.arguments.command).startsWith("npm test")) {
    return ApprovalOutcome.ONCE;
  }
  return ApprovalOutcome.DENY;
});

// Epilogue (ours).
const tools: string[] = [];
let status = "";
for await (const e of engine.run("fix the build")) {
  if (e.type === "tool_finished") tools.push(`${e.data.name}:${e.data.status}`);
  if (e.type === "turn_end") status = String(e.data.status);
}
const shellMeta = engine.registry.get("run_shell")!.metadata;
console.log(JSON.stringify({
  tools,
  status,
  npmTestAllowed: engine.permissions.evaluate("run_shell", { command: "npm test" }, shellMeta)
    .allowed,
  approverNpmTest: await engine.approver!({
    toolName: "run_shell",
    arguments: { command: "npm test -- --ci" },
    metadata: shellMeta,
    reason: "",
  }),
}));
