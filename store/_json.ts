/**
 * JSON as every store keeps it (issue 11). PostgreSQL's `jsonb` refuses the NUL character and
 * unpaired UTF-16 surrogates (a tool's binary output, a preview cut inside an emoji); a refused
 * write would lose a tool result and leave the session retried forever. So every store writes
 * JSON through here: those characters become U+FFFD (the replacement character), and data that
 * is not JSON at all (a `BigInt`, a cycle) is refused with a clear error before anything is
 * written, so the three stores keep the same data.
 *
 * @module
 */

/**
 * An escape in `JSON.stringify` output that `jsonb` refuses: `\u0000`, or a surrogate (JSON.stringify
 * escapes only unpaired ones), preceded by an even run of backslashes (so not an escaped
 * backslash followed by the letters).
 */
const UNSTORABLE = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/gi;

/**
 * The JSON text of `value` with NUL and unpaired surrogates replaced by U+FFFD.
 *
 * @param value Plain data (objects, arrays, strings, numbers, booleans, null).
 * @param what What is being written, for the error ("append events", "submit", …).
 * @throws {TypeError} "Cannot <what>: the data is not JSON (…)" for a `BigInt`, a cycle or
 *   `undefined`.
 */
export function storableJson(value: unknown, what: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new TypeError(`Cannot ${what}: the data is not JSON (${(err as Error).message})`);
  }
  if (text === undefined) throw new TypeError(`Cannot ${what}: the data is not JSON (undefined)`);
  return text.replace(UNSTORABLE, "$1\\ufffd");
}

/**
 * A copy of `value` as the stores keep it (see {@link storableJson}).
 *
 * @throws {TypeError} As {@link storableJson}.
 */
export function storable<T>(value: T, what: string): T {
  return JSON.parse(storableJson(value, what)) as T;
}
