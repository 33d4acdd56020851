/**
 * The reference terminal agent (the project's main job).
 *
 * ```sh
 * deno task agent "explain this project"   # one turn in the current folder
 * deno task agent                          # multi-turn REPL
 * deno task demo                           # offline: a scripted model on a sample project
 * ```
 *
 * Flags: `--model`, `--mode` (interactive | auto | plan | discuss), `--workspace`, `--lang`,
 * `--demo`, `--help`. The model endpoint comes from `OPENAI_BASE_URL`, `OPENAI_API_KEY` and
 * `OPENAI_MODEL`. Ctrl-C interrupts the running turn; a second Ctrl-C (or one while idle) exits.
 *
 * @module
 */
import process from "node:process";
import { createInterface, type Interface } from "node:readline/promises";
import { parseArgs } from "node:util";
import fs from "node:fs";
import {
  ApprovalOutcome,
  ConsoleHook,
  createDefaultEngine,
  EventType,
  Mode,
  OpenAIProvider,
  setQuestionHandler,
  type TurnEngine,
} from "../mod.ts";
import { approvalCard, askApproval } from "./_approval.ts";
import { copyDemoProject, DEMO_PROMPT, startDemoServer } from "./_demo.ts";

const USAGE = `Usage: deno task agent [options] ["prompt"]
       deno task demo

Runs an agent turn in a folder against an OpenAI-compatible endpoint
(OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL). Without a prompt: a multi-turn REPL.

Options:
  --model <id>         model id (default: $OPENAI_MODEL)
  --mode <mode>        interactive (default) | auto | plan | discuss
  --workspace <dir>    workspace folder (default: the current folder)
  --lang <lang>        prompt language: en (default) | zh
  --demo               offline demo: a scripted model on a copy of a sample project
  -h, --help           this help
`;

const write = (text: string): void => void process.stdout.write(text);
const color = !!process.stdout.isTTY && process.env.NO_COLOR === undefined;
const dim = (t: string): string => (color ? `\x1b[2m${t}\x1b[0m` : t);
const bold = (t: string): string => (color ? `\x1b[1m${t}\x1b[0m` : t);

function parseMode(value: string | undefined): Mode {
  if (value === undefined) return Mode.INTERACTIVE;
  const mode = Object.values(Mode).find((m) => m === value.toLowerCase());
  if (!mode) {
    throw new Error(`Cannot use --mode ${value}: expected interactive, auto, plan or discuss`);
  }
  return mode;
}

/** Runs one turn; Ctrl-C interrupts it. Returns the turn's final status. */
async function runTurn(engine: TurnEngine, input: string): Promise<string> {
  let status = "error";
  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    if (interrupts > 1) {
      write("\nexiting\n");
      process.exit(130);
    }
    write(dim("\n(interrupting the turn; Ctrl-C again to quit)\n"));
    engine.requestInterrupt();
  };
  process.on("SIGINT", onSigint);
  try {
    for await (const event of engine.run(input)) {
      if (event.type === EventType.TURN_END) status = String(event.data.status);
    }
  } catch (err) {
    write(`\n${(err as Error).message}\n`);
  } finally {
    process.off("SIGINT", onSigint);
  }
  return status;
}

