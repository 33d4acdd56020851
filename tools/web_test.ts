import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, createServer as createTcpServer, type Socket } from "node:net";
import { ToolRegistry } from "./registry.ts";
import {
  BraveSearch,
  htmlToMarkdown,
  registerWebTools,
  searchBackendFromEnv,
  SearxngSearch,
  TavilySearch,
  type WebToolsOptions,
} from "./web.ts";

const ARTICLE = `<!doctype html><html><head><title>Pelicans</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>All about pelicans</h1>
<p>Pelicans are large water birds with a <a href="/pouch">throat pouch</a>. ${
  "They live near water and eat fish. ".repeat(20)
}</p>
<script>window.steal = true;</script>
<h2>Diet</h2><ul><li>fish</li><li>crustaceans</li></ul></article>
<footer>copyright</footer></body></html>`;

let server: Server;
let base = "";
const sockets = new Set<Socket>();
const seen: { path: string; headers: IncomingMessage["headers"]; body: string }[] = [];

function handle(req: IncomingMessage, res: ServerResponse, body: string): void {
  const url = new URL(req.url ?? "/", base);
  seen.push({ path: url.pathname + url.search, headers: req.headers, body });
  switch (url.pathname) {
    case "/article":
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      return void res.end(ARTICLE);
    case "/redirect":
      res.writeHead(302, { location: "/article" });
      return void res.end();
    case "/loop":
      res.writeHead(301, { location: "/loop" });
      return void res.end();
    case "/to-file":
      res.writeHead(302, { location: "file:///etc/passwd" });
      return void res.end();
    case "/plain":
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
      return void res.end("just text, 你好\n");
    case "/latin1":
      res.writeHead(200, { "content-type": "text/plain; charset=iso-8859-1" });
      return void res.end(Buffer.from([0x63, 0x61, 0x66, 0xe9])); // "café"
    case "/json":
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end('{"a":1,"b":[true,null]}');
    case "/png":
      res.writeHead(200, { "content-type": "image/png", "content-length": "8" });
      return void res.end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    case "/untyped-binary":
      res.writeHead(200);
      return void res.end(Buffer.from([0, 1, 2, 3, 0, 255, 254, 0]));
    case "/huge": {
      // 8 MiB of text, streamed in 64 KiB pieces; the client stops reading early.
      res.writeHead(200, { "content-type": "text/plain" });
      const piece = "x".repeat(65536);
      let sent = 0;
      const pump = () => {
        while (sent < 128) {
          sent++;
          if (!res.write(piece)) return void res.once("drain", pump);
        }
        res.end();
      };
      res.on("error", () => {});
      return pump();
    }
    case "/hang":
      res.writeHead(200, { "content-type": "text/html" });
      res.write("<html><body>");
      return; // never ends
    case "/missing":
      res.writeHead(404, { "content-type": "text/plain" });
      return void res.end("no such page");
    case "/searxng/search": {
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end(JSON.stringify({
        query: url.searchParams.get("q"),
        number_of_results: 2,
        results: [
          { url: "https://a.example/1", title: "First", content: "first snippet", engine: "ddg" },
          { url: "https://a.example/2", title: "Second", content: "second snippet" },
        ],
        answers: [],
        suggestions: [],
      }));
    }
    case "/brave/res/v1/web/search": {
      if (req.headers["x-subscription-token"] !== "brave-key") {
        res.writeHead(401, { "content-type": "application/json" });
        return void res.end(
          '{"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID"}}',
        );
      }
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end(JSON.stringify({
        type: "search",
        query: { original: url.searchParams.get("q") },
        web: {
          type: "search",
          results: [{
            title: "Brave hit",
            url: "https://b.example/",
            description: "A <strong>brave</strong> snippet",
            age: "1 day",
          }],
        },
      }));
    }
    case "/tavily/search": {
      if (req.headers.authorization !== "Bearer tvly-key" || req.method !== "POST") {
        res.writeHead(401, { "content-type": "application/json" });
        return void res.end('{"detail":{"error":"Unauthorized: missing or invalid API key."}}');
      }
      const q = JSON.parse(body);
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end(JSON.stringify({
        query: q.query,
        answer: null,
        images: [],
        results: [{
          title: "Tavily hit",
          url: "https://t.example/",
          content: `about ${q.query}`,
          score: 0.9,
          raw_content: null,
        }],
        response_time: 0.5,
      }));
    }
  }
  res.writeHead(404);
  res.end();
}

before(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => handle(req, res, body));
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

function tools(options: WebToolsOptions = {}): ToolRegistry {
  const registry = new ToolRegistry();
  registerWebTools(registry, { env: {}, searchBackend: null, ...options });
  return registry;
}

