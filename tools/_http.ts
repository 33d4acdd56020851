/**
 * HTTP helpers shared by the web and media tools (private): a time-limited signal tied to the
 * turn's interrupt, a capped body reader and `Content-Type` parsing.
 *
 * @module
 */

/** A signal aborted by the turn's signal or after `ms`; `dispose` clears the timer. */
export function limitSignal(
  ms: number,
  parent: AbortSignal | undefined,
): { signal: AbortSignal; timedOut: () => boolean; dispose: () => void } {
  const ac = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort(new Error("timeout"));
  }, ms);
  const onAbort = () => ac.abort(parent?.reason);
  if (parent?.aborted) ac.abort(parent.reason);
  else parent?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: ac.signal,
    timedOut: () => timedOut,
    dispose: () => {
      clearTimeout(timer);
      parent?.removeEventListener("abort", onAbort);
    },
  };
}

/** Reads at most `max` bytes of a body; `cut` is true when more was there. */
export async function readCapped(
  res: Response,
  max: number,
): Promise<{ bytes: Uint8Array; cut: boolean }> {
  if (!res.body) return { bytes: new Uint8Array(), cut: false };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let cut = false;
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      if (size + value.byteLength > max) {
        chunks.push(value.subarray(0, max - size));
        size = max;
        cut = true;
        break;
      }
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    if (cut) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return { bytes: out, cut };
}

/** MIME type and charset of a `Content-Type` header. */
export function contentType(header: string | null): { mime: string; charset?: string } {
  if (!header) return { mime: "" };
  const [mime, ...params] = header.split(";");
  const charset = params.map((p) => p.trim().match(/^charset="?([^";]+)"?$/i)?.[1]).find(Boolean);
  return { mime: mime.trim().toLowerCase(), charset };
}
