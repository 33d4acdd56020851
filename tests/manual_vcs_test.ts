// The manual's §17 samples (DESIGN §7: §17 → VCS) run as written, as modules under Deno, against
// a local MockOpenAIServer, each in a fresh temporary workspace, with real git.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import process from "node:process";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { gitSkip } from "../vcs/_test_helpers.ts";
import { removeDir, tempWorkspace } from "./_util.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const skip = isDeno ? gitSkip() : "the samples are run as modules by the Deno binary";

async function runSample(
  file: string,
  turns: ScriptedTurn[],
  options: { files?: Record<string, string>; gitRepo?: boolean } = {},
): Promise<{ code: number | null; out: string; err: string }> {
  const ws = tempWorkspace(options.files ?? {});
  cleanups.push(() => removeDir(ws));
  if (options.gitRepo) {
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=u", "-c", "user.email=u@x.invalid", ...args], {
        cwd: ws,
      });
    git("init", "-q");
    git("add", "-A");
    git("commit", "-q", "--allow-empty", "-m", "initial");
  }
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  const path = new URL(`./manual/${file}`, import.meta.url).pathname;
  return await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["run", "-A", path], {
      cwd: ws,
      env: {
        ...process.env,
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "sample-key",
        OPENAI_MODEL: "sample-model",
        NO_COLOR: "1",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out, err }));
  });
}

function lastJson(out: string): Record<string, unknown> {
  return JSON.parse(out.trim().split("\n").at(-1) ?? "");
}

function write(path: string, content: string): ScriptedTurn {
  return { toolCalls: [{ name: "write_file", arguments: { path, content } }] };
}

test("§17.1: createDefaultEngine with vcs auto records a turn (shadow in a plain folder)", {
  skip,
}, async () => {
  const { code, out, err } = await runSample("sec17_1_vcs_enable.ts", [
    write("hello.txt", "hi\n"),
    { text: "written" },
  ], { files: { "README.md": "# demo\n" } });
  assert.equal(code, 0, out + err);
  assert.deepEqual(lastJson(out), {
    mode: "shadow",
    turns: [{ turn: 1, files: ["added:hello.txt"] }],
  });
});

test("§17.2: listTurns, diffTurn, restoreTurn with paths, forget (native)", {
  skip,
}, async () => {
  const { code, out, err } = await runSample("sec17_2_vcs_query.ts", [
    write("src/app.ts", "export const v = 1;\n"),
    { text: "v1" },
    write("src/app.ts", "export const v = 2;\n"),
    { text: "v2" },
    write("src/app.ts", "export const v = 3;\n"),
    { text: "v3" },
  ], { files: { "src/app.ts": "export const v = 0;\n" }, gitRepo: true });
  assert.equal(code, 0, out + err);
  assert.deepEqual(lastJson(out), {
    mode: "native",
    turns: [1, 2, 3],
    patch: ["-export const v = 1;", "+export const v = 2;"],
    restored: ["src/app.ts"],
    overwritten: [],
    missing: [],
    app: "export const v = 2;\n",
    refsAfterForget: "",
  });
});
