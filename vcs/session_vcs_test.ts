import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import {
  agentRef,
  resolveVcsPlan,
  sessionIndexPath,
  SessionVcs,
  VcsError,
  type VcsTurn,
} from "./mod.ts";
import { git, gitSkip, listFiles, read, tempDir, tempRepo, writeFiles } from "./_test_helpers.ts";

const skip = gitSkip();
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function repo(files: Record<string, string> = {}): string {
  const dir = tempRepo(files);
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function folder(files: Record<string, string> = {}): string {
  const dir = tempDir(files);
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

let sessions = 0;
function session(ws: string, mode: "auto" | "native" | "shadow" = "auto", id?: string) {
  return new SessionVcs(resolveVcsPlan(ws, { mode }), id ?? `s${++sessions}-${Date.now()}`);
}

/** Runs `change` inside a begin/commit pair, like one engine turn. */
async function turn(vcs: SessionVcs, change: () => void, status = "completed") {
  await vcs.beginTurn();
  change();
  return await vcs.commitTurn(status);
}

function sha(file: string): string {
  return crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
}

function files(t: VcsTurn): string[] {
  return t.files.map((f) => `${f.change}:${f.from ? `${f.from}->` : ""}${f.path}`).sort();
}

test("native mode leaves HEAD, the user's index and git status untouched across turns", {
  skip,
}, async () => {
  const ws = repo({ "a.txt": "a\n", "b.txt": "b\n" });
  writeFiles(ws, { "a.txt": "user edit\n", "staged.txt": "staged\n", "untracked.txt": "u\n" });
  git(ws, "add", "staged.txt");
  const head = git(ws, "rev-parse", "HEAD");
  const status = git(ws, "status", "--porcelain=v1", "-uall");
  const indexSha = sha(path.join(ws, ".git", "index"));
  const vcs = session(ws, "native");
  await turn(vcs, () => writeFiles(ws, { "b.txt": "agent\n", "new.txt": "n\n" }));
  await turn(vcs, () => fs.rmSync(path.join(ws, "new.txt")));
  assert.equal((await vcs.listTurns()).length, 2);
  assert.equal(git(ws, "rev-parse", "HEAD"), head);
  assert.equal(sha(path.join(ws, ".git", "index")), indexSha);
  writeFiles(ws, { "b.txt": "b\n" }); // undo the agent's own edit: status must be as before
  assert.equal(git(ws, "status", "--porcelain=v1", "-uall"), status);
  assert.equal(git(ws, "diff", "--cached", "--name-only"), "staged.txt\n");
  assert.equal(git(ws, "symbolic-ref", "HEAD"), "refs/heads/main\n");
  assert.match(git(ws, "for-each-ref", "refs/agent/"), new RegExp(`${agentRef(vcs.sessionId)}/`));
});

test("a turn that edits, creates, deletes and renames files is listed with its changes", {
  skip,
}, async () => {
  const ws = repo({ "edit.txt": "1\n", "gone.txt": "g\n", "old.txt": "rename me\n".repeat(20) });
  const vcs = session(ws);
  const r = await turn(vcs, () => {
    writeFiles(ws, { "edit.txt": "2\n", "src/new.txt": "new\n" });
    fs.rmSync(path.join(ws, "gone.txt"));
    fs.renameSync(path.join(ws, "old.txt"), path.join(ws, "renamed.txt"));
  });
  assert.equal(r.turn, 0);
  assert.equal(r.changed, true);
  const turns = await vcs.listTurns();
  assert.equal(turns.length, 1);
  assert.equal(turns[0].turn, 1);
  assert.equal(turns[0].status, "completed");
  assert.deepEqual(files(turns[0]), [
    "added:src/new.txt",
    "deleted:gone.txt",
    "modified:edit.txt",
    "renamed:old.txt->renamed.txt",
  ]);
});

test("turns without changes are not numbered", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = session(ws);
  assert.equal((await turn(vcs, () => {})).changed, false);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "1\n" }));
  await turn(vcs, () => {}, "error");
  await turn(vcs, () => writeFiles(ws, { "a.txt": "2\n" }), "interrupted");
  const turns = await vcs.listTurns();
  assert.deepEqual(turns.map((t) => [t.turn, t.status]), [[1, "completed"], [2, "interrupted"]]);
});

