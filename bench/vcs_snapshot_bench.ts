/**
 * Per-turn snapshot cost against `git status` (DESIGN §8: goal <= 2x).
 *
 * Generates a repository of 50,000 committed files (500 folders × 100 files), then, for several
 * runs, changes 5 files and times (a) the turn-end snapshot `SessionVcs.commitTurn` with those 5
 * changes, (b) the turn-start snapshot `beginTurn` of an unchanged tree, and (c) `git status
 * --porcelain` on the same repository, all as wall-clock time including process start. Prints
 * medians and the ratio (a)/(c); the last line is JSON.
 *
 * Env: `VCS_BENCH_FILES` (default 50000), `VCS_BENCH_RUNS` (default 9).
 *
 * @module
 */
import { execFile, execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { resolveVcsPlan, SessionVcs } from "../vcs/mod.ts";

const FILES = Number(process.env.VCS_BENCH_FILES ?? 50_000);
const RUNS = Number(process.env.VCS_BENCH_RUNS ?? 9);
const PER_DIR = 100;

const env: Record<string, string> = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("GIT_"))),
  GIT_AUTHOR_NAME: "bench",
  GIT_AUTHOR_EMAIL: "bench@example.invalid",
  GIT_COMMITTER_NAME: "bench",
  GIT_COMMITTER_EMAIL: "bench@example.invalid",
} as Record<string, string>;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function gitStatus(cwd: string): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    execFile("git", ["status", "--porcelain"], { cwd, env, maxBuffer: 1 << 26 }, (err) => {
      if (err) reject(err);
      else resolve(performance.now() - t0);
    });
  });
}

const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-vcs-bench-")));
try {
  const t0 = performance.now();
  for (let i = 0; i < FILES; i++) {
    const d = path.join(ws, "src", `d${Math.floor(i / PER_DIR)}`);
    if (i % PER_DIR === 0) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(d, `f${i % PER_DIR}.ts`), `export const v${i} = ${i};\n`);
  }
  execFileSync("git", ["init", "-q"], { cwd: ws, env });
  // No background `git gc --auto` after the big commit: it would still be writing in .git when
  // the bench removes the repository (ENOTEMPTY) and would disturb the timings.
  execFileSync("git", ["config", "gc.auto", "0"], { cwd: ws, env });
  execFileSync("git", ["add", "-A"], { cwd: ws, env });
  execFileSync("git", ["commit", "-q", "-m", "generated"], { cwd: ws, env });
  console.log(
    `generated and committed ${FILES} files in ${(performance.now() - t0).toFixed(0)} ms`,
  );

  const vcs = new SessionVcs(resolveVcsPlan(ws, { mode: "native" }), "bench");
  await vcs.beginTurn(); // first use: seeds the session index and the base snapshot
  await gitStatus(ws); // warm the user's index and the file-system cache

  const commit: number[] = [];
  const begin: number[] = [];
  const status: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    for (let k = 0; k < 5; k++) {
      const f = path.join(ws, "src", `d${k * 37}`, `f${(run + k) % PER_DIR}.ts`);
      fs.appendFileSync(f, `// run ${run}\n`);
    }
    status.push(await gitStatus(ws));
    let t = performance.now();
    const r = await vcs.commitTurn("completed");
    commit.push(performance.now() - t);
    if (!r.changed) throw new Error("Cannot benchmark: the snapshot saw no change");
    t = performance.now();
    await vcs.beginTurn();
    begin.push(performance.now() - t);
  }
  const result = {
    bench: "vcs_snapshot",
    files: FILES,
    changed: 5,
    runs: RUNS,
    snapshotMs: Number(median(commit).toFixed(1)),
    turnStartMs: Number(median(begin).toFixed(1)),
    gitStatusMs: Number(median(status).toFixed(1)),
    ratio: Number((median(commit) / median(status)).toFixed(2)),
    goal: 2,
  };
  console.log(
    `per-turn snapshot (5 changed): ${result.snapshotMs} ms; turn start (no change): ` +
      `${result.turnStartMs} ms; git status: ${result.gitStatusMs} ms; ratio ${result.ratio}x ` +
      `(goal <= ${result.goal}x)`,
  );
  console.log(JSON.stringify(result));
  await vcs.forget();
} finally {
  fs.rmSync(ws, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
}
