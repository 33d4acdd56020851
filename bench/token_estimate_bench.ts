/**
 * Throughput of compaction's token estimate (`engine/token_estimate.ts`, manual §14): the
 * `o200k_base` tokenizer (`gpt-tokenizer`) counting text, and `messagesTokens` over a long
 * history, cold (every message counted) and warm (counts cached per message object, what the
 * engine pays before each request of a turn). Also the one-time cost of loading the tokenizer.
 * No goal is set for it in DESIGN §8; the figures show what compaction checks cost per request.
 *
 * Env: `BENCH_QUICK=1` (a smaller text and history, fewer runs).
 *
 * @module
 */
import process from "node:process";
import { loadTokenCounter, messagesTokens } from "../engine/token_estimate.ts";
import type { Message } from "../providers/mod.ts";
import { fmt, machine, QUICK, summarize, table } from "./_stats.ts";

const RUNS = QUICK ? 3 : 9;
const TEXT_KB = QUICK ? 256 : 2048;
const HISTORY = QUICK ? 200 : 1000;

let t = performance.now();
const count = await loadTokenCounter();
const loadMs = performance.now() - t;

const prose = "The engine keeps the history of one session and streams each turn's events. ";
const code = "function add(a: number, b: number): number { return a + b; }\n";
const cjk = "引擎保存一个会话的历史，并流式输出每一轮的事件。";
let text = "";
for (let i = 0; text.length < TEXT_KB * 1024; i++) {
  text += (i % 3 === 0 ? prose : i % 3 === 1 ? code : cjk) + `#${i} `;
}
const chars = text.length;

function history(): Message[] {
  const out: Message[] = [{ role: "system", content: "You are a coding agent." }];
  for (let i = 0; out.length < HISTORY; i++) {
    out.push({ role: "user", content: `${prose} step ${i}` });
    out.push({
      role: "assistant",
      content: code.repeat(3),
      tool_calls: [{
        id: `call_${i}`,
        type: "function",
        function: { name: "read_file", arguments: JSON.stringify({ path: `src/f${i}.ts` }) },
      }],
    });
    out.push({ role: "tool", tool_call_id: `call_${i}`, content: code.repeat(40) });
  }
  return out;
}

const textMs: number[] = [];
let tokens = 0;
for (let r = 0; r < RUNS; r++) {
  t = performance.now();
  tokens = count(text + r); // a fresh string each run
  textMs.push(performance.now() - t);
}
const cold: number[] = [];
const warm: number[] = [];
let historyTokens = 0;
for (let r = 0; r < RUNS; r++) {
  const h = history();
  t = performance.now();
  historyTokens = messagesTokens(h, count);
  cold.push(performance.now() - t);
  t = performance.now();
  messagesTokens(h, count);
  warm.push(performance.now() - t);
}
const tm = summarize(textMs);
const mbps = (chars / 1e6) / (tm.median / 1000);
const ktps = (tokens / 1000) / (tm.median / 1000);
console.log(machine());
console.log(table(["measurement", "ms, median (IQR)", "throughput"], [
  ["load the tokenizer (once per process)", loadMs.toFixed(0), "—"],
  [
    `count ${(chars / 1e6).toFixed(2)} M chars (${tokens} tokens)`,
    fmt(tm),
    `${mbps.toFixed(1)} M chars/s, ${ktps.toFixed(0)} k tokens/s`,
  ],
  [`history of ${HISTORY} messages (${historyTokens} tokens), cold`, fmt(summarize(cold), 2), "—"],
  [`same history, warm (cached per message)`, fmt(summarize(warm), 3), "—"],
]));
console.log(JSON.stringify({
  bench: "token_estimate",
  goal: "none set (reference figures)",
  met: true,
  mCharsPerS: +mbps.toFixed(2),
  kTokensPerS: +ktps.toFixed(0),
  historyColdMs: +summarize(cold).median.toFixed(2),
  historyWarmMs: +summarize(warm).median.toFixed(3),
  loadMs: +loadMs.toFixed(0),
}));
process.exit(0);
