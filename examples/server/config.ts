/**
 * Configuration of the reference server, read from the environment (manual §20.2: the
 * server-side variables `MAX_ITERATIONS`, `CONTEXT_WINDOW`, `COMPACTION_THRESHOLD_PCT`,
 * `COMPACTION_SOFT_THRESHOLD_PCT`, `COMPACTION_CAP_TOKENS`), plus where it listens, where it
 * keeps data and who may use it.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/** One tenant: its token and, optionally, its own model credentials (manual §18.4). */
export interface TenantConfig {
  /** Tenant id: letters, digits, `_`, `-` (names its folder). */
  id: string;
  /** Bearer token of the tenant (at least 16 characters). */
  token: string;
  /** Model id (default: the server's `model`). */
  model?: string;
  /** API key of the tenant's provider (default env `OPENAI_API_KEY`). */
  apiKey?: string;
  /** Base URL of the tenant's provider (default env `OPENAI_BASE_URL`). */
  baseURL?: string;
}

/** Engine limits applied to every session (manual §6.1, §14.3). */
export interface EngineLimits {
  /** `MAX_ITERATIONS`: iterations per turn (default 50). */
  maxIterations: number;
  /** `CONTEXT_WINDOW`: tokens (default: the engine's detection). */
  contextWindow?: number;
  /** `COMPACTION_THRESHOLD_PCT`: hard threshold, fraction of the window (default 0.8). */
  thresholdPct?: number;
  /** `COMPACTION_SOFT_THRESHOLD_PCT`: soft threshold, fraction of the hard one (default 0.75). */
  softThresholdPct?: number;
  /** `COMPACTION_CAP_TOKENS`: absolute cap of the hard threshold (default none). */
  capTokens?: number;
}

/** Everything the server needs. */
export interface ServerConfig {
  /** `HOST` (default `127.0.0.1`). */
  host: string;
  /** `PORT` (default 8787; 0 picks a free port). */
  port: number;
  /** `DATA_DIR`: tenants' workspaces and sessions (default `./.agent-server`). */
  dataDir: string;
  /** `OPENAI_MODEL`: default model (required unless every tenant names one). */
  model?: string;
  /** Tenants (`TENANTS_FILE`, else `SERVER_TOKENS`, else one `local` tenant). */
  tenants: TenantConfig[];
  /** True when the `local` tenant's token was generated (print it for the user). */
  generatedToken: boolean;
  /** Engine limits. */
  limits: EngineLimits;
  /** `APPROVAL_TIMEOUT_MS`: a pending approval is denied after this (default 300,000 ms). */
  approvalTimeoutMs: number;
  /** `MAX_BODY_BYTES`: largest request body (default 1 MiB). */
  maxBodyBytes: number;
  /**
   * `VCS_MODE`: per-turn snapshots, `off` / `auto` / `native` / `shadow` (default `auto`). In
   * the multi-worker mode workers take them and front ends read them: set it alike on both.
   */
  vcsMode: "off" | "auto" | "native" | "shadow";
  /**
   * `DATABASE_URL`: a `postgres://` URL selects the multi-worker mode (front ends and
   * `SessionWorker` processes sharing a `PostgresSessionStore`, see `cluster.ts`); unset: the
   * single-process server.
   */
  databaseUrl?: string;
  /** `DATABASE_TABLE_PREFIX`: table-name prefix of the store (default `agent_`). */
  tablePrefix?: string;
  /** `WORKER_ID`: this worker's lease owner id (default: random per process). */
  workerId?: string;
  /** `WORKER_CONCURRENCY`: sessions one worker runs at once (default 8). */
  workerConcurrency?: number;
  /** `LEASE_TTL_MS`: lease lifetime of a worker's sessions (default 30,000 ms). */
  leaseTtlMs?: number;
  /**
   * `APPROVAL_HOLD_MS`: how long a worker's turn waits for an approval before it parks the
   * session and frees the worker (default 30,000 ms; the answer later resumes it anywhere).
   */
  approvalHoldMs?: number;
}

const TENANT_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

function num(
  env: Record<string, string | undefined>,
  name: string,
  check: (n: number) => boolean,
  what: string,
): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || !check(n)) {
    throw new Error(`Cannot configure the server: ${name}=${JSON.stringify(raw)} is not ${what}`);
  }
  return n;
}

const positiveInt = (n: number) => Number.isInteger(n) && n > 0;
const fraction = (n: number) => n > 0 && n <= 1;

/**
 * Checks a tenant list: unique ids and tokens, safe ids, tokens of at least 16 characters.
 *
 * @param tenants The list.
 * @returns The same list.
 * @throws {Error} When an entry is malformed.
 */
