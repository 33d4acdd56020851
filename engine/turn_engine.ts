/**
 * `TurnEngine`: the runtime of one session — its history, provider, tools and permissions — and
 * the turn loop (manual §5, §6.2, §6.3, §12).
 *
 * @module
 */
import fs from "node:fs";
import path from "node:path";
import type {
  ContentPart, // tool suite B
  Message,
  ProviderClient,
  StreamChunk,
  TokenUsage,
  ToolCall,
  ToolSchema,
} from "../providers/mod.ts";
import { contextWindowFor, ProviderError } from "../providers/mod.ts";
import {
  budgetToolResult,
  type DirectoryHandler, // tool suite B
  type PlanHandler, // tool suite B
  type QuestionHandler,
  RiskClass,
  type ToolAttachment, // tool suite B
  type ToolContext,
  type ToolRegistry,
  type ToolSpec,
} from "../tools/mod.ts";
import {
  ApprovalOutcome,
  type Approver,
  type Decision,
  type PermissionEngine,
} from "../permissions/mod.ts";
import { envNumber, envString } from "../_internal/env.ts";
import {
  attachmentParts,
  type MessageAttachment,
  normalizeAttachments,
  type StoredAttachment,
  stripAttachments,
} from "./attachments.ts";
import {
  capTokensOf,
  compactedHistory,
  type CompactionState,
  contextTokens,
  initialCompactionState,
  KEEP_RECENT_RATIO,
  MAX_STALLED_COMPACTIONS,
  MIN_SHRINK_RATIO,
  planSplit,
  recentStart,
  renderTranscript,
  restoreCompactionState,
  softCompact,
  SUMMARY_MAX_TOKENS,
  summaryPrompt,
  thresholds,
} from "./compaction.ts";
import { loadTokenCounter, type TextTokenCounter } from "./token_estimate.ts";
import { channelStream, type EventChannel } from "./_event_channel.ts";
import { ApprovalRequiredError, EngineConfigError, TurnInProgressError } from "./errors.ts";
import {
  type EventStream,
  EventType,
  type ToolStatus,
  type TurnStatus,
  type WsEvent,
} from "./events.ts";
import {
  delay,
  effectiveRisk,
  errorMessage,
  isAbortError,
  isHostMistake,
  newId,
  overflowError,
  raceAbort,
  stringifyResult,
  TurnAbort,
} from "./_turn_util.ts";
import { dispatchHook, type EngineHook } from "./hooks.ts";
import { hookBarrier } from "./_hook_barrier.ts";
import { durableBarrier } from "./_durable_barrier.ts"; // distributed sessions (issue 11)
import { headOf } from "../_internal/text.ts";
import { sessionNamePrompt } from "./prompts.ts";
import { // loop detection
  isToolMedia,
  type LoopAlarm,
  LoopDetectedError,
  type LoopDetectionOptions,
  LoopGuard,
  loopStoppedMessage,
  type LoopVerdict,
  repeatedCallMessage,
} from "./_loop_guard.ts";

/** Default iteration cap of a turn (manual §6.1). */
export const DEFAULT_MAX_ITERATIONS = 800;

/** Characters of a tool result shown in `tool_finished.result_preview`. */
const PREVIEW_CHARS = 200;

/** Options of {@link TurnEngine} (manual §6.2). */
export interface TurnEngineOpts {
  /** The model provider (required). */
  provider: ProviderClient;
  /** The tool table (required). */
  registry: ToolRegistry;
  /** The permission engine (required). */
  permissions: PermissionEngine;
  /** Model id; an empty string makes `run()` fail with a clear {@link EngineConfigError}. */
  model: string;
  /** System prompt, injected as the first `system` message. */
  instructions: string;
  /** Prompt used by {@link TurnEngine.generateSessionName}; default taken from `lang`. */
  genSessionNamePrompt?: string;
  /** Language of naming and summaries (default `"zh"`). */
  lang?: string;
  /** Iterations per turn (default {@link DEFAULT_MAX_ITERATIONS}, 800). */
  maxIterations?: number;
  /** On reaching `maxIterations`, make one last model call without tools (default false). */
  finalizeOnMaxIterations?: boolean;
  /** Passed to the provider. */
  reasoningEffort?: "low" | "medium" | "high";
  /** Initial history (restoring a session); a leading `system` message is added when missing. */
  messages?: Message[];
  /** Lifecycle hook (manual §11). */
  hook?: EngineHook;
  /** Context window in tokens (default: the provider's model table, else 128,000). */
  contextWindow?: number;
  /** Hard compaction threshold as a fraction of the window (default 0.8). */
  thresholdPct?: number;
  /** Soft threshold as a fraction of the hard one (default 0.75). */
  softThresholdPct?: number;
  /** Absolute cap of the hard threshold in tokens (default `null`: none). */
  capTokens?: number | null;
  /**
   * Where over-budget tool results are saved (default env `TOOL_RESULT_DIR`, else
   * `<workspace>/.agent/tool-results`).
   */
  toolResultDir?: string;
  /** Initial approver (same as calling {@link TurnEngine.setApprover}). */
  approver?: Approver;
  /** Transient network retries per model request (default env `NETWORK_RETRY_MAX`, else 2). */
  networkRetryMax?: number;
  /** Base of the exponential retry backoff in ms (default env `NETWORK_RETRY_BASE_MS`, else 800). */
  networkRetryBaseMs?: number;
  /**
   * Repeat ("doom loop") detection within a turn (default `{ maxRepeats: 3, ignoreTools:
   * ["shell_task_output", "terminal_read"] }`; `false` turns it off). When the model makes the
   * same tool call (same name, same arguments in any key order) more than `maxRepeats` times in
   * a row, or repeats a cycle of 2–3 calls that often, the call is not run: the model gets a
   * tool error `{error_type: "repeated_call"}` quoting what the call returned. Repeating it again
   * in a later reply ends the turn with `error{error_type: "loop_detected", retriable: false}`
   * then `turn_end{status: "error"}`. See {@link LoopDetectionOptions}.
   *
   * @throws {TypeError} From the constructor when `maxRepeats` is not an integer of at least 1.
   */
  loopDetection?: LoopDetectionOptions | false;
}

export type { CompactionState };
export type { LoopDetectionOptions };

/**
 * How a turn ended, recorded on the last message of the history when the turn ends (a field the
 * providers never send). It survives a checkpoint, so `retry()` and `resume()` decide the same
 * way in a fresh process as in the one that ran the turn.
 */
export interface TurnEndMark {
  /** The `turn_end` status. */
  status: TurnStatus;
  /** True when the turn ended with a retriable error (`retry()` may run). */
  retriable: boolean;
}

type TurnKind = "run" | "retry" | "resume";

interface TurnSpec {
  kind: TurnKind;
  input: string;
  taskId: string;
  extra: Record<string, unknown>;
  userMessage?: Message;
  /** A host mistake found before the turn started (bad attachments). */
  error?: Error;
}

interface SteeringItem {
  text: string;
  attachments?: MessageAttachment[];
  refs?: StoredAttachment[];
}

interface TurnScope {
  taskId: string;
  signal: AbortSignal;
  iteration: number;
  reqId: string;
  logTime: string;
  produced: Set<string>;
  /** Emits an event; a promise when the reader has not taken it yet (await it), else undefined. */
  emit: (type: EventType, data: Record<string, unknown>) => Promise<void> | undefined;
  /** `emit` of an `assistant_delta` / `reasoning_delta` of the current request. */
  delta: (type: EventType, text: string) => Promise<void> | undefined;
}

