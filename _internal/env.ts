/**
 * Environment access for every subsystem (DESIGN §1: no subsystem touches `Deno.*` directly).
 *
 * `node:process` works natively in Deno and Node, so one implementation serves both.
 *
 * @module
 */
import process from "node:process";

/** Reads an environment variable; `undefined` when unset or empty. */
export function envString(name: string): string | undefined {
  const value = process.env[name];
  return value === undefined || value === "" ? undefined : value;
}

/**
 * Reads an environment variable as a number; `fallback` when unset, empty or not a finite number.
 */
export function envNumber(name: string, fallback: number): number {
  const raw = envString(name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  return Number.isFinite(n) ? n : fallback;
}

/** A copy of the whole process environment (unset values dropped). */
export function envAll(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) out[k] = v;
  return out;
}

/** True when running under Deno (not Node). */
export const isDeno: boolean = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

/** `process.platform` ("linux", "darwin", "win32", …). */
export const platform: string = process.platform;
