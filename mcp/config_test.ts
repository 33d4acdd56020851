import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  BUILTIN_MCP_CONFIGS,
  defaultMcpConfigPath,
  loadMcpConfigFile,
  McpConfigError,
  normalizeMcpConfig,
  normalizeMcpConfigs,
  readMcpConfigFile,
  saveMcpConfigFile,
  splitCommandLine,
  withBuiltinMcpConfigs,
} from "./config.ts";
import { childEnv, findProgram, resolveStdioLaunch } from "./_launch.ts";
import { FIXTURES } from "./_test_util.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";

test("a bare array, servers list, servers map, mcpServers map and VS Code file all load", () => {
  const entry = { command: "node", args: ["s.js"] };
  const shapes: unknown[] = [
    [{ name: "a", ...entry }],
    { servers: [{ name: "a", ...entry }] },
    { servers: { a: entry } },
    { mcpServers: { a: entry } },
    { inputs: [{ id: "tok", type: "promptString" }], servers: { a: { type: "stdio", ...entry } } },
    { mcp: { a: { type: "local", command: ["node", "s.js"] } } },
  ];
  for (const shape of shapes) {
    const { configs, warnings } = normalizeMcpConfigs(shape);
    assert.deepEqual(warnings, [], JSON.stringify(shape));
    assert.equal(configs.length, 1);
    assert.equal(configs[0].name, "a");
    assert.equal(configs[0].type, "stdio");
  }
});

test("type is inferred builtin, then url, then command", () => {
  assert.equal(normalizeMcpConfig({ name: "ocr" }).type, "builtin");
  assert.equal(normalizeMcpConfig({ url: "http://127.0.0.1/mcp", command: "x" }, "r").type, "http");
  assert.equal(normalizeMcpConfig({ command: "x" }, "s").type, "stdio");
  assert.equal(normalizeMcpConfig({ type: "streamable-http", url: "http://h" }, "h").type, "http");
  assert.equal(normalizeMcpConfig({ type: "sse", url: "http://h" }, "h").type, "sse");
});

test("enabled false and disabled true disable an entry; a contradiction warns and disables", () => {
  assert.equal(normalizeMcpConfig({ command: "x", enabled: false }, "a").enabled, false);
  assert.equal(normalizeMcpConfig({ command: "x", disabled: true }, "a").enabled, false);
  assert.equal(normalizeMcpConfig({ command: "x" }, "a").enabled, true);
  const warnings: string[] = [];
  assert.equal(
    normalizeMcpConfig({ command: "x", enabled: true, disabled: true }, "a", warnings).enabled,
    false,
  );
  assert.match(warnings[0], /contradict/);
});

test("bad entries become warnings and the good ones still load", () => {
  const { configs, warnings } = normalizeMcpConfigs({
    servers: [
      { name: "good", command: "node" },
      { name: "nothing" },
      { command: "node" },
      { name: "weird", type: "carrier-pigeon", command: "x" },
      "not an object",
      { name: "good", command: "other" },
    ],
  });
  assert.deepEqual(configs.map((c) => c.name), ["good"]);
  assert.equal(warnings.length, 5);
  assert.ok(warnings.some((w) => /neither a command nor a url/.test(w)));
  assert.ok(warnings.some((w) => /no name/.test(w)));
  assert.ok(warnings.some((w) => /carrier-pigeon/.test(w)));
  assert.ok(warnings.some((w) => /defined twice/.test(w)));
});

test("an unrecognised file shape gives a warning, not an exception", () => {
  const { configs, warnings } = normalizeMcpConfigs({ tools: [] });
  assert.deepEqual(configs, []);
  assert.match(warnings[0], /expected an array/);
});

test("normalizeMcpConfig throws a named error for an unusable entry", () => {
  assert.throws(() => normalizeMcpConfig({ type: "stdio" }, "x"), McpConfigError);
  assert.throws(() => normalizeMcpConfig(42), /not an object/);
});

