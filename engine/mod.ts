/**
 * The engine: {@link TurnEngine} (one per session), {@link createDefaultEngine}, the event stream,
 * hooks, the reference console renderer and the default prompts (manual §5, §6, §9, §11, §12).
 *
 * @example Run one turn
 * ```ts
 * import { ApprovalOutcome, createDefaultEngine, EventType, Mode } from "@zqagent/core";
 *
 * const engine = createDefaultEngine({ workspace: ".", model: "gpt-4o-mini", mode: Mode.INTERACTIVE });
 * engine.setApprover(async () => ApprovalOutcome.ONCE);
 * for await (const event of engine.run("What does this project do?")) {
 *   if (event.type === EventType.ASSISTANT_DELTA) console.log(event.data.text);
 * }
 * ```
 *
 * @module
 */
export {
  type CompactionState,
  DEFAULT_MAX_ITERATIONS,
  TurnEngine,
  type TurnEngineOpts,
} from "./turn_engine.ts";
export {
  createDefaultEngine,
  type CreateEngineOpts,
  type SandboxOptions,
  type VcsOptions,
} from "./create_default_engine.ts";
export {
  type EventStream,
  EventType,
  type ToolStatus,
  type TurnStatus,
  type WsEvent,
} from "./events.ts";
export { CompositeHook, dispatchHook, type EngineHook } from "./hooks.ts";
export { ConsoleHook, type ConsoleHookOptions } from "./console_hook.ts";
export { MarkdownRenderer, type MarkdownRendererOptions } from "./markdown.ts";
export { ApprovalRequiredError, EngineConfigError, TurnInProgressError } from "./errors.ts";
export {
  type AgentType,
  buildEnvBlock,
  buildInstructions,
  getPrompts,
  PROMPT_LANGS,
  type PromptSet,
  promptSets,
} from "./prompts.ts";
