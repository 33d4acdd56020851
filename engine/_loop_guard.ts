/**
 * Repeat ("doom loop") detection of the turn loop (private to engine/).
 *
 * A model that calls the same tool with the same arguments again and again, or cycles through
 * the same few calls, makes no progress and only burns tokens until `maxIterations`. Peers do the
 * same check: Gemini CLI hashes name + arguments and reports a cycle of 1–5 calls repeated 5
 * times; OpenHands' stuck detector reports 4 identical action/observation pairs (research notes,
 * coding-engines.md §9). Here a call is identified by its tool name and the canonical JSON of its
 * arguments (key order ignored); the checks are exact and cost one string per call.
 *
 * What the engine does with a verdict (engine/turn_engine.ts):
 * - `"run"`: the call runs as usual;
 * - `"warn"`: the call is not run; the model gets a `repeated_call` tool error saying how many
 *   times it made the call and what it returned, and that one more repeat ends the turn;
 * - `"stop"`: the model repeated the loop in a later reply after that warning: the call gets a
 *   `loop_detected` result and the turn ends with `error{error_type:"loop_detected",
 *   retriable:false}` then `turn_end{status:"error"}` (DESIGN §3: operational failures are
 *   events).
 *
 * @module
 */
import { createHash } from "node:crypto";

/** Default of {@link LoopDetectionOptions.maxRepeats}: 3 identical calls in a row may run. */
export const DEFAULT_LOOP_MAX_REPEATS = 3;

/**
 * Default of {@link LoopDetectionOptions.ignoreTools}: the built-in polling tools, whose identical
 * calls are expected to return something new each time (a background task's output, a terminal's
 * log).
 */
export const DEFAULT_LOOP_IGNORE_TOOLS: readonly string[] = ["shell_task_output", "terminal_read"];

/** Longest cycle of different calls that is recognised (A,B,A,B… and A,B,C,A,B,C…). */
export const MAX_LOOP_CYCLE = 3;

/** Characters of the earlier result quoted in the `repeated_call` warning. */
const RESULT_PREVIEW_CHARS = 1_000;

/** Arguments longer than this (characters) are keyed by their SHA-256 instead of their text. */
const HASH_OVER_CHARS = 256;

/**
 * Repeat detection of a turn (the `loopDetection` option of `TurnEngine` and
 * `createDefaultEngine`; `false` turns it off).
 *
 * Counting is per turn: a new user message (`run()`) or an injected steering message starts a
 * new count; `retry()` and `resume()` go on counting the calls already in the turn's history.
 */
export interface LoopDetectionOptions {
  /**
   * How many times in a row one tool call (same name, same arguments in any key order) may run
   * in a turn (default 3; an integer of at least 1). A cycle of 2 or 3 different calls repeated
   * this many times counts the same way. The next repeat is not run and the model gets a
   * `repeated_call` tool error; repeating again in a later reply ends the turn with
   * `error{error_type:"loop_detected"}`.
   */
  maxRepeats?: number;
  /**
   * Tools whose calls are never counted as repeats: polling tools, whose identical calls return
   * new data over time (default `["shell_task_output", "terminal_read"]`). A list replaces the
   * default; `[]` counts every tool.
   */
  ignoreTools?: string[];
}

/** {@link LoopDetectionOptions} with defaults applied and checked. */
export interface ResolvedLoopOptions {
  /** Identical calls in a row that may run. */
  maxRepeats: number;
  /** Tool names never counted. */
  ignoreTools: ReadonlySet<string>;
}

const LOOP_OPTION_KEYS: ReadonlySet<string> = new Set(["maxRepeats", "ignoreTools"]);

/** A value as a message shows it (numbers such as `NaN` and `Infinity` as they are). */
function shown(value: unknown): string {
  return typeof value === "number" ? String(value) : JSON.stringify(value) ?? String(value);
}

/**
 * Applies the defaults of {@link LoopDetectionOptions} and checks them.
 *
 * @param options The option as given; `undefined` (or `null`) means the defaults, `false` off.
 * @returns The resolved options, or `null` when detection is off.
 * @throws {TypeError} When `options` is not an object (an array included) or has an unknown key,
 *   `maxRepeats` is not an integer of at least 1, or `ignoreTools` is not an array of strings.
 */
export function resolveLoopOptions(
  options: LoopDetectionOptions | false | null | undefined,
): ResolvedLoopOptions | null {
  if (options === false) return null;
  if (
    options !== undefined && options !== null &&
    (typeof options !== "object" || Array.isArray(options))
  ) {
    throw new TypeError(
      `Cannot use loopDetection: expected an object or false, got ${shown(options)}`,
    );
  }
  const unknown = Object.keys(options ?? {}).filter((k) => !LOOP_OPTION_KEYS.has(k));
  if (unknown.length) {
    throw new TypeError(
      `Cannot use loopDetection: unknown option ${
        unknown.map((k) => JSON.stringify(k)).join(", ")
      } ` +
        "(known: maxRepeats, ignoreTools)",
    );
  }
  const maxRepeats = options?.maxRepeats ?? DEFAULT_LOOP_MAX_REPEATS;
  if (!Number.isInteger(maxRepeats) || maxRepeats < 1) {
    throw new TypeError(
      "Cannot use loopDetection: maxRepeats must be an integer of at least 1 " +
        `(got ${shown(maxRepeats)})`,
    );
  }
  const ignore = options?.ignoreTools ?? DEFAULT_LOOP_IGNORE_TOOLS;
  if (!Array.isArray(ignore) || ignore.some((t) => typeof t !== "string")) {
    throw new TypeError("Cannot use loopDetection: ignoreTools must be an array of tool names");
  }
  return { maxRepeats, ignoreTools: new Set(ignore) };
}

