/**
 * Tools: the {@link ToolRegistry}, risk classes, the result budget and the built-in tools
 * (manual §7).
 *
 * @example A registry with the file tools and one custom tool (manual §7.2)
 * ```ts
 * import { registerFileTools, RiskClass, ToolRegistry } from "@zqagent/core/tools";
 *
 * const registry = new ToolRegistry();
 * registerFileTools(registry, "/srv/workspace");
 * registry.register(
 *   (args) => `order ${args.order_id}: shipped`,
 *   {
 *     category: "orders",
 *     riskLevel: "low",
 *     capabilities: [],
 *     requiresApproval: false,
 *     riskClass: RiskClass.READ,
 *   },
 *   {
 *     type: "function",
 *     function: {
 *       name: "query_order",
 *       description: "Looks up an order",
 *       parameters: { type: "object", properties: { order_id: { type: "string" } } },
 *     },
 *   },
 * );
 * ```
 *
 * @module
 */
export {
  type DirectoryDecision,
  type DirectoryHandler,
  type DirectoryRequest,
  type PlanDecision,
  type PlanHandler,
  type QuestionContext,
  type QuestionHandler,
  RiskClass,
  type ToolAttachment,
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
  type CommandWrapper,
  DEFAULT_SHELL_TIMEOUT_MS,
  isSecretEnvName,
  MAX_SHELL_TIMEOUT_MS,
  registerShellTool,
  type ShellChoice,
  type ShellTaskInfo,
  ShellTaskManager,
  type ShellTaskManagerOptions,
  type ShellTaskRead,
  type ShellTaskStart,
  type ShellToolOptions,
  type WrappableCommand,
} from "./shell.ts";
export { registerSearchTool, type SearchToolOptions } from "./search.ts";
export { getQuestionHandler, registerAskTool, setQuestionHandler } from "./ask.ts";
export { type ConflictCheckOptions, ConflictGuard, FileConflictError } from "./conflict_guard.ts";
export { type DiffToolsOptions, registerDiffTools } from "./diff.ts";
export { DEFAULT_GIT_OUTPUT_CHARS, type GitToolsOptions, registerGitTools } from "./git.ts";
export {
  MAX_TODO_CHARS,
  MAX_TODO_ITEMS,
  registerTodoTool,
  type TodoItem,
  TodoList,
  type TodoListener,
  type TodoStatus,
  type TodoToolOptions,
} from "./todo.ts";
export {
  cleanTerminalText,
  registerTerminalTools,
  type TerminalInfo,
  type TerminalReadOptions,
  type TerminalSource,
  type TerminalToolsOptions,
} from "./terminal.ts";
// --- tool suite part B (issue 4) ---
export {
  BraveSearch,
  DEFAULT_WEB_MAX_BYTES,
  DEFAULT_WEB_MAX_CHARS,
  DEFAULT_WEB_TIMEOUT_MS,
  type FetchLike,
  htmlToMarkdown,
  registerWebTools,
  type SearchBackend,
  searchBackendFromEnv,
  type SearchOptions,
  type SearchResult,
  SearxngSearch,
  TavilySearch,
  type WebToolsOptions,
} from "./web.ts";
export { getPlanHandler, registerPlanTool, setPlanHandler } from "./plan.ts";
export {
  type DirectoryGrantTarget,
  type DirectoryToolOptions,
  getDirectoryHandler,
  registerDirectoryTool,
  setDirectoryHandler,
} from "./directories.ts";
export {
  MEDIA_MAX_BYTES,
  MEDIA_MAX_FILES,
  type MediaToolOptions,
  registerMediaTool,
} from "./media.ts";
export {
  DEFAULT_EXPLORE_MAX_ITERATIONS,
  type ExploreToolOptions,
  registerExploreTool,
} from "./explore.ts";
// --- end tool suite part B ---
