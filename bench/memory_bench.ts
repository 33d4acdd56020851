/**
 * Heap per idle engine (DESIGN §8: goal <= 100 KB each with 1,000 engines in one process).
 *
 * Creates 1,000 engines, keeps them, and divides the growth of the V8 heap (after a full GC
 * before and after) by 1,000. Two shapes: `createDefaultEngine` (the manual's way: every
 * built-in tool registered, its own provider, registry and permission engine per session) and
 * a bare `TurnEngine` with one tool. For reference, 1,000 `openai` clients (what a raw-SDK host
 * keeps per session at least). Runs itself again with `--expose-gc` when started without it.
 *
 * Env: `BENCH_QUICK=1` (one repeat instead of three).
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { fmt, machine, QUICK, summarize, table } from "./_stats.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  const r = spawnSync(
    process.execPath,
    ["run", "-A", "--v8-flags=--expose-gc", new URL(import.meta.url).pathname],
    { stdio: "inherit" },
  );
  process.exit(r.status ?? 1);
}

const N = 1000;
const REPEATS = QUICK ? 1 : 3;
const core = await import("../mod.ts");
const { default: OpenAI } = await import("openai");
const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-mem-bench-")));

function heap(): number {
  for (let i = 0; i < 3; i++) gc!();
  return process.memoryUsage().heapUsed;
}

/** Bytes of heap per object made by `make`, with `N` alive at once. */
function perObject(make: (i: number) => unknown): number {
  make(-1); // loads lazily created module state before the baseline
  const before = heap();
  const keep: unknown[] = [];
  for (let i = 0; i < N; i++) keep.push(make(i));
  const after = heap();
  if (keep.length !== N) throw new Error("Cannot measure: objects were lost");
  return (after - before) / N;
}

const shapes: Record<string, (i: number) => unknown> = {
  "createDefaultEngine": () =>
    core.createDefaultEngine({
      workspace: ws,
      model: "gpt-4o-mini",
      mode: core.Mode.AUTO,
    }),
  "TurnEngine, one tool": () => {
    const registry = new core.ToolRegistry();
    registry.register(
      () => ({ ok: true }),
      { category: "bench", riskLevel: "low", capabilities: [], requiresApproval: false },
      { type: "function", function: { name: "noop", parameters: { type: "object" } } },
    );
    return new core.TurnEngine({
      provider: new core.OpenAIProvider({ apiKey: "bench-key", apiMode: "chat" }),
      registry,
      permissions: new core.PermissionEngine({ workspaceRoot: ws, mode: core.Mode.AUTO }),
      model: "gpt-4o-mini",
      instructions: "You are a helpful assistant.",
    });
  },
  "openai client (reference)": () => new OpenAI({ apiKey: "bench-key" }),
};

const results = new Map<string, number[]>();
try {
  for (let r = 0; r < REPEATS; r++) {
    for (const [name, make] of Object.entries(shapes)) {
      const list = results.get(name) ?? [];
      list.push(perObject(make) / 1024);
      results.set(name, list);
    }
  }
} finally {
  fs.rmSync(ws, { recursive: true, force: true });
}
const kb = (n: string) => summarize(results.get(n)!);
console.log(machine());
console.log(table(
  ["per idle session", `KB each, ${N} alive, median (IQR)`],
  Object.keys(shapes).map((n) => [n, fmt(kb(n))]),
));
const worst = Math.max(kb("createDefaultEngine").median, kb("TurnEngine, one tool").median);
console.log(JSON.stringify({
  bench: "memory",
  ratio: +(worst / 100).toFixed(3),
  goal: "<= 100 KB heap per idle engine (1,000 engines)",
  met: worst <= 100,
  kbPerEngine: Object.fromEntries(Object.keys(shapes).map((n) => [n, +kb(n).median.toFixed(1)])),
}));
