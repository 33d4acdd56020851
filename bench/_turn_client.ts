/**
 * One contender of the turn benchmark, in its own process: `deno run -A --config
 * bench/.deps/deno.json bench/_turn_client.ts <contender> <baseURL>`.
 *
 * Reads commands from stdin, one a line, and answers each with one line `@@{json}` on stdout:
 * - `turn <model>`: one turn of that workload (see `_workload.ts`); answers
 *   `{ms, firstEventMs, firstDeltaMs, deltas, calls}` (ms from the call that starts the turn);
 * - `conc <n> <model>`: `n` turns of independent sessions at once; answers `{ms, deltas, calls}`.
 *
 * Every contender does the same work against the same server: Chat Completions requests with
 * the same system prompt, user message and one no-op tool, streaming, executing every tool call
 * and sending its result back, until the model answers without tool calls. Each checks that it
 * saw every delta and ran every call, so a contender that skips work fails instead of winning.
 *
 * @module
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { createInterface } from "node:readline";
import {
  callsAt,
  DELTA,
  deltasAt,
  PROMPT,
  SYSTEM,
  TOOL_DESCRIPTION,
  TOOL_NAME,
  TOOL_PARAMETERS,
  type Workload,
  workloadOf,
} from "./_workload.ts";

/** What one turn of a contender reports. */
interface TurnStats {
  ms: number;
  /** CPU time of this process during the turn (user + system), ms. */
  cpuMs: number;
  firstEventMs: number;
  firstDeltaMs: number;
  deltas: number;
  calls: number;
}

type TurnFn = (model: string) => Promise<TurnStats>;

const API_KEY = "bench-key";

/** Timing and counting shared by the contenders. */
class Meter {
  t0 = performance.now();
  cpu0 = process.cpuUsage();
  firstEvent = -1;
  firstDelta = -1;
  deltas = 0;
  chars = 0;
  calls = 0;

  event(): void {
    if (this.firstEvent < 0) this.firstEvent = performance.now() - this.t0;
  }

  delta(text: string): void {
    if (this.firstDelta < 0) this.firstDelta = performance.now() - this.t0;
    this.deltas++;
    this.chars += text.length;
  }

  /** The no-op tool every contender runs. */
  tool = (args: { i?: unknown }): { ok: boolean } => {
    if (typeof args?.i !== "number") throw new Error("Cannot run noop: i is missing");
    this.calls++;
    return { ok: true };
  };

  done(w: Workload, model: string): TurnStats {
    const ms = performance.now() - this.t0;
    const cpu = process.cpuUsage(this.cpu0);
    if (this.deltas !== w.deltas || this.chars !== w.deltas * DELTA.length) {
      throw new Error(
        `Cannot accept the turn of ${model}: saw ${this.deltas} deltas (${this.chars} chars), ` +
          `expected ${w.deltas}`,
      );
    }
    if (this.calls !== w.calls) {
      throw new Error(`Cannot accept the turn of ${model}: ran ${this.calls} of ${w.calls} calls`);
    }
    return {
      ms,
      cpuMs: (cpu.user + cpu.system) / 1000,
      firstEventMs: this.firstEvent,
      firstDeltaMs: this.firstDelta,
      deltas: this.deltas,
      calls: this.calls,
    };
  }
}

const chatTool = {
  type: "function" as const,
  function: { name: TOOL_NAME, description: TOOL_DESCRIPTION, parameters: TOOL_PARAMETERS },
};

