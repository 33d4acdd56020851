/**
 * Test helper for store/worker tests: an engine against a MockOpenAIServer with scripted tools,
 * and a script where each session calls one tool and then answers (issue 11). The engine comes
 * from the code under test (tests/_target.ts: the source tree or the npm build).
 *
 * @module
 */
import type { TurnEngine } from "../mod.ts";
import type { Message } from "../providers/mod.ts";
import type { RecordedRequest, ScriptedTurn } from "../testing/mod.ts";
import { core } from "./_target.ts";

/** Options of {@link makeEngine}. */
export interface TestEngineOptions {
  /** The server's base URL. */
  baseURL: string;
  /** Workspace folder. */
  workspace: string;
  /** History to start from. */
  messages?: Message[];
  /** The `act` tool's implementation. */
  act: (args: Record<string, unknown>, ctx?: { idempotencyKey?: string }) => unknown;
  /** Declare `act` idempotent. */
  idempotent?: boolean;
  /** `act` needs approval. */
  approval?: boolean;
}

/** A TurnEngine with one tool, `act` (EXEC-class: side-effecting unless declared otherwise). */
export function makeEngine(o: TestEngineOptions): TurnEngine {
  const registry = new core.ToolRegistry();
  registry.register(
    (args, ctx) => o.act(args, ctx),
    {
      category: "test",
      riskLevel: "high",
      capabilities: [],
      requiresApproval: o.approval ?? false,
      riskClass: core.RiskClass.EXEC,
      ...(o.idempotent !== undefined ? { idempotent: o.idempotent } : {}),
    },
    {
      type: "function",
      function: { name: "act", parameters: { type: "object", properties: {} } },
    },
  );
  return new core.TurnEngine({
    provider: new core.OpenAIProvider({
      apiKey: "test",
      baseURL: o.baseURL,
      apiMode: "chat",
      maxRetries: 0,
    }),
    registry,
    permissions: new core.PermissionEngine({
      workspaceRoot: o.workspace,
      mode: o.approval ? core.Mode.INTERACTIVE : core.Mode.AUTO,
    }),
    model: "test-model",
    instructions: "test",
    messages: o.messages,
    networkRetryBaseMs: 10,
  });
}

/**
 * The script: a request whose last message is a tool result gets a final answer (quoting the
 * result); any other gets one `act` call. Answer text comes in several deltas.
 */
export function actThenAnswer(req: RecordedRequest): ScriptedTurn {
  const messages = (req.body?.messages ?? []) as { role: string; content?: unknown }[];
  const last = messages.at(-1);
  if (last?.role === "tool") {
    return { text: ["done", " after", " ", String(last.content ?? "").slice(0, 60)] };
  }
  return { toolCalls: [{ name: "act", arguments: {} }] };
}
