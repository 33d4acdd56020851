/**
 * MCP server configuration: the file shapes of manual §15.2, normalisation with warnings, the
 * built-in presets (§15.6), and shell-like command splitting. Everything here is synchronous
 * (DESIGN §6: the manual's samples call these without `await`).
 *
 * `${VAR}` expansion does not happen here: configs keep the text as written (so saving them never
 * writes a secret into the file); variables are expanded per argument when a server is started.
 *
 * @module
 */
import { writeFileAtomicSync } from "../_internal/atomic_write.ts";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";

/** How a server is reached (manual §15.2). `builtin` presets run inside this process. */
export type McpTransportType = "stdio" | "http" | "sse" | "builtin";

/** One MCP server entry, normalised (manual §15.2). */
export interface McpServerConfig {
  /** Server name; the `<server>` segment of `mcp__<server>__<tool>`. */
  name: string;
  /** Transport; inferred builtin → `url` → `command` when the entry has no `type`. */
  type: McpTransportType;
  /**
   * Program to start (stdio): a string (split like a shell when it holds spaces and `args` is
   * empty, see {@link splitCommandLine}) or an array (program, then arguments).
   */
  command?: string | string[];
  /** Arguments (stdio); `${VAR}` / `${env:VAR}` expanded per argument when started. */
  args?: string[];
  /** Extra environment of the child (stdio), on top of the base environment. */
  env?: Record<string, string>;
  /** Working directory of the child (default: the workspace). */
  cwd?: string;
  /** Server URL (http, sse). */
  url?: string;
  /** HTTP headers (http, sse); values may hold `${ENV}` secrets. */
  headers?: Record<string, string>;
  /** False when the entry is disabled (`enabled: false` or `disabled: true`). Default true. */
  enabled: boolean;
  /**
   * Pass the whole parent environment to the child (default false: only the SDK's safe variables
   * — HOME, PATH, SHELL, TERM, USER, LOGNAME; the Windows equivalents — plus proxy and CA
   * variables, then `env`).
   */
  inheritEnv?: boolean;
  /** Per-call timeout in ms (default env `MCP_CALL_TIMEOUT_MS`, else 300,000). */
  timeoutMs?: number;
}

/** Result of normalising a file or a list: the usable entries and what was wrong with the rest. */
export interface McpConfigLoadResult {
  /** Usable entries, in file order (disabled ones included, with `enabled: false`). */
  configs: McpServerConfig[];
  /** One sentence per problem; bad entries are skipped, never thrown. */
  warnings: string[];
}

/** Thrown for a config entry that cannot be used (only by the single-entry functions). */
export class McpConfigError extends Error {
  /** Error name. */
  override name = "McpConfigError";
}

/**
 * The built-in presets (manual §15.6): `ocr`, which exposes `mcp__ocr__recognize`. Added by
 * {@link withBuiltinMcpConfigs} unless the user has an entry of the same name.
 */
export const BUILTIN_MCP_CONFIGS: readonly McpServerConfig[] = Object.freeze([
  Object.freeze({ name: "ocr", type: "builtin", enabled: true }) as McpServerConfig,
]);

/**
 * Where a workspace's MCP config lives: `<workspace>/.agent/mcp.json` (manual §15.1).
 *
 * @param workspace The workspace root.
 * @returns The absolute path of the file (it may not exist).
 */
export function defaultMcpConfigPath(workspace: string): string {
  return path.join(path.resolve(workspace), ".agent", "mcp.json");
}

/**
 * Adds the built-in presets ({@link BUILTIN_MCP_CONFIGS}) the user has no entry for (manual
 * §15.2: `{"name": "ocr", "enabled": false}` disables the OCR preset).
 *
 * @param configs The user's entries.
 * @returns A new array: the user's entries, then the missing presets.
 */
