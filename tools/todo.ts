/**
 * The task list (manual §7.1, "Tareas"; risk class READ, "solo lectura/estado"): `todo_write`
 * lets the model keep a plan of steps with their status, and {@link TodoList} holds it as session
 * state the host can read, watch and restore.
 *
 * Each `todo_write` call sends the whole list (it replaces the previous one), so the list is
 * always what the model last said. A host reads it with {@link TodoList.items}, is told of
 * changes with {@link TodoList.onChange}, finds the list of an engine with
 * `TodoList.of(engine.registry)`, and rebuilds it after a restart from the saved history with
 * {@link TodoList.fromMessages} (the last valid `todo_write` call wins).
 *
 * @example Watch the model's plan
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerTodoTool } from "@zqagent/core/tools/todo";
 * const registry = new ToolRegistry();
 * const todos = registerTodoTool(registry);
 * todos.onChange((items) => console.log(items.map((t) => `${t.status} ${t.content}`)));
 * ```
 *
 * @module
 */
import type { Message } from "../providers/mod.ts";
import { RiskClass, type ToolMetadata, type ToolRegistry } from "./registry.ts";

/** Status of one task. */
export type TodoStatus = "pending" | "in_progress" | "completed";

/** One task of the list. */
export interface TodoItem {
  /** Stable id (the model's, or the 1-based position when it gave none). */
  id: string;
  /** What is to be done, in the imperative ("Run the tests"). */
  content: string;
  /** Where it stands. */
  status: TodoStatus;
}

/** Most tasks one list holds. */
export const MAX_TODO_ITEMS = 100;
/** Most chars of one task's text. */
export const MAX_TODO_CHARS = 500;

const STATUSES: readonly TodoStatus[] = ["pending", "in_progress", "completed"];

/** A listener of {@link TodoList.onChange}. */
export type TodoListener = (items: TodoItem[]) => void;

const byRegistry = new WeakMap<ToolRegistry, TodoList>();

/**
 * Validates a list as the model sent it.
 *
 * @throws {Error} "Cannot update the todo list: …" naming the item at fault.
 */
function parseItems(raw: unknown): TodoItem[] {
  const fail = (why: string): never => {
    throw new Error(`Cannot update the todo list: ${why}`);
  };
  let value = raw;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      fail("todos must be an array of {content, status} objects");
    }
  }
  if (!Array.isArray(value)) return fail("todos must be an array of {content, status} objects");
  if (value.length > MAX_TODO_ITEMS) {
    fail(`${value.length} items is over the limit of ${MAX_TODO_ITEMS}`);
  }
  const seen = new Set<string>();
  return value.map((entry, i): TodoItem => {
    const n = i + 1;
    if (!entry || typeof entry !== "object") fail(`item ${n} is not an object`);
    const e = entry as Record<string, unknown>;
    const content = typeof e.content === "string" ? e.content.trim() : "";
    if (content === "") fail(`item ${n} has no content`);
    if (content.length > MAX_TODO_CHARS) {
      fail(`item ${n} is ${content.length} chars, over the limit of ${MAX_TODO_CHARS}`);
    }
    const status = e.status ?? "pending";
    if (!STATUSES.includes(status as TodoStatus)) {
      fail(`item ${n} has status ${JSON.stringify(status)}; use ${STATUSES.join(", ")}`);
    }
    const id = e.id === undefined || e.id === null || e.id === "" ? String(n) : String(e.id);
    if (seen.has(id)) fail(`item ${n} repeats the id ${JSON.stringify(id)}`);
    seen.add(id);
    return { id, content, status: status as TodoStatus };
  });
}

/**
 * The task list of one session. Read it, watch it, or restore it; the `todo_write` tool
 * replaces it.
 *
 * @example Restore the list of a saved session
 * ```ts
 * import { TodoList } from "@zqagent/core/tools";
 * const list = TodoList.fromMessages([]);
 * console.log(list.items()); // []
 * ```
 */
export class TodoList {
  #items: TodoItem[] = [];
  #listeners = new Set<TodoListener>();

  /**
   * Creates a list.
   *
   * @param items Initial tasks (validated as `todo_write` would).
   * @throws {Error} When `items` is not a valid list.
   */
  constructor(items: readonly Partial<TodoItem>[] = []) {
    this.#items = parseItems(items);
  }

  /**
   * The list of the engine whose registry `registerTodoTool` filled (`engine.registry`).
   *
   * @param registry A tool registry.
   * @returns The list, or `undefined` when no todo tool was registered there.
   */
  static of(registry: ToolRegistry): TodoList | undefined {
    return byRegistry.get(registry);
  }

