/**
 * The `propose_plan` tool (manual §7.1, §9.2): the model shows a plan to the person and waits for
 * approval before acting. Typical in `Mode.PLAN`, where it is allowed like every interactive tool.
 *
 * The decision comes from the engine's own handler (`engine.setPlanHandler`) when it has one,
 * else from the module-level handler set with {@link setPlanHandler}: the same per-engine
 * override and handler context (`{engine, taskId, toolCallId, signal}`) as `ask_user`. Before
 * waiting, the tool emits `plan_proposed {plan}` into the turn's event stream.
 *
 * @example Approve every plan
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerPlanTool, setPlanHandler } from "@zqagent/core/tools/plan";
 * registerPlanTool(new ToolRegistry());
 * setPlanHandler(async (plan) => ({ approved: true, feedback: "Go ahead" }));
 * ```
 *
 * @module
 */
import type { PlanHandler, ToolContext, ToolRegistry } from "./registry.ts";
import { RiskClass } from "./registry.ts";
import { stringArg } from "./_common.ts";
import { awaitHandler, handlerContext } from "./_interaction.ts";

export type { PlanDecision, PlanHandler } from "./registry.ts";

let globalHandler: PlanHandler | null = null;

/**
 * Sets (or clears, with `null`) the process-wide plan handler used by `propose_plan` when the
 * engine has none of its own (`engine.setPlanHandler`).
 *
 * @param handler `(plan, context) => Promise<{approved, feedback?} | boolean>`, or `null`.
 * @throws {TypeError} When `handler` is neither a function nor `null`.
 * @example
 * ```ts
 * import { setPlanHandler } from "@zqagent/core/tools/plan";
 * setPlanHandler(async (plan, context) => plan.length < 5000);
 * ```
 */
export function setPlanHandler(handler: PlanHandler | null): void {
  if (handler !== null && typeof handler !== "function") {
    throw new TypeError("Cannot set plan handler: it is not a function");
  }
  globalHandler = handler;
}

/**
 * The process-wide plan handler, or `null` when none is set.
 *
 * @returns The handler set by {@link setPlanHandler}.
 */
export function getPlanHandler(): PlanHandler | null {
  return globalHandler;
}

async function proposePlan(args: Record<string, unknown>, ctx?: ToolContext): Promise<string> {
  const plan = stringArg(args, "plan", "propose_plan").trim();
  if (plan === "") throw new Error("Cannot propose the plan: plan is empty");
  const handler = ctx?.planHandler ?? globalHandler;
  if (!handler) {
    throw new Error(
      "Cannot propose the plan: no plan handler is set (call setPlanHandler() or " +
        "engine.setPlanHandler()); describe the plan in your answer instead",
    );
  }
  ctx?.emit?.("plan_proposed", { plan });
  const raw = await awaitHandler(
    Promise.resolve().then(() => handler(plan, handlerContext(ctx))),
    ctx?.signal,
    "propose_plan",
  );
  const decision = typeof raw === "boolean" ? { approved: raw } : raw;
  if (!decision || typeof decision !== "object" || typeof decision.approved !== "boolean") {
    throw new Error("Cannot propose the plan: the plan handler returned no {approved} decision");
  }
  const feedback = typeof decision.feedback === "string" && decision.feedback.trim() !== ""
    ? ` Feedback: ${decision.feedback.trim()}`
    : "";
  return decision.approved
    ? `The user approved the plan. Carry it out.${feedback}`
    : `The user rejected the plan. Do not carry it out; revise it or ask.${feedback}`;
}

/**
 * Registers `propose_plan {plan}` (manual §7.1, risk class INTERACTIVE, allowed in every mode).
 * Errors given to the model: an empty plan, no handler set ("Cannot propose the plan: no plan
 * handler is set …"), a handler that returns no decision; an interrupt while waiting ends the
 * call as interrupted.
 *
 * @param registry The registry to add the tool to.
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerPlanTool } from "@zqagent/core/tools/plan";
 * registerPlanTool(new ToolRegistry());
 * ```
 */
export function registerPlanTool(registry: ToolRegistry): void {
  registry.register(
    proposePlan,
    {
      category: "interaction",
      riskLevel: "low",
      capabilities: ["propose_plan"],
      requiresApproval: false,
      riskClass: RiskClass.INTERACTIVE,
    },
    {
      type: "function",
      function: {
        name: "propose_plan",
        description: "Show your plan to the user and wait for approval before acting. Write " +
          "the plan in Markdown: the goal, the steps, the files you will change and how you " +
          "will verify. The answer says whether it was approved, with any feedback.",
        parameters: {
          type: "object",
          properties: {
            plan: { type: "string", description: "The plan, in Markdown" },
          },
          required: ["plan"],
        },
      },
    },
  );
}