test("loadMcpConfigFile gives no servers for a missing file and a warning for broken JSON", () => {
  const ws = tempWorkspace({ ".agent/mcp.json": "{ broken" });
  try {
    assert.equal(defaultMcpConfigPath(ws), path.join(ws, ".agent", "mcp.json"));
    assert.deepEqual(loadMcpConfigFile(path.join(ws, "none.json")), { configs: [], warnings: [] });
    const r = loadMcpConfigFile(defaultMcpConfigPath(ws));
    assert.deepEqual(r.configs, []);
    assert.match(r.warnings[0], /Cannot read MCP config/);
    assert.throws(() => readMcpConfigFile(defaultMcpConfigPath(ws)), McpConfigError);
  } finally {
    removeDir(ws);
  }
});

test("JSONC comments and trailing commas (VS Code) are accepted", () => {
  const ws = tempWorkspace({
    "mcp.json":
      '{\n // comment\n "servers": { "a": { "type": "stdio", "command": "node", /* x */ "args": ["//not a comment"], }, },\n}',
  });
  try {
    const { configs, warnings } = loadMcpConfigFile(path.join(ws, "mcp.json"));
    assert.deepEqual(warnings, []);
    assert.deepEqual(configs[0].args, ["//not a comment"]);
  } finally {
    removeDir(ws);
  }
});

test("saveMcpConfigFile writes atomically and round-trips; unchanged presets are left out", () => {
  const ws = tempWorkspace();
  try {
    const file = defaultMcpConfigPath(ws);
    const { configs } = normalizeMcpConfigs({
      mcpServers: {
        mem: { command: "npx -y @modelcontextprotocol/server-memory", env: { K: "${TOKEN}" } },
        remote: { url: "http://127.0.0.1:1/mcp", headers: { Authorization: "Bearer ${TOKEN}" } },
      },
    });
    saveMcpConfigFile(file, withBuiltinMcpConfigs(configs));
    assert.deepEqual(fs.readdirSync(path.dirname(file)), ["mcp.json"]);
    const text = fs.readFileSync(file, "utf8");
    assert.match(text, /\$\{TOKEN\}/, "variables are saved unexpanded");
    assert.doesNotMatch(text, /"ocr"/);
    assert.deepEqual(loadMcpConfigFile(file).configs, configs);
    saveMcpConfigFile(file, [{ name: "ocr", type: "builtin", enabled: false }]);
    assert.deepEqual(loadMcpConfigFile(file).configs, [{
      name: "ocr",
      type: "builtin",
      enabled: false,
    }]);
  } finally {
    removeDir(ws);
  }
});

test("saveMcpConfigFile leaves the old file intact when the write fails", () => {
  const ws = tempWorkspace({ "cfg/mcp.json": '{"servers": []}' });
  try {
    const file = path.join(ws, "cfg", "mcp.json");
    fs.mkdirSync(path.join(ws, "cfg", "blocker"));
    assert.throws(() =>
      saveMcpConfigFile(path.join(ws, "cfg", "blocker"), [
        normalizeMcpConfig({ command: "x" }, "a"),
      ])
    );
    assert.equal(fs.readFileSync(file, "utf8"), '{"servers": []}');
    assert.deepEqual(fs.readdirSync(path.join(ws, "cfg")).sort(), ["blocker", "mcp.json"]);
  } finally {
    removeDir(ws);
  }
});

test("withBuiltinMcpConfigs adds OCR unless the user has an entry named ocr", () => {
  assert.deepEqual(withBuiltinMcpConfigs([]).map((c) => c.name), ["ocr"]);
  const off = normalizeMcpConfigs([{ name: "ocr", enabled: false }]).configs;
  const merged = withBuiltinMcpConfigs(off);
  assert.equal(merged.length, 1);
  assert.equal(merged[0].enabled, false);
  assert.equal(BUILTIN_MCP_CONFIGS[0].name, "ocr");
});

