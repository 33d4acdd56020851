/**
 * Keyword ranking for `mcp_search_tools` (manual §15.4): BM25 over the tool's registered name,
 * raw name, server, title, description and parameter names, with snake/kebab/camel case split.
 *
 * @module
 */

const STOP = new Set([
  "a",
  "an",
  "the",
  "of",
  "to",
  "in",
  "on",
  "for",
  "and",
  "or",
  "is",
  "with",
  "by",
  "from",
  "at",
  "it",
  "this",
  "that",
]);

/** Lower-case word tokens of a text, with camelCase, snake_case and kebab-case split. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9\u00c0-\uffff]+/)
    .filter((t) => t.length > 0 && !STOP.has(t));
}

/** A searchable document. */
export interface SearchDoc {
  /** Identifier returned in results. */
  id: string;
  /** Text to index. */
  text: string;
}

/**
 * Ranks documents for a query with BM25 (k1 1.2, b 0.75); documents that match no query token
 * are left out.
 *
 * @returns Ids, best first (ties keep the input order).
 */
export function rankDocuments(query: string, docs: readonly SearchDoc[], limit: number): string[] {
  const q = [...new Set(tokenize(query))];
  if (q.length === 0) return [];
  const tokenized = docs.map((d) => tokenize(d.text));
  const avg = tokenized.reduce((s, t) => s + t.length, 0) / Math.max(1, tokenized.length);
  const df = new Map<string, number>();
  for (const toks of tokenized) for (const t of new Set(toks)) df.set(t, (df.get(t) ?? 0) + 1);
  const n = docs.length;
  const scored: { id: string; score: number; i: number }[] = [];
  tokenized.forEach((toks, i) => {
    let score = 0;
    for (const term of q) {
      let tf = 0;
      for (const t of toks) if (t === term) tf++;
      if (tf === 0) {
        // prefix match ("dir" finds "directory") counts for half
        for (const t of toks) if (term.length >= 3 && t.startsWith(term)) tf += 0.5;
      }
      if (tf === 0) continue;
      const d = df.get(term) ?? 1;
      const idf = Math.log(1 + (n - d + 0.5) / (d + 0.5));
      score += idf * (tf * 2.2) / (tf + 1.2 * (0.25 + 0.75 * toks.length / (avg || 1)));
    }
    if (score > 0) scored.push({ id: docs[i].id, score, i });
  });
  scored.sort((a, b) => b.score - a.score || a.i - b.i);
  return scored.slice(0, limit).map((s) => s.id);
}

/** Edit distance, for "did you mean" suggestions. */
export function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0];
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = prev[j];
      prev[j] = Math.min(prev[j] + 1, prev[j - 1] + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = tmp;
    }
  }
  return prev[b.length];
}
