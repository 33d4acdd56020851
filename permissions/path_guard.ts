/**
 * Path resolution and containment checks for tool paths (DESIGN §5, manual §8.1 step 2).
 *
 * Every path a tool receives is resolved the way the kernel will resolve it: a `file:` URL is
 * turned into its path ({@link pathFromFileUrl}, the same conversion the built-in file tools
 * make), `~` is expanded, a relative path is taken from the workspace, and each segment is followed through symlinks
 * (dangling ones included) before `..` is applied, so a `link/..` where `link` points outside is
 * judged by where it really lands. Segments that do not exist yet are appended as they are.
 * Containment is then checked by whole path segments, so `/srv/ws-evil` is not inside `/srv/ws`.
 *
 * Node's `fs.realpathSync` alone is not enough: it fails on dangling symlinks (a write through one
 * would create a file outside the workspace) and on targets that do not exist yet, so the walk is
 * done segment by segment with `lstatSync`/`readlinkSync`.
 *
 * A symlink loop (`a -> b`, `b -> a`; or a chain longer than the kernel's 40 links) resolves to
 * nothing: every file operation through it fails with `ELOOP`, so {@link resolveWorkspacePath}
 * throws a {@link PathResolutionError} with `code` `"symlink_loop"`. {@link checkPath} still
 * places a true cycle (a symlink met twice): inside when every symlink the walk followed from
 * the path segment where the loop starts lies inside the roots (a loop inside the workspace
 * stays inside, so reading it gives the clear "symlink loop" error instead of "outside the
 * workspace"), outside as soon as one of them lies elsewhere, and a long chain without a cycle
 * is outside too (a loop is never a way out).
 *
 * @module
 */
