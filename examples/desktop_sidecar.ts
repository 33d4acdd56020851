/**
 * The desktop pattern (manual §18.2) as a sidecar process (Electron, Tauri): the engine runs
 * here, the UI talks to it with JSON lines over stdio. The workspace is the folder the user
 * chose; the mode stays INTERACTIVE and approvals go to the UI's native dialog; before exiting
 * the sidecar awaits `mcpManager.closeAll()` and `hook.saveState()`; on the next start it
 * restores the session and asks again for an approval that was pending (manual §12.4).
 *
 * ```sh
 * WORKSPACE=~/projects/app SESSION_ID=main deno run -A examples/desktop_sidecar.ts
 * ```
 *
 * In (one JSON object a line on standard input):
 * - `{"type":"message","text":"…"}` runs a turn; messages queue up and run one after another;
 * - `{"type":"approval","reqId":"…","outcome":"once"|"always_tool"|"always_command"|"deny"}`;
 * - `{"type":"answer","id":"…","text":"…"}` answers an `ask_user` question;
 * - `{"type":"interrupt"}` stops the running turn (manual §12.2);
 * - `{"type":"shutdown"}` (or SIGTERM, SIGINT, end of input) exits gracefully.
 *
 * Out (one JSON object a line on standard output):
 * - `{"type":"ready","sessionId","workspace","restored","pending","mcp"}` once at start;
 * - `{"type":"event","event":{"type","data"}}` for every engine event, in order;
 * - `{"type":"approval_request","reqId","fields"}` with the card rows (`approvalFields`);
 * - `{"type":"question","id","question","options","allowText","multi"}`;
 * - `{"type":"idle"}` when the queue is empty; `{"type":"problem","error"}` for bad input;
 * - `{"type":"bye","saved","pendingApprovals"}` last, before the process exits.
 *
 * Environment: `WORKSPACE` (default the current folder), `SESSION_ID` (default `desktop`),
 * `STATE_DIR` (default `<workspace>/.agent/sessions`), and the provider's `OPENAI_*`. MCP
 * servers come from `<workspace>/.agent/mcp.json` (manual §15.1).
 *
 * @module
 */
import path from "node:path";
import process from "node:process";
import readline from "node:readline";
import {
  approvalFields,
  ApprovalOutcome,
  createDefaultEngine,
  defaultMcpConfigPath,
  FileLogHook,
  loadMcpConfigFile,
  McpManager,
  type Message,
  Mode,
  type PermissionRequest,
} from "../mod.ts";

const workspace = path.resolve(process.env.WORKSPACE ?? process.cwd());
const sessionId = process.env.SESSION_ID ?? "desktop";
const stateDir = process.env.STATE_DIR ?? path.join(workspace, ".agent", "sessions");

/** True when the history ends with tool calls that have no result yet (manual §12.4). */
function hasPendingCalls(messages: Message[]): boolean {
  const i = messages.findLastIndex((m) => m.role === "assistant");
  if (i < 0 || !messages[i].tool_calls?.length) return false;
  const answered = new Set(messages.slice(i + 1).map((m) => m.tool_call_id));
  return messages[i].tool_calls!.some((c) => !answered.has(c.id));
}

/** Writes one JSON line, waiting when the pipe is full (no unbounded buffering). */
async function send(message: Record<string, unknown>): Promise<void> {
  if (!process.stdout.write(JSON.stringify(message) + "\n")) {
    await new Promise<void>((resolve) => process.stdout.once("drain", () => resolve()));
  }
}

// Restore the session, if any (manual §11.3).
const saved = FileLogHook.loadState(sessionId, stateDir);
const hook = new FileLogHook(sessionId, stateDir);
const engine = createDefaultEngine({
  workspace,
  mode: Mode.INTERACTIVE, // local files and shell: keep asking (manual §18.2)
  messages: saved?.messages,
  hook,
});
if (saved) FileLogHook.applyState(engine, saved);
hook.attach(engine);

// MCP servers of this workspace, in the engine's own registry.
const { configs, warnings } = loadMcpConfigFile(defaultMcpConfigPath(workspace));
for (const w of warnings) await send({ type: "problem", error: `mcp: ${w}` });
const mcpManager = new McpManager(engine.registry, configs, {
  builtin: { workspace, env: process.env },
});
const mcp = configs.length ? await mcpManager.connectAll() : { connected: [], failed: [] };

