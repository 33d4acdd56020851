/**
 * The turn benchmark (DESIGN §8, issue 9): the same scripted turn — 20,000 text deltas and 50
 * tool calls across 10 iterations, tools returning at once — played by one `MockOpenAIServer` on
 * 127.0.0.1 to four contenders, each in its own process (`_turn_client.ts`):
 *
 * 1. `raw-openai`: the `openai` SDK with a hand-written minimal tool loop (the floor);
 * 2. `zqagent`: `TurnEngine`, `Mode.AUTO`, only the same no-op tool, consuming `run()`;
 * 3. `vercel-ai`: `ai` `streamText` with `@ai-sdk/openai-compatible`, tools, a step limit;
 * 4. `openai-agents`: `@openai/agents` `Agent` with a function tool, streaming `run()`.
 *
 * All four send Chat Completions requests. Measurements are interleaved (round after round,
 * each contender once per round in rotating order), so background load hits all alike. Per
 * turn: total time, time to the first event and to the first text delta (from the call that
 * starts the turn), and the CPU time of the contender's process during the turn (user + system,
 * which load from other processes on the machine disturbs less than wall time); then aggregate
 * throughput of 200 concurrent sessions (a smaller turn each: 300 deltas, 6 calls, 3
 * iterations). Prints a Markdown table; the last line is JSON.
 *
 * Env: `BENCH_QUICK=1` (fewer rounds, 50 sessions), `TURN_BENCH_ROUNDS`, `TURN_BENCH_SESSIONS`,
 * `TURN_BENCH_ONLY` (comma-separated contender names; besides the four, `wire` (the same requests
 * with `fetch`, bodies read unparsed) and `provider` (`OpenAIProvider.stream` with the raw
 * loop) split the cost into its layers).
 *
 * @module
 */
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import process from "node:process";
import { createInterface } from "node:readline";
import { MockOpenAIServer } from "../testing/mod.ts";
import { benchConfig, ROOT } from "./_deps.ts";
import { FULL, modelFor, scriptFor, SMALL } from "./_workload.ts";
import { fmt, machine, median, QUICK, summarize, type Summary, table } from "./_stats.ts";

const CONTENDERS = (process.env.TURN_BENCH_ONLY ?? "raw-openai,zqagent,vercel-ai,openai-agents")
  .split(",").map((s) => s.trim()).filter(Boolean);
const ROUNDS = Number(process.env.TURN_BENCH_ROUNDS ?? (QUICK ? 3 : 15));
const WARMUP = QUICK ? 2 : 3;
const SESSIONS = Number(process.env.TURN_BENCH_SESSIONS ?? (QUICK ? 50 : 200));
const CONC_ROUNDS = QUICK ? 1 : 5;

/** A contender's process, answering one command at a time. */
class Client {
  readonly name: string;
  #child: ReturnType<typeof spawn>;
  #waiting: ((line: string) => void)[] = [];
  #stderr = "";

  constructor(name: string, baseURL: string, config: string) {
    this.name = name;
    this.#child = spawn(
      process.execPath,
      ["run", "-A", "--config", config, path.join(ROOT, "bench", "_turn_client.ts"), name, baseURL],
      {
        stdio: ["pipe", "pipe", "pipe"],
        env: { ...process.env, OPENAI_AGENTS_DISABLE_TRACING: "1", NO_COLOR: "1" },
      },
    );
    createInterface({ input: this.#child.stdout! }).on("line", (line) => {
      if (line.startsWith("@@")) this.#waiting.shift()?.(line.slice(2));
    });
    this.#child.stderr!.on("data", (d) => (this.#stderr = (this.#stderr + d).slice(-4000)));
    this.#child.on("exit", () => {
      for (const w of this.#waiting.splice(0)) w(JSON.stringify({ error: "the process exited" }));
    });
  }

  /** Sends a command; resolves with its answer, rejects with the contender's error. */
  async ask<T>(command: string): Promise<T> {
    const line = await new Promise<string>((resolve) => {
      this.#waiting.push(resolve);
      this.#child.stdin!.write(command + "\n");
    });
    const answer = JSON.parse(line);
    if (answer.error) {
      throw new Error(`Cannot benchmark ${this.name}: ${answer.error}\n${this.#stderr}`);
    }
    return answer as T;
  }

  /** Ends the process (closing stdin ends its command loop). */
  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.#child.exitCode !== null) return resolve();
      this.#child.once("exit", () => resolve());
      this.#child.stdin!.end();
    });
  }
}

interface Turn {
  ms: number;
  cpuMs: number;
  firstEventMs: number;
  firstDeltaMs: number;
}

