// Manual §12.3, as written; only the import specifier changed. The prelude runs a turn that
// fails with a retriable error (the local server answers 503 first).
import { createDefaultEngine, Mode } from "../../mod.ts";

// Prelude (ours).
const engine = createDefaultEngine({ workspace: process.cwd(), mode: Mode.AUTO });
const firstTurn: string[] = [];
for await (const e of engine.run("hello")) {
  if (e.type === "error") firstTurn.push(`error:${e.data.retriable}`);
  if (e.type === "turn_end") firstTurn.push(`turn_end:${e.data.status}`);
}
const retried: string[] = [];

// §12.3
for await (const e of engine.retry()) {
  // 仅在上一轮以可重试错误结束时才会产出事件
  retried.push(e.type === "turn_end" ? `turn_end:${e.data.status}` : e.type);
}

// Epilogue (ours): nothing to retry after a completed turn.
let again = 0;
for await (const _ of engine.retry()) again++;
console.log(JSON.stringify({ firstTurn, retried: retried.at(-1), again }));
