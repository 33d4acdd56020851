/**
 * Reads one `openai` SDK stream (an async iterable of parsed SSE payloads) into normalised
 * {@link StreamChunk}s for `OpenAIProvider.stream`: the normaliser, the idle watchdog, the audit
 * transcript and the clean-up when the stream ends, fails or is cancelled.
 *
 * Performance (bench/turn_bench.ts, DESIGN §8): this sits between the SDK and the engine on
 * every streamed delta, so a delta costs one `then` on the SDK's own promise and one object:
 * no async function or generator per read, no array per SSE event (the normaliser appends to
 * the reader's queue), no clock read per event (the watchdog counts reads from a coarse
 * timer), and no second copy of the text unless an audit log is written.
 *
 * @module
 */
import { abortError, isAbortError, ProviderError, toProviderError } from "./errors.ts";
import type { StreamChunk, TokenUsage, ToolCall } from "./types.ts";

/** A stream normaliser (`ChatStreamNormaliser`, `ResponsesStreamNormaliser`). */
export interface ChunkNormaliser {
  /** Feeds one parsed SSE payload; passes each chunk to deliver now to `emit`, in order. */
  push(payload: unknown, emit: (chunk: StreamChunk) => void): void;
  /** Ends the stream: the last chunks, and the error when it ended without its terminal marker. */
  finish(): { chunks: StreamChunk[]; error?: ProviderError };
}

/** What a stream produced, for the audit log. */
export interface Transcript {
  /** Answer text. */
  content: string;
  /** Reasoning text. */
  reasoning: string;
  /** The final tool calls (`null` on error). */
  toolCalls: ToolCall[] | null;
  /** Token usage, when the server sent it. */
  usage: TokenUsage | null;
  /** The finish reason of the final chunk. */
  finishReason: string | null;
  /** The error the stream ended with. */
  error?: { message: string; code?: string; status?: number };
}

/** Options of {@link SdkStreamReader}. */
export interface SdkStreamOptions {
  /** The normaliser for the API that answered. */
  normaliser: ChunkNormaliser;
  /** The request's own controller: aborting it fails a pending read at once. */
  controller: AbortController;
  /** The caller's signal (`StreamOpts.signal`), to tell an interrupt from a network error. */
  signal?: AbortSignal;
  /** Idle watchdog (ms); `0` turns it off. */
  idleMs: number;
  /** Keep a {@link Transcript} for {@link SdkStreamOptions.onClose} (only when auditing). */
  transcript: boolean;
  /** Called once when the stream ends, fails or is cancelled (detach listeners, write logs). */
  onClose: (transcript: Transcript | undefined) => Promise<void>;
}

/**
 * The watchdog ticks this many times per idle period: a read that has been pending for this many
 * consecutive ticks fails the stream. So a silent server is detected after between `idleMs` and
 * `idleMs × (1 + 1/IDLE_TICKS)`, and a read costs no clock access.
 */
const IDLE_TICKS = 8;

const DONE: IteratorResult<StreamChunk> = Object.freeze({ value: undefined, done: true });

/**
 * See the module doc. An async iterator (and a `DirectSource` for `directStream`): `next()` one
 * call at a time; `return()` / `cancel()` stop it early.
 */
export class SdkStreamReader {
  #iter: AsyncIterator<unknown>;
  #norm: ChunkNormaliser;
  #controller: AbortController;
  #signal: AbortSignal | undefined;
  #idleMs: number;
  #onClose: (transcript: Transcript | undefined) => Promise<void>;
  #transcript: Transcript | undefined;

  // Chunks normalised and not yet handed out: the first in a slot (an SSE event yields at most
  // one chunk but for the last), the others in order after it. Performance: no array work per
  // delta (a push and a shift, or a reset of `length`, reallocate a small array's storage).
  #first: StreamChunk | undefined;
  #rest: StreamChunk[] = [];
  /** The SDK stream ended and the normaliser finished. */
  #ended = false;
  #endError: unknown = undefined;
  #closed: Promise<void> | undefined;

  // The watchdog: counts reads, not time (see IDLE_TICKS). Time the consumer spends not
  // reading is not idleness: the timer stops while no read is pending.
  #reads = 0;
  #waiting = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #tickRead = -1;
  #ticks = 0;
  #idleFired = false;

  #onRead = (r: IteratorResult<unknown>) => this.#read(r);
  #emit = (c: StreamChunk) => {
    if (this.#first === undefined) this.#first = c;
    else this.#rest.push(c);
  };
  #onReadError = (err: unknown) => this.#readError(err);
  #tick = () => this.#watch();

