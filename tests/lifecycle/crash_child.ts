// A host process for tests/crash_recovery_test.ts: runs (PHASE=first) or resumes (PHASE=resume)
// a session persisted with FileLogHook, printing each event type on its own line. The test kills
// it with SIGKILL at chosen points.
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import {
  ApprovalOutcome,
  FileLogHook,
  Mode,
  OpenAIProvider,
  PermissionEngine,
  registerFileTools,
  ToolRegistry,
  TurnEngine,
} from "../../mod.ts";

const env = (k: string): string => process.env[k] ?? "";
const ws = env("CRASH_WS");
const stateDir = env("CRASH_STATE");
const sessionId = "crash-session";
const runsLog = path.join(ws, "runs.log");

const registry = new ToolRegistry();
registerFileTools(registry, ws);
const low = {
  category: "test",
  riskLevel: "low" as const,
  capabilities: [],
  requiresApproval: false,
};
registry.register(
  (args: Record<string, unknown>) => {
    fs.appendFileSync(runsLog, `count ${args.tag}\n`);
    return { ok: true };
  },
  low,
  {
    type: "function",
    function: {
      name: "count",
      parameters: { type: "object", properties: { tag: { type: "string" } } },
    },
  },
);
registry.register(
  async (_args: Record<string, unknown>, ctx: { toolCallId?: string }) => {
    fs.appendFileSync(runsLog, `slow ${ctx.toolCallId}\n`);
    console.log(`SLOW_RUNNING ${ctx.toolCallId}`);
    await new Promise(() => {}); // runs until the process is killed
  },
  low,
  { type: "function", function: { name: "slow", parameters: { type: "object" } } },
);

const saved = FileLogHook.loadState(sessionId, stateDir);
const hook = new FileLogHook(sessionId, stateDir);
const engine = new TurnEngine({
  provider: new OpenAIProvider({
    apiKey: "k",
    baseURL: env("CRASH_BASE_URL"),
    apiMode: "chat",
    maxRetries: 0,
  }),
  registry,
  permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.INTERACTIVE }),
  model: "crash-model",
  instructions: "You are a test agent.",
  messages: saved?.messages,
  hook,
});
if (saved) FileLogHook.applyState(engine, saved);
hook.attach(engine);

const first = env("PHASE") === "first";
engine.setApprover((request) => {
  if (first) {
    console.log(`APPROVAL_WAIT ${request.toolCallId}`);
    return new Promise(() => {}); // a person who never answers before the crash
  }
  console.log(`APPROVED ${request.toolCallId}`);
  return Promise.resolve(ApprovalOutcome.ONCE);
});

const stream = first ? engine.run("do the work") : engine.resume();
for await (const event of stream) {
  const extra = event.type === "turn_end" ? ` ${event.data.status}` : "";
  console.log(`${event.type}${extra}`);
}
console.log("EXIT");
process.exit(0);
