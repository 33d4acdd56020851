// MCP against real servers from npm (server-everything, server-filesystem, server-memory) and the
// case fixture servers, over stdio, streamable HTTP and SSE on 127.0.0.1.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import process from "node:process";
import { ToolRegistry } from "../tools/mod.ts";
import { normalizeMcpConfigs } from "./config.ts";
import { MCP_CALL_TOOL, MCP_SEARCH_TOOL, McpManager, type McpManagerOptions } from "./manager.ts";
import { McpClient } from "./client.ts";
import {
  alive,
  EVERYTHING_ENTRY,
  FILESYSTEM_ENTRY,
  FIXTURES,
  MEMORY_ENTRY,
  needReal,
  waitFor,
} from "./_test_util.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";

const skip = needReal({ node: true, servers: true });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(raw: unknown, options: McpManagerOptions = {}, env: Record<string, string> = {}) {
  const ws = tempWorkspace({ "hello.txt": "hello from the workspace\n" });
  cleanups.push(() => removeDir(ws));
  const vars = {
    ...process.env,
    EVERYTHING_ENTRY,
    FILESYSTEM_ENTRY,
    MEMORY_ENTRY,
    WORKSPACE: ws,
    ...env,
  };
  const text = JSON.stringify(raw).replaceAll("${FIXTURES}", "${CASE_DIR}");
  const { configs, warnings } = normalizeMcpConfigs(JSON.parse(text));
  assert.deepEqual(warnings, []);
  const registry = new ToolRegistry();
  const manager = new McpManager(registry, configs, {
    env: vars,
    builtin: { workspace: ws },
    ...options,
  });
  cleanups.push(() => manager.closeAll());
  return { ws, registry, manager };
}

function caseFile(name: string, file = "mcp.json"): unknown {
  const text = fs.readFileSync(path.join(FIXTURES, name, file), "utf8")
    .replaceAll("${FIXTURES}", path.join(FIXTURES, name));
  return JSON.parse(text);
}

const everything = {
  servers: { everything: { command: "node", args: ["${EVERYTHING_ENTRY}", "stdio"] } },
};

async function call(
  registry: ToolRegistry,
  name: string,
  args: Record<string, unknown> = {},
  signal?: AbortSignal,
) {
  const spec = registry.get(name);
  assert.ok(spec, `tool ${name} is registered`);
  try {
    return { value: await spec.func(args, { signal }) };
  } catch (error) {
    return { error: error as Error };
  }
}

test(
  "server-everything over stdio: tools registered as mcp__everything__* with approval metadata",
  { skip },
  async () => {
    const { registry, manager } = setup(everything);
    assert.deepEqual(await manager.connectAll(), { connected: ["everything"], failed: [] });
    const names = registry.names().filter((n) => n.startsWith("mcp__everything__"));
    assert.equal(names.length, 12, "13 tools minus the task-only simulate-research-query");
    assert.ok(!names.includes("mcp__everything__simulate-research-query"));
    const echo = registry.get("mcp__everything__echo")!;
    assert.deepEqual(
      { ...echo.metadata, capabilities: undefined },
      { category: "mcp", riskLevel: "high", requiresApproval: true, capabilities: undefined },
    );
    assert.equal(echo.metadata.riskClass, undefined);
    assert.equal(echo.source, "mcp:everything");
    assert.equal((echo.schema.function.parameters as { type: string }).type, "object");
    assert.deepEqual(
      (await call(registry, "mcp__everything__echo", { message: "hi" })).value,
      "Echo: hi",
    );
    const status = manager.status("everything")!;
    assert.equal(status.state, "connected");
    assert.equal(status.transport, "stdio");
    assert.ok(status.pid && alive(status.pid));
  },
);

