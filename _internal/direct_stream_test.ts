import { test } from "node:test";
import assert from "node:assert/strict";
import { directStream } from "./direct_stream.ts";

/** A source of `values`, recording what was asked of it. */
function source(values: number[], error?: Error) {
  const log: string[] = [];
  let i = 0;
  return {
    log,
    next(): Promise<IteratorResult<number>> {
      log.push("next");
      if (i < values.length) return Promise.resolve({ value: values[i++], done: false });
      if (error) return Promise.reject(error);
      return Promise.resolve({ value: undefined, done: true });
    },
    cancel(): void {
      log.push("cancel");
    },
  };
}

test("for await reads every value of the source and ends", async () => {
  const src = source([1, 2, 3]);
  const got: number[] = [];
  for await (const v of directStream(src)) got.push(v);
  assert.deepEqual(got, [1, 2, 3]);
  assert.ok(!src.log.includes("cancel"));
});

test("nothing is read from the source before the first read", async () => {
  const src = source([1]);
  const stream = directStream(src);
  await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(src.log, []);
  for await (const _ of stream) break;
  assert.equal(src.log[0], "next");
});

test("leaving the loop early cancels the source once", async () => {
  const src = source([1, 2, 3]);
  for await (const v of directStream(src)) if (v === 2) break;
  assert.deepEqual(src.log.filter((x) => x === "cancel"), ["cancel"]);
});

test("an error of the source is thrown by the loop after the values before it", async () => {
  const src = source([1], new Error("boom"));
  const got: number[] = [];
  await assert.rejects(async () => {
    for await (const v of directStream(src)) got.push(v);
  }, /boom/);
  assert.deepEqual(got, [1]);
});

test("getReader reads the same source through the ReadableStream path", async () => {
  const stream = directStream(source([4, 5]));
  assert.ok(stream instanceof ReadableStream);
  const reader = stream.getReader();
  assert.deepEqual(await reader.read(), { value: 4, done: false });
  assert.deepEqual(await reader.read(), { value: 5, done: false });
  assert.equal((await reader.read()).done, true);
});

test("pipeThrough transforms the values and surfaces the source's error", async () => {
  const stream = directStream(source([1, 2], new Error("cut")));
  const doubled = stream.pipeThrough(
    new TransformStream<number, number>({ transform: (v, c) => c.enqueue(v * 2) }),
  );
  const got: number[] = [];
  await assert.rejects(async () => {
    for await (const v of doubled) got.push(v);
  }, /cut/);
  assert.deepEqual(got, [2, 4]);
});

test("reader.cancel() cancels the source", async () => {
  const src = source([1, 2]);
  const reader = directStream(src).getReader();
  await reader.read();
  await reader.cancel();
  assert.ok(src.log.includes("cancel"));
});
