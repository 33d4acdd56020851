/**
 * The one place the engine waits for a hook (a deliberate, narrow exception to "hooks are not
 * awaited", manual §11.1): before a turn runs its tools, it awaits `ready()` of every hook that
 * has one. `VcsHook` uses it so its "before the turn" snapshot is taken before any tool changes
 * a file (manual §17); hooks without `ready()` are not waited for. Errors are swallowed, like
 * every hook error.
 *
 * @module
 */
import { CompositeHook, type EngineHook } from "./hooks.ts";

/** A hook with turn-start work that must finish before tools run. */
interface ReadyHook {
  ready(): Promise<void> | void;
}

/** Resolves when every hook's `ready()` (if any) has settled; never rejects. */
export async function hookBarrier(hook: EngineHook | undefined): Promise<void> {
  if (!hook) return;
  if (hook instanceof CompositeHook) {
    await Promise.all(hook.hooks.map((h) => hookBarrier(h)));
    return;
  }
  const ready = (hook as Partial<ReadyHook>).ready;
  if (typeof ready !== "function") return;
  try {
    await ready.call(hook);
  } catch {
    // best-effort, like every hook
  }
}
