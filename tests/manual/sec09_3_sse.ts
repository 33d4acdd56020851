// Manual §9.3, as written; only the import specifier changed. The prelude defines the names the
// manual leaves undefined: an Express-style `app` built on node:http (it parses the JSON body and
// the `:id` parameter) and the `sessions` map; the epilogue posts a message and prints the SSE
// frames it received.
import { createServer, type ServerResponse } from "node:http";
import { createDefaultEngine, Mode, type TurnEngine } from "../../mod.ts";

// Prelude (ours).
type Handler = (
  req: { params: Record<string, string>; body: Record<string, unknown> },
  res: ServerResponse,
) => Promise<void>;
const routes: { method: string; re: RegExp; keys: string[]; handler: Handler }[] = [];
const app = {
  post(pattern: string, handler: Handler): void {
    const keys: string[] = [];
    const re = new RegExp(
      "^" + pattern.replace(/:(\w+)/g, (_m, k) => (keys.push(k), "([^/]+)")) + "$",
    );
    routes.push({ method: "POST", re, keys, handler });
  },
};
const server = createServer(async (req, res) => {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  const url = new URL(req.url ?? "/", "http://localhost");
  for (const r of routes) {
    const m = r.method === req.method ? r.re.exec(url.pathname) : null;
    if (!m) continue;
    const params = Object.fromEntries(r.keys.map((k, i) => [k, m[i + 1]]));
    await r.handler({ params, body: raw ? JSON.parse(raw) : {} }, res);
    return;
  }
  res.writeHead(404).end();
});
const sessions = new Map<string, { engine: TurnEngine }>();
sessions.set("s1", { engine: createDefaultEngine({ workspace: process.cwd(), mode: Mode.INTERACTIVE }) });

// §9.3
import type { WsEvent } from "../../mod.ts";

function toSse(event: WsEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`;
}

app.post("/sessions/:id/messages", async (req, res) => {
  const engine = sessions.get(req.params.id)!.engine;
  res.writeHead(200, {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    Connection: "keep-alive",
  });
  for await (const event of engine.run(String(req.body.text))) {
    res.write(toSse(event));
  }
  res.end();
});

// Epilogue (ours): a client posts a message and reads the stream.
await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
const { port } = server.address() as { port: number };
const res = await fetch(`http://127.0.0.1:${port}/sessions/s1/messages`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ text: "hello over SSE" }),
});
const body = await res.text();
server.close();
const frames = body.split("\n\n").filter(Boolean).map((f) => {
  const [e, d] = f.split("\n");
  return { type: e.slice(7), data: JSON.parse(d.slice(6)) };
});
console.log(JSON.stringify({
  contentType: res.headers.get("content-type"),
  types: [...new Set(frames.map((f) => f.type))],
  text: frames.filter((f) => f.type === "assistant_delta").map((f) => f.data.text).join(""),
  status: frames.at(-1)?.data.status,
}));