test("changes made between turns are not counted as the next turn's", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "agent\n" }));
  writeFiles(ws, { "user.txt": "user\n" });
  await turn(vcs, () => writeFiles(ws, { "b.txt": "agent\n" }));
  const turns = await vcs.listTurns();
  assert.deepEqual(files(turns[1]), ["added:b.txt"]);
});

test("diffTurn returns the turn's patch with workspace paths", { skip }, async () => {
  const ws = repo({ "a.txt": "old line\n", "old.txt": "same content\n".repeat(20) });
  const vcs = session(ws);
  await turn(vcs, () => {
    writeFiles(ws, { "a.txt": "new line\n" });
    fs.renameSync(path.join(ws, "old.txt"), path.join(ws, "new.txt"));
  });
  const patch = await vcs.diffTurn(1);
  assert.match(patch, /^diff --git a\/a.txt b\/a.txt$/m);
  assert.match(patch, /^-old line$/m);
  assert.match(patch, /^\+new line$/m);
  assert.match(patch, /^rename from old.txt$/m);
  assert.match(patch, /^rename to new.txt$/m);
});

test("restoreTurn brings every file back to its state after the turn", { skip }, async () => {
  const ws = repo({ "edit.txt": "1\n", "gone.txt": "g\n", "old.txt": "r\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "edit.txt": "after turn 1\n", "t1.txt": "t1\n" }));
  await turn(vcs, () => {
    writeFiles(ws, { "edit.txt": "after turn 2\n", "dir/t2.txt": "t2\n" });
    fs.rmSync(path.join(ws, "gone.txt"));
    fs.rmSync(path.join(ws, "t1.txt"));
    fs.renameSync(path.join(ws, "old.txt"), path.join(ws, "renamed.txt"));
  });
  const r = await vcs.restoreTurn(1);
  assert.deepEqual(r.restored, [
    "dir/t2.txt",
    "edit.txt",
    "gone.txt",
    "old.txt",
    "renamed.txt",
    "t1.txt",
  ]);
  assert.deepEqual(r.overwritten, []);
  assert.deepEqual(r.kept, []);
  assert.equal(read(ws, "edit.txt"), "after turn 1\n");
  assert.equal(read(ws, "t1.txt"), "t1\n");
  assert.equal(read(ws, "gone.txt"), "g\n");
  assert.equal(read(ws, "old.txt"), "r\n");
  assert.deepEqual(listFiles(ws), ["edit.txt", "gone.txt", "old.txt", "t1.txt"]);
  assert.equal(fs.existsSync(path.join(ws, "dir")), false, "the emptied folder is removed");
});

test("restoreTurn with paths touches only those paths", { skip }, async () => {
  const ws = repo({ "a.txt": "a0\n", "src/b.txt": "b0\n", "src/c.txt": "c0\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "a1\n", "src/b.txt": "b1\n" }));
  await turn(
    vcs,
    () => writeFiles(ws, { "a.txt": "a2\n", "src/b.txt": "b2\n", "src/c.txt": "c2\n" }),
  );
  const r = await vcs.restoreTurn(1, { paths: ["src/b.txt", "./a.txt"] });
  assert.deepEqual(r.restored, ["a.txt", "src/b.txt"]);
  assert.equal(read(ws, "a.txt"), "a1\n");
  assert.equal(read(ws, "src/b.txt"), "b1\n");
  assert.equal(read(ws, "src/c.txt"), "c2\n");
  const folderOnly = await vcs.restoreTurn(1, { paths: ["src"] });
  assert.deepEqual(folderOnly.restored, ["src/b.txt", "src/c.txt"]);
  assert.equal(read(ws, "src/c.txt"), "c0\n");
});

test("restore never deletes a file the user created after the turn", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "turn 1\n" }));
  await turn(vcs, () => writeFiles(ws, { "a.txt": "turn 2\n" }));
  writeFiles(ws, { "mine.txt": "the user's\n", "notes/todo.md": "x\n" });
  const r = await vcs.restoreTurn(1);
  assert.deepEqual(r.restored, ["a.txt"]);
  assert.equal(read(ws, "mine.txt"), "the user's\n");
  assert.equal(read(ws, "notes/todo.md"), "x\n");
});

