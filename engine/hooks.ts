/**
 * Lifecycle hooks: a second, synchronous, best-effort consumer of what the engine does
 * (manual §11.1–11.2). Exceptions thrown by a hook are swallowed and never affect the turn.
 *
 * @module
 */
import type { TokenUsage, ToolCall } from "../providers/mod.ts";
import { EventType, type WsEvent } from "./events.ts";

/**
 * Callbacks the engine calls as a turn runs (manual §11.1). All are optional and synchronous;
 * the engine does not await them.
 */
export interface EngineHook {
  /** A turn started with this user input. */
  onTurnStart?(input: string): void;
  /** A turn ended. `producedFiles` are paths written by tools during the turn. */
  onTurnEnd?(status: string, iterations: number, producedFiles: string[]): void;
  /** Streamed answer text. */
  onAssistantDelta?(text: string): void;
  /** Streamed reasoning text. */
  onReasoningDelta?(text: string): void;
  /** A complete model response (usual place for billing). */
  onAssistantMessage?(text: string, toolCalls: ToolCall[], usage?: TokenUsage): void;
  /** The model proposed a tool call. */
  onToolProposed?(name: string, args: Record<string, unknown>): void;
  /** A tool started. */
  onToolStarted?(name: string): void;
  /** A tool finished with `status` (`ok`, `error`, `denied`, `interrupted`). */
  onToolFinished?(name: string, status: string, resultPreview: string): void;
  /** A tool call needs approval. */
  onPermissionRequired?(name: string, reason: string): void;
  /** An iteration ended (usual place for checkpoints). */
  onIterationEnd?(iteration: number): void;
  /** Compaction started. */
  onCompacting?(info: Record<string, unknown>): void;
  /** Compaction finished; `text` is the summary (empty when trimmed only). */
  onCompacted?(text: string, info: Record<string, unknown>): void;
  /** An error (its `info` includes `retriable`). */
  onError?(error: string, errorType: string, info?: Record<string, unknown>): void;
  /** An automatic retry after a transient network error. */
  onRetry?(attempt: number, max: number, reason: string): void;
  /** The turn was interrupted. */
  onInterrupted?(iterations: number): void;
  /** Every event that no callback above handles. */
  onEvent?(type: string, data: Record<string, unknown>): void;
}

/**
 * Calls the hook callback that matches `event`, or `onEvent` for the others; swallows exceptions.
 *
 * @param hook The hook, or undefined (nothing happens).
 * @param event The event; `data.toolCalls` (full calls) is read for `assistant_message` when present.
 */
export function dispatchHook(hook: EngineHook | undefined, event: WsEvent): void {
  if (!hook) return;
  if (hook instanceof CompositeHook) {
    for (const member of hook.hooks) dispatchHook(member, event);
    return;
  }
  try {
    callHook(hook, event);
  } catch {
    // Hooks are best-effort (manual §11.1): a throwing hook never affects the turn.
  }
}

function callHook(hook: EngineHook, event: WsEvent): void {
  const d = event.data;
  const s = (v: unknown): string => (typeof v === "string" ? v : v == null ? "" : String(v));
  switch (event.type) {
    case EventType.TURN_START:
      if (hook.onTurnStart) return hook.onTurnStart(s(d.input));
      break;
    case EventType.TURN_END:
      if (hook.onTurnEnd) {
        return hook.onTurnEnd(
          s(d.status),
          Number(d.iterations ?? 0),
          (d.produced_files as string[]) ?? [],
        );
      }
      break;
    case EventType.ASSISTANT_DELTA:
      if (hook.onAssistantDelta) return hook.onAssistantDelta(s(d.text));
      break;
    case EventType.REASONING_DELTA:
      if (hook.onReasoningDelta) return hook.onReasoningDelta(s(d.text));
      break;
    case EventType.ASSISTANT_MESSAGE:
      if (hook.onAssistantMessage) {
        return hook.onAssistantMessage(
          s(d.text),
          (d.toolCallsFull as ToolCall[]) ?? [],
          (d.usage as TokenUsage | undefined) ?? undefined,
        );
      }
      break;
    case EventType.TOOL_PROPOSED:
      if (hook.onToolProposed) {
        return hook.onToolProposed(s(d.name), (d.arguments as Record<string, unknown>) ?? {});
      }
      break;
    case EventType.TOOL_STARTED:
      if (hook.onToolStarted) return hook.onToolStarted(s(d.name));
      break;
    case EventType.TOOL_FINISHED:
      if (hook.onToolFinished) {
        return hook.onToolFinished(s(d.name), s(d.status), s(d.result_preview));
      }
      break;
    case EventType.PERMISSION_REQUIRED:
      if (hook.onPermissionRequired) return hook.onPermissionRequired(s(d.name), s(d.reason));
      break;
    case EventType.ITERATION_END:
      if (hook.onIterationEnd) return hook.onIterationEnd(Number(d.iteration ?? 0));
      break;
    case EventType.COMPACTING:
      if (hook.onCompacting) return hook.onCompacting(d);
      break;
    case EventType.COMPACTED:
      if (hook.onCompacted) return hook.onCompacted(s(d.summary ?? d.summaryPreview), d);
      break;
    case EventType.ERROR:
      if (hook.onError) return hook.onError(s(d.error), s(d.error_type), d);
      break;
    case EventType.LLM_RETRY:
      if (hook.onRetry) {
        return hook.onRetry(Number(d.attempt ?? 0), Number(d.max ?? 0), s(d.reason));
      }
      break;
    case EventType.INTERRUPTED:
      if (hook.onInterrupted) return hook.onInterrupted(Number(d.iterations ?? 0));
      break;
  }
  hook.onEvent?.(event.type, d);
}

