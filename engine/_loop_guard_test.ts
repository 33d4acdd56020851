import { test } from "node:test";
import assert from "node:assert/strict";
import {
  callKey,
  canonicalJson,
  type GuardedCall,
  isToolMedia,
  type LoopAlarm,
  LoopDetectedError,
  LoopGuard,
  repeatedCallMessage,
  resolveLoopOptions,
} from "./_loop_guard.ts";

function call(name: string, args: unknown = {}): GuardedCall {
  return { function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) } };
}

/** The actions of one reply per element: `replies(guard, [[a], [a, b]])` → `[["run"], [...]]`. */
function actions(guard: LoopGuard, replies: GuardedCall[][]): string[][] {
  return replies.map((r) => guard.checkReply(r).map((v) => v.action));
}

test("canonicalJson ignores key order at every depth and keeps array order", () => {
  assert.equal(
    canonicalJson({ b: 1, a: { d: [2, 1], c: null } }),
    canonicalJson({ a: { c: null, d: [2, 1] }, b: 1 }),
  );
  assert.notEqual(canonicalJson({ a: [1, 2] }), canonicalJson({ a: [2, 1] }));
});

test("callKey is the same for arguments that differ only in key order or spacing", () => {
  assert.equal(
    callKey("read_file", '{"path":"a.txt","limit":10}'),
    callKey("read_file", '{ "limit": 10,\n "path": "a.txt" }'),
  );
  assert.notEqual(callKey("read_file", '{"path":"a.txt"}'), callKey("read_file", '{"path":"b"}'));
  assert.notEqual(callKey("read_file", "{}"), callKey("list_files", "{}"));
  assert.equal(callKey("x", ""), callKey("x", "{}"), "empty arguments mean {}");
});

test("callKey keeps arguments that are not JSON as sent and hashes long ones", () => {
  assert.equal(callKey("x", "{oops"), callKey("x", " {oops "));
  assert.notEqual(callKey("x", "{oops"), callKey("x", "{oops2"));
  const long = JSON.stringify({ content: "y".repeat(10_000) });
  assert.ok(callKey("write_file", long).length < 200);
  assert.notEqual(
    callKey("write_file", long),
    callKey("write_file", JSON.stringify({ content: "y".repeat(9_999) })),
  );
});

test("the same call runs maxRepeats times in a row, then the next one is warned", () => {
  const guard = new LoopGuard({ maxRepeats: 3 });
  const a = call("read_file", { path: "a.txt" });
  assert.deepEqual(actions(guard, [[a], [a], [a], [a]]), [["run"], ["run"], ["run"], ["warn"]]);
});

test("repeating the call in a later reply after the warning gives stop", () => {
  const guard = new LoopGuard({ maxRepeats: 3 });
  const a = call("read_file", { path: "a.txt" });
  assert.deepEqual(actions(guard, [[a], [a], [a], [a], [a]]).flat(), [
    "run",
    "run",
    "run",
    "warn",
    "stop",
  ]);
});

test("repeats inside one reply are warned but never stopped: the model has not seen a warning", () => {
  const guard = new LoopGuard({ maxRepeats: 2 });
  const a = call("grep", { pattern: "x" });
  assert.deepEqual(actions(guard, [[a, a, a, a, a]]), [["run", "run", "warn", "warn", "warn"]]);
  assert.deepEqual(actions(guard, [[a]]), [["stop"]]);
});

test("a different call after the warning clears it and restarts the count", () => {
  const guard = new LoopGuard({ maxRepeats: 3 });
  const a = call("read_file", { path: "a.txt" });
  const b = call("read_file", { path: "b.txt" });
  assert.deepEqual(actions(guard, [[a], [a], [a], [a], [b], [a], [a], [a]]).flat(), [
    "run",
    "run",
    "run",
    "warn",
    "run",
    "run",
    "run",
    "run",
  ]);
});

test("the same tool with different arguments is not a loop", () => {
  const guard = new LoopGuard({ maxRepeats: 2 });
  const replies = Array.from({ length: 10 }, (_, i) => [call("read_file", { path: `${i}.txt` })]);
  assert.ok(actions(guard, replies).flat().every((a) => a === "run"));
});

test("argument key order does not hide a repeat", () => {
  const guard = new LoopGuard({ maxRepeats: 2 });
  const v = [
    guard.checkReply([call("grep", '{"pattern":"x","path":"src"}')]),
    guard.checkReply([call("grep", '{"path":"src","pattern":"x"}')]),
    guard.checkReply([call("grep", '{ "pattern" : "x", "path" : "src" }')]),
  ].flat();
  assert.deepEqual(v.map((x) => x.action), ["run", "run", "warn"]);
});

test("a cycle of two calls repeated maxRepeats times is recognised on the next call", () => {
  const guard = new LoopGuard({ maxRepeats: 3 });
  const a = call("read_file", { path: "a.txt" });
  const b = call("run_shell", { command: "npm test" });
  const got = actions(guard, [[a], [b], [a], [b], [a], [b], [a]]).flat();
  assert.deepEqual(got, ["run", "run", "run", "run", "run", "run", "warn"]);
  const [v] = guard.checkReply([b]);
  assert.equal(v.action, "stop");
  assert.deepEqual((v as LoopAlarm).cycle, ["read_file", "run_shell"]);
});

test("a cycle of three calls is recognised, a cycle of four is left to maxIterations", () => {
  const three = new LoopGuard({ maxRepeats: 2 });
  const [a, b, c, d] = ["a", "b", "c", "d"].map((n) => call(n));
  assert.deepEqual(actions(three, [[a, b, c], [a, b, c], [a]]).flat().at(-1), "warn");
  const four = new LoopGuard({ maxRepeats: 2 });
  assert.ok(
    actions(four, [[a, b, c, d], [a, b, c, d], [a, b, c, d]]).flat().every((x) => x === "run"),
  );
});

