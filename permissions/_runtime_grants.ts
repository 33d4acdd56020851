/**
 * The Deno permission layer's check (DESIGN §5): before a tool call runs, find a runtime grant
 * it needs that the process lacks, so the call ends as `denied` naming the flag instead of
 * failing half-way or making Deno prompt. Without a permission model (plain Node) nothing is
 * ever missing.
 *
 * @module
 */
import { realpathSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  denoExecPath,
  type GrantDescriptor,
  grantFlag,
  hasPermissionModel,
  mayRead,
  queryGrant,
} from "../_internal/deno_permissions.ts";
import { RiskClass, type ToolMetadata } from "../tools/mod.ts";
import { ISOLATED_FILE_TOOLS } from "./_file_tool_protocol.ts";
import type { SandboxStatus } from "./sandbox.ts";

/** Argument names that carry file paths (DESIGN §5). */
const PATH_KEYS = ["path", "destination", "to", "from", "source"] as const;

/** What the check needs to know about the engine. */
export interface RuntimeGrantContext {
  /** Workspace root (real path); relative paths resolve against it. */
  workspace: string;
  /** The sandbox status: which program `run_shell` starts, whether file tools run in a child. */
  sandbox: SandboxStatus;
}

/** A missing grant: the flag that would give it, and a sentence for people. */
export interface MissingGrant {
  /** The Deno flag, e.g. `--allow-read=/etc/hostname`. */
  flag: string;
  /** "read_file needs --allow-read=/etc/hostname, which this process was not started with". */
  reason: string;
}

/** True when the runtime has a permission model worth checking (Deno, Node `--permission`). */
export function runtimeChecksActive(): boolean {
  return hasPermissionModel();
}

function lexical(workspace: string, raw: string): string {
  let p = raw;
  if (p === "~" || p.startsWith("~/")) {
    try {
      p = path.join(os.homedir(), p.slice(2));
    } catch {
      // no home access: keep the path as written
    }
  }
  return path.resolve(workspace, p);
}

/** The real path of `p` or of its nearest existing parent, with the rest appended. */
function realish(p: string): string {
  let cur = p;
  const rest: string[] = [];
  for (;;) {
    try {
      if (!mayRead(cur)) throw new Error("not readable");
      const real = realpathSync(cur);
      return rest.length ? path.join(real, ...rest.reverse()) : real;
    } catch {
      const parent = path.dirname(cur);
      if (parent === cur) return p;
      rest.push(path.basename(cur));
      cur = parent;
    }
  }
}

function toolPaths(args: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const key of PATH_KEYS) {
    const v = args[key];
    if (typeof v === "string" && v !== "") out.push(v);
  }
  if (Array.isArray(args.paths)) {
    for (const v of args.paths) if (typeof v === "string" && v !== "") out.push(v);
  }
  return out;
}

/**
 * The first runtime grant a built-in tool call needs and the process lacks, or `null`.
 *
 * - File tools (category `"fs"`) and `grep`: read (and, for writes, write) on every path
 *   argument, as written and as its real path; default path: the workspace. When the file
 *   tools run in a child deno process (`sandbox.deno`), the grant to run the deno binary instead;
 *   the same for the patch tools and `media`, which also run there.
 * - `run_shell`: running the sandbox program (bwrap) or the shell, and the environment access
 *   a spawn needs under Deno (the whole environment, or `NODE_V8_COVERAGE` at least).
 *
 * @param toolName Tool name.
 * @param args Parsed arguments.
 * @param metadata The tool's metadata.
 * @param context Workspace and sandbox status.
 * @returns The missing grant, or `null` when nothing known is missing.
 */
export function missingRuntimeGrant(
  toolName: string,
  args: Record<string, unknown>,
  metadata: ToolMetadata | null,
  context: RuntimeGrantContext,
): MissingGrant | null {
  if (!metadata || !hasPermissionModel()) return null;
  const needs: GrantDescriptor[] = [];
  const isFs = metadata.category === "fs" || toolName === "grep";
  // Tools that run in the child deno process under `sandbox.deno` (grep may use ripgrep instead).
  const inChild = context.sandbox.deno && toolName !== "grep" &&
    (metadata.category === "fs" || ISOLATED_FILE_TOOLS.includes(toolName));
  if (inChild) {
    const exec = denoExecPath();
    if (exec) needs.push({ name: "run", command: exec });
  } else if (isFs) {
    const raw = toolPaths(args);
    const targets = raw.length ? raw.map((p) => lexical(context.workspace, p)) : [
      context.workspace,
    ];
    const write = metadata.riskClass === RiskClass.WRITE;
    for (const t of targets) {
      for (const p of new Set([t, realish(t)])) {
        needs.push({ name: "read", path: p });
        if (write) needs.push({ name: "write", path: p });
      }
    }
  } else if (toolName === "run_shell" || (metadata.category === "shell" && "command" in args)) {
    if (context.sandbox.enforced && context.sandbox.program) {
      needs.push({ name: "run", command: context.sandbox.program });
    } else {
      needs.push({ name: "run", command: "bash" });
    }
    if (queryGrant({ name: "env" }) !== "granted") {
      needs.push({ name: "env", variable: "NODE_V8_COVERAGE" });
    }
  }
  for (const need of needs) {
    if (queryGrant(need) !== "granted") {
      const flag = grantFlag(need);
      return {
        flag,
        reason: `${toolName} needs ${flag}, which this process was not started with ` +
          "(the engine never lets the runtime prompt for it)",
      };
    }
  }
  return null;
}
