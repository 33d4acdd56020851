/**
 * Small statistics and formatting helpers shared by the benchmarks.
 *
 * @module
 */
import os from "node:os";
import process from "node:process";

/** True when `BENCH_QUICK=1` (set by `deno task bench --quick`): fewer repeats, smaller inputs. */
export const QUICK: boolean = process.env.BENCH_QUICK === "1";

/** The `q` quantile (0…1) of `xs`, linearly interpolated. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

/** The median of `xs`. */
export function median(xs: readonly number[]): number {
  return quantile(xs, 0.5);
}

/** Median and spread of a sample. */
export interface Summary {
  /** Median. */
  median: number;
  /** 25th percentile. */
  p25: number;
  /** 75th percentile. */
  p75: number;
  /** Smallest value. */
  min: number;
  /** Largest value. */
  max: number;
  /** Sample size. */
  n: number;
}

/** Median, quartiles and range of `xs`. */
export function summarize(xs: readonly number[]): Summary {
  return {
    median: median(xs),
    p25: quantile(xs, 0.25),
    p75: quantile(xs, 0.75),
    min: Math.min(...xs),
    max: Math.max(...xs),
    n: xs.length,
  };
}

/** `12.3 (11.9–13.0)`: median and interquartile range with `digits` decimals. */
export function fmt(s: Summary, digits = 1): string {
  return `${s.median.toFixed(digits)} (${s.p25.toFixed(digits)}–${s.p75.toFixed(digits)})`;
}

/** A Markdown table. */
export function table(head: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  return [line(head), line(head.map(() => "---")), ...rows.map(line)].join("\n");
}

/** The machine and runtime a result was measured on. */
export function machine(): string {
  const cpu = os.cpus()[0]?.model?.trim() ?? "unknown CPU";
  const mem = (os.totalmem() / 2 ** 30).toFixed(0);
  const deno = (globalThis as { Deno?: { version: { deno: string } } }).Deno?.version.deno;
  return `${cpu} × ${os.cpus().length}, ${mem} GiB, ${os.platform()} ${os.release()}, ` +
    (deno ? `Deno ${deno}` : `Node ${process.version}`);
}