test("restore keeps a file the user edited that the restore would delete", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "turn 1\n" }));
  await turn(vcs, () => writeFiles(ws, { "agent.txt": "created by the agent\n" }));
  writeFiles(ws, { "agent.txt": "then edited by the user\n" });
  const preview = await vcs.restoreTurn(1, { dryRun: true });
  const r = await vcs.restoreTurn(1);
  assert.deepEqual(r, preview);
  assert.deepEqual(r.kept, ["agent.txt"]);
  assert.deepEqual(r.restored, []);
  assert.equal(read(ws, "agent.txt"), "then edited by the user\n");
});

test("an unedited file the agent created later is deleted by the restore", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "turn 1\n" }));
  await turn(vcs, () => writeFiles(ws, { "agent.txt": "created by the agent\n" }));
  const r = await vcs.restoreTurn(1);
  assert.deepEqual(r.restored, ["agent.txt"]);
  assert.equal(read(ws, "agent.txt"), null);
});

test("dryRun reports overwritten files first and changes nothing", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n", "b.txt": "b\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "turn 1\n", "b.txt": "turn 1\n" }));
  await turn(vcs, () => writeFiles(ws, { "a.txt": "turn 2\n", "b.txt": "turn 2\n" }));
  writeFiles(ws, { "a.txt": "user edit after the last turn\n" });
  const preview = await vcs.restoreTurn(1, { dryRun: true });
  assert.deepEqual(preview.restored, ["a.txt", "b.txt"]);
  assert.deepEqual(preview.overwritten, ["a.txt"]);
  assert.equal(preview.backup, null);
  assert.equal(read(ws, "a.txt"), "user edit after the last turn\n");
  assert.equal(read(ws, "b.txt"), "turn 2\n");
  const r = await vcs.restoreTurn(1);
  assert.deepEqual(r.overwritten, ["a.txt"]);
  assert.equal(read(ws, "a.txt"), "turn 1\n");
  assert.ok(r.backup, "the overwritten content is kept in a backup commit");
  assert.equal(git(ws, "show", `${r.backup}:a.txt`), "user edit after the last turn\n");
});

test(
  "missing lists requested paths that exist neither in the turn nor on disk",
  { skip },
  async () => {
    const ws = repo({ "a.txt": "a\n" });
    const vcs = session(ws);
    await turn(vcs, () => writeFiles(ws, { "a.txt": "1\n" }));
    writeFiles(ws, { "untouched.txt": "u\n" });
    const r = await vcs.restoreTurn(1, { paths: ["nope.txt", "a.txt", "untouched.txt"] });
    assert.deepEqual(r.missing, ["nope.txt"]);
    assert.equal(read(ws, "untouched.txt"), "u\n");
  },
);

test("restoreTurn refuses unknown turns and paths outside the workspace", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "1\n" }));
  await assert.rejects(vcs.restoreTurn(2), (e) => e instanceof VcsError && e.code === "bad_turn");
  await assert.rejects(vcs.diffTurn(0), (e) => e instanceof VcsError && e.code === "bad_turn");
  await assert.rejects(
    vcs.restoreTurn(1, { paths: ["../outside.txt"] }),
    (e) => e instanceof VcsError && e.code === "bad_path",
  );
});

test("restore keeps executable bits and symlinks", { skip }, async () => {
  const ws = repo({ "run.sh": "#!/bin/sh\n" });
  const vcs = session(ws);
  await turn(vcs, () => {
    fs.chmodSync(path.join(ws, "run.sh"), 0o755);
    fs.symlinkSync("run.sh", path.join(ws, "link"));
  });
  await turn(vcs, () => {
    fs.rmSync(path.join(ws, "run.sh"));
    fs.rmSync(path.join(ws, "link"));
  });
  const r = await vcs.restoreTurn(1);
  assert.deepEqual(r.restored, ["link", "run.sh"]);
  assert.equal(fs.statSync(path.join(ws, "run.sh")).mode & 0o111, 0o111);
  assert.equal(fs.readlinkSync(path.join(ws, "link")), "run.sh");
});

