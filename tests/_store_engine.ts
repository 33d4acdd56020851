/**
 * Test helper for store/worker tests: an engine against a MockOpenAIServer with scripted tools,
 * and a script where each session calls one tool and then answers (issue 11). The engine comes
 * from the code under test (tests/_target.ts: the source tree or the npm build).
 *
 * @module
 */
import type { TurnEngine } from "../mod.ts";
import type { Message } from "../providers/mod.ts";
import type {
  Lease,
  SessionStore,
  SessionWorker,
  SessionWorkerOptions,
  StoreHook,
} from "../store/mod.ts";
import type { MockOpenAIServer, RecordedRequest, ScriptedTurn } from "../testing/mod.ts";
import { test } from "node:test";
import { core, store as target, testing } from "./_target.ts";
import { removeDir, tempWorkspace, wait } from "./_util.ts";
import { type TestPostgres, uniquePrefix } from "./_postgres.ts";

/** Options of {@link makeEngine}. */
export interface TestEngineOptions {
  /** The server's base URL. */
  baseURL: string;
  /** Workspace folder. */
  workspace: string;
  /** History to start from. */
  messages?: Message[];
  /** The `act` tool's implementation. */
  act: (args: Record<string, unknown>, ctx?: { idempotencyKey?: string }) => unknown;
  /** Declare `act` idempotent. */
  idempotent?: boolean;
  /** `act` needs approval. */
  approval?: boolean;
}

/** A TurnEngine with one tool, `act` (EXEC-class: side-effecting unless declared otherwise). */
export function makeEngine(o: TestEngineOptions): TurnEngine {
  const registry = new core.ToolRegistry();
  registry.register(
    (args, ctx) => o.act(args, ctx),
    {
      category: "test",
      riskLevel: "high",
      capabilities: [],
      requiresApproval: o.approval ?? false,
      riskClass: core.RiskClass.EXEC,
      ...(o.idempotent !== undefined ? { idempotent: o.idempotent } : {}),
    },
    {
      type: "function",
      function: { name: "act", parameters: { type: "object", properties: {} } },
    },
  );
  return new core.TurnEngine({
    provider: new core.OpenAIProvider({
      apiKey: "test",
      baseURL: o.baseURL,
      apiMode: "chat",
      maxRetries: 0,
    }),
    registry,
    permissions: new core.PermissionEngine({
      workspaceRoot: o.workspace,
      mode: o.approval ? core.Mode.INTERACTIVE : core.Mode.AUTO,
    }),
    model: "test-model",
    instructions: "test",
    messages: o.messages,
    networkRetryBaseMs: 10,
  });
}

/**
 * The script: a request whose last message is a tool result gets a final answer (quoting the
 * result); any other gets one `act` call. Answer text comes in several deltas.
 */
export function actThenAnswer(req: RecordedRequest): ScriptedTurn {
  const messages = (req.body?.messages ?? []) as { role: string; content?: unknown }[];
  const last = messages.at(-1);
  if (last?.role === "tool") {
    return { text: ["done", " after", " ", String(last.content ?? "").slice(0, 60)] };
  }
  return { toolCalls: [{ name: "act", arguments: {} }] };
}

/** Options of {@link startDyingOwner}. */
export interface DyingOwnerOptions {
  /** The model server's base URL. */
  baseURL: string;
  /** Workspace folder. */
  workspace: string;
  /** Called when the `act` tool starts (before it blocks), with its context. */
  onRun?: (ctx?: { idempotencyKey?: string }) => void;
  /** Declare `act` idempotent. */
  idempotent?: boolean;
}

/** Process A of a crash test (see {@link startDyingOwner}). */
export interface DyingOwner {
  /** A's lease (owner `A`, 200 ms TTL, renewed until {@link DyingOwner.die}). */
  lease: Lease;
  /** A's store hook (its `error` shows whether late writes were fenced). */
  hook: StoreHook;
  /** Resolves when A's `act` tool has started (and blocks). */
  started: Promise<void>;
  /** A stops heartbeating; resolves once its lease has lapsed. */
  die(): Promise<void>;
  /** Unblocks A's tool and waits for A's turn to end (its late writes are fenced). */
  finish(): Promise<void>;
}

