/**
 * MCP integration (manual §15): config files and normalisation, {@link McpClient} (one server over
 * stdio, streamable HTTP with the legacy SSE fallback, or in process), {@link McpManager} (tools
 * registered as `mcp__<server>__<tool>` behind approval, lazy tool search, lifecycle), and the
 * built-in OCR preset.
 *
 * @example Connect the workspace's servers (manual §15.1)
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import {
 *   defaultMcpConfigPath,
 *   loadMcpConfigFile,
 *   McpManager,
 *   withBuiltinMcpConfigs,
 * } from "@zqagent/core/mcp";
 *
 * const registry = new ToolRegistry();
 * const { configs, warnings } = loadMcpConfigFile(defaultMcpConfigPath("."));
 * const manager = new McpManager(registry, withBuiltinMcpConfigs(configs), {
 *   builtin: { workspace: "." },
 * });
 * const { connected, failed } = await manager.connectAll();
 * // … run the engine with `registry` …
 * await manager.closeAll();
 * ```
 *
 * @module
 */
export {
  BUILTIN_MCP_CONFIGS,
  defaultMcpConfigPath,
  loadMcpConfigFile,
  McpConfigError,
  type McpConfigLoadResult,
  type McpServerConfig,
  type McpTransportType,
  normalizeMcpConfig,
  normalizeMcpConfigs,
  readMcpConfigFile,
  saveMcpConfigFile,
  splitCommandLine,
  type SplitCommandLineOptions,
  withBuiltinMcpConfigs,
} from "./config.ts";
export {
  DEFAULT_MCP_CALL_TIMEOUT_MS,
  DEFAULT_MCP_CONNECT_TIMEOUT_MS,
  type McpBuiltinContext,
  type McpCallOptions,
  McpClient,
  type McpClientOptions,
  type McpInProcessServer,
  type McpLogger,
  McpServerError,
  type McpServerState,
  type McpToolInfo,
  type McpTransportKind,
} from "./client.ts";
export {
  MCP_CALL_TOOL,
  MCP_SEARCH_TOOL,
  type McpConnectResult,
  type McpLazyOptions,
  type McpLazyState,
  McpManager,
  type McpManagerOptions,
  type McpServerStatus,
} from "./manager.ts";
export {
  assignToolNames,
  MAX_TOOL_NAME_CHARS,
  mcpToolName,
  sanitizeNameSegment,
  type ToolNameRequest,
} from "./naming.ts";
export { type JsonSchema, type NormalizedSchema, normalizeInputSchema } from "./schema.ts";
export { formatCallToolResult, type FormattedResult, type McpCallResult } from "./result.ts";
export { createOcrServer, OCR_TOOL, recognizeText } from "./ocr.ts";