test("splitCommandLine handles quotes, escapes and Windows paths", () => {
  assert.deepEqual(splitCommandLine('"/opt/Example Apps/server bin" --config "two words.json"'), [
    "/opt/Example Apps/server bin",
    "--config",
    "two words.json",
  ]);
  assert.deepEqual(splitCommandLine(`node -e "console.error('a b')"`), [
    "node",
    "-e",
    "console.error('a b')",
  ]);
  assert.deepEqual(splitCommandLine("a\\ b c ''"), ["a b", "c", ""]);
  assert.deepEqual(splitCommandLine('"C:\\Program Files\\x.exe" y', { platform: "win32" }), [
    "C:\\Program Files\\x.exe",
    "y",
  ]);
  assert.throws(() => splitCommandLine('node "unterminated'), /unterminated/);
});

// Case command-string-split: the argv produced before spawning.
test("case command-string-split: every entry gives the expected argv", () => {
  const raw = JSON.parse(
    fs.readFileSync(path.join(FIXTURES, "command-string-split", "mcp.json"), "utf8"),
  );
  const { configs } = normalizeMcpConfigs(raw);
  const entry = "/srv/node_modules/server-everything/dist/index.js";
  const ctx = {
    env: { PATH: "/usr/bin", EVERYTHING_ENTRY: entry, SPACED_DIR: "/tmp/dir with space" },
    workspace: "/ws",
    platform: "linux",
    isFile: () => false,
  };
  const argv = (name: string) => {
    const l = resolveStdioLaunch(configs.find((c) => c.name === name)!, ctx);
    return [l.command, ...l.args];
  };
  const everything = ["node", entry, "stdio"];
  assert.deepEqual(argv("one_string"), everything);
  assert.deepEqual(argv("one_string_empty_args"), everything);
  assert.deepEqual(argv("array_form"), everything);
  assert.deepEqual(argv("classic"), everything);
  assert.deepEqual(argv("quoted"), ["/opt/Example Apps/server bin", "--config", "two words.json"]);
  assert.deepEqual(argv("inner_quotes"), ["node", "-e", "console.error('a b')"]);
  assert.deepEqual(argv("spaced_var"), ["node", "/tmp/dir with space/server.mjs"]);
  assert.deepEqual(argv("unquoted_spaced_path"), ["/opt/Example", "Apps/server", "bin"]);
  assert.equal(
    resolveStdioLaunch(configs.find((c) => c.name === "unquoted_spaced_path")!, ctx).split,
    true,
  );
  const existing = resolveStdioLaunch(configs.find((c) => c.name === "unquoted_spaced_path")!, {
    ...ctx,
    isFile: (p) => p === "/opt/Example Apps/server bin",
  });
  assert.deepEqual([existing.command, ...existing.args], ["/opt/Example Apps/server bin"]);
  assert.deepEqual(argv("windows_path"), ["C:\\Program Files\\nodejs\\node.exe", "server.js"]);
});

test("a command with shell operators warns that no shell is run", () => {
  const l = resolveStdioLaunch(normalizeMcpConfig({ command: "node a.js && rm x" }, "s"), {
    env: {},
    workspace: "/ws",
    isFile: () => false,
  });
  assert.ok(l.warnings.some((w) => /shell operators/.test(w)));
  assert.deepEqual(l.args, ["a.js", "&&", "rm", "x"]);
});

