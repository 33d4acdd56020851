/**
 * Helpers shared by the built-in tools (private).
 *
 * @module
 */
import os from "node:os";
import path from "node:path";
import { writeFileAtomic as writeAtomic } from "../_internal/atomic_write.ts";
import { pathFromFileUrl, urlScheme } from "../permissions/path_guard.ts";

/** Options of {@link resolveToolPath}. */
export interface ToolPathOptions {
  /** The argument's name in messages (default `"path"`). */
  what?: string;
  /** What the tool was doing, for messages: `"write"` gives "Cannot write …" (default `"use"`). */
  verb?: string;
}

/**
 * Resolves a tool's `path` argument against the workspace with `node:path` (so `..` segments are
 * collapsed before anyone looks at the result). A `file:` URL becomes its path
 * (`pathFromFileUrl`, as the permission engine converts it); `~` and `~/x` expand to the home
 * folder.
 *
 * @param options The argument's name, or {@link ToolPathOptions}.
 * @throws {Error} For a non-string, a NUL, another URL (`http://…`: "Cannot write X: path must
 *   be a file path, not a URL") or a `file:` URL of another host.
 */
export function resolveToolPath(
  workspace: string,
  raw: unknown,
  options: string | ToolPathOptions = "path",
): string {
  const { what = "path", verb = "use" } = typeof options === "string" ? { what: options } : options;
  if (raw === undefined || raw === null || raw === "") return path.resolve(workspace);
  if (typeof raw !== "string") throw new Error(`Cannot use ${what}: expected a string`);
  if (raw.includes("\0")) throw new Error(`Cannot use ${what}: it contains a NUL character`);
  const scheme = urlScheme(raw);
  if (scheme !== undefined && scheme !== "file") {
    throw new Error(`Cannot ${verb} ${raw}: ${what} must be a file path, not a URL`);
  }
  let p: string;
  try {
    p = pathFromFileUrl(raw);
  } catch (err) {
    throw new Error(
      `Cannot ${verb} ${raw}: ${what} must be a file path or a file URL of this machine`,
      { cause: err },
    );
  }
  if (p === "~") p = os.homedir();
  else if (p.startsWith("~/")) p = path.join(os.homedir(), p.slice(2));
  return path.resolve(workspace, p);
}

/** A path for messages: workspace-relative with `/` when inside, absolute otherwise. */
export function displayPath(workspace: string, abs: string): string {
  const rel = path.relative(path.resolve(workspace), abs);
  if (rel === "") return ".";
  if (rel.startsWith("..") || path.isAbsolute(rel)) return abs;
  return rel.split(path.sep).join("/");
}

/** Reads an optional integer argument, clamped to [min, max]. */
export function intArg(
  args: Record<string, unknown>,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const v = args[name];
  if (v === undefined || v === null || v === "") return fallback;
  const n = typeof v === "number" ? v : Number(v);
  if (!Number.isFinite(n)) {
    throw new Error(`Cannot use ${name}: expected a number, got ${String(v)}`);
  }
  return Math.min(max, Math.max(min, Math.trunc(n)));
}

/** Reads an optional boolean argument (accepts `"true"`/`"false"` strings from lax models). */
export function boolArg(args: Record<string, unknown>, name: string, fallback: boolean): boolean {
  const v = args[name];
  if (v === undefined || v === null) return fallback;
  if (typeof v === "boolean") return v;
  if (v === "true") return true;
  if (v === "false") return false;
  throw new Error(`Cannot use ${name}: expected true or false, got ${String(v)}`);
}

/** Reads a required string argument. */
export function stringArg(args: Record<string, unknown>, name: string, tool: string): string {
  const v = args[name];
  if (typeof v !== "string") throw new Error(`Cannot run ${tool}: ${name} must be a string`);
  return v;
}

/** Writes a file atomically (temp file in the same folder, then rename), keeping `mode`. */
export function writeFileAtomic(
  target: string,
  data: string | Uint8Array,
  mode?: number,
): Promise<void> {
  return writeAtomic(target, data, { mode });
}

/** An Error whose `name` is `"AbortError"` (what the engine recognises as an interruption). */
export function abortError(what: string): Error {
  const e = new Error(`Cannot finish ${what}: interrupted`);
  e.name = "AbortError";
  return e;
}

/** Cuts a string to at most `max` chars without splitting a surrogate pair. */
export function clipChars(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const c = text.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return text.slice(0, end);
}