  /**
   * Rebuilds the list from a conversation history: the last `todo_write` call with valid
   * arguments wins. Use it when restoring a session from saved messages.
   *
   * @param messages The history (Chat Completions shape).
   * @returns A new list (empty when no valid call was found).
   */
  static fromMessages(messages: readonly Message[]): TodoList {
    for (let i = messages.length - 1; i >= 0; i--) {
      const calls = messages[i]?.tool_calls ?? [];
      for (let j = calls.length - 1; j >= 0; j--) {
        const call = calls[j];
        if (call?.function?.name !== "todo_write") continue;
        try {
          const args = JSON.parse(call.function.arguments || "{}");
          return new TodoList(parseItems(args.todos));
        } catch {
          // an invalid call changed nothing; look further back
        }
      }
    }
    return new TodoList();
  }

  /** A copy of the tasks, in order. */
  items(): TodoItem[] {
    return this.#items.map((t) => ({ ...t }));
  }

  /** Number of tasks. */
  get size(): number {
    return this.#items.length;
  }

  /**
   * Replaces the whole list (what `todo_write` does) and tells the listeners.
   *
   * @param items The new tasks; `id` defaults to the position, `status` to `"pending"`.
   * @returns A copy of the new list.
   * @throws {Error} "Cannot update the todo list: …" when an item is invalid (the list is then
   *   unchanged).
   */
  replace(items: unknown): TodoItem[] {
    this.#items = parseItems(items);
    const copy = this.items();
    for (const listener of this.#listeners) {
      try {
        listener(this.items());
      } catch {
        // a host's listener never breaks the tool
      }
    }
    return copy;
  }

  /** Empties the list (listeners are told). */
  clear(): void {
    this.replace([]);
  }

  /**
   * Calls `listener` with a copy of the list after every change.
   *
   * @returns A function that removes the listener.
   */
  onChange(listener: TodoListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The tasks, for `JSON.stringify` (e.g. in a host's session record). */
  toJSON(): TodoItem[] {
    return this.items();
  }

  /** The list as the model sees it: one line per task with a status mark. */
  render(): string {
    if (this.#items.length === 0) return "The todo list is empty.";
    const count = (s: TodoStatus): number => this.#items.filter((t) => t.status === s).length;
    const mark: Record<TodoStatus, string> = {
      completed: "[x]",
      in_progress: "[~]",
      pending: "[ ]",
    };
    const lines = this.#items.map((t) => `${mark[t.status]} ${t.id}. ${t.content}`);
    return `Todo list (${this.#items.length} tasks: ${count("completed")} completed, ${
      count("in_progress")
    } in progress, ${count("pending")} pending):\n${lines.join("\n")}`;
  }
}

/** Options of {@link registerTodoTool}. */
export interface TodoToolOptions {
  /** The list the tool writes to (default: a new, empty list). */
  list?: TodoList;
}

const TODO_META: ToolMetadata = {
  category: "todo",
  riskLevel: "low",
  capabilities: ["todo_write"],
  requiresApproval: false,
  riskClass: RiskClass.READ,
};

/**
 * Registers `todo_write` (manual §7.1; risk class READ: it only changes session state).
 *
 * @param registry The registry to add the tool to; `TodoList.of(registry)` finds the list.
 * @param options The list to use.
 * @returns The list the tool writes to.
 *
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerTodoTool } from "@zqagent/core/tools/todo";
 * const registry = new ToolRegistry();
 * const todos = registerTodoTool(registry);
 * await registry.get("todo_write")!.func({
 *   todos: [{ content: "Write the tests", status: "in_progress" }],
 * });
 * console.log(todos.items()[0].status); // "in_progress"
 * ```
 */
export function registerTodoTool(registry: ToolRegistry, options: TodoToolOptions = {}): TodoList {
  const list = options.list ?? new TodoList();
  byRegistry.set(registry, list);
  registry.register(
    (args) => {
      list.replace(args.todos);
      const active = list.items().filter((t) => t.status === "in_progress").length;
      return list.render() +
        (active > 1 ? `\nNote: ${active} tasks are in progress; keep one at a time.` : "");
    },
    TODO_META,
    {
      type: "function",
      function: {
        name: "todo_write",
        description: "Write the task list for the current work (replaces the whole list). Use " +
          "it for multi-step tasks: list the steps, keep exactly one in_progress, mark each " +
          "completed as soon as it is done. The user can see the list.",
        parameters: {
          type: "object",
          properties: {
            todos: {
              type: "array",
              description: "The complete list, in order",
              items: {
                type: "object",
                properties: {
                  id: { type: "string", description: "Stable id (default: the position)" },
                  content: { type: "string", description: "The task, in the imperative" },
                  status: { type: "string", enum: [...STATUSES] },
                },
                required: ["content", "status"],
              },
            },
          },
          required: ["todos"],
        },
      },
    },
  );
  return list;
}
