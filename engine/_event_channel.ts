/**
 * A rendezvous channel between a running turn and the event stream's reader: `push` resolves
 * only when the reader has taken the value, so the turn never runs ahead of its consumer
 * (DESIGN §3, backpressure). Once the reader is gone (`detach`), pushes resolve at once.
 *
 * @module
 */
import type { EventStream } from "./events.ts";

interface Pending<T> {
  value: T;
  taken: () => void;
}

/** See the module doc. */
export class EventChannel<T> {
  #queue: Pending<T>[] = [];
  #waiters: ((r: IteratorResult<T>) => void)[] = [];
  #closed = false;
  #detached = false;
  #error: unknown = undefined;

  /** Queues a value; resolves when the reader took it (at once when detached or closed). */
  push(value: T): Promise<void> {
    if (this.#closed || this.#detached) return Promise.resolve();
    const waiter = this.#waiters.shift();
    if (waiter) {
      waiter({ value, done: false });
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#queue.push({ value, taken: resolve }));
  }

  /** The next value, or done when closed and drained. */
  next(): Promise<IteratorResult<T>> {
    const item = this.#queue.shift();
    if (item) {
      item.taken();
      return Promise.resolve({ value: item.value, done: false });
    }
    if (this.#closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Ends the channel; `error`, if given, is what the reader's next read rejects with. */
  close(error?: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#error = error;
    for (const w of this.#waiters.splice(0)) w({ value: undefined, done: true });
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
  const stream = new ReadableStream<T>({
    async pull(controller) {
      if (!started) {
        started = true;
        start(channel);
      }
      const r = await channel.next();
      if (!r.done) {
        controller.enqueue(r.value);
      } else if (channel.error !== undefined) {
        controller.error(channel.error);
      } else {
        controller.close();
      }
    },
    async cancel() {
      channel.detach();
      if (started) await onCancel(channel);
    },
  }, { highWaterMark: 0 });
  return stream as EventStream<T>;
}
