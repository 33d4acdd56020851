/**
 * The scripted workload of the turn benchmark, shared by the server side (which turn answers
 * which request) and the contenders (which tool, which prompt).
 *
 * A workload is encoded in the model name (`bench-<iterations>x<deltas>x<calls>`), so one
 * server answers several workloads and any number of concurrent sessions: the answer to a
 * request depends only on the model name and on how many assistant messages the request's
 * history holds, never on request order.
 *
 * @module
 */
import type { RecordedRequest, ScriptedTurn } from "../testing/mod.ts";

/** Sizes of one turn. */
export interface Workload {
  /** Model requests (iterations) in the turn; the last one answers without tool calls. */
  iterations: number;
  /** Text deltas in the whole turn, spread evenly over the iterations. */
  deltas: number;
  /** Tool calls in the whole turn, spread over every iteration but the last. */
  calls: number;
}

/** The workload: 20,000 text deltas and 50 tool calls across 10 iterations. */
export const FULL: Workload = { iterations: 10, deltas: 20_000, calls: 50 };

/** The per-session workload of the concurrency measurement (200 sessions at once). */
export const SMALL: Workload = { iterations: 3, deltas: 300, calls: 6 };

/** The text of every delta (4 characters). */
export const DELTA = "tok ";

/** The system prompt all contenders send. */
export const SYSTEM = "You are a benchmark agent.";

/** The user message all contenders send. */
export const PROMPT = "Run the benchmark.";

/** The one tool every contender offers: it takes `{i: number}` and returns `{ok: true}` at once. */
export const TOOL_NAME = "noop";

/** Its description. */
export const TOOL_DESCRIPTION = "Does nothing and returns at once.";

/** Its JSON schema (strict-mode compatible, so the Agents SDK sends it unchanged). */
export const TOOL_PARAMETERS = {
  type: "object",
  properties: { i: { type: "number" } },
  required: ["i"],
  additionalProperties: false,
} as const;

/** The model name that selects `w`. */
export function modelFor(w: Workload): string {
  return `bench-${w.iterations}x${w.deltas}x${w.calls}`;
}

/** The workload a model name selects. */
export function workloadOf(model: string): Workload {
  const m = /^bench-(\d+)x(\d+)x(\d+)$/.exec(model);
  if (!m) throw new Error(`Cannot serve the benchmark: unknown model ${model}`);
  return { iterations: Number(m[1]), deltas: Number(m[2]), calls: Number(m[3]) };
}

/** Tool calls made by iteration `k` (0-based) of `w`. */
export function callsAt(w: Workload, k: number): number {
  const rounds = w.iterations - 1;
  if (k >= rounds || rounds === 0) return 0;
  const base = Math.floor(w.calls / rounds);
  return base + (k < w.calls % rounds ? 1 : 0);
}

/** Text deltas sent by iteration `k` (0-based) of `w`. */
export function deltasAt(w: Workload, k: number): number {
  const base = Math.floor(w.deltas / w.iterations);
  return base + (k < w.deltas % w.iterations ? 1 : 0);
}

const sseCache = new Map<string, string>();

/**
 * The SSE body of iteration `k` of `w`, in the Chat Completions streaming format the mock server
 * itself writes (`chat.completion.chunk` frames, usage frame, `[DONE]`). Rendered once and then
 * replayed through the server's `rawSse`, so the server sends each answer in one write and the
 * measurement is bounded by the client, not by the server building 2,000 frames per request.
 */
export function sseFor(model: string, k: number): string {
  const key = `${model}#${k}`;
  const hit = sseCache.get(key);
  if (hit !== undefined) return hit;
  const w = workloadOf(model);
  const base = { id: `chatcmpl-bench${k}`, object: "chat.completion.chunk", created: 0, model };
  const frame = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${
      JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })
    }\n\n`;
  const out = [frame({ role: "assistant", content: "" })];
  const text = frame({ content: DELTA });
  for (let i = deltasAt(w, k); i > 0; i--) out.push(text);
  const calls = callsAt(w, k);
  for (let i = 0; i < calls; i++) {
    out.push(frame({
      tool_calls: [{
        index: i,
        id: `call_${k}_${i}`,
        type: "function",
        function: { name: TOOL_NAME, arguments: "" },
      }],
    }));
    out.push(frame({ tool_calls: [{ index: i, function: { arguments: JSON.stringify({ i }) } }] }));
  }
  out.push(frame({}, calls ? "tool_calls" : "stop"));
  const n = deltasAt(w, k);
  out.push(`data: ${
    JSON.stringify({
      ...base,
      choices: [],
      usage: { prompt_tokens: 1000, completion_tokens: n, total_tokens: 1000 + n },
    })
  }\n\n`);
  out.push("data: [DONE]\n\n");
  const body = out.join("");
  sseCache.set(key, body);
  return body;
}

/** The server's script: the turn for a request, from its model and its history. */
export function scriptFor(request: RecordedRequest): ScriptedTurn {
  const body = request.body ?? {};
  const model = String(body.model ?? "");
  const messages = Array.isArray(body.messages) ? body.messages as { role?: string }[] : [];
  const k = messages.filter((m) => m.role === "assistant").length;
  return { rawSse: sseFor(model, k) };
}