test(
  "results map text, images, resources, structured content; isError is a tool error",
  { skip },
  async () => {
    const { registry, manager } = setup(everything);
    await manager.connectAll();
    const image = String((await call(registry, "mcp__everything__get-tiny-image")).value);
    assert.match(image, /\[image: image\/png, \d+ bytes\]/);
    const resource = String(
      (await call(registry, "mcp__everything__get-resource-reference", {
        resourceType: "Text",
        resourceId: 1,
      })).value,
    );
    assert.match(resource, /Resource .*text/i);
    const links = String(
      (await call(registry, "mcp__everything__get-resource-links", { count: 2 })).value,
    );
    assert.match(links, /Resource link: .* at /);
    const structured = String(
      (await call(registry, "mcp__everything__get-structured-content", { location: "New York" }))
        .value,
    );
    assert.match(structured, /temperature/);
    const bad = (await call(registry, "mcp__everything__get-sum", { a: "x" })).value as Record<
      string,
      unknown
    >;
    assert.equal(bad.error_type, "mcp_tool_error");
    assert.match(String(bad.error), /-32602|Invalid/);
  },
);

// Case env-default-merge with a real child.
test("case env-default-merge: the child sees PATH, HOME, expanded env and no unrelated secret", {
  skip,
}, async () => {
  const envs = {
    EXAMPLE_API_KEY: "k-123",
    UNRELATED_SECRET: "s-456",
    HTTPS_PROXY: "http://127.0.0.1:9",
  };
  const { registry, manager } = setup(caseFile("env-default-merge"), {}, envs);
  await manager.connectAll();
  const env = JSON.parse(String((await call(registry, "mcp__envprobe__get-env")).value));
  assert.ok(env.PATH);
  assert.ok(env.HOME);
  assert.equal(env.EXAMPLE_API_KEY, "k-123");
  assert.equal(env.EXAMPLE_MODE, "test");
  assert.equal(env.HTTPS_PROXY, "http://127.0.0.1:9");
  assert.equal(env.UNRELATED_SECRET, undefined);
  await manager.updateConfig("envprobe", { inheritEnv: true });
  const all = JSON.parse(String((await call(registry, "mcp__envprobe__get-env")).value));
  assert.equal(all.UNRELATED_SECRET, "s-456");
});

// Case missing-command-enoent.
test(
  "case missing-command-enoent: connectAll resolves with the healthy server and clear failures",
  { skip },
  async () => {
    const { registry, manager } = setup(caseFile("missing-command-enoent"));
    const result = await manager.connectAll();
    assert.deepEqual(result.connected, ["healthy"]);
    const failed = Object.fromEntries(result.failed.map((f) => [f.name, f.error]));
    assert.deepEqual(Object.keys(failed).sort(), ["ghost", "quitter"]);
    assert.match(failed.ghost, /example-missing-binary-9f3c/);
    assert.match(failed.ghost, /ENOENT/);
    assert.match(failed.ghost, /not found on PATH/);
    assert.match(failed.quitter, /fatal: EXAMPLE_TOKEN is not set/);
    assert.equal(registry.names().filter((n) => n.startsWith("mcp__")).length, 12);
    assert.ok(
      registry.names().every((n) => !n.startsWith("mcp__ghost") && !n.startsWith("mcp__quitter")),
    );
    assert.equal(manager.status("quitter")!.state, "failed");
  },
);

// Case stdout-banner-noise.
test("case stdout-banner-noise: non-JSON stdout lines are skipped and the server stays connected", {
  skip,
}, async () => {
  const { registry, manager } = setup(caseFile("stdout-banner-noise"));
  await manager.connectServer("noisy");
  assert.ok(registry.has("mcp__noisy__log_then_answer"));
  assert.ok(registry.has("mcp__noisy__plain"));
  assert.equal((await call(registry, "mcp__noisy__log_then_answer", { x: "a" })).value, "ok a");
  assert.equal((await call(registry, "mcp__noisy__plain")).value, "plain ok");
  assert.equal(manager.status("noisy")!.state, "connected");
});