/**
 * JSON text of `value` with the keys of every object sorted, so two argument objects that differ
 * only in key order give the same text.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const obj = value as Record<string, unknown>;
    const parts = Object.keys(obj).sort()
      .filter((k) => obj[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`);
    return `{${parts.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * The identity of a tool call: its name and the canonical JSON of its arguments (arguments that
 * are not valid JSON are used as sent, trimmed; long ones by their SHA-256).
 *
 * @param name The tool name.
 * @param args The arguments as the model sent them (a JSON text; `""` means `{}`).
 */
export function callKey(name: string, args: string): string {
  let text: string;
  try {
    text = canonicalJson(JSON.parse(args.trim() === "" ? "{}" : args));
  } catch {
    text = `raw:${args.trim()}`;
  }
  if (text.length > HASH_OVER_CHARS) {
    text = `sha256:${createHash("sha256").update(text).digest("hex")}`;
  }
  return `${name}\u0000${text}`;
}

/** A tool call as the guard sees it (the shape of a Chat Completions `tool_calls` item). */
export interface GuardedCall {
  /** The call id. */
  id?: string;
  /** The function called. */
  function: { name: string; arguments: string };
}

/** What to do with one tool call. */
export type LoopVerdict =
  | { action: "run" }
  | {
    /** `"warn"`: do not run, warn the model; `"stop"`: do not run, end the turn. */
    action: "warn" | "stop";
    /** Times the call (or the cycle) was already made in a row, before this call. */
    repeats: number;
    /** Tool names of the repeated cycle, in order (one name for a single repeated call). */
    cycle: string[];
    /** The tool name of this call. */
    name: string;
    /** The call's result the last time it was made in this turn, cut for quoting; or null. */
    lastResult: string | null;
  };

/** A verdict that stops a call: `"warn"` or `"stop"`. */
export type LoopAlarm = Extract<LoopVerdict, { action: "warn" | "stop" }>;

/**
 * Watches the tool calls of one turn, reply by reply, and says which ones repeat a loop.
 *
 * Give it every model reply's calls in order ({@link LoopGuard.checkReply}) and every result
 * ({@link LoopGuard.recordResult}); call {@link LoopGuard.reset} when a new count starts.
 */
export class LoopGuard {
  /** The resolved options. */
  readonly options: ResolvedLoopOptions;
  #keys: string[] = [];
  #names: string[] = [];
  #results = new Map<string, string>();
  #reply = 0;
  #warnedReply: number | null = null;
  #ignored = 0;
  #window: number;

  /**
   * Creates a guard.
   *
   * @param options Thresholds (see {@link LoopDetectionOptions}).
   * @throws {TypeError} When the options are invalid (see {@link resolveLoopOptions}).
   */
  constructor(options?: LoopDetectionOptions | null) {
    this.options = resolveLoopOptions(options)!;
    this.#window = Math.max(64, MAX_LOOP_CYCLE * (this.options.maxRepeats + 2) + 1);
  }

  /** Forgets every call seen: the next call starts a new count (a new user message). */
  reset(): void {
    this.#keys = [];
    this.#names = [];
    this.#results.clear();
    this.#reply = 0;
    this.#warnedReply = null;
  }

