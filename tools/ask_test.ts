import { test } from "node:test";
import assert from "node:assert/strict";
import {
  type QuestionContext,
  type QuestionHandler,
  RiskClass,
  type ToolContext,
  ToolRegistry,
} from "./registry.ts";
import { getQuestionHandler, registerAskTool, setQuestionHandler } from "./ask.ts";

function askTool() {
  const registry = new ToolRegistry();
  registerAskTool(registry);
  return {
    registry,
    call: async (args: Record<string, unknown>, ctx?: ToolContext) =>
      String(await registry.get("ask_user")!.func(args, ctx)),
  };
}

/** Runs `fn` with `handler` as the global handler, restoring the previous one afterwards. */
async function withGlobal(handler: QuestionHandler | null, fn: () => Promise<void>): Promise<void> {
  const previous = getQuestionHandler();
  setQuestionHandler(handler);
  try {
    await fn();
  } finally {
    setQuestionHandler(previous);
  }
}

test("ask_user is registered as a low-risk interactive tool", () => {
  const m = askTool().registry.get("ask_user")!.metadata;
  assert.deepEqual([m.riskClass, m.riskLevel, m.requiresApproval], [
    RiskClass.INTERACTIVE,
    "low",
    false,
  ]);
});

test("ask_user uses the global handler with the manual's four arguments and a context", async () => {
  const seen: unknown[][] = [];
  await withGlobal((question, options, allowText, multi, context) => {
    seen.push([question, options, allowText, multi, context?.taskId, context?.toolCallId]);
    return Promise.resolve(options[1]);
  }, async () => {
    const out = await askTool().call(
      { question: "Which DB?", options: ["sqlite", "postgres"] },
      { taskId: "t1", toolCallId: "call_7" },
    );
    assert.equal(out, "The user answered: postgres");
  });
  assert.deepEqual(seen, [["Which DB?", ["sqlite", "postgres"], false, false, "t1", "call_7"]]);
});

test("ask_user prefers the engine's handler in the context over the global one", async () => {
  await withGlobal(() => Promise.resolve("global"), async () => {
    const out = await askTool().call({ question: "Name?" }, {
      questionHandler: (_q, _o, allowText) => Promise.resolve(allowText ? "engine" : "wrong"),
    });
    assert.equal(out, "The user answered: engine");
  });
});

test("ask_user emits ask_user_question before asking", async () => {
  const order: string[] = [];
  const events: Array<[string, Record<string, unknown>]> = [];
  await withGlobal(() => {
    order.push("handler");
    return Promise.resolve(["a", "b"]);
  }, async () => {
    const out = await askTool().call(
      { question: "Pick", options: ["a", "b", "c"], multi: true, allow_text: true },
      {
        taskId: "t9",
        emit: (type, data) => {
          order.push(type);
          events.push([type, data]);
        },
      },
    );
    assert.equal(out, "The user selected: a, b");
  });
  assert.deepEqual(order, ["ask_user_question", "handler"]);
  assert.deepEqual(events[0][1], {
    taskId: "t9",
    question: "Pick",
    options: ["a", "b", "c"],
    allowText: true,
    multi: true,
  });
});

test("ask_user throws a clear error when no handler is set", async () => {
  await withGlobal(null, async () => {
    await assert.rejects(
      askTool().call({ question: "Hello?" }),
      /Cannot ask the user: no question handler is set/,
    );
  });
});

test("ask_user stops waiting and throws AbortError when the turn is interrupted", async () => {
  const ac = new AbortController();
  let context: QuestionContext | undefined;
  await withGlobal((_q, _o, _t, _m, ctx) => {
    context = ctx;
    return new Promise(() => {}); // a person who never answers
  }, async () => {
    const pending = askTool().call({ question: "Still there?" }, { signal: ac.signal });
    await Promise.resolve();
    ac.abort();
    await assert.rejects(pending, (e: Error) => e.name === "AbortError");
  });
  assert.equal(context?.signal, ac.signal);
});

test("ask_user rejects a question with no options and allow_text false", async () => {
  await withGlobal(() => Promise.resolve("x"), async () => {
    await assert.rejects(askTool().call({ question: "Q", allow_text: false }), /no options given/);
  });
});
