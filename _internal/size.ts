/**
 * Byte sizes for messages (private): one format for every "too large" message of the package,
 * exact where rounding would hide the difference.
 *
 * @module
 */

const KIB = 1024;
const MIB = 1024 * 1024;

/**
 * A byte count as people read it: `"512 bytes"`, `"1.5 KiB"`, `"12.4 MiB"`, `"10 MiB"` (one
 * decimal, dropped when it is 0; binary units, as DESIGN §6 counts "10 MB").
 *
 * @param bytes A size in bytes.
 * @returns The size with its unit.
 */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return `${bytes} bytes`;
  if (Math.abs(bytes) < KIB) return bytes === 1 ? "1 byte" : `${bytes} bytes`;
  const kib = (bytes / KIB).toFixed(1);
  // Just under 1 MiB would read "1024 KiB": say "1 MiB", as for the limit it nears.
  if (Math.abs(bytes) < MIB && Math.abs(Number(kib)) < 1024) return `${trim(kib)} KiB`;
  return `${trim((bytes / MIB).toFixed(1))} MiB`;
}

function trim(fixed: string): string {
  return fixed.replace(/\.0$/, "");
}

/** The two halves of a "size over limit" message (see {@link formatOverLimit}). */
export interface OverLimit {
  /** The size, as a noun: `"12.4 MiB"` or `"10485761 bytes"`. */
  size: string;
  /** The limit, as the adjective of "limit": `"10 MiB"` or `"10485760-byte (10 MiB)"`. */
  limit: string;
}

/**
 * Formats a size and the limit it exceeds so that the message shows the difference: both in
 * the units of {@link formatBytes}, or in exact bytes when those read the same (a file one byte
 * over 10 MiB: "10485761 bytes exceeds the 10485760-byte (10 MiB) limit", never "10.0 MiB
 * exceeds the 10.0 MiB limit").
 *
 * @param size The size in bytes.
 * @param limit The limit in bytes.
 * @returns Strings for `${size} exceeds the ${limit} limit` (or "is over the … limit"):
 *   `formatOverLimit(13_000_000, 10 * 1024 * 1024)` gives `{ size: "12.4 MiB", limit: "10 MiB" }`.
 */
export function formatOverLimit(size: number, limit: number): OverLimit {
  const shownSize = formatBytes(size);
  const shownLimit = formatBytes(limit);
  if (shownSize !== shownLimit) return { size: shownSize, limit: shownLimit };
  return { size: `${size} bytes`, limit: `${limit}-byte (${shownLimit})` };
}
