/**
 * `JSON.stringify` that never throws: circular references become `"[circular]"` and bigints
 * their decimal text. Used where an event or state must be written whatever a host put in it.
 *
 * @module
 */

/** Serialises `value` as JSON; see the module doc. */
export function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch {
    const seen = new WeakSet<object>();
    return JSON.stringify(value, (_k, v) => {
      if (typeof v === "bigint") return v.toString();
      if (v && typeof v === "object") {
        if (seen.has(v)) return "[circular]";
        seen.add(v);
      }
      return v;
    });
  }
}