test("shadow mode snapshots a plain folder in .agent/vcs", { skip }, async () => {
  const ws = folder({ "a.txt": "a\n", "sub/b.txt": "b\n" });
  const plan = resolveVcsPlan(ws, { mode: "auto" });
  assert.equal(plan.mode, "shadow");
  assert.equal(plan.gitDir, path.join(ws, ".agent", "vcs"));
  const vcs = new SessionVcs(plan, "shadow-1");
  await turn(vcs, () => writeFiles(ws, { "a.txt": "1\n", "sub/c.txt": "c\n" }));
  await turn(vcs, () => fs.rmSync(path.join(ws, "sub"), { recursive: true }));
  const turns = await vcs.listTurns();
  assert.deepEqual(files(turns[0]), ["added:sub/c.txt", "modified:a.txt"]);
  assert.deepEqual(files(turns[1]), ["deleted:sub/b.txt", "deleted:sub/c.txt"]);
  assert.ok(fs.existsSync(path.join(ws, ".agent", "vcs", "HEAD")));
  assert.equal(fs.existsSync(path.join(ws, ".git")), false);
  const r = await vcs.restoreTurn(1);
  assert.deepEqual(r.restored, ["sub/b.txt", "sub/c.txt"]);
  assert.equal(read(ws, "sub/c.txt"), "c\n");
  assert.deepEqual(listFiles(ws), ["a.txt", "sub/b.txt", "sub/c.txt"]);
});

test("ignored files, node_modules and .agent are left out of snapshots", { skip }, async () => {
  const ws = repo({ ".gitignore": "*.log\nbuild/\n", "a.txt": "a\n" });
  const vcs = session(ws);
  await turn(vcs, () =>
    writeFiles(ws, {
      "a.txt": "1\n",
      "debug.log": "x\n",
      "build/out.js": "x\n",
      "node_modules/pkg/index.js": "x\n",
      "sub/node_modules/p/i.js": "x\n",
      ".agent/tool-results/r.txt": "x\n",
    }));
  const turns = await vcs.listTurns();
  assert.deepEqual(files(turns[0]), ["modified:a.txt"]);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "2\n" }));
  await vcs.restoreTurn(1);
  assert.equal(read(ws, "debug.log"), "x\n");
  assert.equal(read(ws, "node_modules/pkg/index.js"), "x\n");
});

test("files over the size cap are skipped and reported", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = new SessionVcs(resolveVcsPlan(ws, { mode: "auto", maxFileBytes: 1000 }), "cap");
  const r = await turn(vcs, () => writeFiles(ws, { "big.bin": "x".repeat(1001), "ok.txt": "y" }));
  assert.deepEqual(r.skipped, [{ path: "big.bin", bytes: 1001 }]);
  const turns = await vcs.listTurns();
  assert.deepEqual(files(turns[0]), ["added:ok.txt"]);
  assert.deepEqual(turns[0].skipped, [{ path: "big.bin", bytes: 1001 }]);
});

test("two sessions on one workspace keep separate refs and turns", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const one = session(ws, "native", "one");
  const two = session(ws, "native", "two");
  await turn(one, () => writeFiles(ws, { "one.txt": "1\n" }));
  await turn(two, () => writeFiles(ws, { "two.txt": "2\n" }));
  await turn(two, () => writeFiles(ws, { "two.txt": "2b\n" }));
  assert.equal((await one.listTurns()).length, 1);
  assert.equal((await two.listTurns()).length, 2);
  assert.deepEqual(files((await two.listTurns())[0]), ["added:two.txt"]);
  const refs = git(ws, "for-each-ref", "--format=%(refname)", "refs/agent/").split("\n");
  assert.ok(refs.includes("refs/agent/one/turns/1"));
  assert.ok(refs.includes("refs/agent/two/turns/2"));
  assert.ok(!refs.includes("refs/agent/one/turns/2"));
  assert.notEqual(sessionIndexPath(one.plan, "one"), sessionIndexPath(two.plan, "two"));
});

