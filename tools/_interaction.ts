/**
 * Shared helpers of the interactive tools (`propose_plan`, `request_directory`): the handler
 * context passed to hosts, and waiting for a handler while honouring the turn's interrupt.
 *
 * @module
 */
import type { QuestionContext, ToolContext } from "./registry.ts";
import { abortError } from "./_common.ts";

/** The handler context, as `ask_user` builds it: `{engine, taskId, toolCallId, signal}`. */
export function handlerContext(ctx: ToolContext | undefined): QuestionContext {
  return {
    engine: ctx?.engine,
    taskId: ctx?.taskId,
    toolCallId: ctx?.toolCallId,
    signal: ctx?.signal,
  };
}

/** Awaits `pending`, rejecting with an AbortError as soon as `signal` aborts. */
export async function awaitHandler<T>(
  pending: Promise<T>,
  signal: AbortSignal | undefined,
  what: string,
): Promise<T> {
  if (!signal) return await pending;
  if (signal.aborted) throw abortError(what);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(abortError(what));
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([pending, aborted]);
  } finally {
    signal.removeEventListener("abort", onAbort!);
  }
}
