import { test } from "node:test";
import assert from "node:assert/strict";
import { RiskClass, ToolRegistry } from "./registry.ts";
import { registerTodoTool, type TodoItem, TodoList } from "./todo.ts";

function setup(): {
  list: TodoList;
  write: (todos: unknown) => Promise<string>;
  registry: ToolRegistry;
} {
  const registry = new ToolRegistry();
  const list = registerTodoTool(registry);
  return {
    list,
    registry,
    write: async (todos) => String(await registry.get("todo_write")!.func({ todos })),
  };
}

test("registerTodoTool registers todo_write as a read/state tool without approval", () => {
  const { registry } = setup();
  const meta = registry.get("todo_write")!.metadata;
  assert.equal(meta.riskClass, RiskClass.READ);
  assert.equal(meta.requiresApproval, false);
});

test("todo_write replaces the list and shows it back to the model", async () => {
  const { list, write } = setup();
  const out = await write([
    { content: "Read the code", status: "completed" },
    { content: "Fix the bug", status: "in_progress" },
    { content: "Run the tests", status: "pending" },
  ]);
  assert.equal(
    out,
    "Todo list (3 tasks: 1 completed, 1 in progress, 1 pending):\n" +
      "[x] 1. Read the code\n[~] 2. Fix the bug\n[ ] 3. Run the tests",
  );
  await write([{ id: "a", content: "Only this", status: "pending" }]);
  assert.deepEqual(list.items(), [{ id: "a", content: "Only this", status: "pending" }]);
});

test("the host can find an engine's list from its registry and watch changes", async () => {
  const { registry, write } = setup();
  const list = TodoList.of(registry)!;
  const seen: TodoItem[][] = [];
  const stop = list.onChange((items) => seen.push(items));
  await write([{ content: "x", status: "pending" }]);
  stop();
  await write([]);
  assert.equal(seen.length, 1);
  assert.equal(seen[0][0].content, "x");
  assert.equal(TodoList.of(new ToolRegistry()), undefined);
});

test("todo_write rejects an invalid list and keeps the previous one", async () => {
  const { list, write } = setup();
  await write([{ content: "keep me", status: "pending" }]);
  await assert.rejects(write("not json"), /todos must be an array/);
  await assert.rejects(write([{ content: "", status: "pending" }]), /item 1 has no content/);
  await assert.rejects(write([{ content: "x", status: "done" }]), /item 1 has status "done"/);
  await assert.rejects(
    write([{ id: "1", content: "a" }, { id: "1", content: "b" }]),
    /item 2 repeats the id "1"/,
  );
  await assert.rejects(
    write(Array.from({ length: 101 }, () => ({ content: "x" }))),
    /over the limit of 100/,
  );
  assert.deepEqual(list.items().map((t) => t.content), ["keep me"]);
});

test("todo_write accepts a list sent as a JSON string and warns about two active tasks", async () => {
  const { write } = setup();
  const out = await write(JSON.stringify([
    { content: "a", status: "in_progress" },
    { content: "b", status: "in_progress" },
  ]));
  assert.match(out, /Note: 2 tasks are in progress/);
});

test("TodoList.fromMessages restores the last valid todo_write call of a history", () => {
  const call = (id: string, todos: unknown) => ({
    id,
    type: "function" as const,
    function: { name: "todo_write", arguments: JSON.stringify({ todos }) },
  });
  const list = TodoList.fromMessages([
    { role: "user", content: "go" },
    {
      role: "assistant",
      content: null,
      tool_calls: [call("1", [{ content: "old", status: "pending" }])],
    },
    {
      role: "assistant",
      content: null,
      tool_calls: [call("2", [{ content: "new", status: "completed" }])],
    },
    { role: "assistant", content: null, tool_calls: [call("3", "broken")] },
  ]);
  assert.deepEqual(list.items(), [{ id: "1", content: "new", status: "completed" }]);
  assert.equal(TodoList.fromMessages([]).size, 0);
  assert.equal(JSON.stringify(list), '[{"id":"1","content":"new","status":"completed"}]');
});
