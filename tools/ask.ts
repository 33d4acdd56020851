/**
 * The `ask_user` tool (manual §4, §7.1, §9.2): the model asks the person a question.
 *
 * The answer comes from the engine's own handler (`ctx.questionHandler`) when it has one, else
 * from the module-level handler set with {@link setQuestionHandler} (the manual's "inject once"
 * global). Before asking, the tool emits `ask_user_question {taskId, question, options,
 * allowText, multi}` into the turn's event stream.
 *
 * @example Answer questions with the first option
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerAskTool, setQuestionHandler } from "@zqagent/core/tools/ask";
 * registerAskTool(new ToolRegistry());
 * setQuestionHandler(async (question, options) => options[0] ?? "");
 * ```
 *
 * @module
 */
import {
  type QuestionHandler,
  RiskClass,
  type ToolContext,
  type ToolRegistry,
} from "./registry.ts";
import { abortError, boolArg, stringArg } from "./_common.ts";

let globalHandler: QuestionHandler | null = null;

/**
 * Sets (or clears, with `null`) the process-wide question handler used by `ask_user` when the
 * engine has no handler of its own (manual §4: "模块级全局,注入一次即可").
 *
 * The handler receives `(question, options, allowText, multi, context)`, where `context` is
 * `{engine, taskId, toolCallId, signal}` so a multi-tenant host can route the question.
 *
 * @param handler The handler, or `null` to remove it.
 *
 * @example
 * ```ts
 * import { setQuestionHandler } from "@zqagent/core/tools/ask";
 * setQuestionHandler(async (question, options, allowText, multi) => multi ? options : options[0]);
 * ```
 */
export function setQuestionHandler(handler: QuestionHandler | null): void {
  if (handler !== null && typeof handler !== "function") {
    throw new TypeError("Cannot set question handler: it is not a function");
  }
  globalHandler = handler;
}

/**
 * The process-wide question handler, or `null` when none is set.
 *
 * @returns The handler set by {@link setQuestionHandler}.
 */
export function getQuestionHandler(): QuestionHandler | null {
  return globalHandler;
}

function stringList(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new Error("Cannot ask the user: options must be an array");
  return value.map((v) => String(v));
}

async function askUser(args: Record<string, unknown>, ctx?: ToolContext): Promise<string> {
  const question = stringArg(args, "question", "ask_user").trim();
  if (question === "") throw new Error("Cannot ask the user: question is empty");
  const options = stringList(args.options);
  const allowText = boolArg(args, "allow_text", options.length === 0);
  const multi = boolArg(args, "multi", false);
  if (!allowText && options.length === 0) {
    throw new Error("Cannot ask the user: no options given and allow_text is false");
  }
  const handler = ctx?.questionHandler ?? globalHandler;
  if (!handler) {
    throw new Error(
      "Cannot ask the user: no question handler is set (call setQuestionHandler() or give " +
        "the engine a questionHandler)",
    );
  }
  const signal = ctx?.signal;
  if (signal?.aborted) throw abortError("ask_user");
  ctx?.emit?.("ask_user_question", {
    taskId: ctx.taskId,
    question,
    options,
    allowText,
    multi,
  });
  const pending = Promise.resolve(
    handler(question, options, allowText, multi, {
      engine: ctx?.engine,
      taskId: ctx?.taskId,
      toolCallId: ctx?.toolCallId,
      signal,
    }),
  );
  let answer: string | string[];
  if (signal) {
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(abortError("ask_user"));
      signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      answer = await Promise.race([pending, aborted]);
    } finally {
      signal.removeEventListener("abort", onAbort!);
    }
  } else {
    answer = await pending;
  }
  if (Array.isArray(answer)) {
    const list = answer.map((a) => String(a));
    return list.length === 0
      ? "The user selected nothing."
      : `The user selected: ${list.join(", ")}`;
  }
  if (typeof answer !== "string") {
    throw new Error("Cannot ask the user: the question handler returned neither text nor a list");
  }
  return answer === "" ? "The user gave an empty answer." : `The user answered: ${answer}`;
}

/**
 * Registers `ask_user {question, options?, allow_text?, multi?}` (manual §7.1). `allow_text`
 * defaults to true when there are no options; `multi` (several options may be picked) to false.
 * The tool throws "Cannot ask the user: no question handler is set …" when neither the engine
 * nor {@link setQuestionHandler} gave a handler, and an Error named `"AbortError"` when the turn
 * is interrupted while waiting.
 *
 * @param registry The registry to add the tool to.
 *
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerAskTool } from "@zqagent/core/tools/ask";
 * registerAskTool(new ToolRegistry());
 * ```
 */
export function registerAskTool(registry: ToolRegistry): void {
  registry.register(
    askUser,
    {
      category: "interaction",
      riskLevel: "low",
      capabilities: ["ask_user"],
      requiresApproval: false,
      riskClass: RiskClass.INTERACTIVE,
    },
    {
      type: "function",
      function: {
        name: "ask_user",
        description: "Ask the user a question and wait for the answer. Offer options when the " +
          "choices are known; use it only when you cannot proceed without the user's input.",
        parameters: {
          type: "object",
          properties: {
            question: { type: "string", description: "The question" },
            options: {
              type: "array",
              items: { type: "string" },
              description: "Choices to offer (optional)",
            },
            allow_text: {
              type: "boolean",
              description: "Allow a free-text answer (default: true when there are no options)",
            },
            multi: {
              type: "boolean",
              description: "Allow picking several options (default false)",
            },
          },
          required: ["question"],
        },
      },
    },
  );
}
