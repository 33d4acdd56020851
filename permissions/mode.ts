/**
 * Run modes and approval types (manual §8.2–8.3).
 *
 * @module
 */

/** How much the engine may do without asking (manual §8.2). */
export enum Mode {
  /** Read-only: writes and execution are refused. */
  DISCUSS = "discuss",
  /** Read-only: writes and execution are refused. */
  PLAN = "plan",
  /** Side effects need approval, one call at a time (the recommended default). */
  INTERACTIVE = "interactive",
  /** Side effects are allowed (inside the workspace); only for isolated, trusted setups. */
  AUTO = "auto",
}

/** An approver's answer (manual §8.3). */
export enum ApprovalOutcome {
  /** Allow this call only. */
  ONCE = "once",
  /** Allow this tool for the rest of the session. */
  ALWAYS_TOOL = "always_tool",
  /** Allow this command's executable for the rest of the session (run_shell only). */
  ALWAYS_COMMAND = "always_command",
  /** Refuse. */
  DENY = "deny",
}

/** The permission engine's verdict for one tool call (manual §8.1). */
export interface Decision {
  /** True when the call may run without asking. */
  allowed: boolean;
  /** Why, for people and approval cards. */
  reason: string;
  /** True when a person must decide (the approver is called). */
  needsUser: boolean;
}

/** What an approver is asked (manual §8.3). */
export interface PermissionRequest {
  /** Tool name. */
  toolName: string;
  /** Parsed tool arguments. */
  arguments: Record<string, unknown>;
  /** The tool's `ToolMetadata`, or `null` for an unknown tool. */
  metadata: unknown;
  /** The permission engine's reason. */
  reason: string;
  /** The tool call id (`reqId` in events). */
  toolCallId?: string;
}

/** Decides a {@link PermissionRequest} (manual §8.3). */
export type Approver = (request: PermissionRequest) => Promise<ApprovalOutcome>;
