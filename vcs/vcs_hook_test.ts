// Turns driven through the real engine (createDefaultEngine + the openai SDK over HTTP against
// MockOpenAIServer), where the model changes files with write_file and run_shell.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  type CompositeHook,
  createDefaultEngine,
  EngineConfigError,
  type EngineHook,
  Mode,
  OpenAIProvider,
  type TurnEngine,
  type WsEvent,
} from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect } from "../tests/_util.ts";
import { resolveVcsPlan, SessionVcs, VcsHook } from "./mod.ts";
import { git, gitSkip, listFiles, read, tempDir, tempRepo } from "./_test_helpers.ts";

const skip = gitSkip();
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function serve(turns: ScriptedTurn[]): Promise<MockOpenAIServer> {
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  return server;
}

function repo(files: Record<string, string>): string {
  const dir = tempRepo(files);
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function engineFor(
  server: MockOpenAIServer,
  ws: string,
  sessionId: string,
  hook?: EngineHook,
): TurnEngine {
  return createDefaultEngine({
    workspace: ws,
    model: "test-model",
    provider: new OpenAIProvider({
      apiKey: "test-key",
      baseURL: server.baseURL,
      apiMode: "chat",
      maxRetries: 0,
    }),
    mode: Mode.AUTO,
    defaultApproval: "allow",
    sandbox: { mode: "off" },
    vcs: { mode: "auto", sessionId },
    hook,
  });
}

function vcsHookOf(engine: TurnEngine): VcsHook {
  const hook = (engine.hook as CompositeHook).hooks.find((h) => h instanceof VcsHook);
  assert.ok(hook, "createDefaultEngine composes a VcsHook");
  return hook as VcsHook;
}

test("a turn that writes files and runs shell commands is listed, diffed and restored", {
  skip,
}, async () => {
  const ws = repo({ "app.ts": "let x = 1;\n", "old.txt": "legacy notes\n".repeat(10) });
  const server = await serve([
    {
      toolCalls: [
        { id: "w", name: "write_file", arguments: { path: "app.ts", content: "let x = 2;\n" } },
        {
          id: "s",
          name: "run_shell",
          arguments: {
            command: "mv old.txt notes.txt && mkdir -p gen && echo built > gen/out.txt",
          },
        },
      ],
    },
    { text: "done" },
    { toolCalls: [{ id: "r", name: "run_shell", arguments: { command: "rm app.ts" } }] },
    { text: "removed" },
  ]);
  const ends: string[] = [];
  const engine = engineFor(server, ws, "engine-1", { onTurnEnd: (s) => ends.push(s) });
  const statusBefore = git(ws, "status", "--porcelain");
  const first = await collect(engine.run("change things"));
  assert.equal(first.error, undefined);
  assert.deepEqual(ends, ["completed"], "the host's own hook still runs");
  await collect(engine.run("remove app.ts"));
  assert.equal(read(ws, "app.ts"), null);

  // Manual §17.2: a separate handle on the same session lists what the hook recorded.
  const vcs = new SessionVcs(resolveVcsPlan(ws, { mode: "auto" }), "engine-1");
  const turns = await vcs.listTurns();
  assert.equal(turns.length, 2);
  assert.deepEqual(
    turns[0].files.map((f) => `${f.change}:${f.path}`).sort(),
    ["added:gen/out.txt", "modified:app.ts", "renamed:notes.txt"],
  );
  assert.deepEqual(turns[1].files.map((f) => `${f.change}:${f.path}`), ["deleted:app.ts"]);
  assert.match(await vcs.diffTurn(1), /^\+let x = 2;$/m);

  const one = await vcs.restoreTurn(1, { paths: ["app.ts"] });
  assert.deepEqual(one.restored, ["app.ts"]);
  assert.equal(read(ws, "app.ts"), "let x = 2;\n");

  fs.writeFileSync(path.join(ws, "user.txt"), "mine\n");
  const all = await vcs.restoreTurn(1);
  assert.ok(all.restored.includes("app.ts"));
  assert.deepEqual(all.overwritten, [], "app.ts already has the content of turn 1");
  assert.deepEqual(listFiles(ws), ["app.ts", "gen/out.txt", "notes.txt", "user.txt"]);
  assert.equal(git(ws, "rev-parse", "HEAD"), git(ws, "rev-parse", "main"));
  assert.notEqual(statusBefore, git(ws, "status", "--porcelain"));
});

test("a turn that starts right after another is not merged into it", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const server = await serve([
    { toolCalls: [{ id: "1", name: "write_file", arguments: { path: "a.txt", content: "1\n" } }] },
    { text: "one" },
    { toolCalls: [{ id: "2", name: "write_file", arguments: { path: "b.txt", content: "2\n" } }] },
    { text: "two" },
  ]);
  const engine = engineFor(server, ws, "quick");
  await collect(engine.run("first"));
  await collect(engine.run("second")); // no flush in between
  await vcsHookOf(engine).flush();
  const turns = await new SessionVcs(resolveVcsPlan(ws, { mode: "auto" }), "quick").listTurns();
  assert.deepEqual(turns.map((t) => t.files.map((f) => f.path)), [["a.txt"], ["b.txt"]]);
});

test("a run rejected while a turn is running does not end that turn's snapshot", {
  skip,
}, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const server = await serve([
    {
      stallMs: 300,
      toolCalls: [{ id: "w", name: "write_file", arguments: { path: "a.txt", content: "1\n" } }],
    },
    { text: "done" },
  ]);
  const engine = engineFor(server, ws, "busy");
  const running = engine.run("first")[Symbol.asyncIterator]();
  const events: WsEvent[] = [(await running.next()).value];
  const rejected = await collect(engine.run("second"));
  assert.equal(rejected.error instanceof Error, true);
  for (let r = await running.next(); !r.done; r = await running.next()) events.push(r.value);
  await vcsHookOf(engine).flush();
  const turns = await new SessionVcs(resolveVcsPlan(ws, { mode: "auto" }), "busy").listTurns();
  assert.equal(turns.length, 1);
  assert.deepEqual(turns[0].files.map((f) => f.path), ["a.txt"]);
});

test("VcsHook reports background git errors instead of throwing into the engine", {
  skip,
}, async () => {
  const ws = tempDir({ "a.txt": "a\n" });
  cleanups.push(() => fs.rmSync(ws, { recursive: true, force: true }));
  const errors: Error[] = [];
  const hook = new VcsHook(new SessionVcs(resolveVcsPlan(ws, { mode: "shadow" }), "broken"), {
    onError: (e) => errors.push(e),
  });
  fs.mkdirSync(path.join(ws, ".agent"), { recursive: true });
  fs.writeFileSync(path.join(ws, ".agent", "vcs"), "a file where the repository should be");
  hook.onTurnStart("hi");
  hook.onTurnEnd("completed", 1, []);
  await hook.flush();
  assert.equal(errors.length >= 1, true);
  assert.equal(hook.lastError, errors.at(-1));
});

test("createDefaultEngine refuses native snapshots outside a repository", { skip }, () => {
  const ws = tempDir();
  cleanups.push(() => fs.rmSync(ws, { recursive: true, force: true }));
  assert.throws(
    () => createDefaultEngine({ workspace: ws, vcs: { mode: "native" } }),
    (e) => e instanceof EngineConfigError && /not inside a git repository/.test(e.message),
  );
});

test("createDefaultEngine adds no hook when vcs is off", () => {
  const ws = tempDir();
  cleanups.push(() => fs.rmSync(ws, { recursive: true, force: true }));
  const hook: EngineHook = {};
  assert.equal(createDefaultEngine({ workspace: ws, hook }).hook, hook);
});
