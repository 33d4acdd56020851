// Servers that repeat a tool call id within one reply: the calls stay separate (never merged
// into one call with another's name or arguments), on both APIs; the engine makes the ids unique.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { OpenAIProvider } from "./mod.ts";
import {
  ApprovalOutcome,
  EventType,
  Mode,
  PermissionEngine,
  registerFileTools,
  ToolRegistry,
  TurnEngine,
} from "../mod.ts";
import { MockOpenAIServer } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "../tests/_util.ts";

const DUPLICATE = {
  toolCalls: [
    { id: "dup", name: "read_file", arguments: { path: "a.txt" } },
    { id: "dup", name: "write_file", arguments: { path: "b.txt", content: "B" } },
  ],
};

for (const apiMode of ["chat", "responses"] as const) {
  test(`a repeated call id does not merge two calls (${apiMode})`, async () => {
    const server = await new MockOpenAIServer({ turns: [DUPLICATE] }).start();
    try {
      const provider = new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode });
      const stream = await provider.stream("m", [{ role: "user", content: "x" }], [], {
        reqId: "r",
        logTime: "t",
      });
      let calls: { function: { name: string; arguments: string } }[] = [];
      for await (const c of stream) if (c.toolCalls) calls = c.toolCalls;
      assert.deepEqual(
        calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
        [["read_file", { path: "a.txt" }], ["write_file", { path: "b.txt", content: "B" }]],
      );
    } finally {
      await server.close();
    }
  });

  test(`the engine gives repeated call ids unique ids and runs each call as sent (${apiMode})`, async () => {
    const ws = tempWorkspace({ "a.txt": "alpha" });
    const server = await new MockOpenAIServer({ turns: [DUPLICATE, { text: "ok" }] }).start();
    try {
      const registry = new ToolRegistry();
      registerFileTools(registry, ws);
      const engine = new TurnEngine({
        provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode }),
        registry,
        permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.INTERACTIVE }),
        model: "m",
        instructions: "",
      });
      const asked: string[] = [];
      engine.setApprover((req) => {
        asked.push(`${req.toolName}:${JSON.stringify(req.arguments)}`);
        return Promise.resolve(ApprovalOutcome.ONCE);
      });
      const { events } = await collect(engine.run("go"));
      const ids = ofType(events, EventType.TOOL_PROPOSED).map((e) => e.data.reqId);
      assert.equal(new Set(ids).size, 2);
      assert.deepEqual(asked, ['write_file:{"path":"b.txt","content":"B"}']);
      assert.equal(fs.readFileSync(path.join(ws, "b.txt"), "utf8"), "B");
      assert.equal(fs.readFileSync(path.join(ws, "a.txt"), "utf8"), "alpha");
      const toolMessages = engine.messages.filter((m) => m.role === "tool");
      assert.deepEqual(toolMessages.map((m) => m.tool_call_id), ids);
    } finally {
      await server.close();
      removeDir(ws);
    }
  });
}