test("ignored polling tools are never counted and break a streak of other calls", () => {
  const guard = new LoopGuard({ maxRepeats: 2 });
  const poll = call("shell_task_output", { task_id: "t1", wait_ms: 30000 });
  assert.ok(
    actions(guard, Array.from({ length: 8 }, () => [poll])).flat().every((x) => x === "run"),
  );
  const a = call("read_file", { path: "a" });
  assert.deepEqual(actions(guard, [[a], [a], [poll], [a], [a]]).flat(), [
    "run",
    "run",
    "run",
    "run",
    "run",
  ]);
});

test("ignoreTools replaces the default list; [] counts every tool", () => {
  const guard = new LoopGuard({ maxRepeats: 1, ignoreTools: [] });
  const poll = call("shell_task_output", { task_id: "t1" });
  assert.deepEqual(actions(guard, [[poll], [poll]]).flat(), ["run", "warn"]);
  const custom = new LoopGuard({ maxRepeats: 1, ignoreTools: ["wait_for_job"] });
  const wait = call("wait_for_job", { id: 1 });
  assert.deepEqual(actions(custom, [[wait], [wait], [wait]]).flat(), ["run", "run", "run"]);
});

test("reset() starts a new count", () => {
  const guard = new LoopGuard({ maxRepeats: 1 });
  const a = call("x");
  assert.deepEqual(actions(guard, [[a], [a]]).flat(), ["run", "warn"]);
  guard.reset();
  assert.deepEqual(actions(guard, [[a]]).flat(), ["run"]);
});

test("the warning quotes the call's last result, cut without splitting a character", () => {
  const guard = new LoopGuard({ maxRepeats: 1 });
  const a = call("read_file", { path: "a.txt" });
  guard.checkReply([a]);
  guard.recordResult(a, "x".repeat(999) + "😀" + "tail".repeat(500));
  const [v] = guard.checkReply([a]);
  assert.equal(v.action, "warn");
  const alarm = v as LoopAlarm;
  assert.equal(alarm.repeats, 1);
  assert.ok(alarm.lastResult!.startsWith("x".repeat(999) + "…"), "the lone surrogate is dropped");
  const text = repeatedCallMessage(alarm);
  assert.match(text, /read_file/);
  assert.match(text, /1 time in a row/);
  assert.match(text, /more characters\]/);
  assert.match(text, /ends the turn/);
});

test("the warning says where the results are when none was recorded yet", () => {
  const guard = new LoopGuard({ maxRepeats: 1 });
  const a = call("read_file", { path: "a.txt" });
  const [, v] = guard.checkReply([a, a]);
  assert.match(repeatedCallMessage(v as LoopAlarm), /above/);
});

test("resolveLoopOptions applies defaults and rejects bad thresholds clearly", () => {
  assert.equal(resolveLoopOptions(undefined)?.maxRepeats, 3);
  assert.equal(resolveLoopOptions(null)?.maxRepeats, 3);
  assert.ok(resolveLoopOptions({})?.ignoreTools.has("shell_task_output"));
  assert.equal(resolveLoopOptions(false), null);
  for (const bad of [0, -1, 2.5, Number.NaN, "3"]) {
    assert.throws(
      () => resolveLoopOptions({ maxRepeats: bad as number }),
      /Cannot use loopDetection: maxRepeats must be an integer of at least 1/,
    );
  }
  assert.throws(() => resolveLoopOptions({ maxRepeats: Infinity }), /\(got Infinity\)/);
  assert.throws(() => resolveLoopOptions({ maxRepeats: "3" as unknown as number }), /\(got "3"\)/);
  assert.throws(
    () => resolveLoopOptions({ ignoreTools: "grep" as unknown as string[] }),
    /ignoreTools must be an array/,
  );
  assert.throws(() => resolveLoopOptions(true as unknown as false), /expected an object or false/);
  assert.throws(() => resolveLoopOptions([] as unknown as false), /expected an object or false/);
  assert.throws(() => resolveLoopOptions(NaN as unknown as false), /got NaN/);
  assert.throws(
    () => resolveLoopOptions({ maxRepeat: 1 } as unknown as { maxRepeats: number }),
    /unknown option "maxRepeat" \(known: maxRepeats, ignoreTools\)/,
  );
});

test("LoopDetectedError names the repeated call and the threshold", () => {
  const guard = new LoopGuard({ maxRepeats: 1 });
  const a = call("run_shell", { command: "make" });
  guard.checkReply([a]);
  guard.checkReply([a]);
  const [v] = guard.checkReply([a]);
  assert.equal(v.action, "stop");
  const err = new LoopDetectedError(v as LoopAlarm, 1);
  assert.equal(err.name, "LoopDetectedError");
  assert.equal(err.toolName, "run_shell");
  assert.match(err.message, /^Cannot continue the turn: the model repeated run_shell/);
  assert.match(err.message, /maxRepeats 1/);
});

test("isToolMedia recognises the media tool's message and nothing else", () => {
  assert.equal(
    isToolMedia({
      role: "user",
      content: [{ type: "text", text: "[media] Attached by the media tool: a.png" }],
    }),
    true,
  );
  assert.equal(isToolMedia({ role: "user", content: "[media] Attached by the media tool" }), false);
  assert.equal(isToolMedia({ role: "user", content: [{ type: "text", text: "hello" }] }), false);
});
