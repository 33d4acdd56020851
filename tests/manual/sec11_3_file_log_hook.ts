// Manual §11.3, as written; only the import specifier changed. The prelude defines the names the
// manual leaves undefined; the epilogue restores the session in a second engine.
import { ApprovalOutcome, createDefaultEngine, Mode } from "../../mod.ts";

// Prelude (ours).
const sessionId = "manual-11-3";
const workspace = process.cwd();
const stateDir = `${process.cwd()}/.sessions`;
const name = "Sample session";
const taskCount = 1;

// §11.3
import { FileLogHook } from "../../mod.ts";

const hook = new FileLogHook(sessionId, stateDir);
// 写入:
//   <stateDir>/<sessionId>.jsonl      事件日志(JSONL)
//   <stateDir>/<sessionId>_state.json 检查点

const engine = createDefaultEngine({
  workspace,
  messages: FileLogHook.loadState(sessionId, stateDir)?.messages,
  hook,
});

// Interlude (ours): one turn with an "always allow" approval, so there is something to save.
engine.setApprover(async () => ApprovalOutcome.ALWAYS_TOOL);
for await (const _ of engine.run("write a note")) { /* drain */ }

// 关键节点保存状态(通常在 onIterationEnd / onTurnEnd 里调)
hook.saveState(engine, { name, nameSource: "auto", taskCount });

// Epilogue (ours): restore in a "restarted" process, as §11.3 "Al restaurar" says.
const saved = FileLogHook.loadState(sessionId, stateDir)!;
const restored = createDefaultEngine({ workspace, messages: saved.messages, mode: Mode.PLAN });
restored.permissions.mode = saved.permissionMode as Mode;
for (const t of saved.allowTools ?? []) restored.permissions.allowToolForSession(t);
for (const c of saved.allowCommands ?? []) restored.permissions.allowCommandForSession(c);
const events = FileLogHook.readEvents(sessionId, stateDir);
console.log(JSON.stringify({
  name: saved.name,
  taskCount: saved.taskCount,
  roles: restored.messages.map((m) => m.role),
  mode: restored.permissions.mode,
  allowTools: restored.permissions.sessionAllowedTools(),
  loggedTypes: [...new Set(events.map((e) => e.type))],
  missing: FileLogHook.loadState("no-such-session", stateDir),
}));