// Case env-default-merge (pure part; the real child is checked in manager_test.ts).
test("case env-default-merge: base variables stay, env is expanded, unset variables warn", () => {
  const raw = JSON.parse(
    fs.readFileSync(path.join(FIXTURES, "env-default-merge", "mcp.json"), "utf8"),
  );
  const config = normalizeMcpConfigs(raw).configs[0];
  const parent = {
    PATH: "/usr/bin",
    HOME: "/home/u",
    EXAMPLE_API_KEY: "k-123",
    UNRELATED_SECRET: "s-456",
    HTTPS_PROXY: "http://proxy:3128",
  };
  const warnings: string[] = [];
  const env = childEnv(config, { env: parent, workspace: "/ws", platform: "linux" }, warnings);
  assert.equal(env.PATH, "/usr/bin");
  assert.equal(env.HOME, "/home/u");
  assert.equal(env.EXAMPLE_API_KEY, "k-123");
  assert.equal(env.EXAMPLE_MODE, "test");
  assert.equal(env.HTTPS_PROXY, "http://proxy:3128");
  assert.equal(env.UNRELATED_SECRET, undefined);
  assert.deepEqual(warnings, []);
  const all = childEnv({ ...config, inheritEnv: true }, { env: parent, workspace: "/ws" }, []);
  assert.equal(all.UNRELATED_SECRET, "s-456");
  const unset: string[] = [];
  const e2 = childEnv(
    config,
    { env: { PATH: "/usr/bin" }, workspace: "/ws", platform: "linux" },
    unset,
  );
  assert.equal(e2.EXAMPLE_API_KEY, "");
  assert.match(unset[0], /EXAMPLE_API_KEY is not set/);
  const win = childEnv(config, {
    env: {
      PATH: "C:\\bin",
      SYSTEMROOT: "C:\\Windows",
      APPDATA: "a",
      USERPROFILE: "u",
      EXAMPLE_API_KEY: "k",
    },
    workspace: "C:\\ws",
    platform: "win32",
  }, []);
  for (const k of ["PATH", "SYSTEMROOT", "APPDATA", "USERPROFILE"]) assert.ok(win[k], k);
});

test("${env:VAR}, ${VAR:-default} and ${workspaceFolder} expand; ${input:x} fails clearly", () => {
  const ctx = { env: { A: "x y" }, workspace: "/ws", isFile: () => false };
  const l = resolveStdioLaunch(
    normalizeMcpConfig({ command: "tool ${env:A} ${B:-dflt} ${workspaceFolder}/f" }, "s"),
    ctx,
  );
  assert.deepEqual(l.args, ["x y", "dflt", "/ws/f"]);
  assert.throws(
    () =>
      resolveStdioLaunch(normalizeMcpConfig({ command: "tool", args: ["${input:tok}"] }, "s"), ctx),
    /interactive input/,
  );
});

// Case windows-npx-spawn: the launch spec on win32 (cross-spawn in the SDK wraps .cmd files).
test("case windows-npx-spawn: npx resolves through PATHEXT and spaced .cmd paths stay whole", () => {
  const raw = JSON.parse(
    fs.readFileSync(path.join(FIXTURES, "windows-npx-spawn", "mcp.json"), "utf8"),
  );
  const { configs } = normalizeMcpConfigs(raw);
  const files = new Set(["C:\\Program Files\\nodejs\\npx.cmd"]);
  const ctx = {
    env: { PATH: "C:\\Windows;C:\\Program Files\\nodejs", PATHEXT: ".COM;.EXE;.BAT;.CMD" },
    workspace: "C:\\ws",
    platform: "win32",
    isFile: (p: string) => files.has(p),
  };
  const memory = resolveStdioLaunch(configs[0], ctx);
  assert.deepEqual([memory.command, ...memory.args], [
    "npx",
    "-y",
    "@modelcontextprotocol/server-memory",
  ]);
  assert.equal(memory.resolved, "C:\\Program Files\\nodejs\\npx.cmd");
  const spaced = resolveStdioLaunch(configs[1], ctx);
  assert.deepEqual([spaced.command, ...spaced.args], [
    "C:\\Program Files\\nodejs\\npx.cmd",
    "-y",
    "@modelcontextprotocol/server-memory",
  ]);
  assert.equal(spaced.resolved, "C:\\Program Files\\nodejs\\npx.cmd");
  assert.equal(findProgram("missing", ctx.env, "win32", ctx.isFile), undefined);
});
