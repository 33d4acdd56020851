// Manual §17.1 "Activación", as written; only the import specifier changed. The prelude names
// the workspace; the epilogue runs one turn that writes a file and lists the recorded turn.
import process from "node:process";
import { ApprovalOutcome, createDefaultEngine, resolveVcsPlan, SessionVcs } from "../../mod.ts";

// Prelude (ours).
const workspace = process.cwd();

// §17.1
const engine = createDefaultEngine({
  workspace,
  vcs: { mode: "auto", sessionId: "tenant-42-session-7" },
});

// Epilogue (ours).
engine.setApprover(async () => ApprovalOutcome.ONCE);
for await (const _event of engine.run("write hello.txt")) {
  // 渲染或忽略
}
const vcs = new SessionVcs(resolveVcsPlan(workspace, { mode: "auto" }), "tenant-42-session-7");
const turns = await vcs.listTurns();
console.log(JSON.stringify({
  mode: vcs.plan.mode,
  turns: turns.map((t) => ({ turn: t.turn, files: t.files.map((f) => `${f.change}:${f.path}`) })),
}));