interface PreparedCall {
  call: ToolCall;
  name: string;
  args: Record<string, unknown>;
  spec?: ToolSpec;
  parseError?: string;
  decision?: Decision;
}

interface ToolOutcome {
  status: ToolStatus;
  content: string;
  reason?: string;
  duration?: number;
}

/** What one model stream delivered (see `TurnEngine.#readStream`). */
interface StreamedReply {
  /** Answer text, in pieces. */
  text: string[];
  /** Reasoning text, in pieces. */
  reasoning: string[];
  toolCalls: ToolCall[] | null;
  usage: TokenUsage | null;
  finish: string | null;
  /** True once a delta was delivered (a network error then is not retried). */
  emitted: boolean;
}

const COMPACTION_EFFORTS = ["low", "medium", "high"] as const;

/**
 * The runtime of one session (manual §5.1: one engine per session). Holds the history, runs turns
 * and streams their events.
 *
 * @example A turn against any provider
 * ```ts
 * import { ApprovalOutcome, Mode, PermissionEngine, ToolRegistry, TurnEngine } from "@zqagent/core";
 * import { ScriptedProvider } from "@zqagent/core/testing";
 *
 * const engine = new TurnEngine({
 *   provider: new ScriptedProvider([{ text: "Hello!" }]),
 *   registry: new ToolRegistry(),
 *   permissions: new PermissionEngine({ workspaceRoot: ".", mode: Mode.INTERACTIVE }),
 *   model: "scripted",
 *   instructions: "You are a helpful assistant.",
 * });
 * engine.setApprover(async () => ApprovalOutcome.DENY);
 * for await (const event of engine.run("Hi")) console.log(event.type);
 * ```
 */
export class TurnEngine {
  /** Model id used for the next request. */
  model: string;
  /** The provider. */
  readonly provider: ProviderClient;
  /** The tool table (tools can be enabled/disabled at any time). */
  readonly registry: ToolRegistry;
  /** The permission engine (`engine.permissions.mode = Mode.AUTO` switches mode). */
  readonly permissions: PermissionEngine;
  /** The lifecycle hook, if any. */
  hook: EngineHook | undefined;
  /** Language of naming and summaries. */
  lang: string;
  /** Iterations per turn. */
  maxIterations: number;
  /** One last model call without tools when `maxIterations` is reached. */
  finalizeOnMaxIterations: boolean;
  /** Reasoning effort passed to the provider. */
  reasoningEffort: "low" | "medium" | "high" | undefined;
  /** Context window in tokens, when set explicitly. */
  contextWindow: number | undefined;
  /** Hard compaction threshold (fraction of the window). */
  thresholdPct: number;
  /** Soft threshold (fraction of the hard one). */
  softThresholdPct: number;
  /** Absolute cap of the hard threshold in tokens. */
  capTokens: number | null;
  /** Where over-budget tool results are saved. */
  toolResultDir: string;
  /** Prompt for {@link TurnEngine.generateSessionName}. */
  genSessionNamePrompt: string;

  #messages: Message[];
  #approver: Approver | undefined;
  #questionHandler: QuestionHandler | undefined;
  // --- tool suite part B (issue 4) ---
  #planHandler: PlanHandler | undefined;
  #directoryHandler: DirectoryHandler | undefined;
  #toolAttachments: ToolAttachment[] = [];
  // --- end tool suite part B ---
  #seq = 0;
  #busy = false;
  #abort: AbortController | null = null;
  #steering: SteeringItem[] = [];
  #compaction: CompactionState = initialCompactionState();
  #retryMax: number;
  #retryBaseMs: number;
  // --- loop detection (engine/_loop_guard.ts) ---
  #loopGuard: LoopGuard | null;
  #loopVerdicts = new Map<string, LoopVerdict>();

  /**
   * Creates an engine (synchronous; nothing is contacted until a turn runs).
   *
   * @throws {TypeError} When `provider`, `registry` or `permissions` is missing, or
   *   `loopDetection` is invalid.
   */
  constructor(opts: TurnEngineOpts) {
    if (!opts?.provider) throw new TypeError("Cannot create TurnEngine: provider is required");
    if (!opts.registry) throw new TypeError("Cannot create TurnEngine: registry is required");
    if (!opts.permissions) {
      throw new TypeError("Cannot create TurnEngine: permissions is required");
    }
    this.provider = opts.provider;
    this.registry = opts.registry;
    this.permissions = opts.permissions;
    this.model = opts.model ?? "";
    this.hook = opts.hook;
    this.lang = opts.lang ?? "zh";
    this.maxIterations = opts.maxIterations ?? DEFAULT_MAX_ITERATIONS;
    this.finalizeOnMaxIterations = opts.finalizeOnMaxIterations ?? false;
    this.reasoningEffort = opts.reasoningEffort;
    this.contextWindow = opts.contextWindow;
    this.thresholdPct = opts.thresholdPct ?? 0.8;
    this.softThresholdPct = opts.softThresholdPct ?? 0.75;
    this.capTokens = opts.capTokens ?? null;
    this.toolResultDir = opts.toolResultDir ?? envString("TOOL_RESULT_DIR") ??
      path.join(this.permissions.workspaceRoot, ".agent", "tool-results");
    this.genSessionNamePrompt = opts.genSessionNamePrompt ?? sessionNamePrompt(this.lang);
    this.#approver = opts.approver;
    this.#retryMax = opts.networkRetryMax ?? envNumber("NETWORK_RETRY_MAX", 2);
    this.#retryBaseMs = opts.networkRetryBaseMs ?? envNumber("NETWORK_RETRY_BASE_MS", 800);
    // Loop detection (engine/_loop_guard.ts): a bad threshold throws here, before any turn.
    this.#loopGuard = opts.loopDetection === false ? null : new LoopGuard(opts.loopDetection);
    const initial = [...(opts.messages ?? [])];
    if (initial[0]?.role !== "system") {
      initial.unshift({ role: "system", content: opts.instructions ?? "" });
    }
    this.#messages = initial;
  }

  /** The whole history (the live array; the first message is the system prompt). */
  get messages(): Message[] {
    return this.#messages;
  }

  /** Compaction state (read-only observation, manual §6.3). */
  get compactionState(): Readonly<CompactionState> {
    return this.#compaction;
  }

  /**
   * Restores the compaction state of a saved session (`SavedState.compaction`), so token
   * accounting after a restart starts from the provider's last usage figures
   * (`FileLogHook.applyState` calls it).
   *
   * @param saved A saved `compactionState`; malformed fields take their initial values.
   */
  restoreCompactionState(saved: unknown): void {
    this.#compaction = restoreCompactionState(saved);
  }

  /** `data.seq` of the last event this engine emitted (0 before the first; DESIGN §3). */
  get eventSeq(): number {
    return this.#seq;
  }

