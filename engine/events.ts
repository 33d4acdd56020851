/**
 * The engine's event stream (manual §9, DESIGN §3).
 *
 * @module
 */

/** Every event the engine emits (manual §9.2, plus `subagent_event`). */
export enum EventType {
  /** A turn started: `taskId, input, attachmentCount?, attachments?`. */
  TURN_START = "turn_start",
  /** Streamed answer text: `text, reqId, taskId`. */
  ASSISTANT_DELTA = "assistant_delta",
  /** Streamed reasoning text: `text, reqId, taskId`. */
  REASONING_DELTA = "reasoning_delta",
  /** A complete model response: `text, reasoning, tool_calls (names), usage?, reqId, taskId, logTime`. */
  ASSISTANT_MESSAGE = "assistant_message",
  /** The model proposed a tool call: `reqId (= tool call id), name, arguments, taskId`. */
  TOOL_PROPOSED = "tool_proposed",
  /** A tool call needs approval: `taskId, reqId, name, arguments, reason, category`. */
  PERMISSION_REQUIRED = "permission_required",
  /** A tool call started: `taskId, reqId, name, startTime?`. */
  TOOL_STARTED = "tool_started",
  /** A tool call ended: `taskId, reqId, name, status, reason?, duration?, result_preview?`. */
  TOOL_FINISHED = "tool_finished",
  /** An iteration (model call + its tools) ended: `iteration, taskId`. */
  ITERATION_END = "iteration_end",
  /** The turn ended (always emitted): `status, iterations, produced_files, taskId`. */
  TURN_END = "turn_end",
  /** An error: `error, error_type, retriable, iteration, reqId, logTime, taskId, stack?`. */
  ERROR = "error",
  /** The turn was interrupted: `iterations, reqId, taskId`. */
  INTERRUPTED = "interrupted",
  /** Context compaction started (manual §14). */
  COMPACTING = "compacting",
  /** Context compaction finished (manual §14). */
  COMPACTED = "compacted",
  /** A queued steering message was injected: `text, taskId, attachments?`. */
  QUEUE_STEERING = "queue_steering",
  /** Before each model request: `reqId, taskId, logTime, model, msgCount, toolCount, compact?`. */
  LLM_REQUEST = "llm_request",
  /** The model asked the user (ask_user): `taskId, question, options, allowText, multi`. */
  ASK_USER_QUESTION = "ask_user_question",
  /** The model proposed a plan (propose_plan): `plan`. */
  PLAN_PROPOSED = "plan_proposed",
  /** The model asked for a directory (request_directory): `reason, path, writable`. */
  DIRECTORY_REQUESTED = "directory_requested",
  /** Automatic retry after a transient network error: `attempt, max, reason, waitMs, iteration, reqId`. */
  LLM_RETRY = "llm_retry",
  /** Reserved: hosts emit it after naming a session (`name, source`); the engine never does. */
  SESSION_NAMED = "session_named",
  /** An event of a subagent, forwarded: `agent, parentReqId, event` (DESIGN §3). */
  SUBAGENT_EVENT = "subagent_event",
}

/** One event (manual §9.1). Every `data` also carries `seq` (monotonic per engine) and `taskId`. */
export interface WsEvent {
  /** The event type. */
  type: EventType;
  /** The event's fields (see {@link EventType}). */
  data: Record<string, unknown>;
}

/**
 * What `run()`, `retry()` and `resume()` return: a web `ReadableStream` that is also async-iterable,
 * so `for await` works and hosts can `pipeThrough` it (DESIGN §3).
 *
 * Lazy (nothing runs before the first read) and pull-based (the engine waits for the reader).
 * Cancelling it (`reader.cancel()`, `break` out of `for await`) interrupts the turn.
 */
export type EventStream<T> = ReadableStream<T> & AsyncIterable<T>;

/** `turn_end.status` values (manual §9.2). */
export type TurnStatus = "completed" | "max_iterations_exceeded" | "interrupted" | "error";

/** `tool_finished.status` values (manual §9.2). */
export type ToolStatus = "ok" | "error" | "denied" | "interrupted";

/**
 * Events after which a session's state is worth a checkpoint (the durable points `FileLogHook`
 * and `StoreHook` save at): a turn starting, a model reply, a pending approval, a finished tool,
 * an iteration or turn ending, a compaction, an injected steering message (DESIGN §6).
 */
export const CHECKPOINT_EVENT_TYPES: ReadonlySet<string> = new Set<string>([
  EventType.TURN_START,
  EventType.ASSISTANT_MESSAGE,
  EventType.PERMISSION_REQUIRED,
  EventType.TOOL_FINISHED,
  EventType.ITERATION_END,
  EventType.TURN_END,
  EventType.COMPACTED,
  EventType.QUEUE_STEERING,
]);
