/**
 * Errors a host is meant to catch: host mistakes are thrown out of the event stream after its
 * `error` and `turn_end` events have been delivered (DESIGN §3, manual §21).
 *
 * @module
 */

/** The engine was assembled wrongly: no model, no API key, a bad option. */
export class EngineConfigError extends Error {
  /** Always `"EngineConfigError"`. */
  override name = "EngineConfigError";
  /**
   * Machine-readable reason: `"missing_model"`, `"missing_api_key"`, `"missing_workspace"`,
   * `"bad_option"`.
   */
  readonly code: string;
  /** Creates the error. */
  constructor(message: string, code: string) {
    super(message);
    this.code = code;
  }
}

/**
 * A tool call needed approval and no approver was set while `defaultApproval` is `"error"`
 * (manual §8.3, §21).
 */
export class ApprovalRequiredError extends Error {
  /** Always `"ApprovalRequiredError"`. */
  override name = "ApprovalRequiredError";
  /** The tool that needed approval. */
  readonly toolName: string;
  /** Creates the error. */
  constructor(toolName: string) {
    super(
      `Cannot run tool ${toolName}: it requires approval, but no approver was set on the engine ` +
        `(call engine.setApprover(), or pass defaultApproval: "deny" | "allow")`,
    );
    this.toolName = toolName;
  }
}

/** `run()`, `retry()` or `resume()` was read while another turn of the same engine was running. */
export class TurnInProgressError extends Error {
  /** Always `"TurnInProgressError"`. */
  override name = "TurnInProgressError";
  /** Creates the error. */
  constructor() {
    super(
      "Cannot start a turn: another turn of this engine is still running " +
        "(queue run() calls of one session; manual §12.6)",
    );
  }
}
