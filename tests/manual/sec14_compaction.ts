// Manual §14.2–14.3, as written; only the import specifier changed. The prelude defines
// `workspace`; the epilogue drives a turn over the thresholds (the local server reports a large
// usage) and prints the compaction events and state.
import { ApprovalOutcome } from "../../mod.ts";

// Prelude (ours).
const workspace = process.cwd();

// §14.3
import { createDefaultEngine } from "../../mod.ts";

const engine = createDefaultEngine({
  workspace,
  contextWindow: 200_000,
  thresholdPct: 0.85,
  softThresholdPct: 0.7,
  capTokens: 120_000,
});

// §14.2
// engine.run(...) 的事件流中会出现:
// { type: "compacting", data: { trigger: "threshold", tokens, contextWindow, ... } }
// { type: "compacted",  data: { method: "summarized" | "trimmed", messagesBefore, messagesAfter, ... } }

// Epilogue (ours).
engine.setApprover(async () => ApprovalOutcome.ONCE);
const events: Record<string, unknown>[] = [];
for (const input of ["读一下 README.md", "继续"]) {
  for await (const event of engine.run(input)) {
    if (event.type === "compacting" || event.type === "compacted") {
      events.push({ type: event.type, ...event.data });
    }
  }
}
console.log(JSON.stringify({ events, state: engine.compactionState }));