export function withBuiltinMcpConfigs(configs: readonly McpServerConfig[]): McpServerConfig[] {
  const names = new Set(configs.map((c) => c.name));
  const out = [...configs];
  for (const preset of BUILTIN_MCP_CONFIGS) {
    if (!names.has(preset.name)) out.push({ ...preset });
  }
  return out;
}

/** Options of {@link splitCommandLine}. */
export interface SplitCommandLineOptions {
  /**
   * Platform rules (default `process.platform`): on `win32` a backslash is a path separator and
   * never escapes; elsewhere it escapes a following quote, backslash or space.
   */
  platform?: string;
}

/**
 * Splits a command line into argv like a shell would split words, without running a shell: single
 * and double quotes group words (a quoted empty string is an argument); a backslash escapes a
 * following quote, backslash or space outside single quotes (POSIX only). `$()`, globs, pipes and
 * `&&` have no meaning here (research: case command-string-split).
 *
 * @param line The command line.
 * @param options Platform rules.
 * @returns The words.
 * @throws {McpConfigError} On an unterminated quote.
 * @example
 * ```ts
 * import { splitCommandLine } from "@zqagent/core/mcp";
 * splitCommandLine('"/opt/Example Apps/server bin" --config "two words.json"');
 * // ["/opt/Example Apps/server bin", "--config", "two words.json"]
 * ```
 */
export function splitCommandLine(line: string, options: SplitCommandLineOptions = {}): string[] {
  const windows = (options.platform ?? process.platform) === "win32";
  const words: string[] = [];
  let current = "";
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === quote) {
        quote = null;
      } else if (
        ch === "\\" && quote === '"' && !windows && (line[i + 1] === '"' || line[i + 1] === "\\")
      ) {
        current += line[++i];
      } else {
        current += ch;
      }
      continue;
    }
    if (ch === '"' || ch === "'") {
      quote = ch;
      inWord = true;
    } else if (ch === "\\" && !windows && /["'\\ ]/.test(line[i + 1] ?? "")) {
      current += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(current);
      current = "";
      inWord = false;
    } else {
      current += ch;
      inWord = true;
    }
  }
  if (quote) {
    throw new McpConfigError(
      `Cannot split command line ${JSON.stringify(line)}: unterminated ${quote}`,
    );
  }
  if (inWord) words.push(current);
  return words;
}

const TYPE_ALIASES: Record<string, McpTransportType> = {
  stdio: "stdio",
  local: "stdio",
  http: "http",
  "streamable-http": "http",
  streamablehttp: "http",
  streamable_http: "http",
  remote: "http",
  sse: "sse",
  builtin: "builtin",
};

const KNOWN_KEYS = new Set([
  "name",
  "type",
  "transport",
  "transportType",
  "command",
  "args",
  "env",
  "environment",
  "cwd",
  "url",
  "httpUrl",
  "headers",
  "enabled",
  "disabled",
  "inheritEnv",
  "timeout",
  "timeoutMs",
  // Accepted from other clients' files and ignored.
  "description",
  "autoApprove",
  "alwaysAllow",
  "trust",
  "envFile",
  "includeTools",
  "excludeTools",
  "oauth",
]);

function isRecord(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === "object" && !Array.isArray(v);
}

function stringMap(
  v: unknown,
  what: string,
  warnings: string[],
): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) {
    warnings.push(`${what} is not an object; ignored`);
    return undefined;
  }
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) {
    if (typeof val === "string") out[k] = val;
    else if (typeof val === "number" || typeof val === "boolean") out[k] = String(val);
    else warnings.push(`${what}.${k} is not a string; ignored`);
  }
  return out;
}

/**
 * Normalises one server entry (manual §15.2).
 *
 * @param entry The entry as written (an object).
 * @param name The name when the entry comes from a map (`{"mcpServers": {name: entry}}`);
 *   otherwise `entry.name` is used.
 * @param warnings Receives one sentence per tolerated problem (unknown keys, contradicting
 *   `enabled`/`disabled`, ignored values).
 * @returns The normalised entry.
 * @throws {McpConfigError} When the entry has no name, an unknown `type`, or nothing to start
 *   (no `command`, `url` or built-in preset of that name).
 * @example
 * ```ts
 * import { normalizeMcpConfig } from "@zqagent/core/mcp";
 * normalizeMcpConfig({ command: "npx -y @modelcontextprotocol/server-memory" }, "memory");
 * // { name: "memory", type: "stdio", command: "npx -y …", args: [], enabled: true }
 * ```
 */
