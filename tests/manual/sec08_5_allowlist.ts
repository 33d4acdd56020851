// Manual §8.5 "Lista de comandos permitidos", as written; only the import specifier changed.
import { createDefaultEngine, Mode, RiskClass, type TurnEngine } from "../../mod.ts";

// Prelude (ours).
const workspace = process.cwd();

createDefaultEngine({
  workspace,
  mode: Mode.AUTO,
  allowedCommands: ["git status", "git diff", "ls", "cat", "pnpm test"],
});

// Epilogue (ours): the same engine, checked against the rules listed under the sample.
const engine: TurnEngine = createDefaultEngine({
  workspace,
  mode: Mode.AUTO,
  allowedCommands: ["git status", "git diff", "ls", "cat", "pnpm test"],
});
const meta = engine.registry.get("run_shell")!.metadata;
engine.permissions.mode = Mode.INTERACTIVE;
const allowed = (command: string) => engine.permissions.evaluate("run_shell", { command }, meta).allowed;
console.log(
  JSON.stringify({
    risk: meta.riskClass === RiskClass.EXEC,
    ls: allowed("ls -la"),
    lsof: allowed("lsof"),
    compound: allowed("ls; rm -rf /"),
    gitStatus: allowed("git status -s"),
  }),
);
