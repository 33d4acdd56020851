/**
 * Runtime permission queries (DESIGN §5, "Deno permission layer"): the only place that touches
 * `Deno.permissions` and `Deno.execPath`. Under Node the same functions answer from Node's
 * permission model (`process.permission`, when the process runs with `--permission`) or say
 * "granted" (no permission model at all).
 *
 * Queries never prompt: `Deno.permissions.querySync` only reports the state, so the engine can
 * refuse a tool call that would need a grant the process lacks instead of letting Deno ask
 * (research deno-first.md §4.1).
 *
 * @module
 */
import process from "node:process";

/** A grant the process may hold (the shapes of `Deno.PermissionDescriptor` the engine uses). */
export type GrantDescriptor =
  | { name: "read" | "write"; path: string }
  | { name: "run"; command: string }
  | { name: "env"; variable?: string }
  | { name: "net"; host: string }
  | { name: "sys"; kind: string };

/** `"granted"`, `"denied"` (refused for good) or `"prompt"` (not granted; Deno would ask). */
export type GrantState = "granted" | "denied" | "prompt";

interface DenoPermissionsLike {
  permissions?: { querySync?: (desc: Record<string, unknown>) => { state: string } };
  execPath?: () => string;
}

interface NodePermissionLike {
  has?: (scope: string, reference?: string) => boolean;
}

function denoGlobal(): DenoPermissionsLike | undefined {
  return (globalThis as unknown as { Deno?: DenoPermissionsLike }).Deno;
}

/** True when the process runs under a permission model (Deno, or Node with `--permission`). */
export function hasPermissionModel(): boolean {
  if (denoGlobal()?.permissions?.querySync) return true;
  const nodePermission = (process as unknown as { permission?: NodePermissionLike }).permission;
  return typeof nodePermission?.has === "function";
}

/**
 * The state of one grant, without prompting.
 *
 * @param desc What to ask about (a path, a program name or path, a variable, a host, a sys kind).
 * @returns `"granted"` when the process holds it; under Node without `--permission` always
 *   `"granted"`.
 */
export function queryGrant(desc: GrantDescriptor): GrantState {
  const deno = denoGlobal();
  if (deno?.permissions?.querySync) {
    try {
      const state = deno.permissions.querySync(desc as unknown as Record<string, unknown>).state;
      return state === "granted" ? "granted" : state === "denied" ? "denied" : "prompt";
    } catch {
      return "prompt";
    }
  }
  const nodePermission = (process as unknown as { permission?: NodePermissionLike }).permission;
  if (typeof nodePermission?.has === "function") {
    try {
      switch (desc.name) {
        case "read":
          return nodePermission.has("fs.read", desc.path) ? "granted" : "denied";
        case "write":
          return nodePermission.has("fs.write", desc.path) ? "granted" : "denied";
        case "run":
          return nodePermission.has("child") ? "granted" : "denied";
        default:
          return "granted";
      }
    } catch {
      return "denied";
    }
  }
  return "granted";
}

/**
 * The command-line flag that grants `desc` under Deno (`--allow-read=/srv/ws`), for messages.
 *
 * @param desc The grant.
 * @returns The flag text.
 */
export function grantFlag(desc: GrantDescriptor): string {
  switch (desc.name) {
    case "read":
      return `--allow-read=${desc.path}`;
    case "write":
      return `--allow-write=${desc.path}`;
    case "run":
      return `--allow-run=${desc.command}`;
    case "env":
      return desc.variable ? `--allow-env=${desc.variable}` : "--allow-env";
    case "net":
      return `--allow-net=${desc.host}`;
    case "sys":
      return `--allow-sys=${desc.kind}`;
  }
}

/** The Deno binary running this process, or `null` under Node. */
export function denoExecPath(): string | null {
  const deno = denoGlobal();
  if (!deno?.execPath) return null;
  try {
    return deno.execPath();
  } catch {
    return null;
  }
}

/**
 * True when the process may read `file` without Deno asking (always true without a permission
 * model). Used before touching paths so that the engine never triggers a prompt.
 *
 * @param file Absolute path.
 */
export function mayRead(file: string): boolean {
  if (!modelActive || fullRead) return true;
  return queryGrant({ name: "read", path: file }) === "granted";
}

const modelActive: boolean = hasPermissionModel();
/** Read access to everything (`-A`, `--allow-read`): checked once, at load. */
const fullRead: boolean = modelActive &&
  (globalThis as unknown as { Deno?: DenoPermissionsLike }).Deno?.permissions?.querySync?.({
      name: "read",
    })
      .state === "granted";