export function normalizeMcpConfig(
  entry: unknown,
  name?: string,
  warnings: string[] = [],
): McpServerConfig {
  if (!isRecord(entry)) {
    throw new McpConfigError(
      `Cannot use MCP server entry ${name ?? ""}: it is not an object`.replace("  ", " "),
    );
  }
  const serverName = name ?? entry.name;
  if (typeof serverName !== "string" || serverName.trim() === "") {
    throw new McpConfigError("Cannot use MCP server entry: it has no name");
  }
  const where = `MCP server "${serverName}"`;
  for (const key of Object.keys(entry)) {
    if (!KNOWN_KEYS.has(key)) warnings.push(`${where}: unknown key "${key}" ignored`);
  }
  const rawType = entry.type ?? entry.transport ?? entry.transportType;
  let type: McpTransportType | undefined;
  if (rawType !== undefined) {
    type = typeof rawType === "string" ? TYPE_ALIASES[rawType.toLowerCase()] : undefined;
    if (!type) {
      throw new McpConfigError(
        `Cannot use ${where}: type ${JSON.stringify(rawType)} is not stdio, http, sse or builtin`,
      );
    }
  }
  const url = typeof entry.url === "string"
    ? entry.url
    : typeof entry.httpUrl === "string"
    ? entry.httpUrl
    : undefined;
  let command: string | string[] | undefined;
  if (typeof entry.command === "string" && entry.command.trim() !== "") command = entry.command;
  else if (Array.isArray(entry.command) && entry.command.length > 0) {
    if (!entry.command.every((c) => typeof c === "string")) {
      throw new McpConfigError(`Cannot use ${where}: command array holds a non-string`);
    }
    command = [...entry.command as string[]];
  } else if (entry.command !== undefined) {
    throw new McpConfigError(`Cannot use ${where}: command must be a non-empty string or array`);
  }
  if (!type) {
    // Inference order of manual §15.2: builtin → url → command.
    if (BUILTIN_MCP_CONFIGS.some((b) => b.name === serverName) && !url && !command) {
      type = "builtin";
    } else if (url) type = "http";
    else if (command) type = "stdio";
    else {
      throw new McpConfigError(`Cannot use ${where}: it has neither a command nor a url`);
    }
  }
  if (type === "stdio" && !command) {
    throw new McpConfigError(`Cannot use ${where}: a stdio server needs a command`);
  }
  if ((type === "http" || type === "sse") && !url) {
    throw new McpConfigError(`Cannot use ${where}: an ${type} server needs a url`);
  }
  if (type === "builtin" && !BUILTIN_MCP_CONFIGS.some((b) => b.name === serverName)) {
    throw new McpConfigError(`Cannot use ${where}: there is no built-in preset of that name`);
  }
  let args: string[] | undefined;
  if (Array.isArray(entry.args)) {
    args = entry.args.filter((a) => {
      const ok = typeof a === "string" || typeof a === "number";
      if (!ok) warnings.push(`${where}: a non-string argument was ignored`);
      return ok;
    }).map(String);
  } else if (entry.args !== undefined) {
    warnings.push(`${where}: args is not an array; ignored`);
  }
  let enabled = true;
  const hasEnabled = typeof entry.enabled === "boolean";
  const hasDisabled = typeof entry.disabled === "boolean";
  if (hasEnabled) enabled = entry.enabled as boolean;
  if (hasDisabled) {
    if (hasEnabled && (entry.enabled as boolean) === (entry.disabled as boolean)) {
      warnings.push(`${where}: enabled and disabled contradict each other; disabled wins`);
    }
    if (entry.disabled === true) enabled = false;
    else if (!hasEnabled) enabled = true;
  }
  const out: McpServerConfig = { name: serverName, type, enabled };
  if (command !== undefined) out.command = command;
  if (type === "stdio") out.args = args ?? [];
  const env = stringMap(entry.env ?? entry.environment, `${where}: env`, warnings);
  if (env) out.env = env;
  if (typeof entry.cwd === "string" && entry.cwd) out.cwd = entry.cwd;
  if (url) out.url = url;
  const headers = stringMap(entry.headers, `${where}: headers`, warnings);
  if (headers) out.headers = headers;
  if (typeof entry.inheritEnv === "boolean") out.inheritEnv = entry.inheritEnv;
  const timeout = entry.timeoutMs ?? entry.timeout;
  if (timeout !== undefined) {
    if (typeof timeout === "number" && Number.isFinite(timeout) && timeout > 0) {
      out.timeoutMs = timeout;
    } else warnings.push(`${where}: timeout is not a positive number of ms; ignored`);
  }
  return out;
}

