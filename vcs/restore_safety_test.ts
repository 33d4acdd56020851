// Snapshots and restores when folders or files are swapped for symbolic links pointing outside
// the workspace, and with file names git's line-based input would split (real git, real links).
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { resolveVcsPlan, SessionVcs, VcsHook } from "./mod.ts";
import { gitSkip, listFiles, read, tempDir, tempRepo, writeFiles } from "./_test_helpers.ts";

const skip = gitSkip();
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function dir(files: Record<string, string> = {}, repo = false): string {
  const d = repo ? tempRepo(files) : tempDir(files);
  cleanups.push(() => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

let sessions = 0;
function session(ws: string): SessionVcs {
  return new SessionVcs(resolveVcsPlan(ws, { mode: "auto" }), `safety-${++sessions}`);
}

async function turn(vcs: SessionVcs, change: () => void): Promise<void> {
  await vcs.beginTurn();
  change();
  await vcs.commitTurn("completed");
}

/** Replaces the folder `rel` of `ws` by a symbolic link to `target`. */
function swapForLink(ws: string, rel: string, target: string): void {
  fs.rmSync(path.join(ws, rel), { recursive: true, force: true });
  fs.symlinkSync(target, path.join(ws, rel));
}

for (const kind of ["native", "shadow"] as const) {
  test(`restore never writes through a folder swapped for a link to outside (${kind})`, {
    skip,
  }, async () => {
    const ws = dir({}, kind === "native");
    const outside = dir();
    const vcs = session(ws);
    await turn(vcs, () => writeFiles(ws, { "cfg/authorized_keys": "turn 1 key\n" }));
    await turn(vcs, () => writeFiles(ws, { "cfg/authorized_keys": "turn 2 key\n" }));
    swapForLink(ws, "cfg", outside); // after the last snapshot: no snapshot saw the link
    const expected = {
      restored: [],
      overwritten: [],
      missing: [],
      kept: ["cfg/authorized_keys"],
      keptReasons: [{
        path: "cfg/authorized_keys",
        reason: "its parent folder cfg is now a symbolic link",
      }],
      backup: null,
    };
    assert.deepEqual(await vcs.restoreTurn(1, { dryRun: true }), expected);
    assert.deepEqual(await vcs.restoreTurn(1), expected);
    assert.deepEqual(await vcs.restoreTurn(1, { paths: ["cfg/authorized_keys"] }), expected);
    assert.deepEqual(fs.readdirSync(outside), []);
    assert.equal(fs.readlinkSync(path.join(ws, "cfg")), outside);
  });
}

test("restore never deletes through a folder swapped for a link to outside", {
  skip,
}, async () => {
  const ws = dir({ "keep.txt": "k\n" });
  const outside = dir({ "new.txt": "made in turn 2\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "cfg/old.txt": "o\n" }));
  await turn(vcs, () => writeFiles(ws, { "cfg/new.txt": "made in turn 2\n" }));
  // The outside copy has the very content of the latest snapshot: hashing it through the link
  // would make it look unchanged, so safe to delete.
  swapForLink(ws, "cfg", outside);
  const dry = await vcs.restoreTurn(1, { dryRun: true });
  assert.deepEqual(dry.kept, ["cfg/new.txt"]);
  const result = await vcs.restoreTurn(1);
  assert.deepEqual(result.restored, []);
  assert.deepEqual(result.kept, ["cfg/new.txt"]);
  assert.deepEqual(fs.readdirSync(outside), ["new.txt"]);
  assert.equal(read(outside, "new.txt"), "made in turn 2\n");
});

test("restore replaces a link at the file itself and never writes its target", {
  skip,
}, async () => {
  const ws = dir({}, true);
  const outside = dir({ "secret.txt": "outside\n" });
  const vcs = session(ws);
  await turn(vcs, () => writeFiles(ws, { "a.txt": "v1\n" }));
  await turn(vcs, () => writeFiles(ws, { "a.txt": "v2\n" }));
  fs.rmSync(path.join(ws, "a.txt"));
  fs.symlinkSync(path.join(outside, "secret.txt"), path.join(ws, "a.txt"));
  const dry = await vcs.restoreTurn(1, { dryRun: true });
  assert.deepEqual([dry.restored, dry.overwritten], [["a.txt"], ["a.txt"]]);
  assert.equal(fs.lstatSync(path.join(ws, "a.txt")).isSymbolicLink(), true);
  const result = await vcs.restoreTurn(1);
  assert.deepEqual([result.restored, result.overwritten], [["a.txt"], ["a.txt"]]);
  assert.equal(fs.lstatSync(path.join(ws, "a.txt")).isFile(), true);
  assert.equal(read(ws, "a.txt"), "v1\n");
  assert.equal(read(outside, "secret.txt"), "outside\n");
  assert.deepEqual(fs.readdirSync(outside), ["secret.txt"]);
});

for (const kind of ["native", "shadow"] as const) {
  test(`a folder swapped for a link is snapshotted as the link and later turns work (${kind})`, {
    skip,
  }, async () => {
    const ws = dir({}, kind === "native");
    const outside = dir();
    const vcs = session(ws);
    await turn(vcs, () => writeFiles(ws, { "cfg/authorized_keys": "k1\n" }));
    await turn(vcs, () => {
      swapForLink(ws, "cfg", outside);
      writeFiles(ws, { "other.txt": "z\n" });
    });
    await turn(vcs, () => writeFiles(ws, { "third.txt": "3\n" }));
    const turns = await vcs.listTurns();
    assert.deepEqual(turns.map((t) => t.files.map((f) => `${f.change}:${f.path}`).sort()), [
      ["added:cfg/authorized_keys"],
      ["added:cfg", "added:other.txt", "deleted:cfg/authorized_keys"],
      ["added:third.txt"],
    ]);
    // The link is unchanged since the latest snapshot: restoring turn 1 removes the link itself
    // and writes a real folder in the workspace; the outside folder stays empty.
    const result = await vcs.restoreTurn(1);
    assert.deepEqual(result.kept, []);
    assert.equal(fs.lstatSync(path.join(ws, "cfg")).isDirectory(), true);
    assert.equal(read(ws, "cfg/authorized_keys"), "k1\n");
    assert.deepEqual(fs.readdirSync(outside), []);
    assert.deepEqual(listFiles(ws), ["cfg/authorized_keys"]);
  });
}

test("VcsHook reports a failed snapshot to reportTo.onError and warns when nobody listens", {
  skip,
}, async () => {
  const ws = dir({ "a.txt": "a\n" });
  fs.mkdirSync(path.join(ws, ".agent"), { recursive: true });
  fs.writeFileSync(path.join(ws, ".agent", "vcs"), "a file where the repository should be");
  const seen: unknown[][] = [];
  const reported = new VcsHook(new SessionVcs(resolveVcsPlan(ws, { mode: "shadow" }), "r"), {
    reportTo: { onError: (...args: unknown[]) => seen.push(args) },
  });
  reported.onTurnStart("hi");
  reported.onTurnEnd("completed", 1, []);
  await reported.flush();
  assert.equal(seen.length >= 1, true);
  assert.equal(seen[0][0], reported.lastError?.message);
  assert.equal(seen[0][1], "vcs_failed");
  assert.equal((seen[0][2] as { retriable?: unknown }).retriable, false);

  const warnings: unknown[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => warnings.push(args.join(" "));
  try {
    const silent = new VcsHook(new SessionVcs(resolveVcsPlan(ws, { mode: "shadow" }), "w"));
    silent.onTurnStart("hi");
    silent.onTurnEnd("completed", 1, []);
    await silent.flush();
  } finally {
    console.warn = warn;
  }
  assert.equal(warnings.length >= 1, true);
  assert.match(String(warnings[0]), /^\[zqagent\] vcs: ./);
});

const ODD_NAMES = [
  "new\nline.txt",
  "with space.txt",
  "ünï cødé ✓.txt",
  `quote's "double".txt`,
  "tab\there.txt",
  "dir with\nnewline/inner.txt",
];

for (const kind of ["native", "shadow"] as const) {
  test(`names with newlines, spaces, unicode and quotes are listed and restored (${kind})`, {
    skip,
  }, async () => {
    const ws = dir({}, kind === "native");
    const vcs = session(ws);
    const v = (n: number) => Object.fromEntries(ODD_NAMES.map((p) => [p, `${p} v${n}\n`]));
    await turn(vcs, () => writeFiles(ws, v(1)));
    await turn(vcs, () => writeFiles(ws, v(2)));
    await turn(vcs, () => {
      for (const p of ODD_NAMES) fs.rmSync(path.join(ws, p));
      writeFiles(ws, { "gone\nsoon.txt": "x\n" });
    });
    const turns = await vcs.listTurns();
    assert.deepEqual(turns[0].files.map((f) => f.path).sort(), [...ODD_NAMES].sort());
    // One path first, then the rest; the file made in turn 3 is deleted again.
    const one = await vcs.restoreTurn(1, { paths: ["new\nline.txt"] });
    assert.deepEqual(one.restored, ["new\nline.txt"]);
    assert.equal(read(ws, "new\nline.txt"), "new\nline.txt v1\n");
    writeFiles(ws, { [`quote's "double".txt`]: "user edit\n" }); // not in a snapshot
    const dry = await vcs.restoreTurn(2, { dryRun: true });
    assert.deepEqual(dry.overwritten, ["new\nline.txt", `quote's "double".txt`].sort());
    const all = await vcs.restoreTurn(2);
    assert.deepEqual(all.restored, [...ODD_NAMES, "gone\nsoon.txt"].sort());
    assert.deepEqual(all.overwritten, dry.overwritten);
    assert.notEqual(all.backup, null);
    for (const p of ODD_NAMES) assert.equal(read(ws, p), `${p} v2\n`);
    assert.deepEqual(listFiles(ws), [...ODD_NAMES].sort());
  });
}
