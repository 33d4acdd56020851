import { test } from "node:test";
import assert from "node:assert/strict";
import { RiskClass, ToolRegistry } from "./registry.ts";
import {
  cleanTerminalText,
  registerTerminalTools,
  type TerminalInfo,
  type TerminalSource,
} from "./terminal.ts";

/** A host's terminal manager with terminals of two projects. */
class FakeTerminals implements TerminalSource {
  reads: Array<[string, string]> = [];
  terminals: Array<TerminalInfo & { output: string }> = [
    { id: "a1", projectId: "A", title: "dev", command: "npm run dev", output: "ready on :3000\n" },
    { id: "a2", projectId: "A", running: false, output: "\x1b[31merror\x1b[0m: boom\n" },
    { id: "b1", projectId: "B", title: "secret", output: "B's secret token\n" },
  ];
  list(projectId: string): TerminalInfo[] {
    return this.terminals.filter((t) => t.projectId === projectId).map(({ output: _, ...t }) => t);
  }
  read(projectId: string, id: string): Promise<string | null> {
    this.reads.push([projectId, id]);
    // A careless source that ignores projectId: the tools must not rely on it.
    return Promise.resolve(this.terminals.find((t) => t.id === id)?.output ?? null);
  }
}

function tools(projectId: string, source: TerminalSource = new FakeTerminals(), max?: number) {
  const registry = new ToolRegistry();
  registerTerminalTools(registry, { terminals: source, projectId, maxOutputChars: max });
  return {
    registry,
    call: async (name: string, args: Record<string, unknown> = {}) =>
      String(await registry.get(name)!.func(args)),
  };
}

test("registerTerminalTools registers terminal_list and terminal_read as reads", () => {
  const { registry } = tools("A");
  assert.deepEqual(registry.names(), ["terminal_list", "terminal_read"]);
  assert.equal(registry.get("terminal_read")!.metadata.riskClass, RiskClass.READ);
});

test("terminal_list shows only the project's terminals", async () => {
  const { call } = tools("A");
  const out = await call("terminal_list");
  assert.equal(out, 'a1  "dev"  running: npm run dev\na2  (exited)');
  assert.doesNotMatch(out, /b1|secret/);
});

test("terminal_list says when the project has no terminals", async () => {
  assert.equal(await tools("C").call("terminal_list"), "No terminals are open in this project.");
});

test("terminal_read returns a terminal's output without ANSI escapes", async () => {
  const { call } = tools("A");
  assert.equal(await call("terminal_read", { terminal_id: "a1" }), "ready on :3000");
  assert.equal(await call("terminal_read", { terminal_id: "a2" }), "error: boom");
});

test("terminal_read refuses another project's terminal even when the source would serve it", async () => {
  const source = new FakeTerminals();
  const { call } = tools("A", source);
  await assert.rejects(
    call("terminal_read", { terminal_id: "b1" }),
    /Cannot read terminal b1: there is no such terminal in this project/,
  );
  assert.deepEqual(source.reads, []);
});

test("terminal_read ignores listed terminals that belong to another project", async () => {
  const leaky: TerminalSource = {
    list: () => [{ id: "x", projectId: "B" }],
    read: () => "leak",
  };
  const { call } = tools("A", leaky);
  assert.equal(await call("terminal_list"), "No terminals are open in this project.");
  await assert.rejects(call("terminal_read", { terminal_id: "x" }), /no such terminal/);
});

test("terminal_read keeps the last lines and bounds the chars", async () => {
  const source = new FakeTerminals();
  source.terminals[0].output = Array.from({ length: 50 }, (_, i) => `line ${i + 1}`).join("\n");
  const { call } = tools("A", source, 40);
  const last3 = await tools("A", source).call("terminal_read", { terminal_id: "a1", lines: 3 });
  assert.equal(last3, "[last 3 of 50 lines]\nline 48\nline 49\nline 50");
  const bounded = await call("terminal_read", { terminal_id: "a1" });
  assert.match(bounded, /^\[output cut: the last \d+ of \d+ chars\]\n/);
  assert.match(bounded, /line 50$/);
  assert.ok(bounded.split("\n").slice(1).join("\n").length <= 40);
});

test("terminal_read reports a terminal closed between list and read, and a missing id", async () => {
  const closing: TerminalSource = { list: () => [{ id: "t" }], read: () => null };
  const { call } = tools("A", closing);
  await assert.rejects(call("terminal_read", { terminal_id: "t" }), /it was closed/);
  await assert.rejects(call("terminal_read", {}), /terminal_id must be a non-empty string/);
});

test("registerTerminalTools requires a source and a project id", () => {
  const registry = new ToolRegistry();
  assert.throws(
    () => registerTerminalTools(registry, { terminals: {} as TerminalSource, projectId: "A" }),
    /TerminalSource with list\(\) and read\(\)/,
  );
  assert.throws(
    () => registerTerminalTools(registry, { terminals: new FakeTerminals(), projectId: "" }),
    /projectId is required/,
  );
});

test("cleanTerminalText keeps the last state of a line redrawn with carriage returns", () => {
  assert.equal(
    cleanTerminalText("progress 10%\rprogress 90%\rdone\r\nnext\x1b]0;title\x07"),
    "done\nnext",
  );
});