/**
 * Normalises a whole config (manual §15.2). Accepted shapes: a bare array of entries with
 * `name`; `{servers: [...]}`; `{servers: {name: {...}}}` (also VS Code's `.vscode/mcp.json`, whose
 * `inputs` are ignored); `{mcpServers: {name: {...}}}` (Claude Desktop, Cursor, Cline, Gemini);
 * `{mcp: {...}}` (OpenCode). Never throws: bad entries are skipped with a warning, duplicate names
 * keep the first entry.
 *
 * @param raw The parsed JSON.
 * @returns The usable entries and the warnings.
 * @example
 * ```ts
 * import { normalizeMcpConfigs } from "@zqagent/core/mcp";
 * const { configs, warnings } = normalizeMcpConfigs({
 *   mcpServers: { memory: { command: "npx", args: ["-y", "@modelcontextprotocol/server-memory"] } },
 * });
 * ```
 */
export function normalizeMcpConfigs(raw: unknown): McpConfigLoadResult {
  const warnings: string[] = [];
  const entries: [string | undefined, unknown][] = [];
  const fromMap = (map: Record<string, unknown>) => {
    for (const [k, v] of Object.entries(map)) entries.push([k, v]);
  };
  const fromList = (list: unknown[]) => {
    for (const v of list) entries.push([undefined, v]);
  };
  const fromContainer = (value: unknown, label: string): boolean => {
    if (Array.isArray(value)) fromList(value);
    else if (isRecord(value)) fromMap(value);
    else {
      warnings.push(`MCP config: "${label}" is neither an array nor an object; ignored`);
    }
    return true;
  };
  if (raw === null || raw === undefined) return { configs: [], warnings };
  if (Array.isArray(raw)) fromList(raw);
  else if (isRecord(raw)) {
    let found = false;
    if ("servers" in raw) found = fromContainer(raw.servers, "servers");
    if ("mcpServers" in raw) found = fromContainer(raw.mcpServers, "mcpServers");
    if ("mcp" in raw) {
      const mcp = raw.mcp;
      found = isRecord(mcp) && "servers" in mcp
        ? fromContainer(mcp.servers, "mcp.servers")
        : fromContainer(mcp, "mcp");
    }
    if (!found) {
      warnings.push(
        'MCP config: expected an array, {"servers": …}, {"mcpServers": …} or {"mcp": …}; ' +
          "no servers loaded",
      );
    }
  } else {
    warnings.push("MCP config: expected an array or an object; no servers loaded");
  }
  const configs: McpServerConfig[] = [];
  const seen = new Set<string>();
  for (const [name, entry] of entries) {
    try {
      const config = normalizeMcpConfig(entry, name, warnings);
      if (seen.has(config.name)) {
        warnings.push(`MCP server "${config.name}" is defined twice; the first entry is used`);
        continue;
      }
      seen.add(config.name);
      configs.push(config);
    } catch (err) {
      warnings.push(err instanceof Error ? err.message : String(err));
    }
  }
  return { configs, warnings };
}

