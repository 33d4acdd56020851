/**
 * Small helpers of the turn loop (private to engine/): abort plumbing, ids, result text.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import { isAbortError, ProviderError } from "../providers/mod.ts";
import { RiskClass, type ToolSpec } from "../tools/mod.ts";
import { AttachmentError } from "./attachments.ts";
import { ApprovalRequiredError, EngineConfigError, TurnInProgressError } from "./errors.ts";

export { isAbortError };

/** The error that ends a turn when it is interrupted (recognised as an abort everywhere). */
export class TurnAbort extends Error {
  override name = "AbortError";
}

/** The message of an error, or the thrown value as text. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === "string" ? err : JSON.stringify(err);
}

/** A short random id with a prefix (`req_…`, `task_…`). */
export function newId(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
}

/** Waits `ms`, rejecting with {@link TurnAbort} as soon as `signal` aborts. */
export function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new TurnAbort("interrupted"));
    const onAbort = () => {
      clearTimeout(timer);
      reject(new TurnAbort("interrupted"));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Settles like `promise`, or rejects with {@link TurnAbort} as soon as `signal` aborts. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new TurnAbort("interrupted"));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new TurnAbort("interrupted"));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/** Serialises a tool's return value into the text the model reads. */
export function stringifyResult(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/** A custom tool without `riskClass` is READ only when low risk and approval-free (DESIGN §5). */
export function effectiveRisk(spec: ToolSpec): RiskClass | undefined {
  const m = spec.metadata;
  if (m.riskClass) return m.riskClass;
  return m.riskLevel === "low" && !m.requiresApproval ? RiskClass.READ : undefined;
}

/** True for the host mistakes that are thrown out of the event stream (DESIGN §3). */
export function isHostMistake(err: unknown): boolean {
  return err instanceof EngineConfigError || err instanceof ApprovalRequiredError ||
    err instanceof TurnInProgressError || err instanceof AttachmentError;
}

/** The typed error of a context that compaction could not make fit (DESIGN §6; retriable). */
export function overflowError(detail: string, cause?: unknown): ProviderError {
  return new ProviderError(
    `Cannot fit the conversation into the model's context window: ${detail}`,
    { code: "context_overflow", contextOverflow: true, retriable: true, cause },
  );
}