test("a new handle on the same session sees its turns and queues behind it", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const first = session(ws, "auto", "shared");
  await first.beginTurn();
  writeFiles(ws, { "a.txt": "1\n" });
  first.commitTurn("completed"); // not awaited, as a hook does
  const second = new SessionVcs(resolveVcsPlan(ws, { mode: "auto" }), "shared");
  assert.equal((await second.listTurns()).length, 1);
});

test("a reloaded handle numbers its next turn after turns another process took", {
  skip,
}, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = session(ws, "native", "moved");
  await turn(vcs, () => writeFiles(ws, { "a.txt": "1\n" }));
  // Another process (a worker that took the session over) snapshots the session's next turn.
  await turnInAnotherProcess(ws, "moved", "b.txt");
  await vcs.reload();
  await turn(vcs, () => writeFiles(ws, { "c.txt": "3\n" }));
  const turns = await vcs.listTurns();
  assert.deepEqual(turns.map((t) => [t.turn, files(t)]), [
    [1, ["modified:a.txt"]],
    [2, ["added:b.txt"]],
    [3, ["added:c.txt"]],
  ]);
  assert.equal(turns[2].parent, turns[1].commit);
});

test("a turn another process recorded is never overwritten by a stale handle", {
  skip,
}, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = session(ws, "native", "stale");
  await turn(vcs, () => writeFiles(ws, { "a.txt": "1\n" }));
  await turnInAnotherProcess(ws, "stale", "b.txt");
  await assert.rejects(
    turn(vcs, () => writeFiles(ws, { "c.txt": "3\n" })),
    (e: VcsError) => e.code === "git_failed" && /turns\/2/.test(e.message),
  );
  const turns = await vcs.listTurns();
  assert.deepEqual(turns.map((t) => [t.turn, files(t)]), [
    [1, ["modified:a.txt"]],
    [2, ["added:b.txt"]],
  ]);
});

/** Runs one turn of session `id` that creates `file`, in a child process of this runtime. */
async function turnInAnotherProcess(ws: string, id: string, file: string): Promise<void> {
  const code = `
    const { default: process } = await import("node:process");
    const fs = await import("node:fs");
    const { resolveVcsPlan, SessionVcs } = await import(process.env.VCS_MOD);
    const ws = process.env.VCS_WS;
    const vcs = new SessionVcs(resolveVcsPlan(ws, { mode: "native" }), process.env.VCS_ID);
    await vcs.beginTurn();
    fs.writeFileSync(ws + "/" + process.env.VCS_FILE, "x\\n");
    await vcs.commitTurn("completed");`;
  const args = "Deno" in globalThis ? ["eval", code] : [
    ...process.execArgv.filter((a) => /^--(experimental|no-warnings)/.test(a)),
    "--input-type=module",
    "-e",
    code,
  ];
  const env = {
    ...process.env,
    VCS_MOD: new URL("./mod.ts", import.meta.url).href,
    VCS_WS: ws,
    VCS_ID: id,
    VCS_FILE: file,
  };
  await promisify(execFile)(process.execPath, args, { env });
}

test("forget deletes the session's refs and index but no files", { skip }, async () => {
  const ws = repo({ "a.txt": "a\n" });
  const vcs = session(ws, "native", "forget-me");
  const other = session(ws, "native", "keep-me");
  await turn(vcs, () => writeFiles(ws, { "a.txt": "1\n" }));
  await turn(other, () => writeFiles(ws, { "b.txt": "b\n" }));
  const index = sessionIndexPath(vcs.plan, "forget-me");
  assert.ok(fs.existsSync(index));
  await vcs.forget();
  assert.deepEqual(await vcs.listTurns(), []);
  assert.equal(git(ws, "for-each-ref", "refs/agent/forget-me/"), "");
  assert.notEqual(git(ws, "for-each-ref", "refs/agent/keep-me/"), "");
  assert.equal(fs.existsSync(index), false);
  assert.equal(read(ws, "a.txt"), "1\n");
});

