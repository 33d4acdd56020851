// Manual §12.4, as written; only the import specifier changed. The prelude restores a session
// whose history ends with a tool call waiting for approval (as after a server restart).
import { ApprovalOutcome, createDefaultEngine, Mode } from "../../mod.ts";
import type { Message } from "../../mod.ts";

// Prelude (ours).
const messages: Message[] = [
  { role: "system", content: "You are a test agent." },
  { role: "user", content: "write the note" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{
      id: "pending_1",
      type: "function",
      function: { name: "write_file", arguments: JSON.stringify({ path: "note.md", content: "ok" }) },
    }],
  },
];
const engine = createDefaultEngine({ workspace: process.cwd(), mode: Mode.INTERACTIVE, messages });
const decisions = new Map([["pending_1", ApprovalOutcome.ONCE]]); // resolved while we were down
engine.setApprover(async (request) => decisions.get(request.toolCallId!) ?? ApprovalOutcome.DENY);
const seen: string[] = [];

// §12.4
for await (const e of engine.resume()) {
  // 重新处理挂起的 tool_calls;approver 会按已 resolve 的结果立即返回
  seen.push(e.type === "tool_finished" ? `tool_finished:${e.data.status}` : e.type);
}

// Epilogue (ours): without pending calls, resume() yields nothing.
let again = 0;
for await (const _ of engine.resume()) again++;
const fs = await import("node:fs");
console.log(JSON.stringify({ seen, again, note: fs.readFileSync("note.md", "utf8") }));
