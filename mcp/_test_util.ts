/**
 * Helpers of the MCP tests (not part of the package): paths of the reference servers installed
 * from npm (deno.json "imports"), the case fixtures, and skip rules for missing real components.
 *
 * @module
 */
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { findProgram } from "./_launch.ts";

/** Project root. */
export const ROOT: string = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** Case fixtures copied from ../shared/cases/mcp/. */
export const FIXTURES: string = path.join(ROOT, "tests", "fixtures", "mcp");

function entry(pkg: string): string {
  return path.join(ROOT, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js");
}
/** `@modelcontextprotocol/server-everything` entry. */
export const EVERYTHING_ENTRY: string = entry("server-everything");
/** `@modelcontextprotocol/server-filesystem` entry. */
export const FILESYSTEM_ENTRY: string = entry("server-filesystem");
/** `@modelcontextprotocol/server-memory` entry. */
export const MEMORY_ENTRY: string = entry("server-memory");

/**
 * A skip reason when a real component is missing, or `false`. Throws under `CI_REQUIRE_REAL=1`
 * so CI fails instead of skipping.
 */
export function needReal(
  what: { node?: boolean; servers?: boolean; programs?: string[] },
): string | false {
  const missing: string[] = [];
  if (what.node && !findProgram("node", process.env, process.platform)) missing.push("node");
  if (what.servers) {
    for (const e of [EVERYTHING_ENTRY, FILESYSTEM_ENTRY, MEMORY_ENTRY]) {
      if (!fs.existsSync(e)) missing.push(`${e} (run deno install)`);
    }
  }
  for (const p of what.programs ?? []) {
    if (!findProgram(p, process.env, process.platform)) missing.push(p);
  }
  if (missing.length === 0) return false;
  const reason = `missing ${missing.join(", ")}`;
  if (process.env.CI_REQUIRE_REAL === "1") {
    throw new Error(
      `Cannot run a test that needs real components under CI_REQUIRE_REAL=1: ${reason}`,
    );
  }
  return reason;
}

/** True while a process id is alive. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits until `check()` is true (polling every 20 ms, up to `ms`). */
export async function waitFor(check: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return check();
}