async function call(
  registry: ToolRegistry,
  name: string,
  args: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<string> {
  return String(await registry.get(name)!.func(args, { signal }));
}

test("web_fetch turns an HTML page into Markdown of its article, without scripts", async () => {
  const out = await call(tools(), "web_fetch", { url: `${base}/article` });
  assert.match(out, /^URL: http:\/\/127\.0\.0\.1:\d+\/article$/m);
  assert.match(out, /^Title: (All about pelicans|Pelicans)$/m);
  assert.match(out, /Pelicans are large water birds/);
  assert.match(out, /## Diet/);
  assert.match(out, /-\s+fish/);
  assert.match(out, /\[throat pouch\]\(http:\/\/127\.0\.0\.1:\d+\/pouch\)/, "links made absolute");
  assert.doesNotMatch(out, /window\.steal|<p>|<script/);
});

test("web_fetch follows a redirect and reports the final URL", async () => {
  const out = await call(tools(), "web_fetch", { url: `${base}/redirect` });
  assert.match(out, /^URL: .*\/article$/m);
  assert.match(out, /throat pouch/);
});

test("web_fetch refuses a redirect to a non-http scheme", async () => {
  await assert.rejects(
    call(tools(), "web_fetch", { url: `${base}/to-file` }),
    /redirects to file: \(only http and https/,
  );
});

test("web_fetch stops after 10 redirects", async () => {
  await assert.rejects(
    call(tools(), "web_fetch", { url: `${base}/loop` }),
    /more than 10 redirects/,
  );
});

test("web_fetch refuses URLs that are not http or https", async () => {
  await assert.rejects(
    call(tools(), "web_fetch", { url: "file:///etc/passwd" }),
    /only http and https URLs are allowed, not file:/,
  );
  await assert.rejects(call(tools(), "web_fetch", { url: "not a url" }), /is not a valid URL/);
});

test("web_fetch passes plain text through and decodes the declared charset", async () => {
  const out = await call(tools(), "web_fetch", { url: `${base}/plain` });
  assert.match(out, /Content-Type: text\/plain\n\njust text, 你好/);
  const latin = await call(tools(), "web_fetch", { url: `${base}/latin1` });
  assert.match(latin, /café$/);
});

test("web_fetch pretty-prints JSON", async () => {
  const out = await call(tools(), "web_fetch", { url: `${base}/json` });
  assert.match(out, /\{\n {2}"a": 1,\n {2}"b": \[/);
});

test("web_fetch refuses binary content, typed or not", async () => {
  await assert.rejects(
    call(tools(), "web_fetch", { url: `${base}/png` }),
    /content is image\/png \(8 bytes\), not text; use the media tool/,
  );
  await assert.rejects(
    call(tools(), "web_fetch", { url: `${base}/untyped-binary` }),
    /content is binary, not text/,
  );
});

test("web_fetch reads a huge page only up to the byte limit and says it was cut", async () => {
  const out = await call(tools({ maxBytes: 100_000, maxChars: 50_000 }), "web_fetch", {
    url: `${base}/huge`,
  });
  assert.match(out, /Note: the page was cut at 100000 bytes; the text was cut at 50000 chars/);
  const body = out.split("\n\n")[1];
  assert.equal(body.length, 50_000);
});

test("web_fetch gives up at the time limit with a clear error", async () => {
  await assert.rejects(
    call(tools({ timeoutMs: 300 }), "web_fetch", { url: `${base}/hang` }),
    /no complete answer within 300 ms/,
  );
});

test("web_fetch stops at once when the turn is interrupted", async () => {
  const ac = new AbortController();
  const pending = call(tools(), "web_fetch", { url: `${base}/hang` }, ac.signal);
  setTimeout(() => ac.abort(), 50);
  await assert.rejects(pending, (e: Error) => e.name === "AbortError");
});

test("web_fetch reports an HTTP error status with the start of the body", async () => {
  await assert.rejects(
    call(tools(), "web_fetch", { url: `${base}/missing` }),
    /HTTP 404 Not Found — no such page/,
  );
});

test("web_search is registered but disabled when no backend is configured", async () => {
  const registry = new ToolRegistry();
  const backend = registerWebTools(registry, { env: {} });
  assert.equal(backend, null);
  assert.ok(registry.get("web_search"));
  assert.equal(registry.get("web_search")!.enabled, false);
  assert.deepEqual(registry.schemas().map((s) => s.function.name), ["web_fetch"]);
  await assert.rejects(
    call(registry, "web_search", { query: "x" }),
    /no search backend is configured \(set SEARXNG_URL, BRAVE_API_KEY or TAVILY_API_KEY\)/,
  );
});

test("SEARXNG_URL enables web_search against a SearXNG JSON endpoint", async () => {
  const registry = new ToolRegistry();
  const backend = registerWebTools(registry, { env: { SEARXNG_URL: `${base}/searxng/` } });
  assert.equal(backend?.name, "searxng");
  assert.equal(registry.get("web_search")!.enabled, true);
  const out = await call(registry, "web_search", { query: "pelican diet", max_results: 1 });
  assert.match(out, /Results for "pelican diet" \(searxng\)/);
  assert.match(out, /1\. First\n {3}https:\/\/a\.example\/1\n {3}first snippet/);
  assert.doesNotMatch(out, /Second/);
  assert.equal(seen.at(-1)?.path, "/searxng/search?q=pelican+diet&format=json");
});

test("the Brave backend sends its token and reads web.results", async () => {
  const registry = tools({
    searchBackend: new BraveSearch("brave-key", { endpoint: `${base}/brave/res/v1/web/search` }),
  });
  const out = await call(registry, "web_search", { query: "brave" });
  assert.match(
    out,
    /1\. Brave hit\n {3}https:\/\/b\.example\/\n {3}A <strong>brave<\/strong> snippet/,
  );
  assert.match(seen.at(-1)!.path, /count=5/);
  const bad = tools({
    searchBackend: new BraveSearch("wrong", { endpoint: `${base}/brave/res/v1/web/search` }),
  });
  await assert.rejects(call(bad, "web_search", { query: "x" }), /Brave Search: HTTP 401/);
});

test("the Tavily backend posts the query with a bearer key", async () => {
  const registry = tools({
    searchBackend: new TavilySearch("tvly-key", { endpoint: `${base}/tavily/search` }),
  });
  const out = await call(registry, "web_search", { query: "agents", max_results: 3 });
  assert.match(out, /\(tavily\)/);
  assert.match(out, /Tavily hit\n {3}https:\/\/t\.example\/\n {3}about agents/);
  assert.deepEqual(JSON.parse(seen.at(-1)!.body), { query: "agents", max_results: 3 });
});

test("the environment picks the backend; WEB_SEARCH_BACKEND chooses among several", () => {
  assert.equal(searchBackendFromEnv({}), null);
  assert.equal(searchBackendFromEnv({ BRAVE_API_KEY: "k" })?.name, "brave");
  assert.equal(searchBackendFromEnv({ TAVILY_API_KEY: "k" })?.name, "tavily");
  const both = { SEARXNG_URL: "http://127.0.0.1:1", TAVILY_API_KEY: "k" };
  assert.equal(searchBackendFromEnv(both)?.name, "searxng");
  assert.equal(searchBackendFromEnv({ ...both, WEB_SEARCH_BACKEND: "tavily" })?.name, "tavily");
  assert.equal(
    (searchBackendFromEnv({ BRAVE_API_KEY: "k" }) as BraveSearch).endpoint,
    "https://api.search.brave.com/res/v1/web/search",
  );
  assert.throws(() => searchBackendFromEnv({ WEB_SEARCH_BACKEND: "bing" }), /not searxng/);
  assert.throws(
    () => searchBackendFromEnv({ WEB_SEARCH_BACKEND: "brave" }),
    /its variable is not set/,
  );
  assert.throws(() => new SearxngSearch("ftp://x"), /not an http\(s\) URL/);
});

test("web_search fails clearly on an empty query", async () => {
  const registry = tools({ searchBackend: new SearxngSearch(`${base}/searxng`) });
  await assert.rejects(call(registry, "web_search", { query: "  " }), /query is empty/);
});

test("htmlToMarkdown keeps the body when Readability finds no article", async () => {
  const { markdown } = await htmlToMarkdown(
    "<html><body><p>Short <b>note</b>.</p><script>x()</script></body></html>",
    "https://e.example/",
  );
  assert.equal(markdown, "Short **note**.");
});

/** A minimal real SOCKS5 proxy (no auth, CONNECT only) on 127.0.0.1. */
async function socksProxy(): Promise<{ url: string; connects: string[]; close(): Promise<void> }> {
  const connects: string[] = [];
  const open = new Set<Socket>();
  const proxy = createTcpServer((client) => {
    open.add(client);
    client.on("close", () => open.delete(client));
    client.on("error", () => {});
    client.once("data", (greeting) => {
      assert.equal(greeting[0], 5);
      client.write(Buffer.from([5, 0]));
      client.once("data", (req) => {
        let host = "";
        let at = 4;
        if (req[3] === 1) {
          host = [...req.subarray(4, 8)].join(".");
          at = 8;
        } else if (req[3] === 3) {
          host = req.subarray(5, 5 + req[4]).toString();
          at = 5 + req[4];
        }
        const port = req.readUInt16BE(at);
        connects.push(`${host}:${port}`);
        const upstream = connect(port, host, () => {
          client.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
          client.pipe(upstream).pipe(client);
        });
        open.add(upstream);
        upstream.on("close", () => open.delete(upstream));
        upstream.on("error", () => client.destroy());
      });
    });
  });
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
  return {
    url: `socks5://127.0.0.1:${(proxy.address() as { port: number }).port}`,
    connects,
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => proxy.close(() => r()));
    },
  };
}

test("web_fetch goes through SOCKS5_PROXY when it is set", async () => {
  const proxy = await socksProxy();
  try {
    const registry = tools({ env: { SOCKS5_PROXY: proxy.url } });
    const out = await call(registry, "web_fetch", { url: `${base}/plain` });
    assert.match(out, /just text/);
    assert.equal(proxy.connects.length, 1);
    assert.equal(proxy.connects[0], `127.0.0.1:${new URL(base).port}`);
  } finally {
    await proxy.close();
  }
});