/**
 * Reads a config file as parsed JSON, without normalising it (for editors that rewrite it).
 *
 * @param file Path of the file.
 * @returns The parsed JSON, or `null` when the file does not exist.
 * @throws {McpConfigError} When the file exists but cannot be read or is not valid JSON (so a
 *   broken file is never silently overwritten).
 */
export function readMcpConfigFile(file: string): unknown {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return null;
    throw new McpConfigError(`Cannot read MCP config ${file}: ${(err as Error).message}`);
  }
  if (text.trim() === "") return null;
  try {
    return JSON.parse(stripJsonComments(text));
  } catch (err) {
    throw new McpConfigError(`Cannot read MCP config ${file}: ${(err as Error).message}`);
  }
}

/** Removes `//` and `/* *\/` comments and trailing commas outside strings (VS Code files are JSONC). */
function stripJsonComments(text: string): string {
  let out = "";
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      out += ch;
      if (ch === "\\") out += text[++i] ?? "";
      else if (ch === '"') inString = false;
    } else if (ch === '"') {
      inString = true;
      out += ch;
    } else if (ch === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++;
      out += "\n";
    } else if (ch === "/" && text[i + 1] === "*") {
      i = text.indexOf("*/", i + 2);
      if (i < 0) break;
      i++;
    } else {
      out += ch;
    }
  }
  return out.replace(/,(\s*[}\]])/g, "$1");
}

/**
 * Loads and normalises a config file (manual §15.1). Never throws: a missing file gives no
 * servers; an unreadable or invalid file gives no servers and a warning.
 *
 * @param file Path of the file, usually {@link defaultMcpConfigPath}.
 * @returns The entries and warnings.
 * @example
 * ```ts
 * import { defaultMcpConfigPath, loadMcpConfigFile } from "@zqagent/core/mcp";
 * const { configs, warnings } = loadMcpConfigFile(defaultMcpConfigPath("."));
 * ```
 */
export function loadMcpConfigFile(file: string): McpConfigLoadResult {
  let raw: unknown;
  try {
    raw = readMcpConfigFile(file);
  } catch (err) {
    return { configs: [], warnings: [(err as Error).message] };
  }
  return normalizeMcpConfigs(raw);
}

function isUnchangedPreset(config: McpServerConfig): boolean {
  const preset = BUILTIN_MCP_CONFIGS.find((b) => b.name === config.name);
  return !!preset && JSON.stringify({ ...config }) === JSON.stringify({ ...preset });
}

/**
 * Writes configs atomically (a temporary file in the same folder, then a rename), as
 * `{"servers": [...]}`. Built-in presets left unchanged are not written (they are added again by
 * {@link withBuiltinMcpConfigs}); a disabled preset is. The folder is created when missing. The
 * manager never saves by itself (manual §15.5).
 *
 * @param file Path of the file.
 * @param configs The entries to write.
 * @throws {Error} When the folder or file cannot be written (the old file is then left intact).
 */
export function saveMcpConfigFile(file: string, configs: readonly McpServerConfig[]): void {
  const servers = configs.filter((c) => !isUnchangedPreset(c)).map((c) => {
    const out: Record<string, unknown> = { name: c.name, type: c.type };
    for (const [k, v] of Object.entries(c)) {
      if (k === "name" || k === "type" || v === undefined) continue;
      if (k === "enabled" && v === true) continue;
      if (k === "args" && Array.isArray(v) && v.length === 0) continue;
      out[k] = v;
    }
    return out;
  });
  const dir = path.dirname(path.resolve(file));
  fs.mkdirSync(dir, { recursive: true });
  writeFileAtomicSync(file, JSON.stringify({ servers }, null, 2) + "\n", { mode: 0o600 });
}