  /**
   * @param stream The SDK's stream (async-iterable payloads).
   * @param options Normaliser, controller, watchdog and clean-up.
   */
  constructor(stream: AsyncIterable<unknown>, options: SdkStreamOptions) {
    this.#iter = stream[Symbol.asyncIterator]();
    this.#norm = options.normaliser;
    this.#controller = options.controller;
    this.#signal = options.signal;
    this.#idleMs = options.idleMs;
    this.#onClose = options.onClose;
    if (options.transcript) {
      this.#transcript = {
        content: "",
        reasoning: "",
        toolCalls: null,
        usage: null,
        finishReason: null,
      };
    }
  }

  /** The next chunk; rejects with a `ProviderError` (`AbortError` name when aborted). */
  next(): Promise<IteratorResult<StreamChunk>> {
    if (this.#first !== undefined) return Promise.resolve(this.#take());
    if (this.#closed) return Promise.resolve(DONE);
    if (this.#ended) return this.#end();
    this.#reads++;
    this.#waiting = true;
    if (this.#timer === undefined && this.#idleMs > 0) {
      this.#tickRead = this.#reads;
      this.#ticks = 0;
      this.#timer = setTimeout(this.#tick, this.#idleMs / IDLE_TICKS);
    }
    return this.#iter.next().then(this.#onRead, this.#onReadError);
  }

  /** Stops early: aborts the request and cleans up. */
  async return(): Promise<IteratorResult<StreamChunk>> {
    this.#drop();
    await this.#close();
    return DONE;
  }

  /** `DirectSource.cancel`: the consumer went away. */
  cancel(): void {
    this.#controller.abort();
    this.return().catch(() => {});
  }

  #take(): IteratorResult<StreamChunk> {
    const c = this.#first!;
    this.#first = this.#rest.length > 0 ? this.#rest.shift() : undefined;
    const t = this.#transcript;
    if (t) {
      if (c.content) t.content += c.content;
      if (c.reasoning) t.reasoning += c.reasoning;
      if (c.toolCalls) t.toolCalls = c.toolCalls;
      if (c.usage) t.usage = c.usage;
      if (c.finishReason) t.finishReason = c.finishReason;
    }
    return { value: c, done: false };
  }

  #read(
    r: IteratorResult<unknown>,
  ): IteratorResult<StreamChunk> | Promise<IteratorResult<StreamChunk>> {
    this.#waiting = false;
    if (this.#closed) return DONE; // stopped (return()) while this read was pending
    try {
      if (r.done) {
        this.#ended = true;
        if (this.#idleFired) throw this.#idleError();
        if (this.#signal?.aborted) throw abortError(this.#signal.reason);
        const end = this.#norm.finish();
        for (const c of end.chunks) this.#emit(c);
        if (end.error) this.#endError = end.error;
      } else {
        this.#norm.push(r.value, this.#emit);
      }
    } catch (err) {
      return this.#fail(err);
    }
    // An SSE event without anything to deliver (a role or tool-call fragment): read on.
    return this.#first !== undefined ? this.#take() : this.next();
  }

  #readError(err: unknown): Promise<never> {
    this.#waiting = false;
    if (this.#idleFired) return this.#fail(this.#idleError());
    if (this.#signal?.aborted || isAbortError(err)) return this.#fail(abortError(err));
    return this.#fail(toProviderError(err));
  }

  async #end(): Promise<IteratorResult<StreamChunk>> {
    if (this.#endError !== undefined) return this.#fail(this.#endError);
    await this.#close();
    return DONE;
  }

  #watch(): void {
    this.#timer = undefined;
    if (!this.#waiting) return; // re-armed by the next read
    if (this.#reads !== this.#tickRead) {
      // A read that began since the last tick: its wait starts counting now.
      this.#tickRead = this.#reads;
      this.#ticks = 0;
    } else if (++this.#ticks >= IDLE_TICKS) {
      this.#idleFired = true;
      this.#controller.abort();
      return;
    }
    this.#timer = setTimeout(this.#tick, this.#idleMs / IDLE_TICKS);
  }

  #idleError(): ProviderError {
    return new ProviderError(
      `Cannot finish the model response: the stream sent nothing for ${this.#idleMs} ms (OPENAI_STREAM_IDLE_MS)`,
      { code: "stream_idle_timeout", retriable: true, network: true },
    );
  }

  #drop(): void {
    this.#first = undefined;
    this.#rest.length = 0;
    this.#ended = true;
    this.#endError = undefined;
  }

  async #fail(err: unknown): Promise<never> {
    const e = toProviderError(err);
    if (this.#transcript) {
      this.#transcript.error = { message: e.message, code: e.code, status: e.status };
      this.#transcript.toolCalls = null;
    }
    this.#drop();
    await this.#close();
    throw e;
  }

  #close(): Promise<void> {
    return this.#closed ??= (async () => {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#controller.abort();
      this.#iter.return?.().catch(() => {});
      await this.#onClose(this.#transcript);
    })();
  }
}