// Approvals: the UI answers with {"type":"approval"}; nothing times out on a desktop.
const approvals = new Map<string, (outcome: ApprovalOutcome) => void>();
let approvalSeq = 0;
engine.setApprover((request: PermissionRequest) =>
  new Promise<ApprovalOutcome>((resolve) => {
    const reqId = request.toolCallId ?? `approval-${++approvalSeq}`;
    approvals.set(reqId, resolve);
    void send({ type: "approval_request", reqId, fields: approvalFields(request) });
  })
);

// ask_user: the UI answers with {"type":"answer"}.
const questions = new Map<string, (answer: string) => void>();
let questionSeq = 0;
engine.setQuestionHandler((question, options, allowText, multi) =>
  new Promise<string>((resolve) => {
    const id = `q-${++questionSeq}`;
    questions.set(id, resolve);
    void send({ type: "question", id, question, options, allowText, multi });
  })
);

// Turns run one after another (checklist §19: run() of a session is serialized).
let queue: Promise<void> = Promise.resolve();
let queued = 0;
function enqueue(work: () => AsyncIterable<{ type: string; data: unknown }>): void {
  queued++;
  queue = queue.then(async () => {
    try {
      for await (const event of work()) await send({ type: "event", event });
    } catch (err) {
      await send({ type: "problem", error: (err as Error).message });
    } finally {
      // An interrupted turn leaves its question or approval unanswered: drop them.
      if (!closing) {
        for (const resolve of approvals.values()) resolve(ApprovalOutcome.DENY);
        approvals.clear();
        for (const resolve of questions.values()) resolve("");
        questions.clear();
      }
      if (--queued === 0) await send({ type: "idle" });
    }
  });
}

const OUTCOMES = new Set<string>(Object.values(ApprovalOutcome));
let closing = false;

async function shutdown(): Promise<void> {
  if (closing) return;
  closing = true;
  // A pending approval stays pending: the checkpoint holds the call and the next start asks
  // again. A turn that is working (not waiting for a person) is interrupted so no child
  // process outlives us.
  if (engine.running && approvals.size === 0 && questions.size === 0) {
    engine.requestInterrupt();
    await queue;
  }
  await mcpManager.closeAll();
  let ok = true;
  try {
    hook.saveState(engine);
  } catch (err) {
    ok = false;
    await send({ type: "problem", error: `Cannot save state: ${(err as Error).message}` });
  }
  await send({ type: "bye", saved: ok, pendingApprovals: [...approvals.keys()] });
  process.exit(ok ? 0 : 1);
}

process.on("SIGTERM", () => void shutdown());
process.on("SIGINT", () => void shutdown());

await send({
  type: "ready",
  sessionId,
  workspace,
  restored: saved !== null,
  pending: hasPendingCalls(engine.messages),
  mcp: { connected: mcp.connected, failed: mcp.failed },
});

// Finish what a previous run left open (a pending approval is asked again).
enqueue(() => engine.resume());

const rl = readline.createInterface({ input: process.stdin });
rl.on("close", () => void shutdown());
rl.on("line", (line) => {
  if (line.trim() === "") return;
  let msg: Record<string, unknown>;
  try {
    msg = JSON.parse(line);
    if (!msg || typeof msg !== "object") throw new Error("not an object");
  } catch {
    void send({ type: "problem", error: "Cannot read input: each line must be a JSON object" });
    return;
  }
  switch (msg.type) {
    case "message":
      if (typeof msg.text !== "string" || msg.text.trim() === "") {
        void send({ type: "problem", error: "Cannot run: message text is empty" });
      } else enqueue(() => engine.run(msg.text as string));
      break;
    case "approval": {
      const resolve = approvals.get(String(msg.reqId));
      if (!resolve || !OUTCOMES.has(String(msg.outcome))) {
        void send({ type: "problem", error: `Cannot answer approval ${msg.reqId}: unknown` });
        break;
      }
      approvals.delete(String(msg.reqId));
      resolve(msg.outcome as ApprovalOutcome);
      break;
    }
    case "answer": {
      const resolve = questions.get(String(msg.id));
      if (!resolve) {
        void send({ type: "problem", error: `Cannot answer question ${msg.id}: unknown` });
        break;
      }
      questions.delete(String(msg.id));
      resolve(String(msg.text ?? ""));
      break;
    }
    case "interrupt":
      engine.requestInterrupt();
      break;
    case "shutdown":
      void shutdown();
      break;
    default:
      void send({ type: "problem", error: `Cannot handle message type ${String(msg.type)}` });
  }
});
