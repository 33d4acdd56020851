/**
 * Private helpers of the VCS tests: real git repositories in temporary folders.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { which } from "../_internal/process.ts";

/** `false` when git is present; a skip reason otherwise (a failure under `CI_REQUIRE_REAL=1`). */
export function gitSkip(): string | false {
  if (which("git")) return false;
  if (process.env.CI_REQUIRE_REAL === "1") {
    throw new Error("Cannot run the vcs tests: git is missing and CI_REQUIRE_REAL=1");
  }
  return "git is not installed";
}

/** Runs git in `cwd` with a clean environment and a fixed identity; returns stdout. */
export function git(cwd: string, ...args: string[]): string {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("GIT_")) env[k] = v;
  }
  return execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: {
      ...env,
      GIT_AUTHOR_NAME: "User",
      GIT_AUTHOR_EMAIL: "user@example.invalid",
      GIT_COMMITTER_NAME: "User",
      GIT_COMMITTER_EMAIL: "user@example.invalid",
      GIT_OPTIONAL_LOCKS: "0",
    },
  });
}

/** Makes a temporary folder with `files` (relative path → content); returns its real path. */
export function tempDir(files: Record<string, string> = {}): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-vcs-")));
  writeFiles(dir, files);
  return dir;
}

/** Writes `files` under `dir`, creating folders. */
export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(dir, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, content);
  }
}

/** Makes a git repository with `files` committed on `main`; returns its real path. */
export function tempRepo(files: Record<string, string> = {}): string {
  const dir = tempDir(files);
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "--allow-empty", "-m", "initial");
  return dir;
}

/** Reads a file of `dir`, or `null` when it does not exist. */
export function read(dir: string, rel: string): string | null {
  try {
    return fs.readFileSync(path.join(dir, rel), "utf8");
  } catch {
    return null;
  }
}

/** Every file under `dir` (relative, sorted), skipping `.git` and `.agent`. */
export function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(path.join(dir, d), { withFileTypes: true })) {
      if (e.name === ".git" || e.name === ".agent") continue;
      const rel = d ? `${d}/${e.name}` : e.name;
      if (e.isDirectory()) walk(rel);
      else out.push(rel);
    }
  };
  walk("");
  return out.sort();
}