  /**
   * Continues event numbering after a restored session's last event, so `data.seq` never goes
   * back across a restart (DESIGN §3: monotonic; `FileLogHook.applyState` calls it with
   * `SavedState.eventSeq`). Never moves the counter backwards.
   *
   * @param seq `data.seq` of the saved session's last event; anything but a non-negative safe
   *   integer is ignored.
   */
  restoreEventSeq(seq: unknown): void {
    if (typeof seq === "number" && Number.isSafeInteger(seq) && seq > this.#seq) this.#seq = seq;
  }

  /** Steering messages queued and not yet injected (copies of their texts, in order). */
  get queuedSteering(): string[] {
    return this.#steering.map((s) => s.text);
  }

  /** The current approver, if any. */
  get approver(): Approver | undefined {
    return this.#approver;
  }

  /** The engine's own question handler for `ask_user`, if any (overrides the global one). */
  get questionHandler(): QuestionHandler | undefined {
    return this.#questionHandler;
  }

  /** True while a turn of this engine is running. */
  get running(): boolean {
    return this.#busy;
  }

  /** Sets the approver called when a tool call needs a person (manual §8.3). */
  setApprover(fn: Approver | undefined): void {
    this.#approver = fn;
  }

  /**
   * Sets this engine's handler for `ask_user`, overriding the global `setQuestionHandler` for this
   * session only (a multi-tenant host routes questions per session this way).
   */
  setQuestionHandler(fn: QuestionHandler | undefined): void {
    this.#questionHandler = fn;
  }

  // --- tool suite part B (issue 4) ---
  /** The engine's own handler for `propose_plan`, if any (overrides the global one). */
  get planHandler(): PlanHandler | undefined {
    return this.#planHandler;
  }

  /** The engine's own handler for `request_directory`, if any (overrides the global one). */
  get directoryHandler(): DirectoryHandler | undefined {
    return this.#directoryHandler;
  }

  /**
   * Sets this engine's handler for `propose_plan`, overriding the global `setPlanHandler` for
   * this session only.
   */
  setPlanHandler(fn: PlanHandler | undefined): void {
    this.#planHandler = fn;
  }

  /**
   * Sets this engine's handler for `request_directory`, overriding the global
   * `setDirectoryHandler` for this session only. A granted directory extends
   * `engine.permissions` (read-only or writable as granted).
   */
  setDirectoryHandler(fn: DirectoryHandler | undefined): void {
    this.#directoryHandler = fn;
  }
  // --- end tool suite part B ---

  /** Replaces the system prompt (e.g. switching agent role, manual §16.2). */
  setSystemPrompt(text: string): void {
    if (this.#messages[0]?.role === "system") {
      this.#messages[0] = { ...this.#messages[0], content: text };
    } else {
      this.#messages.unshift({ role: "system", content: text });
    }
  }

  /**
   * Interrupts the running turn: aborts the model request and running tools (shell process trees
   * are killed). The stream then yields `interrupted` and `turn_end{status:"interrupted"}`.
   * Does nothing when no turn runs.
   */
  requestInterrupt(): void {
    this.#abort?.abort(new TurnAbort("interrupted"));
  }

  /**
   * Queues a message injected as a `user` message between iterations, with a `queue_steering`
   * event (manual §12.5). Messages are injected in the order queued. When the model gives its
   * final answer while a message is queued, the turn goes on so the model sees it; a message
   * still queued when a turn ends otherwise (interrupt, error, iteration limit) is delivered at
   * the start of the next turn, never lost.
   *
   * @param text The message.
   * @param attachments Optional attachments (manual §13), validated now; images go to the model
   *   with this message only.
   * @param refs Optional stored refs of those attachments (from `saveAttachments`).
   * @throws {TypeError} When `text` is empty.
   * @throws {AttachmentError} When the attachments are invalid.
   */
  queueSteering(
    text: string,
    attachments?: MessageAttachment[],
    refs?: StoredAttachment[],
  ): void {
    if (typeof text !== "string" || text.trim() === "") {
      throw new TypeError("Cannot queue steering: text must be a non-empty string");
    }
    const list = normalizeAttachments(attachments) ?? undefined;
    this.#steering.push({ text, attachments: list, refs: refs?.length ? [...refs] : undefined });
  }

  /** Withdraws a queued steering message; false when it was already injected (or never queued). */
  removeSteering(text: string): boolean {
    const i = this.#steering.findIndex((s) => s.text === text);
    if (i < 0) return false;
    this.#steering.splice(i, 1);
    return true;
  }

  /**
   * Runs one turn: the user's input, then model calls and tool calls until the model stops
   * calling tools or `maxIterations` is reached (manual §5, §9).
   *
   * @param input The user's message.
   * @param taskId Id put on every event of the turn (default: a new id).
   * @param attachments Attachments sent with this message (images as data URLs).
   * @param refs Stored attachment refs, recorded on the message and in `turn_start`.
   * @returns A lazy event stream; host mistakes (no model, no API key, no approver, a second
   *   concurrent turn) are delivered as `error` + `turn_end` and then thrown by the next read.
   */
  run(
    input: string,
    taskId?: string,
    attachments?: MessageAttachment[],
    refs?: StoredAttachment[],
  ): EventStream<WsEvent> {
    const text = typeof input === "string" ? input : String(input ?? "");
    const extra: Record<string, unknown> = {};
    let userMessage: Message = { role: "user", content: text };
    let error: Error | undefined;
    let list: MessageAttachment[] = [];
    try {
      list = normalizeAttachments(attachments) ?? [];
    } catch (err) {
      error = err as Error;
    }
    if (list.length) {
      extra.attachmentCount = list.length;
      if (refs?.length) extra.attachments = refs;
      userMessage = { role: "user", content: attachmentParts(text, list, refs) };
      if (refs?.length) userMessage.attachments = [...refs];
    }
    return this.#stream({
      kind: "run",
      input: text,
      taskId: taskId ?? newId("task"),
      extra,
      userMessage,
      error,
    });
  }

  /**
   * Retries the last turn when it ended with a retriable error (manual §9.4, §12.3): the model is
   * called again on the same history. Otherwise the stream ends at once without events. Works in
   * a fresh process too: how the turn ended is recorded in the history (see {@link TurnEndMark}).
   *
   * @param taskId Id put on every event (default: a new id).
   */
  retry(taskId?: string): EventStream<WsEvent> {
    return this.#stream({ kind: "retry", input: "", taskId: taskId ?? newId("task"), extra: {} });
  }

  /**
   * Finishes a turn that was cut short (manual §12.4), typically after a restart from a saved
   * state:
   * - tool calls left without results at the end of the history (approvals pending when the
   *   server restarted) are each evaluated again through the permission engine and, where
   *   needed, the approver; a call that already has a result never runs again; then the turn
   *   goes on;
   * - a history that ends with tool results or a user message the model has not answered (the
   *   process stopped mid-stream or between iterations) goes on with the next model call.
   *
   * Otherwise — the last turn completed, or ended by an interrupt, an error or the iteration
   * limit — the stream ends at once without events.
   *
   * @param taskId Id put on every event (default: a new id).
   */
  resume(taskId?: string): EventStream<WsEvent> {
    return this.#stream({ kind: "resume", input: "", taskId: taskId ?? newId("task"), extra: {} });
  }

  /**
   * Asks the model for a short session name from the first user message (`provider.chat` with
   * the naming prompt). Hosts emit `session_named` themselves (manual §9.2).
   *
   * @returns The name, or null when there is no user message or the model gave nothing.
   */
  async generateSessionName(): Promise<string | null> {
    const first = this.#messages.find((m) => m.role === "user");
    if (!first || !this.model) return null;
    const content = typeof first.content === "string"
      ? first.content
      : (first.content ?? []).map((p) => (p.type === "text" ? p.text : "")).join(" ");
    try {
      const out = await this.provider.chat(
        this.model,
        [
          { role: "system", content: this.genSessionNamePrompt },
          { role: "user", content: content.slice(0, 2000) },
        ],
        {},
        { reqId: newId("req"), logTime: new Date().toISOString() },
        { maxTokens: 40 },
      );
      const name = (out ?? "").replace(/<think>[\s\S]*?<\/think>/g, "").split("\n")
        .map((l) => l.trim()).find((l) => l !== "")?.replace(
          /^["'“”「」《》]+|["'“”「」《》.。]+$/g,
          "",
        )
        .slice(0, 60);
      return name || null;
    } catch {
      return null;
    }
  }

  #stream(spec: TurnSpec): EventStream<WsEvent> {
    let done: Promise<void> = Promise.resolve();
    let ac: AbortController | null = null;
    return channelStream<WsEvent>(
      (channel) => {
        ac = new AbortController();
        done = this.#turn(spec, channel, ac);
      },
      async () => {
        ac?.abort(new TurnAbort("interrupted"));
        await done;
      },
    );
  }

  async #turn(spec: TurnSpec, channel: EventChannel<WsEvent>, ac: AbortController): Promise<void> {
    const scope: TurnScope = {
      taskId: spec.taskId,
      signal: ac.signal,
      iteration: 0,
      reqId: "",
      logTime: "",
      produced: new Set(),
      // Performance (bench/turn_bench.ts): not an async function, so an event costs no extra
      // promise on top of the channel's own.
      emit: (type, data) => {
        const event: WsEvent = {
          type,
          data: { ...data, taskId: spec.taskId, seq: ++this.#seq },
        };
        dispatchHook(this.hook, event);
        return channel.push(event);
      },
      // The same for the many deltas: the event's data built in one object (same fields, same
      // order as through `emit`).
      delta: (type, text) => {
        const event: WsEvent = {
          type,
          data: { text, reqId: scope.reqId, taskId: spec.taskId, seq: ++this.#seq },
        };
        dispatchHook(this.hook, event);
        return channel.push(event);
      },
    };
    if (this.#busy) {
      const err = new TurnInProgressError();
      await this.#emitError(scope, err);
      await scope.emit(EventType.TURN_END, {
        status: "error",
        iterations: 0,
        produced_files: [],
      });
      channel.close(err);
      return;
    }
    const mark = this.#messages.at(-1)?.turnEnd as TurnEndMark | undefined;
    if (spec.kind === "retry" && !(mark?.status === "error" && mark.retriable)) {
      return channel.close();
    }
    if (spec.kind === "resume" && !this.#canResume()) return channel.close();

    this.#busy = true;
    this.#abort = ac;
    let status: TurnStatus = "completed";
    let fatal: unknown = undefined;
    let retriable = false;
    try {
      // Host mistakes found before anything changes; reported after turn_start.
      let mistake: Error | undefined = spec.error;
      if (!mistake && !this.model) {
        mistake = new EngineConfigError(
          "Cannot run a turn: no model specified (pass model or set OPENAI_MODEL); " +
            "the engine does not pick one for you",
          "missing_model",
        );
      }
      if (!mistake && !fs.existsSync(this.permissions.workspaceRoot)) {
        mistake = new EngineConfigError(
          `Cannot run a turn: the workspace ${this.permissions.workspaceRoot} does not exist`,
          "missing_workspace",
        );
      }
      if (mark) delete this.#messages.at(-1)!.turnEnd;
      if (!mistake && spec.kind === "run" && spec.userMessage) {
        // Calls a crash left pending are not run once the user moved on (no orphan calls).
        this.#closeOpenCalls("superseded");
        // Bytes of earlier turns' attachments never go to the model again (manual §13.2).
        this.#stripHistory();
        // In the history before turn_start, so a checkpoint taken on turn_start holds it.
        this.#messages.push(spec.userMessage);
      }
      await scope.emit(EventType.TURN_START, {
        input: spec.input,
        ...spec.extra,
        ...(spec.kind !== "run" ? { kind: spec.kind } : {}),
      });
      if (mistake) throw mistake;
      this.#startLoopGuard(); // loop detection: counts the turn's calls so far (retry/resume)
      if (spec.kind === "resume" && this.#pendingCalls().length > 0) {
        scope.iteration = 1;
        await this.#runTools(scope, this.#pendingCalls());
        this.#flushToolAttachments(); // tool suite B: media for the next request
        await scope.emit(EventType.ITERATION_END, { iteration: scope.iteration });
      }
      status = await this.#loop(scope);
    } catch (err) {
      if (ac.signal.aborted || isAbortError(err)) {
        status = "interrupted";
      } else {
        status = "error";
        retriable = err instanceof ProviderError && err.retriable;
        if (isHostMistake(err)) fatal = err;
        await this.#emitError(scope, err);
      }
    } finally {
      this.#closeOpenCalls(status === "interrupted" ? "interrupted" : "not_run");
      this.#flushToolAttachments(); // tool suite B: media queued before an early end
      this.#busy = false;
      this.#abort = null;
    }
    if (status !== "error") this.#stripHistory();
    const last = this.#messages.at(-1);
    if (last) last.turnEnd = { status, retriable } satisfies TurnEndMark;
    if (status === "interrupted") {
      await scope.emit(EventType.INTERRUPTED, {
        iterations: scope.iteration,
        reqId: scope.reqId,
      });
    }
    await scope.emit(EventType.TURN_END, {
      status,
      iterations: scope.iteration,
      produced_files: [...scope.produced],
    });
    channel.close(fatal);
  }

  /** Context window in tokens: the option, else the provider's model table (manual §14.1). */
  #window(): number {
    return this.contextWindow ?? contextWindowFor(this.model);
  }

  #thresholds(): ReturnType<typeof thresholds> {
    return thresholds(this.#window(), this.thresholdPct, this.softThresholdPct, this.capTokens);
  }

  async #count(tools: ToolSchema[]): Promise<{ tokens: number; estimated: boolean }> {
    const count = await loadTokenCounter();
    const r = contextTokens(this.#messages, tools, this.#compaction, count);
    this.#compaction.lastEstimatedTokens = r.tokens;
    this.#compaction.estimated = r.estimated;
    return r;
  }

  /**
   * Before a model request: the soft pass at the soft threshold, a summary at the hard one
   * (manual §14.1). Ends the turn with the typed overflow error after
   * `MAX_STALLED_COMPACTIONS` consecutive compactions that did not shrink the context.
   */
  async #maybeCompact(scope: TurnScope, tools: ToolSchema[]): Promise<void> {
    const t = this.#thresholds();
    let { tokens, estimated } = await this.#count(tools);
    if (tokens < t.soft) return;
    const elide = envString("COMPACTION_ELIDE") !== "0";
    const dedup = envString("COMPACTION_DEDUP") !== "0";
    if (elide || dedup) {
      const count = await loadTokenCounter();
      const protectFrom = recentStart(this.#messages, t.hard * KEEP_RECENT_RATIO, count);
      const soft = softCompact(this.#messages, { elide, dedup, protectFrom });
      if (soft) {
        const before = this.#messages.length;
        await scope.emit(EventType.COMPACTING, {
          trigger: "threshold",
          level: "soft",
          tokens,
          estimated,
          contextWindow: t.contextWindow,
          thresholdPct: this.thresholdPct * this.softThresholdPct,
          thresholdTokens: t.soft,
          outboundMessages: before,
        });
        this.#replaceHistory(soft.messages);
        const after = await this.#count(tools);
        this.#compaction.count++;
        this.#compaction.lastCompactedAt = new Date().toISOString();
        this.#compaction.lastMethod = "trimmed";
        await scope.emit(EventType.COMPACTED, {
          reqId: scope.reqId,
          method: "trimmed",
          level: "soft",
          messagesBefore: before,
          messagesAfter: this.#messages.length,
          elided: soft.elided,
          deduped: soft.deduped,
          tokensBefore: tokens,
          tokensAfter: after.tokens,
        });
        ({ tokens, estimated } = after);
      }
    }
    if (tokens < t.hard) {
      this.#compaction.stalled = 0;
      return;
    }
    const r = await this.#compact(scope, tools, "threshold", { tokens, estimated });
    if (r.shrank && r.after < t.hard) {
      this.#compaction.stalled = 0;
      return;
    }
    this.#compaction.stalled++;
    if (this.#compaction.stalled >= MAX_STALLED_COMPACTIONS) {
      this.#compaction.stalled = 0;
      throw overflowError(
        `${MAX_STALLED_COMPACTIONS} compactions in a row left it at or above the threshold ` +
          `(${r.after} tokens, threshold ${t.hard}, window ${t.contextWindow})`,
      );
    }
  }

  /** Replaces the live history array's content (hosts may hold the array). */
  #replaceHistory(messages: Message[]): void {
    this.#messages.splice(0, this.#messages.length, ...messages);
    this.#compaction.usageTokens = null;
    this.#compaction.usageMessageCount = null;
  }

  /**
   * A hard compaction (manual §14.1 step 2/3): a summary of the older part by the model, capped at
   * `SUMMARY_MAX_TOKENS`, or a plain trim when the model gives none; emits `compacting` and
   * `compacted`.
   *
   * @returns Tokens before and after, and whether it shrank the context by `MIN_SHRINK_RATIO`.
   */
  async #compact(
    scope: TurnScope,
    tools: ToolSchema[],
    trigger: "threshold" | "overflow",
    known?: { tokens: number; estimated: boolean },
  ): Promise<{ before: number; after: number; shrank: boolean }> {
    const t = this.#thresholds();
    const { tokens: before, estimated } = known ?? await this.#count(tools);
    const count = await loadTokenCounter();
    const messagesBefore = this.#messages.length;
    await scope.emit(EventType.COMPACTING, {
      trigger,
      level: "hard",
      tokens: before,
      estimated,
      contextWindow: t.contextWindow,
      thresholdPct: this.thresholdPct,
      thresholdTokens: t.hard,
      outboundMessages: messagesBefore,
    });
    const plan = this.#messages[0]?.role === "system" ? planSplit(this.#messages, count) : null;
    if (!plan) {
      await scope.emit(EventType.COMPACTED, {
        reqId: scope.reqId,
        method: "none",
        level: "hard",
        messagesBefore,
        messagesAfter: messagesBefore,
        tokensBefore: before,
        tokensAfter: before,
        reason: "nothing older than the current message can be summarised",
      });
      return { before, after: before, shrank: false };
    }
    const model = envString("COMPACTION_MODEL") || this.model;
    const summary = await this.#summarize(scope, plan.head, model, count);
    this.#replaceHistory(compactedHistory(this.#messages[0], plan, summary));
    const after = (await this.#count(tools)).tokens;
    const method = summary !== null ? "summarized" : "trimmed";
    const c = this.#compaction;
    c.count++;
    if (summary !== null) c.summaries++;
    c.lastCompactedAt = new Date().toISOString();
    c.lastMethod = method;
    await scope.emit(EventType.COMPACTED, {
      reqId: scope.reqId,
      method,
      level: "hard",
      messagesBefore,
      messagesAfter: this.#messages.length,
      boundaryIndex: plan.boundaryIndex,
      ...(summary !== null ? { model } : {}),
      summaryPreview: headOf(summary ?? "", PREVIEW_CHARS),
      summary: summary ?? "",
      keptUserMessages: plan.keptUsers.length,
      droppedUserMessages: plan.droppedUserMessages,
      tokensBefore: before,
      tokensAfter: after,
    });
    return { before, after, shrank: after <= before * (1 - MIN_SHRINK_RATIO) };
  }

  /** The summary of `head` by the model (`provider.chat`), or null when it gives none. */
  async #summarize(
    scope: TurnScope,
    head: Message[],
    model: string,
    count: TextTokenCounter,
  ): Promise<string | null> {
    const window = this.#window();
    const promptTokens = count(summaryPrompt(this.lang)) + 64;
    const budget = Math.max(1000, window - SUMMARY_MAX_TOKENS - promptTokens);
    // About 3 characters a token keeps the transcript inside the budget for most text.
    const transcript = renderTranscript(head, Math.floor(budget * 0.8) * 3);
    const messages: Message[] = [
      { role: "system", content: summaryPrompt(this.lang) },
      { role: "user", content: `Conversation to summarise:\n\n${transcript}` },
    ];
    const effortEnv = envString("COMPACTION_REASONING_EFFORT") ?? "low";
    const effort = (COMPACTION_EFFORTS as readonly string[]).includes(effortEnv)
      ? effortEnv as "low" | "medium" | "high"
      : "low";
    const reqId = newId("req");
    const logTime = new Date().toISOString();
    await scope.emit(EventType.LLM_REQUEST, {
      reqId,
      logTime,
      model,
      msgCount: messages.length,
      toolCount: 0,
      compact: true,
    });
    try {
      const out = await raceAbort(
        this.provider.chat(model, messages, {}, {
          reqId,
          logTime,
          signal: scope.signal,
          reasoningEffort: effort,
        }, { maxTokens: SUMMARY_MAX_TOKENS }),
        scope.signal,
      );
      const text = (out ?? "").replace(/<think>[\s\S]*?<\/think>/g, "").trim();
      if (!text) return null;
      return capTokensOf(text, SUMMARY_MAX_TOKENS, count);
    } catch (err) {
      if (scope.signal.aborted || isAbortError(err)) throw new TurnAbort("interrupted");
      return null;
    }
  }

  /** True when the history ends in a turn that was cut short (see {@link TurnEngine.resume}). */
  #canResume(): boolean {
    if (this.#pendingCalls().length > 0) return true;
    const last = this.#messages.at(-1);
    if (!last || last.turnEnd) return false;
    return last.role === "tool" || (last.role === "user" && !last.compactionSummary);
  }

  /** Replaces inline attachment bytes in the history by references, in place (manual §13.2). */
  #stripHistory(): void {
    const stripped = stripAttachments(this.#messages);
    stripped.forEach((m, i) => {
      if (m !== this.#messages[i]) this.#messages[i] = m;
    });
  }

  async #emitError(scope: TurnScope, err: unknown): Promise<void> {
    const pe = err instanceof ProviderError ? err : undefined;
    let type = "engine_error";
    if (err instanceof EngineConfigError) type = "config_error";
    else if (err instanceof ApprovalRequiredError) type = "approval_required";
    else if (err instanceof TurnInProgressError) type = "turn_in_progress";
    else if (err instanceof LoopDetectedError) type = "loop_detected";
    else if (pe) type = pe.contextOverflow ? "context_overflow" : pe.code ?? "provider_error";
    await scope.emit(EventType.ERROR, {
      error: errorMessage(err),
      error_type: type,
      retriable: pe?.retriable ?? false,
      iteration: scope.iteration,
      reqId: scope.reqId,
      logTime: scope.logTime,
      ...(pe?.status !== undefined ? { status: pe.status } : {}),
      ...(err instanceof LoopDetectedError ? { toolName: err.toolName, repeats: err.repeats } : {}),
      ...(err instanceof Error && !pe && !isHostMistake(err) && !(err instanceof LoopDetectedError)
        ? { stack: err.stack }
        : {}),
    });
  }

  async #loop(scope: TurnScope): Promise<TurnStatus> {
    while (true) {
      if (scope.signal.aborted) throw new TurnAbort("interrupted");
      if (scope.iteration >= this.maxIterations) {
        if (this.finalizeOnMaxIterations) {
          scope.iteration++;
          await this.#callModel(scope, [], true);
          await scope.emit(EventType.ITERATION_END, { iteration: scope.iteration });
        }
        return "max_iterations_exceeded";
      }
      scope.iteration++;
      await this.#injectSteering(scope);
      const calls = await this.#callModel(scope, this.registry.schemas(), false);
      if (calls.length > 0) await this.#runTools(scope, calls);
      this.#flushToolAttachments(); // tool suite B: media for the next request
      await scope.emit(EventType.ITERATION_END, { iteration: scope.iteration });
      // A steering message queued while the model answered: the turn goes on (manual §12.5).
      if (calls.length === 0 && this.#steering.length === 0) return "completed";
    }
  }

  async #injectSteering(scope: TurnScope): Promise<void> {
    while (this.#steering.length > 0) {
      const item = this.#steering.shift()!;
      const msg: Message = {
        role: "user",
        content: item.attachments?.length
          ? attachmentParts(item.text, item.attachments, item.refs)
          : item.text,
      };
      if (item.refs?.length) msg.attachments = item.refs;
      this.#messages.push(msg);
      this.#loopGuard?.reset(); // loop detection: the user spoke, a new count starts
      await scope.emit(EventType.QUEUE_STEERING, {
        text: item.text,
        ...(item.refs?.length ? { attachments: item.refs } : {}),
      });
    }
  }

  /**
   * One model request: compaction first when the context is over a threshold (manual §14), then
   * the request with transient-network retries; on a context-overflow error from the provider,
   * one forced compaction and one more request (manual §9.4). Appends the assistant message.
   */
  async #callModel(scope: TurnScope, tools: ToolSchema[], finalize: boolean): Promise<ToolCall[]> {
    await this.#maybeCompact(scope, tools);
    for (let overflowRetry = false;; overflowRetry = true) {
      try {
        return await this.#request(scope, tools, finalize);
      } catch (err) {
        const pe = err instanceof ProviderError ? err : undefined;
        if (!pe?.contextOverflow || scope.signal.aborted || pe.code === "context_overflow") {
          throw err;
        }
        if (overflowRetry) {
          throw overflowError(
            "the model still reported an overflow after the context was compacted",
            err,
          );
        }
        const r = await this.#compact(scope, tools, "overflow");
        if (!r.shrank) {
          throw overflowError(
            `compaction could not shrink it (${r.before} → ${r.after} tokens, window ${this.#window()})`,
            err,
          );
        }
      }
    }
  }

  /** One model request with transient-network retries; appends the assistant message. */
  async #request(scope: TurnScope, tools: ToolSchema[], finalize: boolean): Promise<ToolCall[]> {
    scope.reqId = newId("req");
    scope.logTime = new Date().toISOString();
    const { reqId, logTime, signal } = scope;
    const messages = finalize
      ? [...this.#messages, {
        role: "user" as const,
        content:
          "The iteration limit of this turn has been reached. Do not call tools; give your " +
          "final answer now from what you have.",
      }]
      : this.#messages;
    await scope.emit(EventType.LLM_REQUEST, {
      reqId,
      logTime,
      model: this.model,
      msgCount: messages.length,
      toolCount: tools.length,
    });
    for (let attempt = 0;; attempt++) {
      const reply: StreamedReply = {
        text: [],
        reasoning: [],
        toolCalls: null,
        usage: null,
        finish: null,
        emitted: false,
      };
      try {
        const stream = await this.provider.stream(this.model, messages, tools, {
          reqId,
          logTime,
          signal,
          ...(this.reasoningEffort ? { reasoningEffort: this.reasoningEffort } : {}),
        });
        await this.#readStream(scope, stream, reply);
        if (signal.aborted) throw new TurnAbort("interrupted");
        if (!reply.finish && !reply.toolCalls) {
          throw new ProviderError(
            "Cannot read the model's response: the stream ended without a finish reason",
            { code: "stream_incomplete", retriable: true, network: true },
          );
        }
      } catch (err) {
        if (signal.aborted || isAbortError(err)) {
          const text = reply.text.join("");
          if (text) this.#messages.push({ role: "assistant", content: text });
          throw new TurnAbort("interrupted");
        }
        if (err instanceof ProviderError && err.code === "missing_api_key") {
          throw new EngineConfigError(err.message, "missing_api_key");
        }
        const pe = err instanceof ProviderError ? err : undefined;
        if (pe?.network && !reply.emitted && attempt < this.#retryMax) {
          const waitMs = this.#retryBaseMs * 2 ** attempt;
          await scope.emit(EventType.LLM_RETRY, {
            attempt: attempt + 1,
            max: this.#retryMax,
            reason: pe.message,
            waitMs,
            iteration: scope.iteration,
            reqId,
          });
          await delay(waitMs, signal);
          continue;
        }
        throw err;
      }
      const text = reply.text.join("");
      const reasoning = reply.reasoning.join("");
      const { usage, finish } = reply;
      const toolCalls = finalize ? null : reply.toolCalls;
      // Ids must be unique within a reply: each result is matched to its call by id.
      const usedIds = new Set<string>();
      const calls = (toolCalls ?? []).map((c) => {
        let id = c.id || newId("call");
        if (usedIds.has(id)) id = `${id}_${usedIds.size + 1}`;
        usedIds.add(id);
        return {
          id,
          type: "function" as const,
          function: { name: c.function.name, arguments: c.function.arguments || "{}" },
        };
      });
      const message: Message = { role: "assistant", content: text === "" ? null : text };
      if (calls.length) message.tool_calls = calls;
      if (reasoning) message.reasoning_content = reasoning;
      this.#messages.push(message);
      if (usage) {
        const c = this.#compaction;
        c.lastInputTokens = usage.inputTokens;
        if (!finalize) {
          c.usageTokens = usage.inputTokens + usage.outputTokens - (usage.reasoningTokens ?? 0);
          c.usageMessageCount = this.#messages.length;
        }
      }
      await scope.emit(EventType.ASSISTANT_MESSAGE, {
        text,
        reasoning,
        tool_calls: calls.map((c) => c.function.name),
        ...(usage ? { usage } : {}),
        finish_reason: calls.length ? "tool_calls" : finish,
        reqId,
        logTime,
        toolCallsFull: calls,
      });
      return calls;
    }
  }

  /**
   * Reads one model stream to its end, delivering each delta as it comes (DESIGN §3: one event
   * per streamed delta, taken by the reader before the next chunk is asked for). Performance
   * (bench/turn_bench.ts): a small async function of its own, so the wait per delta saves and
   * restores few registers, and no wait at all when the reader was already waiting; the text is
   * kept in pieces joined once (a string grown by `+=` per delta is a chain of small objects
   * that every young-generation GC of a long turn copies again).
   */
  async #readStream(
    scope: TurnScope,
    stream: AsyncIterable<StreamChunk>,
    reply: StreamedReply,
  ): Promise<void> {
    const signal = scope.signal;
    for await (const chunk of stream) {
      if (signal.aborted) return;
      if (chunk.reasoning) {
        reply.reasoning.push(chunk.reasoning);
        reply.emitted = true;
        const taken = scope.delta(EventType.REASONING_DELTA, chunk.reasoning);
        if (taken) await taken;
      }
      if (chunk.content) {
        reply.text.push(chunk.content);
        reply.emitted = true;
        const taken = scope.delta(EventType.ASSISTANT_DELTA, chunk.content);
        if (taken) await taken;
      }
      if (chunk.toolCalls?.length) reply.toolCalls = chunk.toolCalls;
      if (chunk.usage) reply.usage = chunk.usage;
      if (chunk.finishReason) reply.finish = chunk.finishReason;
    }
  }

  // --- tool suite part B (issue 4) ---
  /**
   * Appends media queued by tools (the `media` tool) as one `user` message after the tool
   * results, so the next request shows them to the model. The message carries `attachments`
   * refs (`{name, mimeType, size, path}`) so later requests can strip the bytes.
   */
  #flushToolAttachments(): void {
    const queued = this.#toolAttachments.splice(0);
    if (queued.length === 0) return;
    const list = queued.map((a) => `${a.name} (${a.mimeType}, ${a.size} bytes, from ${a.path})`);
    this.#messages.push({
      role: "user",
      content: [
        { type: "text", text: `[media] Attached by the media tool: ${list.join("; ")}` },
        ...queued.map((a) => a.part as unknown as ContentPart),
      ],
      attachments: queued.map((a) => ({
        name: a.name,
        mimeType: a.mimeType,
        size: a.size,
        path: a.path,
      })),
    });
  }
  // --- end tool suite part B ---

  /** Tool calls of the last assistant message that have no result yet. */
  #pendingCalls(): ToolCall[] {
    for (let i = this.#messages.length - 1; i >= 0; i--) {
      const m = this.#messages[i];
      if (m.role === "assistant") {
        const answered = new Set(
          this.#messages.slice(i + 1).filter((x) => x.role === "tool").map((x) => x.tool_call_id),
        );
        return (m.tool_calls ?? []).filter((c) => !answered.has(c.id));
      }
      if (m.role !== "tool") return [];
    }
    return [];
  }

  /** Gives every unanswered call of the last assistant message a result: no orphans. */
  #closeOpenCalls(why: "interrupted" | "not_run" | "superseded"): void {
    for (const call of this.#pendingCalls()) {
      this.#messages.push({
        role: "tool",
        tool_call_id: call.id,
        name: call.function.name,
        content: JSON.stringify({
          error: why === "interrupted"
            ? "The tool call was interrupted by the user before it finished."
            : why === "superseded"
            ? "The tool call was not run: the session stopped before it ran, and the user has " +
              "sent a new message since."
            : "The tool call was not run because the turn ended with an error.",
          error_type: why,
        }),
      });
    }
  }

  async #runTools(scope: TurnScope, calls: ToolCall[]): Promise<void> {
    // Hooks' turn-start work that must precede tools (VcsHook's snapshot; _hook_barrier.ts).
    await raceAbort(hookBarrier(this.hook), scope.signal);
    this.#checkLoops(calls); // loop detection: one verdict per call, in call order
    const prepared: PreparedCall[] = calls.map((call) => {
      const name = call.function.name;
      let args: Record<string, unknown> = {};
      let parseError: string | undefined;
      try {
        const parsed = JSON.parse(call.function.arguments || "{}");
        if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) args = parsed;
        else parseError = "the arguments are not a JSON object";
      } catch (e) {
        parseError = `the arguments are not valid JSON (${errorMessage(e)})`;
      }
      return { call, name, args, parseError, spec: this.registry.get(name) };
    });
    for (const p of prepared) {
      await scope.emit(EventType.TOOL_PROPOSED, {
        reqId: p.call.id,
        name: p.name,
        arguments: p.args,
      });
    }
    for (const p of prepared) {
      if (!p.parseError && p.spec) {
        p.decision = this.permissions.evaluate(p.name, p.args, p.spec.metadata);
      }
    }
    // Consecutive low-risk calls run together; every other call runs alone, in call order.
    let i = 0;
    while (i < prepared.length) {
      if (scope.signal.aborted) throw new TurnAbort("interrupted");
      const batch: PreparedCall[] = [prepared[i]];
      if (this.#isConcurrent(prepared[i])) {
        while (
          i + batch.length < prepared.length && this.#isConcurrent(prepared[i + batch.length])
        ) {
          batch.push(prepared[i + batch.length]);
        }
      }
      i += batch.length;
      // allSettled: every call of the batch has recorded its result before an error moves on.
      const settled = await Promise.allSettled(batch.map((p) => this.#runOne(scope, p)));
      const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed) throw failed.reason;
    }
    if (scope.signal.aborted) throw new TurnAbort("interrupted");
  }

  #isConcurrent(p: PreparedCall): boolean {
    return !!p.spec && !!p.decision?.allowed && !p.decision.needsUser &&
      effectiveRisk(p.spec) === RiskClass.READ && !p.spec.metadata.requiresApproval;
  }

  async #runOne(scope: TurnScope, p: PreparedCall): Promise<void> {
    const reqId = p.call.id;
    let outcome: ToolOutcome;
    const loop = this.#takeLoopVerdict(reqId); // loop detection: a repeat is not run
    if (loop) {
      outcome = this.#loopOutcome(loop);
    } else if (p.parseError) {
      outcome = this.#errorOutcome(`Cannot run ${p.name}: ${p.parseError}`, "invalid_arguments");
    } else if (!p.spec) {
      outcome = this.#errorOutcome(
        `Cannot run ${p.name}: no tool of that name is available`,
        "unknown_tool",
      );
    } else {
      // Decide again right before running: an earlier call of the same reply may have changed
      // the world (a symlink made by run_shell) or the session allowlists ("always this tool").
      const decision = this.permissions.evaluate(p.name, p.args, p.spec.metadata);
      p.decision = decision;
      let allowed = decision.allowed && !decision.needsUser;
      let denyReason = decision.reason;
      if (decision.needsUser) {
        await scope.emit(EventType.PERMISSION_REQUIRED, {
          reqId,
          name: p.name,
          arguments: p.args,
          reason: decision.reason,
          category: p.spec.metadata.category,
        });
        const verdict = await this.#ask(scope, p, decision);
        allowed = verdict.allowed;
        denyReason = verdict.reason;
      }
      if (!allowed) {
        outcome = {
          status: "denied",
          reason: denyReason,
          content: JSON.stringify({
            error: `Permission denied: ${denyReason}`,
            error_type: "permission_denied",
          }),
        };
      } else {
        outcome = await this.#execute(scope, p);
      }
    }
    this.#messages.push({
      role: "tool",
      tool_call_id: reqId,
      name: p.name,
      content: outcome.content,
    });
    if (!loop) this.#loopGuard?.recordResult(p.call, outcome.content); // loop detection
    await scope.emit(EventType.TOOL_FINISHED, {
      reqId,
      name: p.name,
      status: outcome.status,
      ...(outcome.reason ? { reason: outcome.reason } : {}),
      ...(outcome.duration !== undefined ? { duration: outcome.duration } : {}),
      result_preview: headOf(outcome.content, PREVIEW_CHARS),
      idemKey: `tool_result:${reqId}`, // issue 11: results carry an idempotency key
    });
    if (loop?.action === "stop") {
      throw new LoopDetectedError(loop, this.#loopGuard?.options.maxRepeats ?? 0);
    }
  }

  // --- loop detection (engine/_loop_guard.ts) ---
  /**
   * Starts the turn's repeat count. When `retry()` or `resume()` goes on with a turn, the calls
   * and results already in it (after its last user message) are counted again, so a loop cut
   * short by an error or a restart is still recognised; the verdicts of calls still without a
   * result are kept for when they run.
   */
  #startLoopGuard(): void {
    this.#loopVerdicts.clear();
    const guard = this.#loopGuard;
    if (!guard) return;
    guard.reset();
    const msgs = this.#messages;
    let start = msgs.length;
    while (start > 0 && (msgs[start - 1].role !== "user" || isToolMedia(msgs[start - 1]))) start--;
    const turn = msgs.slice(start);
    const answered = new Set(turn.filter((m) => m.role === "tool").map((m) => m.tool_call_id));
    const calls = new Map<string, ToolCall>();
    for (const m of turn) {
      if (m.role === "assistant" && m.tool_calls?.length) {
        const list = m.tool_calls;
        guard.checkReply(list).forEach((v, i) => {
          if (!answered.has(list[i].id)) this.#loopVerdicts.set(list[i].id, v);
        });
        for (const c of list) calls.set(c.id, c);
      } else if (m.role === "tool" && typeof m.content === "string") {
        const call = calls.get(m.tool_call_id ?? "");
        // A warning is not what the call returned: the next warning quotes the real result.
        if (call && !/"error_type":"(repeated_call|loop_detected)"/.test(m.content)) {
          guard.recordResult(call, m.content);
        }
      }
    }
  }

  /** Checks the calls of one reply that have no verdict yet (resume seeds some). */
  #checkLoops(calls: ToolCall[]): void {
    if (!this.#loopGuard) return;
    const fresh = calls.filter((c) => !this.#loopVerdicts.has(c.id));
    if (fresh.length === 0) return;
    this.#loopGuard.checkReply(fresh).forEach((v, i) => this.#loopVerdicts.set(fresh[i].id, v));
  }

  /** The verdict of a call, when it must not run (`"warn"` or `"stop"`); forgets it. */
  #takeLoopVerdict(id: string): LoopAlarm | null {
    const v = this.#loopVerdicts.get(id);
    this.#loopVerdicts.delete(id);
    return v && v.action !== "run" ? v : null;
  }

  /** The result of a call that repeats a loop: `repeated_call`, or `loop_detected` on a stop. */
  #loopOutcome(v: LoopAlarm): ToolOutcome {
    const stop = v.action === "stop";
    return {
      status: "error",
      reason: stop
        ? "not run: repeated after a warning, the turn was stopped (loop detection)"
        : `not run: already made ${v.repeats} times in a row (loop detection)`,
      content: JSON.stringify({
        error: stop ? loopStoppedMessage(v) : repeatedCallMessage(v),
        error_type: stop ? "loop_detected" : "repeated_call",
      }),
    };
  }
  // --- end loop detection ---

  #errorOutcome(message: string, type: string): ToolOutcome {
    return {
      status: "error",
      reason: message,
      content: JSON.stringify({ error: message, error_type: type }),
    };
  }

  async #ask(
    scope: TurnScope,
    p: PreparedCall,
    decision: Decision,
  ): Promise<{ allowed: boolean; reason: string }> {
    const approver = this.#approver;
    if (!approver) throw new ApprovalRequiredError(p.name);
    // Called synchronously (a throw still rejects this async function): a host that answers as
    // soon as it reads `permission_required` finds its approver already called, now that events
    // reach the reader without the ReadableStream's extra promise turns (bench/turn_bench.ts).
    const outcome = await raceAbort(
      Promise.resolve(approver({
        toolName: p.name,
        arguments: p.args,
        metadata: p.spec?.metadata ?? null,
        reason: decision.reason,
        toolCallId: p.call.id,
      })),
      scope.signal,
    );
    switch (outcome) {
      case ApprovalOutcome.ONCE:
        return { allowed: true, reason: "approved once" };
      case ApprovalOutcome.ALWAYS_TOOL:
        this.permissions.allowToolForSession(p.name);
        return { allowed: true, reason: "approved for this session" };
      case ApprovalOutcome.ALWAYS_COMMAND:
        if (typeof p.args.command === "string") {
          this.permissions.allowCommandForSession(p.args.command);
        } else {
          this.permissions.allowToolForSession(p.name);
        }
        return { allowed: true, reason: "approved for this session" };
      case ApprovalOutcome.DENY:
        return { allowed: false, reason: "denied by the user" };
      default:
        return { allowed: false, reason: `the approver returned ${JSON.stringify(outcome)}` };
    }
  }

  async #execute(scope: TurnScope, p: PreparedCall): Promise<ToolOutcome> {
    const spec = p.spec!;
    const started = Date.now();
    // --- distributed sessions (issue 11): idempotency, write-ahead before the tool runs ---
    const idempotent = spec.metadata.idempotent ?? effectiveRisk(spec) === RiskClass.READ;
    const idemKey = `tool_result:${p.call.id}`;
    await scope.emit(EventType.TOOL_STARTED, {
      reqId: p.call.id,
      name: p.name,
      startTime: new Date(started).toISOString(),
      idempotent,
    });
    try {
      await raceAbort(durableBarrier(this.hook), scope.signal);
    } catch (err) {
      if (scope.signal.aborted || isAbortError(err)) throw new TurnAbort("interrupted");
      return this.#errorOutcome(
        `Cannot run ${p.name}: its start could not be recorded durably (${errorMessage(err)})`,
        "not_durable",
      );
    }
    // --- end distributed sessions ---
    const ctx: ToolContext = {
      signal: scope.signal,
      taskId: scope.taskId,
      toolCallId: p.call.id,
      idempotencyKey: idemKey, // issue 11
      engine: this,
      emit: (type, data) => {
        void scope.emit(type as EventType, data);
      },
      questionHandler: this.#questionHandler,
      // --- tool suite part B (issue 4) ---
      planHandler: this.#planHandler,
      directoryHandler: this.#directoryHandler,
      attachments: this.#toolAttachments,
      // --- end tool suite part B ---
    };
    let value: unknown;
    try {
      value = await raceAbort(Promise.resolve().then(() => spec.func(p.args, ctx)), scope.signal);
    } catch (err) {
      const duration = Date.now() - started;
      if (scope.signal.aborted || isAbortError(err)) {
        return {
          status: "interrupted",
          duration,
          content: JSON.stringify({ error: "interrupted by the user", error_type: "interrupted" }),
        };
      }
      const type = err instanceof Error && err.name !== "Error" ? err.name : "tool_error";
      return { ...this.#errorOutcome(errorMessage(err), type), duration };
    }
    const duration = Date.now() - started;
    const isError = !!value && typeof value === "object" && "error" in value &&
      (value as { error: unknown }).error != null;
    if (!isError && effectiveRisk(spec) === RiskClass.WRITE) {
      for (const key of ["path", "destination"]) {
        const v = p.args[key];
        if (typeof v === "string" && v) scope.produced.add(v);
      }
    }
    let content = stringifyResult(value);
    try {
      content = budgetToolResult(content, {
        dir: this.toolResultDir,
        toolCallId: p.call.id,
        toolName: p.name,
      }).text;
    } catch (err) {
      content = content.slice(0, 20_000) +
        `\n[result cut: it could not be saved (${errorMessage(err)})]`;
    }
    if (isError) {
      return {
        status: "error",
        duration,
        reason: stringifyResult((value as { error: unknown }).error),
        content,
      };
    }
    return { status: "ok", duration, content };
  }
}
