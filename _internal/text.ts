/**
 * Text helpers shared by the engine.
 *
 * @module
 */

/**
 * The first `max` UTF-16 code units of `text`, one fewer when the cut would split a surrogate
 * pair (an emoji), so a preview never ends in half a character (which JSON stores such as
 * PostgreSQL's `jsonb` refuse).
 *
 * @param text Any text.
 * @param max Length limit in UTF-16 code units (a non-negative integer).
 */
export function headOf(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}
