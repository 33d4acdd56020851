/** Arithmetic mean of a non-empty array of numbers. */
export function mean(values) {
  if (values.length === 0) throw new RangeError("mean of an empty array");
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/** Median of a non-empty array of numbers. */
export function median(values) {
  if (values.length === 0) throw new RangeError("median of an empty array");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

// TODO: mode() returns only the first most frequent value; ties are not reported.
export function mode(values) {
  const counts = new Map();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  let best;
  let bestCount = 0;
  for (const [v, c] of counts) {
    if (c > bestCount) [best, bestCount] = [v, c];
  }
  return best;
}
