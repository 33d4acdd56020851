/**
 * A rendezvous channel between a running turn and the event stream's reader: `push` resolves
 * only when the reader has taken the value, so the turn never runs ahead of its consumer
 * (DESIGN §3, backpressure). Once the reader is gone (`detach`), pushes resolve at once.
 *
 * @module
 */
import { directStream } from "../_internal/direct_stream.ts";
import type { EventStream } from "./events.ts";

const RESOLVED: Promise<void> = Promise.resolve();

interface Pending<T> {
  value: T;
  taken: () => void;
}

/** See the module doc. */
export class EventChannel<T> {
  #queue: Pending<T>[] = [];
  #waiters: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }[] = [];
  #closed = false;
  #detached = false;
  #error: unknown = undefined;

  /** Queues a value; resolves when the reader took it (at once when detached or closed). */
  push(value: T): Promise<void> {
    if (this.#closed || this.#detached) return Promise.resolve();
    const waiter = this.#waiters.shift();
    if (waiter) {
      waiter.resolve({ value, done: false });
      return RESOLVED;
    }
    return new Promise((resolve) => this.#queue.push({ value, taken: resolve }));
  }

  /**
   * The next value, or done when closed and drained; rejects with the error given to
   * {@link close} instead of done when there is one.
   */
  next(): Promise<IteratorResult<T>> {
    const item = this.#queue.shift();
    if (item) {
      item.taken();
      return Promise.resolve({ value: item.value, done: false });
    }
    if (this.#closed) return this.#end();
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  #end(): Promise<IteratorResult<T>> {
    return this.#error !== undefined
      ? Promise.reject(this.#error)
      : Promise.resolve({ value: undefined, done: true });
  }

  /** Ends the channel; `error`, if given, is what the reader's next read rejects with. */
  close(error?: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#error = error;
    for (const w of this.#waiters.splice(0)) {
      if (error !== undefined) w.reject(error);
      else w.resolve({ value: undefined, done: true });
    }
  }

  /** The error given to {@link close}, if any. */
  get error(): unknown {
    return this.#error;
  }

  /** The reader went away: release every pending push and accept no more. */
  detach(): void {
    this.#detached = true;
    for (const item of this.#queue.splice(0)) item.taken();
  }
}

/**
 * Wraps a producer into a lazy, pull-based {@link EventStream}.
 *
 * @param start Called on the first read; runs the producer, which pushes into the channel and
 *   closes it when done.
 * @param onCancel Called when the reader cancels; its promise is awaited by `cancel()`.
 */
export function channelStream<T>(
  start: (channel: EventChannel<T>) => void,
  onCancel: (channel: EventChannel<T>) => Promise<void>,
): EventStream<T> {
  const channel = new EventChannel<T>();
  let started = false;
  // Performance (bench/turn_bench.ts): `for await` reads the channel directly instead of going
  // through the ReadableStream machinery per event (_internal/direct_stream.ts); `getReader()`
  // and `pipeThrough` still work on the same channel.
  return directStream<T>({
    next() {
      if (!started) {
        started = true;
        start(channel);
      }
      return channel.next();
    },
    async cancel() {
      channel.detach();
      if (started) await onCancel(channel);
    },
  }) as EventStream<T>;
}
