/**
 * A pull-based `ReadableStream` (`highWaterMark: 0`) whose `for await` reads its source
 * directly.
 *
 * Why: iterating a `ReadableStream` costs a reader request, a pull, an enqueue and several
 * promises per value; on a stream of 20,000 text deltas that is most of what the engine adds over
 * the raw SDK (bench/turn_bench.ts, issue 9). The returned object is still a real
 * `ReadableStream` (`getReader`, `pipeThrough`, `pipeTo` use the ordinary path over the same
 * source); only its own `[Symbol.asyncIterator]` skips the stream machinery. The semantics stay
 * those of the built-in iterator — leaving the loop early (`break`, `return`, a throw) cancels
 * the stream, an error of the source is thrown by the loop — except that iterating does not
 * lock the stream: read it one way only.
 *
 * @module
 */

/** The producer behind a {@link directStream}. */
export interface DirectSource<T> {
  /** The next value, or done; a rejection is the stream's error. Called one at a time. */
  next(): Promise<IteratorResult<T>>;
  /** The consumer went away early; stop producing and clean up. */
  cancel(reason?: unknown): Promise<void> | void;
}

const DONE: IteratorResult<never> = Object.freeze({ value: undefined, done: true });

/**
 * Wraps `source` into a lazy `ReadableStream` that is also a fast async iterable.
 *
 * @param source The producer; nothing is called until the first read.
 * @returns A `ReadableStream` whose `for await` reads `source` directly.
 */
export function directStream<T>(source: DirectSource<T>): ReadableStream<T> & AsyncIterable<T> {
  let finished = false;
  const stream = new ReadableStream<T>({
    async pull(controller) {
      let r: IteratorResult<T>;
      try {
        r = await source.next();
      } catch (err) {
        finished = true;
        controller.error(err);
        return;
      }
      if (r.done) {
        finished = true;
        controller.close();
      } else controller.enqueue(r.value);
    },
    cancel(reason) {
      if (finished) return;
      finished = true;
      return source.cancel(reason);
    },
  }, { highWaterMark: 0 });
  Object.defineProperty(stream, Symbol.asyncIterator, {
    configurable: true,
    writable: true,
    value(options?: { preventCancel?: boolean }): AsyncIterator<T> {
      return {
        next: () => (finished ? Promise.resolve(DONE) : source.next()),
        async return(): Promise<IteratorResult<T>> {
          if (!finished) {
            finished = true;
            if (!options?.preventCancel) await source.cancel();
          }
          return DONE;
        },
      };
    },
  });
  return stream as ReadableStream<T> & AsyncIterable<T>;
}
