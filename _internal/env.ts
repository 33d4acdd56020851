/**
 * Environment access for every subsystem (DESIGN §1: no subsystem touches `Deno.*` directly).
 *
 * `node:process` works natively in Deno and Node, so one implementation serves both.
 *
 * @module
 */
import process from "node:process";
import { hasPermissionModel, queryGrant } from "./deno_permissions.ts";

/** Under a permission model (Deno), a variable is only read when granted: never a prompt. */
const checkGrants: boolean = hasPermissionModel();
const fullEnv: boolean = !checkGrants || queryGrant({ name: "env" }) === "granted";

function readable(name: string): boolean {
  return fullEnv || queryGrant({ name: "env", variable: name }) === "granted";
}

/** Variables a child process commonly needs, passed on when the whole environment is not granted. */
const BASIC_VARS = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LC_ALL",
  "LC_CTYPE",
  "TERM",
  "TZ",
  "TMPDIR",
  "SystemRoot",
  "ComSpec",
  "PATHEXT",
];

/** Reads an environment variable; `undefined` when unset or empty. */
export function envString(name: string): string | undefined {
  if (!readable(name)) return undefined;
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

/**
 * A copy of the whole process environment (unset values dropped). Under Deno without full
 * `--allow-env`, only the granted ones of a few basic variables (`PATH`, `HOME`, `LANG`, …).
 */
export function envAll(): Record<string, string> {
  const out: Record<string, string> = {};
  if (!fullEnv) {
    for (const name of BASIC_VARS) {
      const v = envString(name);
      if (v !== undefined) out[name] = v;
    }
    return out;
  }
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) out[k] = v;
  return out;
}

/** True when running under Deno (not Node). */
export const isDeno: boolean = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

/** `process.platform` ("linux", "darwin", "win32", …). */
export const platform: string = process.platform;
