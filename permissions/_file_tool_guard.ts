/**
 * The path check of the isolated file tools (private; DESIGN §5, "Deno permission layer").
 *
 * Deno's `--allow-read`/`--allow-write` checks do not follow symlinks (research deno-first.md
 * §4.4): a link inside the workspace reaches its target outside. So before a tool runs, every path
 * it will touch is resolved to its real path here — the target's, or its nearest existing
 * parent's, following dangling links too — and refused unless both the path as written and its
 * real path are inside the workspace or a directory granted to the engine (`request_directory`;
 * writable ones only for tools that write).
 *
 * Written apart from the permission engine's path guard (`path_guard.ts`) on purpose: the
 * isolation is there in case that guard has a bug.
 *
 * @module
 */
import { lstatSync, readlinkSync, realpathSync } from "node:fs";
import path from "node:path";
import { pathFromFileUrl, urlScheme } from "./path_guard.ts";

/** A directory granted to the engine, as `PermissionEngine.grantedDirectories()` lists it. */
export interface GrantedRoot {
  /** Absolute real path. */
  path: string;
  /** True when tools may write into it. */
  writable: boolean;
}

/** What a path is checked against. */
export interface PathScope {
  /** The workspace as the tools resolve paths against it (`path.resolve`d, maybe a link). */
  workspace: string;
  /** The workspace's real path. */
  realRoot: string;
  /** Directories granted to the engine. */
  grants: readonly GrantedRoot[];
  /** True when the tool writes: then only writable grants count. */
  write: boolean;
  /** Who refuses, for the message (default `"the isolated file-tool process"`). */
  refusedBy?: string;
}

/** Argument names holding paths (DESIGN §5). */
const PATH_KEYS = ["path", "destination", "to", "from", "source"] as const;

/** Symlinks followed while resolving one path before giving up (as `path_guard.ts`). */
const MAX_LINKS = 40;

/** True when `target` is `root` or below it, by whole segments. */
export function within(root: string, target: string): boolean {
  const rel = path.relative(root, target);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/**
 * The real path of `p` (absolute): its own when it exists; else its nearest existing parent's
 * with the missing tail appended, a dangling symlink on the way followed to its target.
 *
 * @throws {Error} On a symlink loop, or when a part cannot be read (e.g. Deno's `NotCapable`).
 */
export function realPathOf(p: string, budget: { links: number } = { links: MAX_LINKS }): string {
  try {
    return realpathSync(p);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") throw e;
  }
  let link = false;
  try {
    link = lstatSync(p).isSymbolicLink();
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") throw e;
  }
  if (link) {
    if (--budget.links < 0) throw new Error(`Cannot resolve ${p}: too many symlinks`);
    return realPathOf(path.resolve(path.dirname(p), readlinkSync(p)), budget);
  }
  const parent = path.dirname(p);
  if (parent === p) return p;
  return path.join(realPathOf(parent, budget), path.basename(p));
}

/**
 * The path arguments of a call: the usual keys (as written and trimmed), `paths: []`, and a
 * `file:` URL in `url` (which `media` reads as a path).
 */
export function pathArguments(args: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const key of PATH_KEYS) {
    const v = args[key];
    if (typeof v !== "string" || v.trim() === "") continue;
    out.push(v);
    if (v.trim() !== v) out.push(v.trim()); // media trims; the others take it as written
  }
  if (Array.isArray(args.paths)) {
    for (const v of args.paths) if (typeof v === "string" && v !== "") out.push(v);
  }
  if (typeof args.url === "string" && urlScheme(args.url.trim()) === "file") {
    out.push(args.url.trim());
  }
  return out;
}

/**
 * Refuses `given` unless it stays inside the workspace or a granted directory, as written and
 * as its real path.
 *
 * @param tool The tool name, for the message.
 * @param given The path as the model wrote it (relative, absolute or a `file:` URL).
 * @param scope Workspace, real root, grants, and whether the tool writes.
 * @throws {Error} "Cannot run <tool> on <path>: …, outside the workspace (refused by the
 *   isolated file-tool process)" (or by `scope.refusedBy`).
 */
export function checkToolPath(tool: string, given: string, scope: PathScope): void {
  let p: string;
  try {
    p = pathFromFileUrl(given);
  } catch (e) {
    throw new Error(`Cannot run ${tool} on ${given}: ${(e as Error).message}`);
  }
  if (p.includes("\0")) throw new Error(`Cannot run ${tool}: the path contains a NUL character`);
  const by = scope.refusedBy ?? "the isolated file-tool process";
  if (p === "~" || p.startsWith("~/")) {
    throw new Error(
      `Cannot run ${tool} on ${p}: home-relative paths are outside the workspace ` +
        `(refused by ${by}); give a workspace path`,
    );
  }
  const roots = [scope.realRoot];
  for (const g of scope.grants) if (g.writable || !scope.write) roots.push(g.path);
  const lexical = path.resolve(scope.workspace, p);
  const lexicalOk = within(scope.workspace, lexical) || roots.some((r) => within(r, lexical));
  let real = lexical;
  if (lexicalOk) {
    try {
      real = realPathOf(lexical);
    } catch {
      real = "an unreadable path"; // e.g. NotCapable: Deno's grant refused a part of it
    }
  }
  if (!lexicalOk || !roots.some((r) => within(r, real))) {
    const where = scope.grants.length > 0
      ? `outside the workspace and the ${scope.write ? "writable " : ""}granted directories`
      : "outside the workspace";
    throw new Error(
      `Cannot run ${tool} on ${p}: it resolves to ${real}, ${where} (refused by ${by})`,
    );
  }
}