import { lstatSync, readlinkSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { mayRead } from "../_internal/deno_permissions.ts";

/** Symlinks followed per resolution before giving up (the Linux kernel's limit is 40). */
const MAX_SYMLINKS = 40;

/** Why a path could not be resolved: a symlink loop, or a path of a shape never resolved. */
export type PathResolutionCode = "symlink_loop" | "bad_path";

/**
 * Thrown when a tool path cannot be resolved at all (an unsupported `~user` form, a symlink
 * loop, an empty path). {@link checkPath} treats such a path as outside every allowed root,
 * except a symlink loop that stays inside them (see the module doc).
 */
export class PathResolutionError extends Error {
  /** Always `"PathResolutionError"`. */
  override name = "PathResolutionError";
  /**
   * Creates the error.
   *
   * @param message "Cannot resolve X: reason".
   * @param path The path as given.
   * @param code `"symlink_loop"` for too many levels of symbolic links (default `"bad_path"`).
   */
  constructor(
    message: string,
    readonly path: string,
    readonly code: PathResolutionCode = "bad_path",
  ) {
    super(message);
  }
}

/**
 * Expands a leading `~` or `~/` to the current user's home directory.
 *
 * @param input A path as a tool or a person wrote it.
 * @returns The path with `~` expanded; other paths unchanged.
 * @throws {PathResolutionError} For `~user` forms (another user's home is never looked up).
 */
export function expandHome(input: string): string {
  if (input === "~") return homedir();
  if (input.startsWith("~/") || (path.sep === "\\" && input.startsWith("~\\"))) {
    return path.join(homedir(), input.slice(2));
  }
  if (input.startsWith("~")) {
    throw new PathResolutionError(
      `Cannot resolve ${input}: only ~ and ~/ are expanded, not ~user`,
      input,
    );
  }
  return input;
}

/**
 * A URL scheme followed by `//` (`http://`, `file://`, `s3://`). Two characters at least, so a
 * Windows drive (`C://x`) is a path.
 */
const URL_WITH_AUTHORITY = /^([A-Za-z][A-Za-z0-9+.-]+):\/\//;

/**
 * The scheme of a URL-shaped tool argument (`"http"` for `http://host/x`, `"file"` for
 * `file:///x` and `file:/x`), or `undefined` for a path. A Windows drive letter (`C:\x`,
 * `C:/x`) is never a scheme. No file-system access.
 *
 * @param input A path or URL as a tool received it.
 * @returns The scheme, lower-cased, or `undefined`.
 *
 * @example
 * ```ts
 * import { urlScheme } from "@zqagent/core/permissions";
 * urlScheme("https://example.com/a.txt"); // "https"
 * urlScheme("src/a.txt"); // undefined
 * ```
 */
export function urlScheme(input: string): string | undefined {
  if (typeof input !== "string") return undefined;
  if (/^file:\//i.test(input)) return "file";
  return URL_WITH_AUTHORITY.exec(input)?.[1].toLowerCase();
}

/**
 * Turns a `file:` URL (`file:///srv/ws/a.txt`, `file:/srv/ws/a.txt`,
 * `file://localhost/srv/ws/a.txt`; percent-escapes decoded) into the absolute path it names,
 * with `node:url`'s `fileURLToPath`; anything else is returned unchanged. The built-in file
 * tools and the permission engine both convert through it, so they judge and touch the same
 * path (a model often writes paths as file URLs).
 *
 * @param input A tool's path argument.
 * @returns The path the URL names, or `input` itself when it is not a `file:` URL.
 * @throws {PathResolutionError} For a `file:` URL that names no local path (another host,
 *   an encoded `/` or NUL, a Windows URL without a drive).
 *
 * @example
 * ```ts
 * import { pathFromFileUrl } from "@zqagent/core/permissions";
 * pathFromFileUrl("file:///srv/ws/My%20Notes.md"); // "/srv/ws/My Notes.md" (POSIX)
 * pathFromFileUrl("src/a.ts"); // "src/a.ts"
 * ```
 */
export function pathFromFileUrl(input: string): string {
  if (urlScheme(input) !== "file") return input;
  let out: string;
  try {
    out = fileURLToPath(input);
  } catch (err) {
    throw new PathResolutionError(
      `Cannot resolve ${input}: it is not a file URL of this machine ` +
        `(${err instanceof Error ? err.message : String(err)})`,
      input,
    );
  }
  if (out.includes("\0")) {
    throw new PathResolutionError(`Cannot resolve ${input}: it encodes a NUL character`, input);
  }
  return out;
}

/** Splits a path into its non-empty segments, dropping `.`. */
function segmentsOf(p: string): string[] {
  return p.split(/[\\/]+/).filter((s) => s !== "" && s !== ".");
}

/**
 * State of one resolution: symlinks left to follow, and (for {@link checkPath}) where the
 * symlinks followed from the current segment of the path as given lie.
 */
interface Budget {
  links: number;
  trail?: string[];
}

/**
 * Resolves `rest` segment by segment from the real directory `start`. `top` marks the walk of
 * the path as given (not of a symlink's target): the trail restarts at each of its segments.
 */
function walk(
  start: string,
  rest: string[],
  budget: Budget,
  original: string,
  top = false,
): string {
  let cur = start;
  for (const seg of rest) {
    if (top && budget.trail) budget.trail.length = 0;
    if (seg === "..") {
      cur = path.dirname(cur);
      continue;
    }
    const next = path.join(cur, seg);
    let isLink = false;
    try {
      // Never touch a path the runtime may not read: under Deno that would prompt (DESIGN §5).
      if (!mayRead(next)) throw new Error("not readable");
      isLink = lstatSync(next).isSymbolicLink();
    } catch {
      // Missing (or unreadable) segment: kept as written; later segments may exist again only
      // through `..`, which pops back into the real part.
      cur = next;
      continue;
    }
    if (!isLink) {
      cur = next;
      continue;
    }
    budget.trail?.push(next);
    if (--budget.links < 0) {
      throw new PathResolutionError(
        `Cannot resolve ${original}: too many levels of symbolic links (a symlink loop)`,
        original,
        "symlink_loop",
      );
    }
    const target = readlinkSync(next);
    cur = path.isAbsolute(target)
      ? walk(path.parse(target).root, segmentsOf(target), budget, original)
      : walk(cur, segmentsOf(target), budget, original);
  }
  return cur;
}

/**
 * Resolves a path to the absolute real path a file operation on it will reach: a `file:` URL
 * converted ({@link pathFromFileUrl}), `~` expanded, symlinks followed (dangling ones too), `..` applied after symlinks, missing trailing segments
 * kept as written. Synchronous.
 *
 * @param base Directory a relative path is taken from (the workspace). It is itself resolved.
 * @param input Workspace-relative or absolute path, or a `file:` URL; `~` and `~/…` are
 *   expanded. Other URLs (`http://…`) are not converted: they are taken as relative paths, as
 *   a shell would take them (the file tools refuse them).
 * @returns The resolved absolute path.
 * @throws {PathResolutionError} When `input` is empty, uses `~user`, is a `file:` URL of
 *   another host, or hits a symlink loop.
 */
export function resolveWorkspacePath(base: string, input: string): string {
  return resolveTracked(base, input, undefined);
}

/** {@link resolveWorkspacePath}, recording in `trail` where the symlinks followed lie. */
function resolveTracked(base: string, input: string, trail: string[] | undefined): string {
  if (typeof input !== "string" || input === "" || input.includes("\0")) {
    throw new PathResolutionError("Cannot resolve path: it is empty or contains NUL", input);
  }
  const expanded = expandHome(pathFromFileUrl(input));
  const budget: Budget = { links: MAX_SYMLINKS, trail };
  if (path.isAbsolute(expanded)) {
    const root = path.parse(expanded).root;
    return walk(root, segmentsOf(expanded.slice(root.length)), budget, input, true);
  }
  // The base is a directory the kernel has already resolved (a process's working directory):
  // its symlinks count neither against the input's budget nor in its trail.
  const absBase = path.resolve(expandHome(base));
  const baseRoot = path.parse(absBase).root;
  const realBase = walk(
    baseRoot,
    segmentsOf(absBase.slice(baseRoot.length)),
    { links: MAX_SYMLINKS },
    base,
  );
  return walk(realBase, segmentsOf(expanded), budget, input, true);
}

/**
 * Resolves a directory (a workspace root or a granted directory) to its real absolute path,
 * following symlinks; a missing tail is kept as written.
 *
 * @param dir Absolute or cwd-relative path, or a `file:` URL; `~` is expanded.
 * @returns The resolved absolute path.
 * @throws {PathResolutionError} When `dir` is empty, uses `~user`, is a `file:` URL of another
 *   host, or hits a symlink loop.
 */
export function resolveRoot(dir: string): string {
  if (typeof dir !== "string" || dir === "") {
    throw new PathResolutionError("Cannot resolve directory: it is empty", String(dir));
  }
  const abs = path.resolve(expandHome(pathFromFileUrl(dir)));
  return resolveWorkspacePath(abs, abs);
}

/**
 * True when `target` is `root` or below it, compared by whole path segments (`/srv/ws-evil` is
 * not inside `/srv/ws`). Both must already be resolved absolute paths
 * (see {@link resolveWorkspacePath}); no filesystem access.
 *
 * @param root The containing directory.
 * @param target The path to test.
 */
export function isInside(root: string, target: string): boolean {
  const rel = path.relative(root, target);
  if (rel === "") return true;
  if (path.isAbsolute(rel)) return false;
  const first = rel.split(/[\\/]/)[0];
  return first !== "..";
}

/**
 * Resolves `input` from `base` and tells whether it lands inside any of `roots`. A path that
 * cannot be resolved counts as outside, except a symlink loop whose symlinks (those followed
 * from the segment where the loop starts) all lie inside `roots`: every operation through it
 * fails, so it reaches nothing, and it stays inside (see the module doc).
 *
 * @param base Directory a relative path is taken from (the workspace).
 * @param input The tool's path argument.
 * @param roots Resolved absolute roots (see {@link resolveRoot}).
 * @returns The resolved path (or `null` when unresolvable, a loop included) and whether it is
 *   inside.
 */
export function checkPath(
  base: string,
  input: string,
  roots: readonly string[],
): { resolved: string | null; inside: boolean } {
  const within = (p: string): boolean => roots.some((root) => isInside(root, p));
  const trail: string[] = [];
  let resolved: string;
  try {
    resolved = resolveTracked(base, input, trail);
  } catch (err) {
    // A true cycle (a symlink met twice) resolves on no system, whatever its link limit; a
    // long chain without one might on a kernel allowing more links, so it counts as outside.
    const cycle = err instanceof PathResolutionError && err.code === "symlink_loop" &&
      new Set(trail).size < trail.length;
    return { resolved: null, inside: cycle && trail.every(within) };
  }
  return { resolved, inside: within(resolved) };
}

/** Files under a git folder that change what git runs (besides anything under `hooks`). */
const GIT_CONFIG_FILES = new Set(["config", "config.worktree"]);

/** True when the absolute path's segments name a git hook, a git config file or a `.git` file. */
function protectedSegments(abs: string): boolean {
  // Lower case: `.GIT/hooks` is the same folder on case-insensitive file systems (macOS, Windows).
  const segs = abs.split(/[\\/]+/).filter((s) => s !== "").map((s) => s.toLowerCase());
  const git = segs.indexOf(".git");
  if (git < 0) return false;
  const last = segs.length - 1;
  if (git === last) return true; // a `.git` file: it names the git folder (worktrees, submodules)
  const inside = segs.slice(git + 1);
  return inside.includes("hooks") || GIT_CONFIG_FILES.has(segs[last]);
}

/**
 * True when writing `target` could change what git runs later, outside any sandbox: a path
 * inside a `hooks` folder of a `.git` folder, a `.git/config` (or `config.worktree`) file, or a
 * `.git` file itself (it points git at another git folder) — at any depth, so nested
 * repositories and submodules' `.git/modules/<name>/` folders count too. Research
 * coding-engines.md §2.6; the OS sandbox keeps the same paths read-only for shell commands
 * (`sandboxProtectedPaths`).
 * Segments compare case-insensitively. Write tools refuse these paths in every mode.
 *
 * @param target The path to test: absolute, or relative to `base`, or a `file:` URL; `~` is
 *   expanded.
 * @param base When given, `target` is resolved from it both as written (`..` collapsed) and
 *   through symlinks ({@link resolveWorkspacePath}), and either form being protected counts;
 *   without it `target` is only normalized (it should already be resolved).
 * @returns True for a protected path; false otherwise, and for a path that cannot be resolved
 *   (other checks refuse those).
 *
 * @example
 * ```ts
 * import { isProtectedPath } from "@zqagent/core/permissions";
 * isProtectedPath("/srv/ws/.git/hooks/pre-commit"); // true
 * isProtectedPath("lib/sub/.git/config", "/srv/ws"); // true
 * isProtectedPath("/srv/ws/src/hooks/use_it.ts"); // false
 * ```
 */
export function isProtectedPath(target: string, base?: string): boolean {
  if (typeof target !== "string" || target === "") return false;
  let written: string;
  try {
    written = path.resolve(
      base === undefined ? "" : expandHome(base),
      expandHome(pathFromFileUrl(target)),
    );
  } catch {
    return false;
  }
  if (protectedSegments(written)) return true;
  if (base === undefined) return false;
  try {
    return protectedSegments(resolveWorkspacePath(base, target));
  } catch {
    return false;
  }
}