// Case tool-name-over-64 with the real server.
test(
  "case tool-name-over-64: long names are cut with a hash, the call sends the raw name, refresh keeps names",
  { skip },
  async () => {
    const { registry, manager } = setup(caseFile("tool-name-over-64"));
    await manager.connectAll();
    const names = registry.names().filter((n) => n.startsWith("mcp__"));
    assert.equal(names.length, 12);
    for (const n of names) assert.match(n, /^[a-zA-Z0-9_-]{1,64}$/);
    assert.ok(names.includes("mcp__example-enterprise-knowledge-base-connector__echo"));
    assert.ok(names.includes("mcp__example-enterprise-knowledge-base-connector__get-tiny-image"));
    const long = names.find((n) => n.endsWith("trigger-long-running-operation"))!;
    assert.ok(long.length <= 64);
    const r = await call(registry, long, { duration: 0.1, steps: 1 });
    assert.match(String(r.value), /completed/i);
    await manager.refresh("example-enterprise-knowledge-base-connector");
    assert.deepEqual(registry.names().filter((n) => n.startsWith("mcp__")), names);
  },
);

// Case reconnect-after-crash.
test(
  "case reconnect-after-crash: a crash mid-call is a fast tool error; the next call reconnects",
  { skip },
  async () => {
    const { registry, manager } = setup(caseFile("reconnect-after-crash"));
    await manager.connectAll();
    const before = registry.names();
    const pidA = Number((await call(registry, "mcp__crashy__ping")).value);
    assert.ok(pidA > 0);
    const crashed = await call(registry, "mcp__crashy__crash");
    assert.ok(crashed.error);
    assert.match(crashed.error.message, /exited \(code 3\)/);
    assert.equal(crashed.error.name, "McpServerError");
    assert.equal(manager.status("crashy")!.state, "disconnected");
    assert.deepEqual(registry.names(), before, "tools stay listed while disconnected");
    const pidB = Number((await call(registry, "mcp__crashy__ping")).value);
    assert.ok(pidB > 0 && pidB !== pidA);
    assert.equal(Number((await call(registry, "mcp__crashy__ping")).value), pidB);
    await manager.refresh("crashy");
    const pidC = Number((await call(registry, "mcp__crashy__ping")).value);
    assert.notEqual(pidC, pidB);
    assert.deepEqual(registry.names(), before, "same names after refresh");
    await manager.closeAll();
    assert.ok(await waitFor(() => !alive(pidC)), "closeAll stopped the child");
    assert.ok(!alive(pidB));
    await manager.closeAll();
    assert.equal(registry.names().filter((n) => n.startsWith("mcp__")).length, 0);
  },
);

test(
  "a server killed mid-call gives a clear tool error and comes back on next use",
  { skip },
  async () => {
    const { registry, manager } = setup({
      servers: {
        slow: { command: "node", args: [path.join(FIXTURES, "helper-server.mjs"), "slow"] },
      },
    });
    await manager.connectAll();
    const pid = manager.status("slow")!.pid!;
    const pending = call(registry, "mcp__slow__sleep");
    await new Promise((r) => setTimeout(r, 200));
    process.kill(pid, "SIGKILL");
    const r = await pending;
    assert.match(
      r.error!.message,
      /Cannot call sleep on MCP server "slow": the server exited \(signal SIGKILL\)/,
    );
    const again = await call(registry, "mcp__slow__progress", { steps: 1 });
    assert.equal(again.value, "done 1");
    assert.notEqual(manager.status("slow")!.pid, pid);
  },
);

test(
  "progress notifications reset the call timeout; without progress the call times out",
  { skip },
  async () => {
    const { registry, manager } = setup(
      {
        servers: {
          slow: { command: "node", args: [path.join(FIXTURES, "helper-server.mjs"), "slow"] },
        },
      },
      { callTimeoutMs: 1000 },
    );
    await manager.connectAll();
    // 5 steps of 300 ms = 1.5 s in total, longer than the 1 s timeout, but progress arrives every 300 ms.
    assert.equal((await call(registry, "mcp__slow__progress", { steps: 5 })).value, "done 5");
    const r = await call(registry, "mcp__slow__sleep");
    assert.match(r.error!.message, /no answer within 1000 ms \(MCP_CALL_TIMEOUT_MS\)/);
    assert.equal(manager.status("slow")!.state, "connected");
  },
);

