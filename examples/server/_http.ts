/**
 * HTTP plumbing shared by the reference server's single-process mode (`server.ts`) and its
 * multi-worker front end (`cluster.ts`): listening with socket tracking, bearer-token tenants,
 * bounded JSON bodies, JSON answers with security headers, and the page's static assets.
 *
 * @module
 */
import { createHash } from "node:crypto";
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from "node:http";
import type { Socket } from "node:net";
import { asset } from "./_assets.ts";
import type { TenantConfig } from "./config.ts";

/** An error answered with its HTTP status and message. */
export class HttpError extends Error {
  /** Creates an error answered with `status`. */
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** Headers on every answer: no sniffing, no framing, scripts and styles from this origin only. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; " +
    "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
};

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** Tenants by bearer token; tokens are kept only as SHA-256 hashes. */
export class TenantTokens {
  readonly #byHash = new Map<string, TenantConfig>();

  /** Indexes `tenants` by the hash of their tokens. */
  constructor(tenants: readonly TenantConfig[]) {
    for (const t of tenants) this.#byHash.set(sha256(t.token), t);
  }

  /** The tenant of the request's `Authorization: Bearer <token>`, if any. */
  tenantOf(req: IncomingMessage): TenantConfig | undefined {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(String(req.headers.authorization ?? ""));
    return m ? this.#byHash.get(sha256(m[1])) : undefined;
  }
}

/** Answers with a JSON body and the security headers. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  extra: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
    "content-length": String(Buffer.byteLength(text)),
    ...extra,
  });
  res.end(text);
}

/**
 * Reads a JSON object body of at most `maxBytes` (`{}` when empty).
 *
 * @throws {HttpError} 413 beyond `maxBytes`, 400 when it is not a JSON object.
 */
export async function readJsonBody(
  req: IncomingMessage,
  maxBytes: number,
): Promise<Record<string, unknown>> {
  if (Number(req.headers["content-length"] ?? "0") > maxBytes) {
    throw new HttpError(413, `request body over ${maxBytes} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new HttpError(413, `request body over ${maxBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return {};
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    if (v && typeof v === "object" && !Array.isArray(v)) return v;
  } catch {
    // answered below
  }
  throw new HttpError(400, "the body must be a JSON object");
}

/**
 * Answers a GET for one of the page's assets.
 *
 * @throws {HttpError} 404 for anything else.
 */
export async function serveAsset(
  method: string,
  pathname: string,
  res: ServerResponse,
): Promise<void> {
  const file = method === "GET" ? await asset(pathname) : null;
  if (!file) throw new HttpError(404, "not found");
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    "content-type": file.type,
    "cache-control": "no-cache",
  });
  res.end(file.body);
}

/** A listening HTTP server that tracks its sockets, so a close can end keep-alive connections. */
export class HttpListener {
  /** The node:http server. */
  readonly server: Server;
  /** `http://host:port`. */
  readonly url: string;
  readonly #sockets: Set<Socket>;

  private constructor(server: Server, url: string, sockets: Set<Socket>) {
    this.server = server;
    this.url = url;
    this.#sockets = sockets;
  }

  /**
   * Listens on `host:port` (port 0: a free one).
   *
   * @throws {Error} When the port cannot be bound.
   */
  static async listen(handler: RequestListener, host: string, port: number): Promise<HttpListener> {
    const sockets = new Set<Socket>();
    const server = createServer(handler);
    server.on("connection", (s: Socket) => {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    const addr = server.address();
    const bound = typeof addr === "object" && addr ? addr.port : port;
    const shown = host.includes(":") ? `[${host}]` : host;
    return new HttpListener(server, `http://${shown}:${bound}`, sockets);
  }

  /** Stops accepting connections; resolves once the server has closed. */
  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** Destroys every open connection (after {@link HttpListener.stop}). */
  destroySockets(): void {
    for (const s of this.#sockets) s.destroy();
  }
}