export function checkTenants(tenants: TenantConfig[]): TenantConfig[] {
  if (!Array.isArray(tenants) || tenants.length === 0) {
    throw new Error("Cannot configure the server: no tenants");
  }
  const ids = new Set<string>();
  const tokens = new Set<string>();
  for (const t of tenants) {
    if (!t || typeof t.id !== "string" || !TENANT_ID_RE.test(t.id)) {
      throw new Error(
        `Cannot configure the server: tenant id ${JSON.stringify(t?.id)} must be 1–64 letters, ` +
          "digits, '_' or '-'",
      );
    }
    if (typeof t.token !== "string" || t.token.length < 16) {
      throw new Error(`Cannot configure the server: the token of ${t.id} is under 16 characters`);
    }
    if (ids.has(t.id)) throw new Error(`Cannot configure the server: tenant ${t.id} twice`);
    if (tokens.has(t.token)) {
      throw new Error(`Cannot configure the server: two tenants share a token (${t.id})`);
    }
    ids.add(t.id);
    tokens.add(t.token);
  }
  return tenants;
}

/**
 * Reads the configuration from environment variables.
 *
 * Tenants: `TENANTS_FILE` (a JSON file `[{"id","token","model"?,"apiKey"?,"baseURL"?}]`), else
 * `SERVER_TOKENS` (`id:token,id:token`), else one tenant `local` whose token is `SERVER_TOKEN`
 * or, when unset, a random one (`generatedToken`).
 *
 * @param env The environment (usually `process.env`).
 * @returns The configuration.
 * @throws {Error} When a variable is malformed, or no model is configured for some tenant
 *   (checklist §19: the model is explicit, and a missing one fails at start).
 */
export function configFromEnv(env: Record<string, string | undefined>): ServerConfig {
  let tenants: TenantConfig[];
  let generatedToken = false;
  if (env.TENANTS_FILE) {
    try {
      tenants = JSON.parse(fs.readFileSync(env.TENANTS_FILE, "utf8"));
    } catch (err) {
      throw new Error(
        `Cannot configure the server: TENANTS_FILE ${env.TENANTS_FILE}: ${(err as Error).message}`,
      );
    }
  } else if (env.SERVER_TOKENS) {
    tenants = env.SERVER_TOKENS.split(",").filter((s) => s.trim()).map((pair) => {
      const i = pair.indexOf(":");
      return { id: pair.slice(0, i).trim(), token: pair.slice(i + 1).trim() };
    });
  } else {
    const token = env.SERVER_TOKEN ?? randomBytes(18).toString("base64url");
    generatedToken = env.SERVER_TOKEN === undefined;
    tenants = [{ id: "local", token }];
  }
  checkTenants(tenants);
  const model = env.OPENAI_MODEL || undefined;
  const without = tenants.filter((t) => !t.model && !model).map((t) => t.id);
  if (without.length) {
    throw new Error(
      `Cannot configure the server: no model for ${without.join(", ")} ` +
        "(set OPENAI_MODEL or a tenant's model; the engine never picks one)",
    );
  }
  const vcsMode = (env.VCS_MODE ?? "auto") as ServerConfig["vcsMode"];
  if (!["off", "auto", "native", "shadow"].includes(vcsMode)) {
    throw new Error(
      `Cannot configure the server: VCS_MODE=${vcsMode} is not off/auto/native/shadow`,
    );
  }
  const port = num(env, "PORT", (n) => Number.isInteger(n) && n >= 0 && n < 65536, "a port") ??
    8787;
  return {
    host: env.HOST || "127.0.0.1",
    port,
    dataDir: path.resolve(env.DATA_DIR || ".agent-server"),
    model,
    tenants,
    generatedToken,
    limits: {
      maxIterations: num(env, "MAX_ITERATIONS", positiveInt, "a positive integer") ?? 50,
      contextWindow: num(env, "CONTEXT_WINDOW", positiveInt, "a positive integer"),
      thresholdPct: num(env, "COMPACTION_THRESHOLD_PCT", fraction, "a fraction in (0, 1]"),
      softThresholdPct: num(env, "COMPACTION_SOFT_THRESHOLD_PCT", fraction, "a fraction in (0, 1]"),
      capTokens: num(env, "COMPACTION_CAP_TOKENS", positiveInt, "a positive integer"),
    },
    approvalTimeoutMs: num(env, "APPROVAL_TIMEOUT_MS", positiveInt, "a positive integer") ??
      300_000,
    maxBodyBytes: num(env, "MAX_BODY_BYTES", positiveInt, "a positive integer") ?? 1024 * 1024,
    vcsMode,
    databaseUrl: env.DATABASE_URL || undefined,
    tablePrefix: env.DATABASE_TABLE_PREFIX || undefined,
    workerId: env.WORKER_ID || undefined,
    workerConcurrency: num(env, "WORKER_CONCURRENCY", positiveInt, "a positive integer"),
    leaseTtlMs: num(env, "LEASE_TTL_MS", positiveInt, "a positive integer"),
    approvalHoldMs: num(env, "APPROVAL_HOLD_MS", positiveInt, "a positive integer"),
  };
}