/**
 * Calls several hooks in order (manual §11.2). A throwing hook does not stop the others.
 *
 * @example Log to the console and to files
 * ```ts
 * import { CompositeHook, type EngineHook } from "@zqagent/core/engine";
 * const audit: EngineHook = { onTurnEnd: (status) => console.log("turn", status) };
 * const hook = new CompositeHook([audit]);
 * ```
 */
export class CompositeHook implements EngineHook {
  /** The hooks, in call order. */
  readonly hooks: EngineHook[];

  /** Creates a composite of `hooks` (undefined entries are skipped). */
  constructor(hooks: (EngineHook | undefined | null)[]) {
    this.hooks = hooks.filter((h): h is EngineHook => h != null);
  }

  /** Adds a hook at the end. */
  add(hook: EngineHook): void {
    this.hooks.push(hook);
  }

  #each(fn: (h: EngineHook) => void): void {
    for (const h of this.hooks) {
      try {
        fn(h);
      } catch {
        // best-effort, like every hook
      }
    }
  }

  /** {@inheritDoc EngineHook.onTurnStart} */
  onTurnStart(input: string): void {
    this.#each((h) => h.onTurnStart?.(input));
  }
  /** {@inheritDoc EngineHook.onTurnEnd} */
  onTurnEnd(status: string, iterations: number, producedFiles: string[]): void {
    this.#each((h) => h.onTurnEnd?.(status, iterations, producedFiles));
  }
  /** {@inheritDoc EngineHook.onAssistantDelta} */
  onAssistantDelta(text: string): void {
    this.#each((h) => h.onAssistantDelta?.(text));
  }
  /** {@inheritDoc EngineHook.onReasoningDelta} */
  onReasoningDelta(text: string): void {
    this.#each((h) => h.onReasoningDelta?.(text));
  }
  /** {@inheritDoc EngineHook.onAssistantMessage} */
  onAssistantMessage(text: string, toolCalls: ToolCall[], usage?: TokenUsage): void {
    this.#each((h) => h.onAssistantMessage?.(text, toolCalls, usage));
  }
  /** {@inheritDoc EngineHook.onToolProposed} */
  onToolProposed(name: string, args: Record<string, unknown>): void {
    this.#each((h) => h.onToolProposed?.(name, args));
  }
  /** {@inheritDoc EngineHook.onToolStarted} */
  onToolStarted(name: string): void {
    this.#each((h) => h.onToolStarted?.(name));
  }
  /** {@inheritDoc EngineHook.onToolFinished} */
  onToolFinished(name: string, status: string, resultPreview: string): void {
    this.#each((h) => h.onToolFinished?.(name, status, resultPreview));
  }
  /** {@inheritDoc EngineHook.onPermissionRequired} */
  onPermissionRequired(name: string, reason: string): void {
    this.#each((h) => h.onPermissionRequired?.(name, reason));
  }
  /** {@inheritDoc EngineHook.onIterationEnd} */
  onIterationEnd(iteration: number): void {
    this.#each((h) => h.onIterationEnd?.(iteration));
  }
  /** {@inheritDoc EngineHook.onCompacting} */
  onCompacting(info: Record<string, unknown>): void {
    this.#each((h) => h.onCompacting?.(info));
  }
  /** {@inheritDoc EngineHook.onCompacted} */
  onCompacted(text: string, info: Record<string, unknown>): void {
    this.#each((h) => h.onCompacted?.(text, info));
  }
  /** {@inheritDoc EngineHook.onError} */
  onError(error: string, errorType: string, info?: Record<string, unknown>): void {
    this.#each((h) => h.onError?.(error, errorType, info));
  }
  /** {@inheritDoc EngineHook.onRetry} */
  onRetry(attempt: number, max: number, reason: string): void {
    this.#each((h) => h.onRetry?.(attempt, max, reason));
  }
  /** {@inheritDoc EngineHook.onInterrupted} */
  onInterrupted(iterations: number): void {
    this.#each((h) => h.onInterrupted?.(iterations));
  }
  /**
   * Passes an event to each member: members with `onEvent` get it directly (this is how a
   * composite forwards events its members handle only through `onEvent`).
   */
  onEvent(type: string, data: Record<string, unknown>): void {
    this.#each((h) => h.onEvent?.(type, data));
  }
}
