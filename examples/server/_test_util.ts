/**
 * Helpers of the reference server's tests (not part of the package): a server on 127.0.0.1
 * with tenants whose providers are local {@link MockOpenAIServer}s, and an SSE client.
 *
 * @module
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { MockOpenAIServer, type TurnScript } from "../../testing/mod.ts";
import type { ServerConfig, TenantConfig } from "./config.ts";
import { AgentServer, type AgentServerOptions } from "./server.ts";

/** One SSE frame. */
export interface Frame {
  /** `event:` (an event type, or `server_error`). */
  type: string;
  /** Parsed `data:`. */
  data: Record<string, unknown>;
}

/** A running test server. */
export interface TestServer {
  /** The server. */
  server: AgentServer;
  /** Base URL. */
  url: string;
  /** Data folder. */
  dataDir: string;
  /** Tenants by id. */
  tenants: Record<string, TenantConfig>;
  /** The mock model server of each tenant. */
  models: Record<string, MockOpenAIServer>;
  /** The workspace folder of a tenant. */
  workspace(tenant: string): string;
  /** Stops the server (graceful) and the mock model servers; removes the data folder. */
  close(opts?: { keepData?: boolean }): Promise<void>;
}

/** Makes the configuration of a test server (port 0, a temporary data folder). */
export function testConfig(
  dataDir: string,
  tenants: TenantConfig[],
  extra: Partial<ServerConfig> = {},
): ServerConfig {
  return {
    host: "127.0.0.1",
    port: 0,
    dataDir,
    model: "mock-model",
    tenants,
    generatedToken: false,
    limits: { maxIterations: 20 },
    approvalTimeoutMs: 60_000,
    maxBodyBytes: 64 * 1024,
    vcsMode: "off",
    ...extra,
  };
}

/**
 * Starts a server with one tenant per script (`{acme: [...turns]}`), each with its own mock
 * model server and a token `token-of-<id>-0123456789`.
 */
export async function startTestServer(
  scripts: Record<string, TurnScript>,
  extra: Partial<AgentServerOptions> & { dataDir?: string } = {},
): Promise<TestServer> {
  const dataDir = extra.dataDir ??
    fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-server-")));
  const models: Record<string, MockOpenAIServer> = {};
  const tenants: Record<string, TenantConfig> = {};
  for (const [id, turns] of Object.entries(scripts)) {
    models[id] = await new MockOpenAIServer({ turns }).start();
    tenants[id] = {
      id,
      token: `token-of-${id}-0123456789`,
      apiKey: `key-of-${id}`,
      baseURL: models[id].baseURL,
    };
  }
  const server = new AgentServer({
    ...testConfig(dataDir, Object.values(tenants)),
    ...extra,
  });
  const url = await server.listen();
  return {
    server,
    url,
    dataDir,
    tenants,
    models,
    workspace: (t) => path.join(dataDir, "tenants", t, "workspace"),
    async close(opts = {}) {
      await server.close();
      for (const m of Object.values(models)) await m.close();
      if (!opts.keepData) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A JSON request with the tenant's token; returns status and parsed body. */
export async function call(
  url: string,
  token: string | null,
  method: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown>; text: string }> {
  const res = await fetch(url, {
    method,
    headers: {
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      "content-type": "application/json",
    },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed, text };
}

/**
 * POSTs to a streaming route and reads the SSE frames until the server ends the response or
 * `onFrame` returns `"stop"` (then the request is aborted: a client disconnect).
 */
export async function sse(
  url: string,
  token: string,
  body: unknown,
  onFrame: (frame: Frame) => unknown = () => {},
): Promise<{ status: number; frames: Frame[] }> {
  const ac = new AbortController();
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: ac.signal,
  });
  const frames: Frame[] = [];
  if (!res.body || !res.headers.get("content-type")?.startsWith("text/event-stream")) {
    await res.body?.cancel();
    return { status: res.status, frames };
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let type = "";
        let data = "";
        for (const line of raw.split("\n")) {
          if (line.startsWith("event: ")) type = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (!type) continue;
        const frame = { type, data: JSON.parse(data) };
        frames.push(frame);
        if (await onFrame(frame) === "stop") {
          ac.abort();
          await reader.cancel().catch(() => {});
          return { status: res.status, frames };
        }
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  return { status: res.status, frames };
}

/** Waits until `check()` is true, polling every 20 ms, at most `limit` tries (then throws). */
export async function until(check: () => boolean | Promise<boolean>, limit = 500): Promise<void> {
  for (let i = 0; i < limit; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("Cannot wait any longer: the condition never became true");
}