test("MCP_CALL_TIMEOUT_MS sets the default call timeout", { skip }, async () => {
  const { manager } = setup({
    servers: {
      slow: { command: "node", args: [path.join(FIXTURES, "helper-server.mjs"), "slow"] },
    },
  });
  await manager.connectAll();
  const old = process.env.MCP_CALL_TIMEOUT_MS;
  process.env.MCP_CALL_TIMEOUT_MS = "300";
  try {
    await assert.rejects(manager.client("slow")!.callTool("sleep", {}), /no answer within 300 ms/);
  } finally {
    if (old === undefined) delete process.env.MCP_CALL_TIMEOUT_MS;
    else process.env.MCP_CALL_TIMEOUT_MS = old;
  }
});

test("aborting the signal cancels the call on the server", { skip }, async () => {
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  const cancelFile = path.join(ws, "cancelled");
  const { registry, manager } = setup({
    servers: {
      slow: {
        command: "node",
        args: [path.join(FIXTURES, "helper-server.mjs"), "slow"],
        env: { CANCEL_FILE: cancelFile },
      },
    },
  });
  await manager.connectAll();
  const controller = new AbortController();
  const pending = call(registry, "mcp__slow__sleep", {}, controller.signal);
  await new Promise((r) => setTimeout(r, 200));
  controller.abort();
  const r = await pending;
  assert.equal(r.error!.name, "AbortError");
  assert.ok(
    await waitFor(() => fs.existsSync(cancelFile)),
    "the server saw notifications/cancelled",
  );
});

test("every tools/list page is read; a repeated cursor stops the loop; duplicates keep the first", {
  skip,
}, async () => {
  const { registry, manager } = setup({
    servers: {
      paged: { command: "node", args: [path.join(FIXTURES, "helper-server.mjs"), "paged"] },
    },
  });
  await manager.connectAll();
  assert.deepEqual(registry.names().filter((n) => n.startsWith("mcp__")), [
    "mcp__paged__p1_a",
    "mcp__paged__p1_b",
    "mcp__paged__p2_a",
    "mcp__paged__p3_a",
    "mcp__paged__p3_b",
  ]);
  assert.ok(manager.status("paged")!.warnings.some((w) => /repeated cursor/.test(w)));
});

test("tools/list_changed refreshes the registered tools", { skip }, async () => {
  const { registry, manager } = setup({
    servers: {
      changing: { command: "node", args: [path.join(FIXTURES, "helper-server.mjs"), "changing"] },
    },
  });
  await manager.connectAll();
  assert.ok(!registry.has("mcp__changing__extra_tool"));
  await call(registry, "mcp__changing__add_tool");
  assert.ok(await waitFor(() => registry.has("mcp__changing__extra_tool")));
  assert.equal((await call(registry, "mcp__changing__extra_tool")).value, "extra");
});

test("server-filesystem and server-memory work through the registry", { skip }, async () => {
  const { ws, registry, manager } = setup({
    servers: {
      files: { command: "node", args: ["${FILESYSTEM_ENTRY}", "${WORKSPACE}"] },
      memory: {
        command: "node",
        args: ["${MEMORY_ENTRY}"],
        env: { MEMORY_FILE_PATH: "${WORKSPACE}/memory.jsonl" },
      },
    },
  }, { lazy: { enabled: false } });
  const r = await manager.connectAll();
  assert.deepEqual(r.connected.sort(), ["files", "memory"]);
  const text = await call(registry, "mcp__files__read_text_file", {
    path: path.join(ws, "hello.txt"),
  });
  assert.match(String(text.value), /hello from the workspace/);
  const denied = (await call(registry, "mcp__files__read_text_file", { path: "/etc/passwd" }))
    .value as Record<string, unknown>;
  assert.equal(denied.error_type, "mcp_tool_error");
  await call(registry, "mcp__memory__create_entities", {
    entities: [{ name: "Ada", entityType: "person", observations: ["wrote programs"] }],
  });
  assert.match(
    String((await call(registry, "mcp__memory__search_nodes", { query: "Ada" })).value),
    /wrote programs/,
  );
  assert.match(fs.readFileSync(path.join(ws, "memory.jsonl"), "utf8"), /Ada/);
});

