/**
 * Write-ahead before side effects (issue 11): before a tool runs, the engine awaits `flush()` of
 * every hook that has one (a `StoreHook` writes the pending events, `tool_started` included, to
 * its store). Unlike `hookBarrier`, an error propagates: a tool whose start could not be made
 * durable (a lost lease, a store that is down) does not run.
 *
 * @module
 */
import { CompositeHook, type EngineHook } from "./hooks.ts";

/** A hook that can make what it has recorded so far durable. */
interface FlushHook {
  flush(): Promise<void> | void;
}

/** Resolves when every hook's `flush()` (if any) has; rejects with the first error. */
export async function durableBarrier(hook: EngineHook | undefined): Promise<void> {
  if (!hook) return;
  if (hook instanceof CompositeHook) {
    await Promise.all(hook.hooks.map((h) => durableBarrier(h)));
    return;
  }
  const flush = (hook as Partial<FlushHook>).flush;
  if (typeof flush === "function") await flush.call(hook);
}