async function demo(): Promise<number> {
  const workspace = copyDemoProject();
  const server = await startDemoServer();
  write(bold("zqagent demo (offline)\n"));
  write(
    "The model here is SCRIPTED: a local OpenAI-compatible test server (testing/MockOpenAIServer)\n" +
      "plays its answers, while every tool call runs for real on a temporary copy of a small\n" +
      `project:\n  ${workspace}\n` +
      "To use a real model instead:\n" +
      '  OPENAI_API_KEY=... OPENAI_BASE_URL=... OPENAI_MODEL=... npx -y deno@2.9.6 task agent "your prompt"\n\n',
  );
  const engine = createDefaultEngine({
    workspace,
    model: "scripted-demo-model",
    provider: new OpenAIProvider({ apiKey: "demo-key", baseURL: server.baseURL }),
    mode: Mode.INTERACTIVE,
    lang: "en",
    hook: new ConsoleHook({ write, color }),
  });
  engine.setApprover((request) => {
    write(approvalCard(request) + "\n");
    write(dim("  (demo: approving once on your behalf)\n"));
    return Promise.resolve(ApprovalOutcome.ONCE);
  });
  try {
    const status = await runTurn(engine, DEMO_PROMPT);
    write(`\nfinal status: ${status}\n`);
    const notes = `${workspace}/NOTES.md`;
    if (fs.existsSync(notes)) {
      write(dim("\nNOTES.md as the agent wrote it:\n") + fs.readFileSync(notes, "utf8"));
    }
    write(dim("(the temporary copy of the project is removed now)\n"));
    return status === "completed" ? 0 : 1;
  } finally {
    await server.close();
    fs.rmSync(workspace, { recursive: true, force: true });
  }
}

async function main(argv: string[]): Promise<number> {
  let args;
  try {
    args = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        model: { type: "string" },
        mode: { type: "string" },
        workspace: { type: "string" },
        lang: { type: "string" },
        demo: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = args;
  if (values.help) {
    write(USAGE);
    return 0;
  }
  if (values.demo) return await demo();

  let engine: TurnEngine;
  try {
    engine = createDefaultEngine({
      workspace: values.workspace ?? process.cwd(),
      model: values.model,
      mode: parseMode(values.mode),
      lang: values.lang ?? "en",
      hook: new ConsoleHook({ write, color }),
    });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }

  const interactive = !!process.stdin.isTTY;
  let rl: Interface | undefined;
  const readline = (): Interface => {
    if (!rl) {
      rl = createInterface({ input: process.stdin, output: process.stdout, terminal: interactive });
      // readline takes Ctrl-C on a TTY: pass it on, so it interrupts the turn as usual.
      rl.on("SIGINT", () => {
        if (process.listenerCount("SIGINT") > 0) process.emit("SIGINT");
        else process.exit(130);
      });
    }
    return rl;
  };
  engine.setApprover((request) => {
    if (!interactive) {
      write(approvalCard(request) + "\n");
      write(dim("  (no terminal to ask on: denied; use --mode auto in a disposable workspace)\n"));
      return Promise.resolve(ApprovalOutcome.DENY);
    }
    return askApproval(readline(), request, write);
  });
  setQuestionHandler(async (question, options, allowText) => {
    if (!interactive) return options[0] ?? "";
    const hint = options.length ? ` (${options.map((o, i) => `${i + 1}=${o}`).join(", ")})` : "";
    const answer = (await readline().question(`  ${question}${hint} > `)).trim();
    const n = Number(answer);
    if (Number.isInteger(n) && n >= 1 && n <= options.length) return options[n - 1];
    return allowText || options.length === 0 ? answer : options[0];
  });

  try {
    const prompt = positionals.join(" ").trim();
    if (prompt) {
      const status = await runTurn(engine, prompt);
      return status === "completed" ? 0 : 1;
    }
    if (!interactive) {
      const input = fs.readFileSync(0, "utf8").trim();
      if (!input) {
        process.stderr.write("No prompt given (pass one as an argument or on stdin)\n");
        return 2;
      }
      const status = await runTurn(engine, input);
      return status === "completed" ? 0 : 1;
    }
    write(dim("zqagent REPL: type a message; /exit or Ctrl-D to quit\n"));
    const r = readline();
    let closed = false;
    r.on("close", () => (closed = true));
    while (!closed) {
      let line: string;
      try {
        line = (await r.question(bold("› "))).trim();
      } catch {
        break;
      }
      if (line === "/exit" || line === "/quit") break;
      if (line) await runTurn(engine, line);
    }
    return 0;
  } finally {
    rl?.close();
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
  // Background shell tasks and servers must not keep the process alive.
  process.exit(process.exitCode);
}

export { main };
