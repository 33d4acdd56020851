// The manual's §17 samples (DESIGN §7: §17 → VCS) run as written, as modules under Deno, against
// a local MockOpenAIServer, each in a fresh temporary workspace, with real git.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import type { ScriptedTurn } from "../testing/mod.ts";
import { gitSkip } from "../vcs/_test_helpers.ts";
import { cleanUpSamples, lastJson, runSample as runManualSample } from "./_manual.ts";

afterEach(cleanUpSamples);

const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
const skip = isDeno ? gitSkip() : "the samples are run as modules by the Deno binary";

function runSample(
  file: string,
  turns: ScriptedTurn[],
  options: { files?: Record<string, string>; gitRepo?: boolean } = {},
) {
  return runManualSample(file, {
    turns,
    files: options.files,
    prepare: options.gitRepo ? initRepo : undefined,
  });
}

function initRepo(ws: string): void {
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=u", "-c", "user.email=u@x.invalid", ...args], {
      cwd: ws,
    });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-q", "--allow-empty", "-m", "initial");
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
