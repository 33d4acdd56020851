/**
 * Tools: the {@link ToolRegistry}, risk classes, the result budget and the built-in tools
 * (manual §7).
 *
 * @module
 */
export {
  type QuestionContext,
  type QuestionHandler,
  RiskClass,
  type ToolContext,
  type ToolFunc,
  type ToolMetadata,
  ToolRegistry,
  type ToolSpec,
} from "./registry.ts";
export {
  type BudgetedResult,
  type BudgetOptions,
  budgetToolResult,
  DEFAULT_TOOL_RESULT_MAX_CHARS,
  DEFAULT_TOOL_RESULT_SAVE_THRESHOLD,
} from "./result_budget.ts";
export { type FileToolsOptions, registerFileTools, registerReadOnlyFileTools } from "./fs.ts";
export {
  DEFAULT_SHELL_TIMEOUT_MS,
  MAX_SHELL_TIMEOUT_MS,
  registerShellTool,
  type ShellChoice,
  type ShellTaskInfo,
  ShellTaskManager,
  type ShellTaskManagerOptions,
  type ShellTaskRead,
  type ShellTaskStart,
  type ShellToolOptions,
} from "./shell.ts";
export { registerSearchTool, type SearchToolOptions } from "./search.ts";
export { getQuestionHandler, registerAskTool, setQuestionHandler } from "./ask.ts";
