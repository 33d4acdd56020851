/**
 * The offline demo of the reference CLI: a scripted model served by the `testing/`
 * OpenAI-compatible server drives a real turn over a temporary copy of `cli/demo_project/`.
 *
 * @module
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MockOpenAIServer, type RecordedRequest, type ScriptedTurn } from "../testing/mod.ts";

/** The folder of the small real project the demo works on. */
export const DEMO_PROJECT: string = fileURLToPath(new URL("./demo_project", import.meta.url));

/** The user prompt the demo sends. */
export const DEMO_PROMPT =
  "Look at this project, find its open TODOs, write them to NOTES.md, run the tests and tell me " +
  "what the project does.";

/** Copies the demo project into a new temporary folder and returns its path. */
export function copyDemoProject(): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-demo-")));
  fs.cpSync(DEMO_PROJECT, dir, { recursive: true });
  return dir;
}

function lastToolOutput(request: RecordedRequest): string {
  const body = request.body as Record<string, unknown>;
  const messages = (body.messages ?? body.input ?? []) as Record<string, unknown>[];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === "tool" && typeof m.content === "string") return m.content;
    if (m.type === "function_call_output" && typeof m.output === "string") return m.output;
  }
  return "";
}

/**
 * The scripted model: each request gets the next step; later steps use earlier tool results.
 *
 * @param delayPerDeltaMs Pause between streamed deltas, so the text visibly streams (default 15).
 */
export function demoScript(
  delayPerDeltaMs = 15,
): (request: RecordedRequest, index: number) => ScriptedTurn {
  const step = nextStep();
  return (request, index) => ({ delayPerDeltaMs, ...step(request, index) });
}

function nextStep(): (request: RecordedRequest, index: number) => ScriptedTurn {
  let todos = "";
  return (request, index) => {
    switch (index) {
      case 0:
        return {
          reasoning: "The user wants an overview. I should list the files first.",
          text: "Let me look at the project first.",
          toolCalls: [{
            id: "call_list",
            name: "list_files",
            arguments: { path: ".", recursive: true },
          }],
        };
      case 1:
        return {
          toolCalls: [
            { id: "call_readme", name: "read_file", arguments: { path: "README.md" } },
            { id: "call_src", name: "read_file", arguments: { path: "src/stats.js" } },
          ],
        };
      case 2:
        return {
          toolCalls: [{ id: "call_grep", name: "grep", arguments: { pattern: "TODO" } }],
        };
      case 3: {
        todos = lastToolOutput(request);
        const lines = todos.split("\n").filter((l) => l.includes("TODO"));
        const content = [
          "# Notes",
          "",
          "Open TODOs found in this project:",
          "",
          ...lines.map((l) => `- ${l.trim()}`),
          "",
        ].join("\n");
        return {
          text: `I found ${lines.length} TODO(s). I will write them to NOTES.md.`,
          toolCalls: [{
            id: "call_write",
            name: "write_file",
            arguments: { path: "NOTES.md", content },
          }],
        };
      }
      case 4:
        return {
          toolCalls: [{
            id: "call_test",
            name: "run_shell",
            arguments: { command: "node test/stats_test.js" },
          }],
        };
      default: {
        const testOutput = lastToolOutput(request);
        const passed = testOutput.includes("all tests passed");
        return {
          text: [
            "## Summary",
            "",
            "**tiny-stats** is a very small statistics library exporting `mean`, `median` and " +
            "`mode` for arrays of numbers (`src/stats.js`).",
            "",
            `- Open TODOs are listed in \`NOTES.md\` (${
              todos.split("\n").filter((l) => l.includes("TODO")).length
            } found).`,
            `- Tests: ${
              passed ? "`node test/stats_test.js` passed" : "the test command did not pass"
            }.`,
            "",
          ].join("\n"),
        };
      }
    }
  };
}

/** Starts the scripted model server; the caller closes it. */
export async function startDemoServer(): Promise<MockOpenAIServer> {
  const server = new MockOpenAIServer({ turns: demoScript() });
  await server.start();
  return server;
}
