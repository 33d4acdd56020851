// Manual §11.1–11.2, as written; only the import specifier changed. The prelude defines
// `sessionId`; the epilogue runs a turn through the composite and shows that both hooks and a
// throwing one (§11.1: hooks never affect the turn) see it.
import { createDefaultEngine, Mode, type EngineHook } from "../../mod.ts";

// Prelude (ours).
const sessionId = "manual-11-2";

// §11.2
import { CompositeHook, ConsoleHook, FileLogHook } from "../../mod.ts";

const hook = new CompositeHook([
  new ConsoleHook(),
  new FileLogHook(sessionId, "/var/lib/myapp/sessions"),
]);

// Epilogue (ours): the same shape with a writable folder and a throwing member.
const seen: string[] = [];
const counting: EngineHook = { onTurnEnd: (status) => void seen.push(`end:${status}`) };
const throwing: EngineHook = {
  onTurnStart: () => {
    throw new Error("a hook bug");
  },
};
const local = new CompositeHook([throwing, counting, new FileLogHook(sessionId, process.cwd())]);
const engine = createDefaultEngine({ workspace: process.cwd(), mode: Mode.AUTO, hook: local });
for await (const _ of engine.run("hi")) { /* drain */ }
console.log(JSON.stringify({ members: hook.hooks.length, seen }));
