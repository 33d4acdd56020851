/**
 * The smallest complete host (manual §4): mount an engine on the current folder, approve tool
 * calls and answer the model's questions on the terminal, and print the event stream. Calling
 * `run()` again on the same engine would carry the history on (multi-turn, manual §12.1).
 *
 * ```sh
 * export OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4o-mini
 * cd my-project && deno run -A path/to/examples/embed_basic.ts "What does this project do?"
 * ```
 *
 * Answers are read line by line from standard input (`y` approves once, `a` always allows the
 * tool, anything else denies; a question gets the line typed, or its first option when empty),
 * so a script can pipe them in.
 *
 * @module
 */
import process from "node:process";
import readline from "node:readline";
import {
  ApprovalOutcome,
  createDefaultEngine,
  EventType,
  Mode,
  setQuestionHandler,
} from "../mod.ts";

const model = process.env.OPENAI_MODEL;
if (!model) {
  // Checklist §19: the model is configured explicitly, and a missing one fails at start.
  console.error("Cannot start: set OPENAI_MODEL (the engine never picks a model for you)");
  process.exit(2);
}

const engine = createDefaultEngine({
  workspace: process.cwd(), // the permission boundary: files and commands stay in here
  model,
  mode: Mode.INTERACTIVE, // side effects are approved one by one
});

// Standard input, one answer a line; lines typed ahead of a question are kept, not lost.
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function ask(prompt: string): Promise<string> {
  process.stdout.write(prompt);
  const next = await lines.next();
  return next.done ? "" : String(next.value).trim();
}

// 1) Approvals: without one, the first tool call that needs a person throws (manual §8.3).
engine.setApprover(async (request) => {
  console.log(`\n[approval] ${request.toolName} — ${request.reason}`);
  console.log(JSON.stringify(request.arguments, null, 2));
  const answer = (await ask("[y] once  [a] always this tool  [n] deny > ")).toLowerCase();
  if (answer === "y") return ApprovalOutcome.ONCE;
  if (answer === "a") return ApprovalOutcome.ALWAYS_TOOL;
  return ApprovalOutcome.DENY; // end of input or anything else: deny
});

// 2) ask_user answers (module-wide, set once).
setQuestionHandler(async (question, options) => {
  console.log(`\n[question] ${question}`, options);
  return (await ask("> ")) || (options[0] ?? "");
});

// 3) One turn, consuming the event stream; turn_end is the turn's final state (manual §9.1).
const input = process.argv.slice(2).join(" ") || "Read this project and tell me what it does";
let status = "error";
for await (const event of engine.run(input)) {
  switch (event.type) {
    case EventType.ASSISTANT_DELTA:
      process.stdout.write(String(event.data.text ?? ""));
      break;
    case EventType.TOOL_STARTED:
      console.log(`\n[tool] ${event.data.name}`);
      break;
    case EventType.TOOL_FINISHED:
      console.log(`[tool done] ${event.data.name}: ${event.data.status}`);
      break;
    case EventType.ERROR:
      console.error(`\n[error] ${event.data.error}`);
      break;
    case EventType.TURN_END:
      status = String(event.data.status);
      console.log(`\n[end] ${status}`);
      break;
  }
}
process.exit(status === "completed" ? 0 : 1);
