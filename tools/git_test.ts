import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import process from "node:process";
import { which } from "../_internal/process.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { RiskClass, ToolRegistry } from "./registry.ts";
import { registerGitTools } from "./git.ts";

const gitMissing = which("git") === null;
if (gitMissing && process.env.CI_REQUIRE_REAL === "1") {
  throw new Error("Cannot run the git tool tests: git is not on the PATH and CI_REQUIRE_REAL=1");
}
const skip = gitMissing ? "git is not on the PATH" : false;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function git(dir: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd: dir,
    encoding: "utf8",
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "Ada",
      GIT_AUTHOR_EMAIL: "ada@example.invalid",
      GIT_COMMITTER_NAME: "Ada",
      GIT_COMMITTER_EMAIL: "ada@example.invalid",
      GIT_CONFIG_NOSYSTEM: "1",
    },
  });
}

function repo(files: Record<string, string> = {}, init = true): {
  dir: string;
  call: (name: string, args?: Record<string, unknown>) => Promise<string>;
} {
  const dir = tempWorkspace(files);
  cleanups.push(() => removeDir(dir));
  if (init) {
    git(dir, "init", "-q", "-b", "main");
    git(dir, "config", "commit.gpgsign", "false");
  }
  const registry = new ToolRegistry();
  registerGitTools(registry, dir, { maxOutputChars: 2_000 });
  return { dir, call: async (name, args = {}) => String(await registry.get(name)!.func(args)) };
}

function commitAll(dir: string, message: string): void {
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", message);
}

test("registerGitTools registers three read-only tools", () => {
  const registry = new ToolRegistry();
  registerGitTools(registry, "/tmp");
  assert.deepEqual(registry.names(), ["git_status", "git_log", "git_diff"]);
  for (const name of registry.names()) {
    assert.equal(registry.get(name)!.metadata.riskClass, RiskClass.READ);
    assert.equal(registry.get(name)!.metadata.requiresApproval, false);
  }
});

test("git_status shows the branch, modified, staged and untracked files", { skip }, async () => {
  const r = repo({ "a.txt": "1\n", "b.txt": "1\n" });
  commitAll(r.dir, "first");
  writeFileSync(path.join(r.dir, "a.txt"), "2\n");
  writeFileSync(path.join(r.dir, "b.txt"), "2\n");
  git(r.dir, "add", "b.txt");
  writeFileSync(path.join(r.dir, "new.txt"), "x\n");
  const out = await r.call("git_status");
  assert.match(out, /^Branch: main/);
  assert.match(out, /^ M a\.txt$/m);
  assert.match(out, /^M {2}b\.txt$/m);
  assert.match(out, /^\?\? new\.txt$/m);
});

test("git_status says when the working tree is clean", { skip }, async () => {
  const r = repo({ "a.txt": "1\n" });
  commitAll(r.dir, "first");
  assert.match(await r.call("git_status"), /Working tree clean\./);
});

test("git_status does not touch the index (no optional locks)", { skip }, async () => {
  const r = repo({ "a.txt": "1\n" });
  commitAll(r.dir, "first");
  const indexBefore = execFileSync("sha256sum", [path.join(r.dir, ".git", "index")], {
    encoding: "utf8",
  });
  // A touched file makes a normal `git status` refresh and rewrite the index.
  const future = new Date(Date.now() + 5_000);
  execFileSync("touch", ["-d", future.toISOString(), path.join(r.dir, "a.txt")]);
  await r.call("git_status");
  const indexAfter = execFileSync("sha256sum", [path.join(r.dir, ".git", "index")], {
    encoding: "utf8",
  });
  assert.equal(indexAfter, indexBefore);
});

test("git_log lists commits newest first and honours max_count and path", { skip }, async () => {
  const r = repo({ "a.txt": "1\n" });
  commitAll(r.dir, "first commit");
  writeFileSync(path.join(r.dir, "b.txt"), "1\n");
  commitAll(r.dir, "second commit");
  writeFileSync(path.join(r.dir, "a.txt"), "2\n");
  commitAll(r.dir, "third commit");
  const all = (await r.call("git_log")).split("\n");
  assert.equal(all.length, 3);
  assert.match(all[0], /^[0-9a-f]{7,} \d{4}-\d\d-\d\d Ada: third commit$/);
  assert.match(all[2], /first commit$/);
  assert.equal((await r.call("git_log", { max_count: 1 })).split("\n").length, 1);
  const forA = await r.call("git_log", { path: "a.txt" });
  assert.doesNotMatch(forA, /second commit/);
  assert.match(forA, /third commit/);
});

test("git_log says there are no commits in a fresh repository", { skip }, async () => {
  const r = repo();
  assert.equal(await r.call("git_log"), "No commits yet.");
});

test("git_log refuses a ref that looks like an option", { skip }, async () => {
  const r = repo({ "a.txt": "1\n" });
  commitAll(r.dir, "first");
  await assert.rejects(r.call("git_log", { ref: "--output=/tmp/x" }), /is not a revision/);
});

test("git_diff shows unstaged, staged, stat and ref diffs", { skip }, async () => {
  const r = repo({ "a.txt": "one\ntwo\n" });
  commitAll(r.dir, "first");
  writeFileSync(path.join(r.dir, "a.txt"), "one\nTWO\n");
  const unstaged = await r.call("git_diff");
  assert.match(unstaged, /^diff --git a\/a\.txt b\/a\.txt/m);
  assert.match(unstaged, /^-two$/m);
  assert.match(unstaged, /^\+TWO$/m);
  assert.equal(await r.call("git_diff", { staged: true }), "No staged changes.");
  git(r.dir, "add", "a.txt");
  assert.match(await r.call("git_diff", { staged: true }), /^\+TWO$/m);
  assert.match(await r.call("git_diff", { stat: true, ref: "HEAD" }), /a\.txt \| 2 \+-/);
  assert.match(await r.call("git_diff"), /^No unstaged changes/);
});

test("git_diff bounds a huge diff and says how much was cut", { skip }, async () => {
  const r = repo({ "big.txt": "x\n" });
  commitAll(r.dir, "first");
  writeFileSync(path.join(r.dir, "big.txt"), "y\n".repeat(10_000));
  const out = await r.call("git_diff");
  assert.ok(out.length < 2_200, `length ${out.length}`);
  assert.match(out, /\[output cut: \d+ of \d+ chars shown; pass path/);
});

test("git_diff reports an unknown ref as a git failure", { skip }, async () => {
  const r = repo({ "a.txt": "1\n" });
  commitAll(r.dir, "first");
  await assert.rejects(
    r.call("git_diff", { ref: "no-such-branch" }),
    /Cannot run git_diff: git failed/,
  );
});

test("the git tools say clearly when the workspace is not a repository", { skip }, async () => {
  const r = repo({ "a.txt": "1\n" }, false);
  for (const name of ["git_status", "git_log", "git_diff"]) {
    await assert.rejects(
      r.call(name),
      new RegExp(`^Error: Cannot run ${name}: the workspace .* is not inside a git repository`),
    );
  }
});
