/**
 * Test doubles for hosts (DESIGN §7): a local OpenAI-compatible server that streams scripted
 * answers in both API modes, so tests run the real `openai` SDK over real HTTP and SSE.
 *
 * @example Script a tool call, then an answer
 * ```ts
 * import { MockOpenAIServer, textTurn, toolCallTurn } from "@zqagent/core/testing";
 * import { OpenAIProvider } from "@zqagent/core/providers";
 *
 * const server = await new MockOpenAIServer({
 *   turns: [toolCallTurn("read_file", { path: "README.md" }), textTurn("Done.")],
 * }).start();
 * const provider = new OpenAIProvider({ apiKey: "test", baseURL: server.baseURL });
 * // … run the engine with `provider` …
 * await server.close();
 * ```
 *
 * @module
 */

// --- Local OpenAI-compatible server (providers/) ---
export {
  httpErrorTurn,
  MockOpenAIServer,
  type MockOpenAIServerOptions,
  type RecordedRequest,
  type ScriptedHttpError,
  type ScriptedToolCall,
  type ScriptedTurn,
  textTurn,
  toolCallTurn,
  type TurnScript,
} from "./mock_server.ts";

// --- Scripted provider: no HTTP at all ---
export { type ProviderScript, type ScriptedCall, ScriptedProvider } from "./scripted_provider.ts";
