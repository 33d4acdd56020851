/**
 * Private helpers of the engine's own tests (not part of the package).
 *
 * @module
 */
import { afterEach } from "node:test";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { WsEvent } from "../engine/mod.ts";

/** Makes a temporary workspace with `files` (relative path → content); returns its real path. */
export function tempWorkspace(files: Record<string, string> = {}): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-test-")));
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(dir, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, content);
  }
  return dir;
}

/** Removes a temporary folder. */
export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Reads a whole event stream; a rejection of the stream is returned as `error`. */
export async function collect(
  stream: AsyncIterable<WsEvent>,
): Promise<{ events: WsEvent[]; error?: unknown }> {
  const events: WsEvent[] = [];
  try {
    for await (const e of stream) events.push(e);
  } catch (error) {
    return { events, error };
  }
  return { events };
}

/** The event types, in order. */
export function types(events: WsEvent[]): string[] {
  return events.map((e) => e.type);
}

/** Events of one type. */
export function ofType(events: WsEvent[], type: string): WsEvent[] {
  return events.filter((e) => e.type === type);
}

/** Resolves after `ms` milliseconds. */
export function wait(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `check` every 25 ms until it returns true.
 *
 * @param what Named in the error.
 * @param timeoutMs Give up after this many ms (default 60,000).
 * @throws {Error} "Timed out waiting for <what>".
 */
export async function until(
  check: () => Promise<boolean> | boolean,
  what: string,
  timeoutMs = 60_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await wait(25);
  }
  throw new Error(`Timed out waiting for ${what}`);
}

/**
 * A list of clean-ups run after each test of the calling file, last pushed first (servers,
 * workers, stores, temp folders).
 */
export function cleanupsAfterEach(): (() => Promise<void> | void)[] {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return cleanups;
}

/** The first bytes of a 1×1 PNG: enough for file-type sniffing (`media`). */
export const TINY_PNG: Uint8Array = Uint8Array.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489".match(/../g)!
    .map((h) => parseInt(h, 16)),
);
