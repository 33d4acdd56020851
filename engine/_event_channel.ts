/**
 * A rendezvous channel between a running turn and the event stream's reader: `push` resolves
 * only when the reader has taken the value, so the turn never runs ahead of its consumer
 * (DESIGN §3, backpressure). Once the reader is gone (`detach`), pushes resolve at once.
 *
 * Performance (bench/turn_bench.ts): every streamed delta passes through here. A push that finds
 * the reader waiting hands the value over and returns `undefined` (nothing to wait for), and
 * the one waiting read and the one pending push each sit in a slot: no array work per event
 * (a `push` and a `shift` on a small array reallocate its storage).
 *
 * @module
 */
import { directStream } from "../_internal/direct_stream.ts";
import type { EventStream } from "./events.ts";

interface Pending<T> {
  value: T;
  taken: PromiseWithResolvers<void>;
}

/** See the module doc. */
export class EventChannel<T> {
  // Pushed values the reader has not taken, in order: the first in a slot, the rest after it
  // (only several pushes that do not wait for each other, e.g. tools' own events, queue up).
  #pending: Pending<T> | undefined;
  #morePending: Pending<T>[] = [];
  // Reads waiting for a value, in order: the first in a slot, the rest after it (a reader that
  // does not wait for one read before the next).
  #waiter: PromiseWithResolvers<IteratorResult<T>> | undefined;
  #moreWaiters: PromiseWithResolvers<IteratorResult<T>>[] = [];
  #closed = false;
  #detached = false;
  #error: unknown = undefined;

  /**
   * Hands a value to the reader. Returns `undefined` when the reader took it at once (it was
   * waiting) or is gone or the channel is closed; otherwise a promise that resolves when the
   * reader takes it.
   */
  push(value: T): Promise<void> | undefined {
    if (this.#closed || this.#detached) return undefined;
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = this.#moreWaiters.length > 0 ? this.#moreWaiters.shift() : undefined;
      waiter.resolve({ value, done: false });
      return undefined;
    }
    const item: Pending<T> = { value, taken: Promise.withResolvers<void>() };
    if (this.#pending === undefined) this.#pending = item;
    else this.#morePending.push(item);
    return item.taken.promise;
  }

  /**
   * The next value, or done when closed and drained; rejects with the error given to
   * {@link close} instead of done when there is one.
   */
  next(): Promise<IteratorResult<T>> {
    const item = this.#pending;
    if (item) {
      this.#pending = this.#morePending.length > 0 ? this.#morePending.shift() : undefined;
      item.taken.resolve();
      return Promise.resolve({ value: item.value, done: false });
    }
    if (this.#closed) return this.#end();
    const waiter = Promise.withResolvers<IteratorResult<T>>();
    if (this.#waiter === undefined) this.#waiter = waiter;
    else this.#moreWaiters.push(waiter);
    return waiter.promise;
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
    const waiters = this.#waiter ? [this.#waiter, ...this.#moreWaiters.splice(0)] : [];
    this.#waiter = undefined;
    for (const w of waiters) {
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
    const items = this.#pending ? [this.#pending, ...this.#morePending.splice(0)] : [];
    this.#pending = undefined;
    for (const item of items) item.taken.resolve();
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