/** The floor: the `openai` SDK and a hand-written minimal tool loop. */
async function rawSdk(baseURL: string): Promise<TurnFn> {
  const { default: OpenAI } = await import("openai");
  return async (model) => {
    const w = workloadOf(model);
    const m = new Meter();
    const client = new OpenAI({ apiKey: API_KEY, baseURL, maxRetries: 0 });
    // deno-lint-ignore no-explicit-any
    const messages: any[] = [{ role: "system", content: SYSTEM }, {
      role: "user",
      content: PROMPT,
    }];
    for (let it = 0; it < w.iterations + 1; it++) {
      const stream = await client.chat.completions.create({
        model,
        messages,
        tools: [chatTool as never],
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = "";
      const calls: {
        id: string;
        type: "function";
        function: { name: string; arguments: string };
      }[] = [];
      for await (const chunk of stream) {
        m.event();
        const d = chunk.choices[0]?.delta;
        if (!d) continue;
        if (d.content) {
          text += d.content;
          m.delta(d.content);
        }
        for (const tc of d.tool_calls ?? []) {
          const c = calls[tc.index] ??= {
            id: "",
            type: "function",
            function: { name: "", arguments: "" },
          };
          if (tc.id) c.id = tc.id;
          if (tc.function?.name) c.function.name += tc.function.name;
          if (tc.function?.arguments) c.function.arguments += tc.function.arguments;
        }
      }
      messages.push({
        role: "assistant",
        content: text || null,
        ...(calls.length ? { tool_calls: calls } : {}),
      });
      if (!calls.length) break;
      for (const c of calls) {
        const result = await m.tool(JSON.parse(c.function.arguments));
        messages.push({ role: "tool", tool_call_id: c.id, content: JSON.stringify(result) });
      }
    }
    return m.done(w, model);
  };
}

/**
 * Not a contender: the same requests with `fetch`, reading the SSE bodies without parsing them.
 * Shows how much of a turn is the server and HTTP alone.
 */
function wire(baseURL: string): Promise<TurnFn> {
  return Promise.resolve(async (model) => {
    const w = workloadOf(model);
    const m = new Meter();
    // deno-lint-ignore no-explicit-any
    const messages: any[] = [{ role: "system", content: SYSTEM }, {
      role: "user",
      content: PROMPT,
    }];
    for (let k = 0; k < w.iterations; k++) {
      const res = await fetch(`${baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${API_KEY}` },
        body: JSON.stringify({
          model,
          messages,
          tools: [chatTool],
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
      for await (const _ of res.body!) m.event();
      const n = deltasAt(w, k);
      for (let i = 0; i < n; i++) m.delta(DELTA);
      const calls = Array.from({ length: callsAt(w, k) }, (_, i) => ({
        id: `call_${k}_${i}`,
        type: "function",
        function: { name: TOOL_NAME, arguments: JSON.stringify({ i }) },
      }));
      messages.push({
        role: "assistant",
        content: DELTA.repeat(n),
        ...(calls.length ? { tool_calls: calls } : {}),
      });
      for (const c of calls) {
        const result = m.tool(JSON.parse(c.function.arguments));
        messages.push({ role: "tool", tool_call_id: c.id, content: JSON.stringify(result) });
      }
    }
    return m.done(w, model);
  });
}

/**
 * Not a contender: `OpenAIProvider.stream` (this package's provider layer alone) with the same
 * hand-written loop as `raw-openai`. Shows how the engine's overhead splits between the
 * provider (stream normaliser, watchdog) and the turn loop with its event stream.
 */
async function providerOnly(baseURL: string): Promise<TurnFn> {
  const core = await import("../mod.ts");
  return async (model) => {
    const w = workloadOf(model);
    const m = new Meter();
    const provider = new core.OpenAIProvider({
      apiKey: API_KEY,
      baseURL,
      apiMode: "chat",
      maxRetries: 0,
    });
    const tools = [chatTool as never];
    // deno-lint-ignore no-explicit-any
    const messages: any[] = [{ role: "system", content: SYSTEM }, {
      role: "user",
      content: PROMPT,
    }];
    for (let it = 0; it < w.iterations + 1; it++) {
      const stream = await provider.stream(model, messages, tools, {
        reqId: `req_${it}`,
        logTime: new Date().toISOString(),
      });
      let text = "";
      let calls: { id: string; function: { name: string; arguments: string } }[] = [];
      for await (const chunk of stream) {
        m.event();
        if (chunk.content) {
          text += chunk.content;
          m.delta(chunk.content);
        }
        if (chunk.toolCalls) calls = chunk.toolCalls;
      }
      messages.push({
        role: "assistant",
        content: text || null,
        ...(calls.length ? { tool_calls: calls } : {}),
      });
      if (!calls.length) break;
      for (const c of calls) {
        const result = await m.tool(JSON.parse(c.function.arguments));
        messages.push({ role: "tool", tool_call_id: c.id, content: JSON.stringify(result) });
      }
    }
    return m.done(w, model);
  };
}

/** This engine: `TurnEngine`, `Mode.AUTO`, only the no-op tool, consuming `run()`. */
async function engine(baseURL: string): Promise<TurnFn> {
  const core = await import("../mod.ts");
  const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-bench-ws-")));
  process.on("exit", () => fs.rmSync(ws, { recursive: true, force: true }));
  return async (model) => {
    const w = workloadOf(model);
    const m = new Meter();
    const registry = new core.ToolRegistry();
    registry.register(
      (args) => m.tool(args),
      { category: "bench", riskLevel: "low", capabilities: [], requiresApproval: false },
      chatTool,
    );
    const turn = new core.TurnEngine({
      provider: new core.OpenAIProvider({
        apiKey: API_KEY,
        baseURL,
        apiMode: "chat",
        maxRetries: 0,
      }),
      registry,
      permissions: new core.PermissionEngine({ workspaceRoot: ws, mode: core.Mode.AUTO }),
      model,
      instructions: SYSTEM,
    });
    for await (const event of turn.run(PROMPT)) {
      m.event();
      if (event.type === core.EventType.ASSISTANT_DELTA) m.delta(event.data.text as string);
      else if (event.type === core.EventType.ERROR) {
        throw new Error(`Cannot finish the engine's turn: ${event.data.error}`);
      }
    }
    return m.done(w, model);
  };
}

/** The Vercel AI SDK: `streamText` with the OpenAI-compatible provider, tools, a step limit. */
async function vercelAi(baseURL: string): Promise<TurnFn> {
  const { streamText, tool, jsonSchema, stepCountIs } = await import("ai");
  const { createOpenAICompatible } = await import("@ai-sdk/openai-compatible");
  return async (model) => {
    const w = workloadOf(model);
    const m = new Meter();
    const provider = createOpenAICompatible({
      name: "bench",
      baseURL,
      apiKey: API_KEY,
      includeUsage: true,
    });
    const result = streamText({
      model: provider.chatModel(model),
      system: SYSTEM,
      prompt: PROMPT,
      tools: {
        [TOOL_NAME]: tool({
          description: TOOL_DESCRIPTION,
          inputSchema: jsonSchema<{ i: number }>(TOOL_PARAMETERS as never),
          execute: (args: { i: number }) => Promise.resolve(m.tool(args)),
        }),
      },
      stopWhen: stepCountIs(w.iterations + 1),
      maxRetries: 0,
    });
    for await (const part of result.fullStream) {
      m.event();
      if (part.type === "text-delta") m.delta(part.text);
      else if (part.type === "error") throw part.error;
    }
    return m.done(w, model);
  };
}

/** The OpenAI Agents SDK: an `Agent` with a function tool, streaming `run()`. */
async function openaiAgents(baseURL: string): Promise<TurnFn> {
  const agents = await import("@openai/agents");
  const { default: OpenAI } = await import("openai");
  agents.setTracingDisabled(true); // no trace export: nothing may leave 127.0.0.1
  return async (model) => {
    const w = workloadOf(model);
    const m = new Meter();
    const client = new OpenAI({ apiKey: API_KEY, baseURL, maxRetries: 0 });
    const agent = new agents.Agent({
      name: "bench",
      instructions: SYSTEM,
      model: new agents.OpenAIChatCompletionsModel(client as never, model),
      tools: [agents.tool({
        name: TOOL_NAME,
        description: TOOL_DESCRIPTION,
        parameters: TOOL_PARAMETERS as never,
        strict: true,
        execute: (args: unknown) => Promise.resolve(m.tool(args as { i: number })),
      })],
    });
    const result = await agents.run(agent, PROMPT, { stream: true, maxTurns: w.iterations + 1 });
    for await (const event of result) {
      m.event();
      if (event.type === "raw_model_stream_event" && event.data.type === "output_text_delta") {
        m.delta(event.data.delta);
      }
    }
    await result.completed;
    if (result.error) throw result.error;
    return m.done(w, model);
  };
}

/** The contenders, by the name the orchestrator passes. */
export const CONTENDERS: Record<string, (baseURL: string) => Promise<TurnFn>> = {
  "wire": wire,
  "raw-openai": rawSdk,
  "provider": providerOnly,
  "zqagent": engine,
  "vercel-ai": vercelAi,
  "openai-agents": openaiAgents,
};

if (import.meta.main) {
  const [name, baseURL] = process.argv.slice(2);
  const make = CONTENDERS[name];
  if (!make || !baseURL) {
    console.error(`Usage: _turn_client.ts <${Object.keys(CONTENDERS).join("|")}> <baseURL>`);
    process.exit(2);
  }
  const turn = await make(baseURL);
  const answer = (v: unknown) => process.stdout.write(`@@${JSON.stringify(v)}\n`);
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [cmd, ...args] = line.trim().split(/\s+/);
    try {
      if (cmd === "turn") {
        answer(await turn(args[0]));
      } else if (cmd === "conc") {
        const n = Number(args[0]);
        const t0 = performance.now();
        const cpu0 = process.cpuUsage();
        const all = await Promise.all(Array.from({ length: n }, () => turn(args[1])));
        const cpu = process.cpuUsage(cpu0);
        answer({
          ms: performance.now() - t0,
          cpuMs: (cpu.user + cpu.system) / 1000,
          deltas: all.reduce((s, r) => s + r.deltas, 0),
          calls: all.reduce((s, r) => s + r.calls, 0),
        });
      } else if (cmd) {
        answer({ error: `unknown command ${cmd}` });
      }
    } catch (err) {
      answer({ error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
    }
  }
  process.exit(0);
}