test("a workspace inside a larger repository is snapshotted alone", { skip }, async () => {
  const top = repo({ "outside.txt": "o\n", "proj/a.txt": "a\n" });
  const ws = path.join(top, "proj");
  const vcs = session(ws, "native");
  assert.equal(vcs.plan.workTree, top);
  await turn(vcs, () => {
    writeFiles(top, { "outside.txt": "changed by someone else\n", "proj/a.txt": "1\n" });
  });
  await turn(vcs, () => writeFiles(ws, { "a.txt": "2\n", "b.txt": "b\n" }));
  const turns = await vcs.listTurns();
  assert.deepEqual(files(turns[0]), ["modified:a.txt"]);
  const r = await vcs.restoreTurn(1);
  assert.deepEqual(r.restored, ["a.txt", "b.txt"]);
  assert.equal(read(ws, "a.txt"), "1\n");
  assert.equal(read(top, "outside.txt"), "changed by someone else\n");
});

test("an off plan records nothing and explains itself", async () => {
  const ws = folder({ "a.txt": "a\n" });
  const vcs = new SessionVcs(resolveVcsPlan(ws), "off");
  assert.equal(vcs.enabled, false);
  assert.equal((await vcs.commitTurn("completed")).changed, false);
  assert.deepEqual(await vcs.listTurns(), []);
  await assert.rejects(vcs.diffTurn(1), (e) => e instanceof VcsError && e.code === "off");
  await vcs.forget();
});

// --- resolveVcsPlan, agentRef, sessionIndexPath ---

test("resolveVcsPlan is off by default", () => {
  const plan = resolveVcsPlan(folder());
  assert.equal(plan.mode, "off");
  assert.equal(plan.requested, "off");
});

test("auto uses native mode inside a repository and shadow mode outside", { skip }, () => {
  const r = repo();
  const nativePlan = resolveVcsPlan(r, { mode: "auto" });
  assert.equal(nativePlan.mode, "native");
  assert.equal(nativePlan.gitDir, path.join(r, ".git"));
  assert.equal(resolveVcsPlan(folder(), { mode: "auto" }).mode, "shadow");
});

test("auto uses shadow mode in a folder the repository ignores", { skip }, () => {
  const r = repo({ ".gitignore": "tmp/\n", "tmp/ws/a.txt": "a\n" });
  assert.equal(resolveVcsPlan(path.join(r, "tmp", "ws"), { mode: "auto" }).mode, "shadow");
});

test("native mode outside a repository is an error", { skip }, () => {
  assert.throws(
    () => resolveVcsPlan(folder(), { mode: "native" }),
    (e) => e instanceof VcsError && e.code === "not_a_repository",
  );
});

test("resolveVcsPlan refuses / and the home folder", () => {
  for (const ws of ["/", os.homedir()]) {
    assert.throws(
      () => resolveVcsPlan(ws, { mode: "auto" }),
      (e) => e instanceof VcsError && e.code === "unsafe_root" && /Cannot snapshot/.test(e.message),
    );
  }
});

test("without git every mode is off with a reason", () => {
  const plan = resolveVcsPlan(folder(), { mode: "auto", gitPath: "/nonexistent/bin/git" });
  assert.equal(plan.mode, "off");
  assert.equal(plan.requested, "auto");
  assert.match(plan.reason, /git was not found/);
});

test("an unknown mode is a clear error", () => {
  assert.throws(
    () => resolveVcsPlan(folder(), { mode: "always" as "auto" }),
    /Cannot resolve the vcs plan: mode "always"/,
  );
});

test("agentRef names session and turn refs and escapes unsafe ids", () => {
  assert.equal(agentRef("tenant-42-session-7"), "refs/agent/tenant-42-session-7");
  assert.equal(agentRef("s", 3), "refs/agent/s/turns/3");
  assert.equal(agentRef("a/b..c"), "refs/agent/a%2Fb%2E%2Ec");
  assert.throws(() => agentRef(""), VcsError);
  assert.throws(() => agentRef("s", 0), VcsError);
});

test("the session index lives in the git dir, never the user's index", { skip }, () => {
  const r = repo();
  const p = sessionIndexPath(resolveVcsPlan(r, { mode: "native" }), "s1");
  assert.equal(p, path.join(r, ".git", "agent", "s1.index"));
  assert.throws(() => sessionIndexPath(resolveVcsPlan(r), "s1"), VcsError);
});