// Case lazy-mode-many-tools.
test(
  "case lazy-mode-many-tools: eager with one server, lazy with three, search loads, call works",
  { skip },
  async () => {
    const eager = setup(caseFile("lazy-mode-many-tools", "mcp-eager.json"));
    await eager.manager.connectAll();
    assert.equal(
      eager.registry.schemas().filter((s) => s.function.name.startsWith("mcp__")).length,
      12,
    );
    assert.ok(!eager.registry.has(MCP_SEARCH_TOOL));
    const raw = caseFile("lazy-mode-many-tools") as { servers: Record<string, unknown> };
    delete raw.servers.thinking; // server-sequential-thinking is not installed; three servers pass 16 tools
    const logs: string[] = [];
    const { registry, manager } = setup(raw, { log: (_l, m) => logs.push(m) });
    const result = await manager.connectAll();
    assert.equal(result.failed.length, 0, JSON.stringify(result.failed));
    const offered = registry.schemas().map((s) => s.function.name);
    assert.deepEqual(offered.filter((n) => n.startsWith("mcp")).sort(), [
      MCP_CALL_TOOL,
      MCP_SEARCH_TOOL,
    ]);
    assert.equal(manager.lazyState.active, true);
    assert.equal(manager.lazyState.toolCount, 35);
    assert.ok(logs.some((l) => /lazy mode on: 35 tools > 16/.test(l)), logs.join("\n"));
    const search = registry.get(MCP_SEARCH_TOOL)!;
    assert.equal(search.metadata.requiresApproval, false);
    const found = await search.func({ query: "list directory" }) as {
      matches: { name: string; server: string }[];
    };
    assert.ok(found.matches.length > 0 && found.matches.length <= 8);
    assert.equal(found.matches[0].server, "files");
    assert.match(found.matches[0].name, /^mcp__files__list_directory/);
    const nowOffered = registry.schemas().map((s) => s.function.name);
    for (const m of found.matches) assert.ok(nowOffered.includes(m.name), m.name);
    const callTool = registry.get(MCP_CALL_TOOL)!;
    assert.equal(callTool.metadata.requiresApproval, true);
    const listing = await callTool.func({ name: "mcp__memory__read_graph", arguments: {} });
    assert.match(String(listing), /entities/);
    const unknown = await callTool.func({ name: "mcp__files__list_directry" }) as Record<
      string,
      string
    >;
    assert.match(unknown.error, /did you mean mcp__files__list_directory/);
    await manager.refresh("files");
    assert.ok(
      registry.schemas().some((s) => s.function.name === found.matches[0].name),
      "loaded set survives refresh",
    );
  },
);

test(
  "lazy mode: the character threshold, the 40-tool cap with LRU, and ZQAGENT_MCP_LAZY",
  { skip },
  async () => {
    const big = {
      servers: {
        big: { command: "node", args: [path.join(FIXTURES, "helper-server.mjs"), "big"] },
      },
    };
    const { manager, registry: bigRegistry } = setup(big);
    await manager.connectAll();
    const state = manager.lazyState;
    assert.equal(state.toolCount, 6);
    assert.ok(state.chars > 24_000, String(state.chars));
    assert.equal(state.active, true);

    const many = setup(caseFile("lazy-mode-many-tools", "mcp-eager.json"), {
      lazy: { maxLoaded: 3, thresholdTools: 5 },
    });
    await many.manager.connectAll();
    const search = many.registry.get(MCP_SEARCH_TOOL)!;
    await search.func({ query: "echo", limit: 1 });
    await search.func({ query: "sum", limit: 1 });
    await search.func({ query: "env", limit: 1 });
    await search.func({ query: "tiny image", limit: 1 });
    const loaded = many.manager.lazyState.loaded;
    assert.equal(loaded.length, 3);
    assert.ok(!loaded.includes("mcp__everything__echo"), "least recently used was unloaded");
    assert.ok(!many.registry.schemas().some((s) => s.function.name === "mcp__everything__echo"));

    const old = process.env.ZQAGENT_MCP_LAZY;
    process.env.ZQAGENT_MCP_LAZY = "0";
    try {
      await manager.refresh("big");
      assert.equal(manager.lazyState.active, false);
      assert.ok(!bigRegistry.has(MCP_SEARCH_TOOL));
    } finally {
      if (old === undefined) delete process.env.ZQAGENT_MCP_LAZY;
      else process.env.ZQAGENT_MCP_LAZY = old;
    }
  },
);

