/**
 * A `fetch` that sends every request through a SOCKS5 proxy (manual §10.1 `SOCKS5_PROXY`).
 *
 * - Deno: `Deno.createHttpClient({ proxy: { url } })` (Deno's own client speaks SOCKS5).
 * - Node: `undici`'s `fetch` with a `fetch-socks` dispatcher, both loaded lazily with dynamic
 *   `import()` on the first request, so importing the package stays fast and neither module is
 *   loaded when no proxy is set. `fetch-socks` is the small, maintained SOCKS dispatcher for
 *   undici (built on `socks`); undici is Node's own fetch implementation.
 *
 * @module
 */
import { isDeno } from "./env.ts";

/** The `fetch` signature the openai SDK accepts. */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Parsed parts of a `socks5://[user:pass@]host:port` URL. */
export interface SocksProxyParts {
  /** Proxy host. */
  host: string;
  /** Proxy port (default 1080). */
  port: number;
  /** User name, when the URL has one. */
  userId?: string;
  /** Password, when the URL has one. */
  password?: string;
}

/**
 * Parses a SOCKS5 proxy URL (`socks5://`, `socks5h://` or `socks://`; a bare `host:port` is
 * taken as SOCKS5).
 *
 * @throws {Error} "Cannot use the SOCKS5 proxy: …" for another scheme or a URL without a host.
 */
export function parseSocksUrl(raw: string): SocksProxyParts {
  const withScheme = /^[a-z0-9+.-]+:\/\//i.test(raw) ? raw : `socks5://${raw}`;
  const url = new URL(withScheme);
  if (!/^socks(5h?)?:$/i.test(url.protocol)) {
    throw new Error(`Cannot use the SOCKS5 proxy: "${url.protocol}" is not a SOCKS5 URL`);
  }
  if (url.hostname === "") throw new Error("Cannot use the SOCKS5 proxy: the URL has no host");
  const parts: SocksProxyParts = {
    host: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port ? Number(url.port) : 1080,
  };
  if (url.username) parts.userId = decodeURIComponent(url.username);
  if (url.password) parts.password = decodeURIComponent(url.password);
  return parts;
}

/** Builds the real proxied fetch (runtime-specific). */
async function buildSocksFetch(proxyUrl: string): Promise<FetchLike> {
  const parts = parseSocksUrl(proxyUrl);
  if (isDeno) {
    const deno = (globalThis as unknown as {
      Deno: { createHttpClient(options: { proxy: { url: string } }): unknown };
    }).Deno;
    const auth = parts.userId
      ? `${encodeURIComponent(parts.userId)}:${encodeURIComponent(parts.password ?? "")}@`
      : "";
    const client = deno.createHttpClient({
      proxy: { url: `socks5://${auth}${parts.host}:${parts.port}` },
    });
    return (input, init) => fetch(input, { ...init, client } as RequestInit);
  }
  const [{ fetch: undiciFetch }, { socksDispatcher }] = await Promise.all([
    import("undici"),
    import("fetch-socks"),
  ]);
  const dispatcher = socksDispatcher({ type: 5, ...parts });
  return (input, init) =>
    undiciFetch(
      input as Parameters<typeof undiciFetch>[0],
      { ...init, dispatcher } as Parameters<typeof undiciFetch>[1],
    ) as unknown as Promise<Response>;
}

/**
 * A fetch that goes through the SOCKS5 proxy at `proxyUrl`. The runtime-specific client is built
 * on the first request (lazy), and reused after.
 *
 * @param proxyUrl `socks5://[user:pass@]host:port`.
 * @throws {Error} On the first request, when the URL is not a SOCKS5 URL.
 */
export function createSocksFetch(proxyUrl: string): FetchLike {
  let real: Promise<FetchLike> | undefined;
  return async (input, init) => {
    real ??= buildSocksFetch(proxyUrl);
    return (await real)(input, init);
  };
}