const config = benchConfig();
// Install the peers once, before four processes would race to fill the same node_modules.
const install = spawnSync(
  process.execPath,
  ["cache", "--quiet", "--config", config, path.join(ROOT, "bench", "_turn_client.ts")],
  { stdio: "inherit" },
);
if (install.status !== 0) throw new Error("Cannot install the benchmark's peer libraries");
const server = await new MockOpenAIServer({ turns: (r) => scriptFor(r) }).start();
const clients = CONTENDERS.map((name) => new Client(name, server.baseURL, config));
const full = modelFor(FULL);
const small = modelFor(SMALL);
const turns = new Map<string, Turn[]>(CONTENDERS.map((n) => [n, []]));
const cold = new Map<string, Turn>();
const conc = new Map<string, number[]>(CONTENDERS.map((n) => [n, []]));
try {
  console.log(
    `workload: ${FULL.deltas} deltas, ${FULL.calls} tool calls, ${FULL.iterations} iterations; ` +
      `${ROUNDS} rounds after ${WARMUP} warm-up turns; ${SESSIONS} concurrent sessions`,
  );
  // Warm-up one contender at a time; the very first turn of each process is its cold start.
  for (const c of clients) {
    for (let i = 0; i < WARMUP; i++) {
      const t = await c.ask<Turn>(`turn ${full}`);
      if (i === 0) cold.set(c.name, t);
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < clients.length; k++) {
      const c = clients[(round + k) % clients.length];
      turns.get(c.name)!.push(await c.ask<Turn>(`turn ${full}`));
    }
  }
  for (let round = 0; round < CONC_ROUNDS; round++) {
    for (let k = 0; k < clients.length; k++) {
      const c = clients[(round + k) % clients.length];
      const r = await c.ask<{ ms: number }>(`conc ${SESSIONS} ${small}`);
      conc.get(c.name)!.push(r.ms);
    }
  }
} finally {
  await Promise.all(clients.map((c) => c.close()));
  await server.close();
}

const total = new Map<string, Summary>();
for (const [name, list] of turns) total.set(name, summarize(list.map((t) => t.ms)));
const floor = total.get("raw-openai")?.median ?? NaN;
const cpu = new Map<string, Summary>();
for (const [name, list] of turns) cpu.set(name, summarize(list.map((t) => t.cpuMs)));
const cpuFloor = cpu.get("raw-openai")?.median ?? NaN;
const concFloor = median(conc.get("raw-openai") ?? []);
const rows = CONTENDERS.map((name) => {
  const list = turns.get(name)!;
  const t = total.get(name)!;
  const c = median(conc.get(name)!);
  return [
    name,
    (t.median / floor).toFixed(2),
    fmt(t),
    (cpu.get(name)!.median / cpuFloor).toFixed(2),
    fmt(cpu.get(name)!),
    fmt(summarize(list.map((x) => x.firstEventMs)), 2),
    fmt(summarize(list.map((x) => x.firstDeltaMs)), 2),
    cold.get(name)!.firstDeltaMs.toFixed(1),
    (c / concFloor).toFixed(2),
    ((SESSIONS * SMALL.deltas) / (c / 1000) / 1000).toFixed(0),
  ];
});
console.log(`\n${machine()}`);
console.log(table([
  "contender",
  "turn / raw",
  "turn ms, median (IQR)",
  "CPU / raw",
  "CPU ms per turn",
  "first event ms",
  "first delta ms",
  "first delta ms, 1st turn of process",
  `${SESSIONS} sessions / raw`,
  `${SESSIONS} sessions, k deltas/s`,
], rows));
const ratio = (name: string) => (total.get(name)?.median ?? NaN) / floor;
const result = {
  bench: "turn",
  ratio: ratio("zqagent"),
  goal: "zqagent / raw-openai <= 1.10; faster than vercel-ai and openai-agents",
  met: ratio("zqagent") <= 1.1 && ratio("zqagent") < ratio("vercel-ai") &&
    ratio("zqagent") < ratio("openai-agents"),
  medianMs: Object.fromEntries([...total].map(([n, s]) => [n, +s.median.toFixed(1)])),
  ratios: Object.fromEntries(CONTENDERS.map((n) => [n, +ratio(n).toFixed(3)])),
  cpuRatios: Object.fromEntries(
    CONTENDERS.map((n) => [n, +((cpu.get(n)?.median ?? NaN) / cpuFloor).toFixed(3)]),
  ),
  firstDeltaMs: Object.fromEntries(
    CONTENDERS.map((n) => [n, +median(turns.get(n)!.map((t) => t.firstDeltaMs)).toFixed(2)]),
  ),
  concurrentRatios: Object.fromEntries(
    CONTENDERS.map((n) => [n, +(median(conc.get(n)!) / concFloor).toFixed(3)]),
  ),
};
console.log(JSON.stringify(result));
