/**
 * The `request_directory` tool (manual §7.1, §9.2): the model asks the person for access to a
 * directory outside the workspace. A granted directory extends the permission boundary through
 * `engine.permissions.grantDirectory(path, {writable})`: read-only or writable, as granted
 * (DESIGN §5: writes outside the workspace and writable grants stay refused in every mode).
 *
 * The decision comes from the engine's own handler (`engine.setDirectoryHandler`) when it has one,
 * else from the module-level handler set with {@link setDirectoryHandler}: the same per-engine
 * override and handler context as `ask_user`. Before waiting, the tool emits
 * `directory_requested {reason, path, writable}` into the turn's event stream.
 *
 * @example Grant read-only access to anything under /srv/shared
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerDirectoryTool, setDirectoryHandler } from "@zqagent/core/tools/directories";
 * registerDirectoryTool(new ToolRegistry());
 * setDirectoryHandler(async (request) => ({
 *   granted: request.path.startsWith("/srv/shared/"),
 *   writable: false,
 * }));
 * ```
 *
 * @module
 */
import { realpath, stat } from "node:fs/promises";
import type { DirectoryHandler, ToolContext, ToolRegistry } from "./registry.ts";
import { RiskClass } from "./registry.ts";
import { boolArg, resolveToolPath, stringArg } from "./_common.ts";
import { awaitHandler, handlerContext } from "./_interaction.ts";

export type { DirectoryDecision, DirectoryHandler, DirectoryRequest } from "./registry.ts";

/** What the tool needs of a permission engine (a `PermissionEngine` fits). */
export interface DirectoryGrantTarget {
  /** The workspace root; relative paths resolve against it. */
  readonly workspaceRoot: string;
  /** Extends the boundary (manual §8.6, DESIGN §5). */
  grantDirectory(
    dir: string,
    options?: { writable?: boolean },
  ): { path: string; writable: boolean };
  /** The grants so far. */
  grantedDirectories(): { path: string; writable: boolean }[];
}

/** Options of {@link registerDirectoryTool}. */
export interface DirectoryToolOptions {
  /**
   * Where grants go when the calling engine has no `permissions` (default: the engine's
   * `permissions`, which is always there for `TurnEngine`).
   */
  permissions?: DirectoryGrantTarget;
}

let globalHandler: DirectoryHandler | null = null;

/**
 * Sets (or clears, with `null`) the process-wide directory handler used by `request_directory`
 * when the engine has none of its own (`engine.setDirectoryHandler`).
 *
 * @param handler `(request, context) => Promise<{granted, writable?, reason?} | boolean>`, or
 *   `null`.
 * @throws {TypeError} When `handler` is neither a function nor `null`.
 * @example
 * ```ts
 * import { setDirectoryHandler } from "@zqagent/core/tools/directories";
 * setDirectoryHandler(async () => false); // refuse every request
 * ```
 */
export function setDirectoryHandler(handler: DirectoryHandler | null): void {
  if (handler !== null && typeof handler !== "function") {
    throw new TypeError("Cannot set directory handler: it is not a function");
  }
  globalHandler = handler;
}

/**
 * The process-wide directory handler, or `null` when none is set.
 *
 * @returns The handler set by {@link setDirectoryHandler}.
 */
export function getDirectoryHandler(): DirectoryHandler | null {
  return globalHandler;
}

function isInsideRoot(root: string, target: string): boolean {
  return target === root || target.startsWith(root.endsWith("/") ? root : `${root}/`);
}

