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
 * `--max-iterations`, `--demo`, `--help`. The model endpoint comes from `OPENAI_BASE_URL`,
 * `OPENAI_API_KEY` and `OPENAI_MODEL`. Ctrl-C interrupts the running turn; a second Ctrl-C (or
 * one while idle) exits. SIGTERM and SIGHUP interrupt the turn, stop its commands, then exit.
 *
 * @module
 */
import process from "node:process";
import path from "node:path";
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
  PROMPT_LANGS,
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
  --model <id>            model id (default: $OPENAI_MODEL)
  --mode <mode>           interactive (default) | auto | plan | discuss
  --workspace <dir>       workspace folder (default: the folder you run the command in)
  --lang <lang>           prompt language: ${PROMPT_LANGS.join(" | ")} (default: en)
  --max-iterations <n>    model calls per turn at most (default: 50)
  --demo                  offline demo: a scripted model on a copy of a sample project
  -h, --help              this help
`;

const write = (text: string): void => void process.stdout.write(text);
const color = !!process.stdout.isTTY && process.env.NO_COLOR === undefined;
const dim = (t: string): string => (color ? `\x1b[2m${t}\x1b[0m` : t);
const bold = (t: string): string => (color ? `\x1b[1m${t}\x1b[0m` : t);

/** The folder the user ran the command in: `deno task` runs in the config's folder and passes
 * the caller's folder as INIT_CWD. */
const callerCwd = process.env.INIT_CWD || process.cwd();

class UsageError extends Error {
  override name = "UsageError";
}

function parseMode(value: string | undefined): Mode {
  if (value === undefined) return Mode.INTERACTIVE;
  const mode = Object.values(Mode).find((m) => m === value.toLowerCase());
  if (!mode) {
    throw new UsageError(`Cannot use --mode ${value}: expected interactive, auto, plan or discuss`);
  }
  return mode;
}

function parseLang(value: string | undefined): string {
  if (value === undefined) return "en";
  if (!PROMPT_LANGS.includes(value)) {
    throw new UsageError(`Cannot use --lang ${value}: expected one of ${PROMPT_LANGS.join(", ")}`);
  }
  return value;
}

function parseMaxIterations(value: string | undefined): number {
  if (value === undefined) return 50;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) {
    throw new UsageError(`Cannot use --max-iterations ${value}: expected a whole number >= 1`);
  }
  return n;
}

/** The running turn, so signals can interrupt it and wait for its clean-up. */
interface Current {
  engine: TurnEngine;
  done: Promise<string>;
  /** Aborts a question or approval prompt that is waiting for the user. */
  prompts: AbortController;
}
let current: Current | undefined;

/** Runs one turn; Ctrl-C interrupts it. Returns the turn's final status. */
function runTurn(engine: TurnEngine, input: string): Promise<string> {
  const prompts = new AbortController();
  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    if (interrupts > 1) {
      write("\nexiting\n");
      process.exit(130);
    }
    write(dim("\n(interrupting the turn; Ctrl-C again to quit)\n"));
    prompts.abort();
    engine.requestInterrupt();
  };
  const run = async (): Promise<string> => {
    let status = "error";
    let errorShown = false;
    process.on("SIGINT", onSigint);
    try {
      for await (const event of engine.run(input)) {
        if (event.type === EventType.ERROR) errorShown = true;
        if (event.type === EventType.TURN_END) status = String(event.data.status);
      }
    } catch (err) {
      if (!errorShown) write(`\n${(err as Error).message}\n`);
    } finally {
      process.off("SIGINT", onSigint);
    }
    return status;
  };
  const done = run();
  current = { engine, done, prompts };
  return done.finally(() => (current = undefined));
}

/** SIGTERM / SIGHUP: interrupt the turn, let it stop its commands (5 s at most), then exit. */
function installShutdown(): void {
  const shutdown = async (code: number) => {
    const turn = current;
    if (turn) {
      turn.prompts.abort();
      turn.engine.requestInterrupt();
      await Promise.race([turn.done, new Promise((r) => setTimeout(r, 5000))]);
    }
    process.exit(code);
  };
  process.on("SIGTERM", () => void shutdown(143));
  if (process.platform !== "win32") process.on("SIGHUP", () => void shutdown(129));
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
        "max-iterations": { type: "string" },
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
  installShutdown();
  if (values.demo) return await demo();

  const interactive = !!process.stdin.isTTY;
  const prompt = positionals.join(" ").trim();
  const repl = prompt === "" && interactive;
  let engine: TurnEngine;
  try {
    const workspace = path.resolve(callerCwd, values.workspace ?? ".");
    if (!fs.existsSync(workspace)) {
      throw new UsageError(`Cannot use workspace ${workspace}: it does not exist`);
    }
    engine = createDefaultEngine({
      workspace,
      model: values.model,
      mode: parseMode(values.mode),
      lang: parseLang(values.lang),
      maxIterations: parseMaxIterations(values["max-iterations"]),
      hook: new ConsoleHook({ write, color, showInput: !repl }),
    });
    if (!engine.model) {
      throw new UsageError("Cannot start: no model specified (pass --model or set OPENAI_MODEL)");
    }
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }

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
    return askApproval(readline(), request, { write, signal: current?.prompts.signal });
  });
  setQuestionHandler(async (question, options, allowText) => {
    if (!interactive) {
      throw new Error(
        "Cannot ask the user: the CLI has no terminal to ask on (stdin is not a TTY); decide " +
          "without asking or stop and say what you need",
      );
    }
    const hint = options.length ? ` (${options.map((o, i) => `${i + 1}=${o}`).join(", ")})` : "";
    const answer = (await readline().question(`  ${question}${hint} > `, {
      signal: current?.prompts.signal,
    })).trim();
    const n = Number(answer);
    if (Number.isInteger(n) && n >= 1 && n <= options.length) return options[n - 1];
    return allowText || options.length === 0 ? answer : options[0];
  });

  try {
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
    write(dim(`zqagent REPL in ${engine.permissions.workspaceRoot}: /exit or Ctrl-D to quit\n`));
    const r = readline();
    let closed = false;
    let named = false;
    r.on("close", () => (closed = true));
    while (!closed) {
      let line: string;
      try {
        line = (await r.question(bold("› "))).trim();
      } catch {
        break;
      }
      if (line === "/exit" || line === "/quit") break;
      if (!line) continue;
      await runTurn(engine, line);
      if (!named) {
        named = true;
        const name = await engine.generateSessionName();
        if (name) write(dim(`(session: ${name})\n`));
      }
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