  /**
   * Checks the tool calls of one model reply, in call order.
   *
   * A call repeats a loop when, with it, the calls end in a cycle of 1 to {@link MAX_LOOP_CYCLE}
   * calls made more than `maxRepeats` times in a row. The first such call of a loop, and any
   * further one in the same reply, gets `"warn"`; one in a later reply (the model has seen the
   * warning) gets `"stop"`. A call that repeats nothing ends the warning.
   *
   * @param calls The reply's tool calls.
   * @returns One verdict per call, in the same order.
   */
  checkReply(calls: readonly GuardedCall[]): LoopVerdict[] {
    this.#reply++;
    return calls.map((call) => this.#check(call));
  }

  /**
   * Records the result of a call, quoted by a later warning about the same call.
   *
   * @param call The call.
   * @param content The result text the model got.
   */
  recordResult(call: GuardedCall, content: string): void {
    const key = callKey(call.function.name, call.function.arguments);
    this.#results.delete(key);
    this.#results.set(key, preview(content));
    if (this.#results.size > this.#window) {
      this.#results.delete(this.#results.keys().next().value!);
    }
  }

  #check(call: GuardedCall): LoopVerdict {
    const name = call.function.name;
    // An ignored tool's call matches nothing, so it also breaks a streak of other calls.
    const key = this.options.ignoreTools.has(name)
      ? `\u0001ignored:${++this.#ignored}`
      : callKey(name, call.function.arguments);
    this.#keys.push(key);
    this.#names.push(name);
    if (this.#keys.length > this.#window) {
      this.#keys.shift();
      this.#names.shift();
    }
    const found = this.#findCycle();
    if (!found) {
      this.#warnedReply = null;
      return { action: "run" };
    }
    const { length, repeats } = found;
    const n = this.#names.length;
    const cycle = this.#names.slice(n - length, n);
    let action: "warn" | "stop" = "warn";
    if (this.#warnedReply === null) this.#warnedReply = this.#reply;
    else if (this.#warnedReply < this.#reply) action = "stop";
    return { action, repeats, cycle, name, lastResult: this.#results.get(key) ?? null };
  }

  /** The shortest cycle the calls now end in, when it was already made `maxRepeats` times. */
  #findCycle(): { length: number; repeats: number } | null {
    const s = this.#keys;
    const n = s.length;
    const max = this.options.maxRepeats;
    for (let length = 1; length <= MAX_LOOP_CYCLE; length++) {
      // m = how many of the last calls equal the call `length` places before them.
      let m = 0;
      while (n - 1 - m - length >= 0 && s[n - 1 - m] === s[n - 1 - m - length]) m++;
      if (m >= length * (max - 1) + 1) {
        return { length, repeats: Math.floor((m + length - 1) / length) };
      }
    }
    return null;
  }
}

/**
 * True for the `user` message by which the engine shows media queued by the `media` tool
 * (`#flushToolAttachments` in turn_engine.ts): it is part of the turn, not a new user message.
 */
export function isToolMedia(m: { role: string; content?: unknown }): boolean {
  if (m.role !== "user" || !Array.isArray(m.content)) return false;
  const first = m.content[0] as { type?: unknown; text?: unknown } | undefined;
  return first?.type === "text" && typeof first.text === "string" &&
    first.text.startsWith("[media] Attached by the media tool");
}

/** Cuts a result for quoting, without splitting a UTF-16 surrogate pair. */
function preview(text: string): string {
  if (text.length <= RESULT_PREVIEW_CHARS) return text;
  let cut = text.slice(0, RESULT_PREVIEW_CHARS);
  const last = cut.charCodeAt(cut.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut = cut.slice(0, -1);
  return `${cut}… [${text.length - cut.length} more characters]`;
}

/** "1 time", "3 times". */
function times(n: number): string {
  return n === 1 ? "1 time" : `${n} times`;
}

/** The `repeated_call` text the model gets instead of running a call (verdict `"warn"`). */
export function repeatedCallMessage(v: LoopAlarm): string {
  const what = v.cycle.length === 1
    ? `this exact call (${v.name} with the same arguments)`
    : `the same sequence of ${v.cycle.length} calls (${v.cycle.join(" → ")}, each with the ` +
      "same arguments)";
  const returned = v.lastResult === null
    ? "Its earlier results are in the conversation above."
    : `The last time, ${v.name} returned: ${v.lastResult}`;
  return `Not run: you have already made ${what} ${times(v.repeats)} in a row in this turn. ` +
    `${returned}\nRepeating it will not give a different result. Change your approach (other ` +
    "arguments or another tool) or give your answer now; repeating it again ends the turn.";
}

/** The `loop_detected` text the call gets when the turn is stopped (verdict `"stop"`). */
export function loopStoppedMessage(v: LoopAlarm): string {
  return `Not run: ${v.name} was called again with the same arguments after a warning that it ` +
    "repeats a loop, so the turn was stopped.";
}

/**
 * The error that ends a turn stuck in a loop: the model repeated a call after the `repeated_call`
 * warning. Reported as `error{error_type:"loop_detected", retriable:false}`, never thrown out of
 * the event stream.
 */
export class LoopDetectedError extends Error {
  /** Always `"LoopDetectedError"`. */
  override name = "LoopDetectedError";
  /** The tool name of the call that ended the turn. */
  readonly toolName: string;
  /** Times the call (or its cycle) had been made in a row before it. */
  readonly repeats: number;
  /** Tool names of the repeated cycle. */
  readonly cycle: string[];

  /**
   * Creates the error from a `"stop"` verdict.
   *
   * @param v The verdict.
   * @param maxRepeats The threshold in force (quoted in the message).
   */
  constructor(v: LoopAlarm, maxRepeats: number) {
    const what = v.cycle.length === 1
      ? `${v.name} with the same arguments`
      : `the same ${v.cycle.length} calls (${v.cycle.join(" → ")})`;
    super(
      `Cannot continue the turn: the model repeated ${what} ${times(v.repeats)} in a row and ` +
        `again after a warning (loop detection, maxRepeats ${maxRepeats})`,
    );
    this.toolName = v.name;
    this.repeats = v.repeats;
    this.cycle = v.cycle;
  }
}
