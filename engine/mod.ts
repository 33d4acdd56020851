/**
 * The engine: {@link TurnEngine} (one per session), {@link createDefaultEngine}, the event stream,
 * hooks, persistence ({@link FileLogHook}), attachments, the reference console renderer and the
 * default prompts (manual §5, §6, §9, §11–§13).
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
  type LoopDetectionOptions,
  type TurnEndMark,
  TurnEngine,
  type TurnEngineOpts,
} from "./turn_engine.ts";
export {
  FileLogHook,
  type LoggedEvent,
  type SavedState,
  type SaveStateExtra,
} from "./file_log_hook.ts";
export {
  ATTACHMENT_DIR,
  AttachmentError,
  type AttachmentErrorCode,
  MAX_ATTACHMENT_BYTES,
  MAX_ATTACHMENTS,
  type MessageAttachment,
  normalizeAttachments,
  readStoredAttachment,
  saveAttachments,
  type StoredAttachment,
  stripAttachments,
} from "./attachments.ts";
export { estimateTokens } from "./token_estimate.ts";
export {
  createDefaultEngine,
  type CreateEngineOpts,
  type SandboxOptions,
  type VcsOptions,
} from "./create_default_engine.ts";
export {
  CHECKPOINT_EVENT_TYPES,
  type EventStream,
  EventType,
  type ToolStatus,
  type TurnStatus,
  type WsEvent,
} from "./events.ts";
export { CompositeHook, dispatchHook, type EngineHook } from "./hooks.ts";
export { ConsoleHook, type ConsoleHookOptions } from "./console_hook.ts";
export { SubagentHook, type SubagentHookOptions } from "./subagent_hook.ts";
export {
  type AgentDef,
  AgentRegistry,
  type AgentRegistryOptions,
  BUILTIN_AGENTS,
} from "./agent_registry.ts";
export { MarkdownRenderer, type MarkdownRendererOptions } from "./markdown.ts";
export {
  type ApprovalField,
  type ApprovalFieldKind,
  approvalFields,
  type ApprovalSubject,
  approvalToHtmlTable,
  approvalToMarkdownTable,
  type ApprovalViewOptions,
} from "./approval_view.ts";
export { ApprovalRequiredError, EngineConfigError, TurnInProgressError } from "./errors.ts";
export {
  type AgentType,
  buildEnvBlock,
  buildExploreInstructions,
  buildInstructions,
  getPrompts,
  PROMPT_LANGS,
  type PromptSet,
  promptSets,
} from "./prompts.ts";
