/**
 * `VcsHook`: connects a {@link SessionVcs} to the engine's lifecycle (manual §17.2):
 * `onTurnStart` → `beginTurn()`, `onTurnEnd` → `commitTurn(status)`.
 *
 * @module
 */
import type { SessionVcs, VcsCommitResult } from "./session_vcs.ts";

/** Where {@link VcsHook} reports errors: any object with an `EngineHook`-style `onError`. */
export interface VcsErrorSink {
  /** Called as `onError(message, "vcs_failed", {retriable: false, code})` (manual §11.1). */
  onError?(error: string, errorType: string, info?: Record<string, unknown>): void;
}

/** Options of {@link VcsHook}. */
export interface VcsHookOptions {
  /**
   * Called with every error of the background git work (a failed snapshot, for example).
   * Errors are also kept in `lastError`. When neither `onError` nor `reportTo` can take them,
   * they are printed with `console.warn`, so a failing snapshot is never silent.
   */
  onError?: (error: Error) => void;
  /**
   * A hook (usually the host's own `EngineHook`) whose `onError` also receives every error, as
   * `onError(message, "vcs_failed", {retriable: false, code})`.
   */
  reportTo?: VcsErrorSink;
  /** Called after each turn's snapshot (e.g. to report files skipped by the size cap). */
  onCommit?: (result: VcsCommitResult) => void;
}

/**
 * Engine hook that snapshots the workspace at every turn start and end (manual §17.2).
 * Hooks are synchronous, so the git work runs in the background on the session's promise
 * chain, in order; {@link VcsHook.flush} awaits it (a `SessionVcs` of the same session in the
 * same process queues behind it too). The engine awaits only {@link VcsHook.ready} before the
 * turn's tools run, so the "before" snapshot never includes the turn's own changes. Errors never
 * reach the engine's turn: they go to `onError`, to `reportTo.onError` and to `lastError`, and
 * are printed with `console.warn` when no callback takes them.
 *
 * It has the `EngineHook` callbacks it needs (structurally an `EngineHook`).
 *
 * A turn rejected because another one is running (`TurnInProgressError`) ends without having
 * started; the hook recognises it and does not close the running turn early.
 *
 * @example Compose with your own hook (manual §11.2, §17.2)
 * ```ts
 * import { CompositeHook, ConsoleHook } from "@zqagent/core";
 * import { resolveVcsPlan, SessionVcs, VcsHook } from "@zqagent/core/vcs";
 * const vcs = new SessionVcs(resolveVcsPlan(".", { mode: "auto" }), "session-1");
 * const hook = new CompositeHook([new ConsoleHook(), new VcsHook(vcs)]);
 * ```
 */
export class VcsHook {
  /** The session snapshotted. */
  readonly vcs: SessionVcs;
  /** The last error of the background git work, if any. */
  lastError: Error | null = null;
  readonly #options: VcsHookOptions;
  #open = false;
  #begun: Promise<void> = Promise.resolve();
  #ignoreEnds = 0;

  /**
   * Creates the hook for `vcs`.
   *
   * @param vcs The session to snapshot.
   * @param options See {@link VcsHookOptions}.
   */
  constructor(vcs: SessionVcs, options: VcsHookOptions = {}) {
    this.vcs = vcs;
    this.#options = options;
  }

  #fail(error: unknown): void {
    const e = error instanceof Error ? error : new Error(String(error));
    this.lastError = e;
    const { onError, reportTo } = this.#options;
    try {
      if (!onError && typeof reportTo?.onError !== "function") {
        console.warn(`[zqagent] vcs: ${e.message}`);
      }
      onError?.(e);
    } catch {
      // a throwing callback must not break the chain
    }
    try {
      const code = (e as { code?: unknown }).code;
      reportTo?.onError?.(e.message, "vcs_failed", { retriable: false, code });
    } catch {
      // best-effort, like every hook (manual §11.1)
    }
  }

  /** Starts a turn: queues `beginTurn()`. */
  onTurnStart(_input: string): void {
    this.#open = true;
    this.#ignoreEnds = 0;
    this.#begun = this.vcs.beginTurn().then(() => {}, (e) => this.#fail(e));
  }

  /**
   * Resolves when the current turn's "before" snapshot is taken. The engine awaits it before
   * the turn's tools run (the one hook call it waits for), so no tool can change a file before
   * that snapshot; the model request is not held up by it.
   */
  ready(): Promise<void> {
    return this.#begun;
  }

  /** Ends a turn: queues `commitTurn(status)`. */
  onTurnEnd(status: string, _iterations: number, _producedFiles: string[]): void {
    if (this.#ignoreEnds > 0) {
      this.#ignoreEnds--;
      return;
    }
    if (!this.#open) return;
    this.#open = false;
    this.vcs.commitTurn(status).then((r) => {
      try {
        this.#options.onCommit?.(r);
      } catch {
        // best-effort callback
      }
    }, (e) => this.#fail(e));
  }

  /**
   * Watches for `turn_in_progress` errors: the rejected turn's `turn_end` that follows must not
   * close the running turn.
   */
  onError(_error: string, errorType: string, _info?: Record<string, unknown>): void {
    if (errorType === "turn_in_progress" && this.#open) this.#ignoreEnds++;
  }

  /** Resolves when all queued snapshot work has finished. */
  flush(): Promise<void> {
    return this.vcs.idle();
  }
}