async function requestDirectory(
  args: Record<string, unknown>,
  ctx: ToolContext | undefined,
  options: DirectoryToolOptions,
): Promise<string> {
  const permissions = (ctx?.engine as { permissions?: DirectoryGrantTarget } | undefined)
    ?.permissions ?? options.permissions;
  if (!permissions || typeof permissions.grantDirectory !== "function") {
    throw new Error("Cannot request a directory: this engine has no permission engine to extend");
  }
  const raw = stringArg(args, "path", "request_directory").trim();
  if (raw === "") throw new Error("Cannot request a directory: path is empty");
  const reason = typeof args.reason === "string" ? args.reason.trim() : "";
  if (reason === "") throw new Error("Cannot request a directory: give a reason");
  const writable = boolArg(args, "writable", false);
  const asked = resolveToolPath(permissions.workspaceRoot, raw);
  const st = await stat(asked).catch(() => null);
  if (!st) throw new Error(`Cannot request ${raw}: no such directory`);
  if (!st.isDirectory()) throw new Error(`Cannot request ${raw}: it is a file, not a directory`);
  const target = await realpath(asked);
  if (isInsideRoot(permissions.workspaceRoot, target)) {
    return `${target} is inside the workspace already; no grant is needed.`;
  }
  const already = permissions.grantedDirectories().find((g) => isInsideRoot(g.path, target));
  if (already && (already.writable || !writable)) {
    return `${target} is already granted (${already.writable ? "read and write" : "read-only"}).`;
  }
  const handler = ctx?.directoryHandler ?? globalHandler;
  if (!handler) {
    throw new Error(
      "Cannot request a directory: no directory handler is set (call setDirectoryHandler() or " +
        "engine.setDirectoryHandler()); work inside the workspace or ask the user to add it",
    );
  }
  ctx?.emit?.("directory_requested", { reason, path: target, writable });
  const answer = await awaitHandler(
    Promise.resolve().then(() => handler({ path: target, reason, writable }, handlerContext(ctx))),
    ctx?.signal,
    "request_directory",
  );
  const decision = typeof answer === "boolean" ? { granted: answer } : answer;
  if (!decision || typeof decision !== "object" || typeof decision.granted !== "boolean") {
    throw new Error(
      "Cannot request a directory: the directory handler returned no {granted} decision",
    );
  }
  const note = typeof decision.reason === "string" && decision.reason.trim() !== ""
    ? ` Note: ${decision.reason.trim()}`
    : "";
  if (!decision.granted) {
    return `The user refused access to ${target}. Do not use it.${note}`;
  }
  const grant = permissions.grantDirectory(target, { writable: decision.writable ?? writable });
  return `Access granted to ${grant.path} (${
    grant.writable ? "read and write" : "read-only"
  }).${note}`;
}

/**
 * Registers `request_directory {path, reason, writable?}` (manual §7.1, risk class INTERACTIVE,
 * allowed in every mode). `writable` defaults to false. Errors given to the model: an empty path
 * or reason, a path that does not exist or is a file, no handler set ("Cannot request a
 * directory: no directory handler is set …"), a handler that returns no decision.
 *
 * @param registry The registry to add the tool to.
 * @param options Where grants go when the engine has no permission engine.
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerDirectoryTool } from "@zqagent/core/tools/directories";
 * registerDirectoryTool(new ToolRegistry());
 * ```
 */
export function registerDirectoryTool(
  registry: ToolRegistry,
  options: DirectoryToolOptions = {},
): void {
  registry.register(
    (args, ctx) => requestDirectory(args, ctx, options),
    {
      category: "interaction",
      riskLevel: "low",
      capabilities: ["request_directory"],
      requiresApproval: false,
      riskClass: RiskClass.INTERACTIVE,
    },
    {
      type: "function",
      function: {
        name: "request_directory",
        description: "Ask the user for access to a directory outside the workspace. Say why " +
          "you need it; ask for write access only when you must change files there. The " +
          "answer says whether access was granted, read-only or writable.",
        parameters: {
          type: "object",
          properties: {
            path: { type: "string", description: "The directory (absolute or ~/...)" },
            reason: { type: "string", description: "Why you need it" },
            writable: {
              type: "boolean",
              description: "Also write there (default false: read only)",
            },
          },
          required: ["path", "reason"],
        },
      },
    },
  );
}
