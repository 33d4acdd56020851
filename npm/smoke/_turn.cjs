// One complete agent turn against the packed package, shared by smoke.mjs (ESM) and
// smoke.cjs (CommonJS): the modules are passed in, so each run uses its own module format.
// A local MockOpenAIServer (from @zqagent/core/testing) plays a model that lists and reads
// files, then writes one (needs an approval in INTERACTIVE mode), then answers.
"use strict";
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

/**
 * Runs the turn; throws (assert) when anything differs from the expected behaviour.
 * @param {Record<string, any>} core the "@zqagent/core" module
 * @param {Record<string, any>} testing the "@zqagent/core/testing" module
 * @param {string} label "esm" or "cjs"
 */
async function runTurn(core, testing, label) {
  const {
    ApprovalOutcome,
    createDefaultEngine,
    EventType,
    Mode,
    OpenAIProvider,
  } = core;
  const ws = fs.realpathSync(
    fs.mkdtempSync(path.join(os.tmpdir(), `zqagent-smoke-${label}-`)),
  );
  fs.writeFileSync(
    path.join(ws, "README.md"),
    "# smoke\nA statistics library.\n",
  );
  const server = new testing.MockOpenAIServer({
    turns: [
      {
        toolCalls: [
          { id: "c1", name: "list_files", arguments: { path: "." } },
          { id: "c2", name: "read_file", arguments: { path: "README.md" } },
        ],
      },
      {
        toolCalls: [{
          id: "c3",
          name: "write_file",
          arguments: { path: "SUMMARY.md", content: `written by ${label}\n` },
        }],
      },
      { text: ["It is a ", "statistics library."] },
    ],
  });
  await server.start();
  try {
    const engine = createDefaultEngine({
      workspace: ws,
      model: "smoke-model",
      mode: Mode.INTERACTIVE,
      provider: new OpenAIProvider({
        apiKey: "smoke-key",
        baseURL: server.baseURL,
        maxRetries: 0,
      }),
    });
    const asked = [];
    engine.setApprover((request) => {
      asked.push(request.toolName);
      return Promise.resolve(ApprovalOutcome.ONCE);
    });
    const events = [];
    for await (
      const event of engine.run("What is this project? Write a summary.")
    ) {
      events.push(event);
    }
    const of = (type) => events.filter((e) => e.type === type);
    const finished = of(EventType.TOOL_FINISHED).map((e) => `${e.data.name}:${e.data.status}`);
    assert.deepEqual(finished, [
      "list_files:ok",
      "read_file:ok",
      "write_file:ok",
    ]);
    assert.deepEqual(
      of(EventType.PERMISSION_REQUIRED).map((e) => e.data.name),
      ["write_file"],
    );
    assert.deepEqual(asked, ["write_file"]);
    const text = of(EventType.ASSISTANT_DELTA).map((e) => e.data.text).join("");
    assert.equal(text, "It is a statistics library.");
    const ends = of(EventType.TURN_END);
    assert.equal(ends.length, 1);
    assert.equal(ends[0].data.status, "completed");
    assert.equal(events.at(-1).type, EventType.TURN_END);
    assert.equal(
      fs.readFileSync(path.join(ws, "SUMMARY.md"), "utf8"),
      `written by ${label}\n`,
    );
    assert.equal(server.requests.length, 3);
    return { events: events.length, tools: finished.length };
  } finally {
    await server.close();
    fs.rmSync(ws, { recursive: true, force: true });
  }
}

module.exports = { runTurn };