test("attach moves the tools to a new registry; add/update/removeConfig change memory only", {
  skip,
}, async () => {
  const { ws, registry, manager } = setup(everything);
  await manager.connectAll();
  const next = new ToolRegistry();
  manager.attach(next);
  assert.equal(registry.names().filter((n) => n.startsWith("mcp__")).length, 0);
  assert.ok(next.has("mcp__everything__echo"));
  manager.addConfig({
    name: "mem",
    command: "node",
    args: [MEMORY_ENTRY],
    env: { MEMORY_FILE_PATH: path.join(ws, "m.jsonl") },
  });
  assert.equal(manager.status("mem")!.state, "idle");
  await manager.connectServer("mem");
  assert.ok(next.has("mcp__mem__read_graph"));
  await manager.updateConfig("mem", { enabled: false });
  assert.equal(manager.status("mem")!.state, "disabled");
  assert.ok(!next.has("mcp__mem__read_graph"));
  assert.equal(await manager.removeConfig("mem"), true);
  assert.equal(manager.status("mem"), undefined);
  assert.deepEqual(manager.configs.map((c) => c.name), ["everything"]);
  assert.equal(fs.existsSync(path.join(ws, ".agent", "mcp.json")), false, "nothing was saved");
});

test("an MCP tool never overwrites a host tool of the same name", { skip }, async () => {
  const { registry, manager } = setup(everything);
  registry.register(() => "host", {
    category: "x",
    riskLevel: "low",
    capabilities: [],
    requiresApproval: false,
  }, {
    type: "function",
    function: { name: "mcp__everything__echo", parameters: { type: "object" } },
  });
  await manager.connectAll();
  assert.equal(await registry.get("mcp__everything__echo")!.func({}), "host");
  const renamed = registry.names().find((n) => /^mcp__everything__echo_[0-9a-f]{8}$/.test(n));
  assert.ok(renamed);
  assert.equal(await registry.get(renamed)!.func({ message: "x" }), "Echo: x");
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function startHttpEverything(mode: "streamableHttp" | "sse"): Promise<number> {
  const port = await freePort();
  const child = spawn("node", [EVERYTHING_ENTRY, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.resume();
  child.stderr.resume();
  cleanups.push(async () => {
    child.kill("SIGKILL");
    await new Promise((r) =>
      child.exitCode !== null || child.signalCode !== null ? r(null) : child.once("exit", r)
    );
  });
  const up = await waitFor(() => false, 0) || await new Promise<boolean>((resolve) => {
    const end = Date.now() + 10_000;
    const tryConnect = () => {
      const sock = net.connect(port, "127.0.0.1", () => {
        sock.destroy();
        resolve(true);
      });
      sock.on("error", () => (Date.now() > end ? resolve(false) : setTimeout(tryConnect, 50)));
    };
    tryConnect();
  });
  assert.ok(up, "the HTTP server started");
  return port;
}

test(
  "streamable HTTP: server-everything on 127.0.0.1 with headers expanded from env",
  { skip },
  async () => {
    const port = await startHttpEverything("streamableHttp");
    const { registry, manager } = setup(
      {
        servers: {
          web: {
            url: `http://127.0.0.1:${port}/mcp`,
            headers: { Authorization: "Bearer ${MCP_TEST_TOKEN}" },
          },
        },
      },
      {},
      { MCP_TEST_TOKEN: "t-1" },
    );
    const r = await manager.connectAll();
    assert.deepEqual(r.connected, ["web"], JSON.stringify(r.failed));
    assert.equal(manager.status("web")!.transport, "http");
    assert.equal(
      (await call(registry, "mcp__web__echo", { message: "over http" })).value,
      "Echo: over http",
    );
  },
);

test(
  "legacy SSE: type sse connects, and an http URL answering 404 falls back to SSE",
  { skip },
  async () => {
    const port = await startHttpEverything("sse");
    const { registry, manager } = setup({
      servers: {
        explicit: { type: "sse", url: `http://127.0.0.1:${port}/sse` },
        fallback: { url: `http://127.0.0.1:${port}/sse` },
      },
    });
    const r = await manager.connectAll();
    assert.deepEqual(r.connected.sort(), ["explicit", "fallback"], JSON.stringify(r.failed));
    assert.equal(manager.status("explicit")!.transport, "sse");
    assert.equal(manager.status("fallback")!.transport, "sse");
    assert.equal(
      (await call(registry, "mcp__fallback__echo", { message: "sse" })).value,
      "Echo: sse",
    );
  },
);

test("a refused HTTP connection fails without trying SSE", { skip }, async () => {
  const port = await freePort();
  const logs: string[] = [];
  const { manager } = setup({ servers: { down: { url: `http://127.0.0.1:${port}/mcp` } } }, {
    log: (_l, m) => logs.push(m),
  });
  const r = await manager.connectAll();
  assert.equal(r.failed[0].name, "down");
  assert.ok(!logs.some((l) => /legacy SSE/.test(l)));
});

test("McpClient alone connects, lists and closes; close is idempotent", { skip }, async () => {
  const client = new McpClient(
    {
      name: "mem",
      type: "stdio",
      command: ["node", MEMORY_ENTRY],
      enabled: true,
      env: { MEMORY_FILE_PATH: "/dev/null" },
    },
  );
  cleanups.push(() => client.close());
  await client.connect();
  assert.equal(client.tools.length, 9);
  const pid = client.pid!;
  await client.close();
  await client.close();
  assert.equal(client.state, "closed");
  assert.ok(await waitFor(() => !alive(pid)));
  await assert.rejects(client.callTool("read_graph", {}), /not connected/);
});

test(
  "a server that never answers initialize holds back neither the other servers' tools nor their result",
  { skip },
  async () => {
    const { registry, manager } = setup({
      servers: {
        // Reads its input and never answers: connecting to it lasts until the connect timeout.
        hang: { command: "node", args: ["-e", "process.stdin.resume()"] },
        everything: { command: "node", args: ["${EVERYTHING_ENTRY}", "stdio"] },
        missing: { command: "zq-no-such-mcp-command" },
        memory: { command: "node", args: ["${MEMORY_ENTRY}"] },
      },
    }, { connectTimeoutMs: 600_000 });
    let settled = false;
    const all = manager.connectAll().finally(() => (settled = true));
    const othersUp = () =>
      registry.has("mcp__everything__echo") && registry.has("mcp__memory__read_graph");
    assert.ok(await waitFor(othersUp, 60_000), "the healthy servers' tools are registered");
    assert.equal(settled, false, "connectAll is still waiting for the hanging server");
    assert.equal(manager.status("hang")!.state, "connecting");
    assert.equal(manager.status("missing")!.state, "failed");
    assert.equal(
      (await call(registry, "mcp__everything__echo", { message: "meanwhile" })).value,
      "Echo: meanwhile",
    );
    await manager.closeAll(); // gives up on the hanging server
    const result = await all;
    assert.deepEqual(result.connected, ["everything", "memory"], "config order");
    assert.deepEqual(result.failed.map((f) => f.name), ["hang", "missing"], "config order");
  },
);
