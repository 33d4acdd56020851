// Manual §17.2 "Consulta y reversión", as written; only the import specifier changed. The
// prelude runs three turns that change src/app.ts; the epilogue prints what the sample got.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import process from "node:process";
import { ApprovalOutcome, createDefaultEngine } from "../../mod.ts";

// Prelude (ours).
const workspace = process.cwd();
const sessionId = "tenant-42-session-7";
const agent = createDefaultEngine({ workspace, vcs: { mode: "auto", sessionId } });
agent.setApprover(async () => ApprovalOutcome.ONCE);
for (const ask of ["v1", "v2", "v3"]) {
  for await (const _event of agent.run(`write src/app.ts ${ask}`)) {
    // 渲染或忽略
  }
}

// §17.2
import { SessionVcs, resolveVcsPlan } from "../../mod.ts";

const vcs = new SessionVcs(resolveVcsPlan(workspace, { mode: "auto" }), sessionId);

const turns = await vcs.listTurns();       // 只列「有改动的轮次」,序号从 1 开始
const patch = await vcs.diffTurn(2);       // git show --patch
const result = await vcs.restoreTurn(2, {   // 回滚到第 2 轮之后的状态
  paths: ["src/app.ts"],                    // 可选:只回滚部分文件
  dryRun: false,
});
// result: { restored, overwritten, missing }

await vcs.forget();  // 删除该会话的 refs/agent/<id>,不还原文件

// Epilogue (ours).
const refs = execFileSync("git", ["for-each-ref", "refs/agent/"], {
  cwd: workspace,
  encoding: "utf8",
});
console.log(JSON.stringify({
  mode: vcs.plan.mode,
  turns: turns.map((t) => t.turn),
  patch: patch.split("\n").filter((l) => /^[-+][^-+]/.test(l)),
  restored: result.restored,
  overwritten: result.overwritten,
  missing: result.missing,
  app: fs.readFileSync("src/app.ts", "utf8"),
  refsAfterForget: refs,
}));