/**
 * Starts "process A" of a crash test in this process: it takes session `sessionId` (which must
 * exist) under a short lease that it heartbeats, and runs the input "go" on an engine whose `act`
 * tool blocks until {@link DyingOwner.finish}. {@link DyingOwner.die} then lets the lease lapse,
 * as a killed process would.
 */
export async function startDyingOwner(
  store: SessionStore,
  sessionId: string,
  o: DyingOwnerOptions,
): Promise<DyingOwner> {
  const lease = await store.acquire(sessionId, { ownerId: "A", ttlMs: 200 });
  if (!lease) throw new Error(`Cannot start process A: ${sessionId} is held`);
  // Heartbeats until it "dies": a slow first turn must not lose the lease early.
  const beat = setInterval(() => store.heartbeat({ ownerId: "A", ttlMs: 200 }).catch(() => {}), 40);
  let unblock!: () => void;
  const blocked = new Promise<void>((r) => (unblock = r));
  let started!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  const engine = makeEngine({
    baseURL: o.baseURL,
    workspace: o.workspace,
    ...(o.idempotent !== undefined ? { idempotent: o.idempotent } : {}),
    act: async (_args, ctx) => {
      o.onRun?.(ctx);
      started();
      await blocked;
      return "A finished late";
    },
  });
  const hook = new target.StoreHook(store, lease).attach(engine);
  engine.hook = hook;
  const stream = (async () => {
    for await (const _ of engine.run("go")) { /* events go to the store through the hook */ }
  })();
  return {
    lease,
    hook,
    started: startedP,
    async die() {
      clearInterval(beat);
      await wait(300);
    },
    async finish() {
      clearInterval(beat);
      unblock();
      await stream;
      await hook.flush().catch(() => {});
    },
  };
}

/** Clean-ups run after each test (from `cleanupsAfterEach()` in tests/_util.ts). */
type Cleanups = (() => Promise<void> | void)[];

/**
 * Registers one test per store kind; the store is made fresh for the test and closed after it.
 */
export type StoreTest = (name: string, fn: (store: SessionStore) => Promise<void>) => void;

/**
 * Runs `body` once per store kind of the worker tests — `memory`, and `postgres` (skipped with
 * the reason when PostgreSQL is missing) — with a `t` that names each test `"<kind>: <name>"`.
 *
 * @param pg The file's PostgreSQL (`postgresForTests()`).
 * @param tag Start of the table prefixes (keeps the files' tables apart).
 */
export function eachStore(
  pg: TestPostgres | { skip: string },
  tag: string,
  cleanups: Cleanups,
  body: (t: StoreTest) => void,
): void {
  const kinds: [string, () => SessionStore, string | undefined][] = [
    ["memory", () => new target.MemorySessionStore({ pollMs: 50 }), undefined],
    [
      "postgres",
      () =>
        new target.PostgresSessionStore({
          connectionString: "skip" in pg ? "postgres://unused" : pg.url,
          tablePrefix: uniquePrefix(tag),
          pollMs: 100,
        }),
      "skip" in pg ? pg.skip : undefined,
    ],
  ];
  for (const [label, makeStore, skip] of kinds) {
    body((name, fn) =>
      test(`${label}: ${name}`, { skip: skip ?? false }, async () => {
        const store = makeStore();
        cleanups.push(() => store.close());
        await fn(store);
      })
    );
  }
}

/** A MockOpenAIServer scripted with {@link actThenAnswer} and a temp workspace, both cleaned up. */
export async function modelAndWorkspace(
  cleanups: Cleanups,
): Promise<{ server: MockOpenAIServer; ws: string }> {
  const server = await new testing.MockOpenAIServer({ turns: actThenAnswer }).start();
  const ws = tempWorkspace();
  cleanups.push(() => server.close(), () => removeDir(ws));
  return { server, ws };
}

/**
 * A `SessionWorker` (polling every 20 ms unless `options` say otherwise) whose sessions run on
 * {@link makeEngine} engines with `engine`'s options and the history from the store.
 */
export function testWorker(
  store: SessionStore,
  engine: Omit<TestEngineOptions, "messages">,
  options: Omit<SessionWorkerOptions, "createEngine"> = {},
): SessionWorker {
  return new target.SessionWorker(store, {
    pollMs: 20,
    ...options,
    createEngine: ({ messages }) => makeEngine({ ...engine, messages }),
  });
}
