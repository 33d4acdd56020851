import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import {
  killProcessTree,
  selectShell,
  spawnProcess,
  utf8BoundaryBefore,
  which,
} from "./process.ts";

const posix = process.platform !== "win32";

/** Command lines of live processes whose arguments contain `marker`. */
function processesWith(marker: string): string[] {
  const out = execFileSync("ps", ["-eo", "pid=,stat=,args="], { encoding: "utf8" });
  return out.split("\n").filter((l) =>
    l.includes(`sleep ${marker}`) && !/^\s*\d+\s+Z/.test(l) && !l.includes("-c")
  );
}

function uniqueSleep(): string {
  // A distinctive duration so `ps` finds only this test's processes.
  return `${300 + Math.floor(Math.random() * 600)}.${Math.floor(Math.random() * 1e6)}`;
}

test("selectShell uses $SHELL when it is bash, zsh or sh and exists", () => {
  const exists = (f: string) => f === "/usr/bin/zsh" || f === "/bin/bash";
  assert.deepEqual(selectShell("linux", { SHELL: "/usr/bin/zsh" }, exists), {
    path: "/usr/bin/zsh",
    kind: "zsh",
    args: ["-c"],
  });
});

test("selectShell ignores an unsupported $SHELL and falls back to /bin/bash", () => {
  const exists = (f: string) => f === "/usr/bin/fish" || f === "/bin/bash";
  assert.equal(selectShell("darwin", { SHELL: "/usr/bin/fish" }, exists).path, "/bin/bash");
});

test("selectShell ignores a $SHELL that does not exist", () => {
  const exists = (f: string) => f === "/bin/bash";
  assert.equal(selectShell("linux", { SHELL: "/opt/none/bash" }, exists).path, "/bin/bash");
});

test("selectShell falls back to /bin/sh when there is no bash", () => {
  assert.deepEqual(selectShell("linux", {}, () => false), {
    path: "/bin/sh",
    kind: "sh",
    args: ["-c"],
  });
});

test("selectShell prefers Git Bash on Windows", () => {
  const gitBash = "C:\\Program Files\\Git\\bin\\bash.exe";
  const exists = (f: string) => f === gitBash || f === "C:\\tools\\pwsh.exe";
  const choice = selectShell(
    "win32",
    { ProgramFiles: "C:\\Program Files", PATH: "C:\\tools" },
    exists,
  );
  assert.equal(choice.path, gitBash);
  assert.equal(choice.kind, "bash");
});

test("selectShell picks pwsh, then powershell, on Windows without Git Bash", () => {
  const env = { ProgramFiles: "C:\\Program Files", PATH: "C:\\tools;C:\\Windows\\PS" };
  const pwsh = selectShell("win32", env, (f) => f === "C:\\tools\\pwsh.exe");
  assert.equal(pwsh.kind, "pwsh");
  assert.equal(pwsh.path, "C:\\tools\\pwsh.exe");
  assert.deepEqual(pwsh.args, ["-NoProfile", "-NonInteractive", "-Command"]);
  const ps = selectShell("win32", env, (f) => f === "C:\\Windows\\PS\\powershell.exe");
  assert.equal(ps.kind, "powershell");
});

test("selectShell does not take WSL's System32 bash.exe for Git Bash", () => {
  const env = { PATH: "C:\\Windows\\System32", ComSpec: "C:\\Windows\\System32\\cmd.exe" };
  const choice = selectShell("win32", env, (f) => f === "C:\\Windows\\System32\\bash.exe");
  assert.equal(choice.kind, "cmd");
});

test("selectShell ends with cmd.exe from ComSpec on Windows", () => {
  const choice = selectShell("win32", { ComSpec: "D:\\Win\\cmd.exe" }, () => false);
  assert.deepEqual(choice, { path: "D:\\Win\\cmd.exe", kind: "cmd", args: ["/d", "/s", "/c"] });
});

test("which finds an executable on the PATH and not a plain file", { skip: !posix }, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "zq-which-"));
  try {
    writeFileSync(path.join(dir, "tool-x"), "#!/bin/sh\n");
    chmodSync(path.join(dir, "tool-x"), 0o755);
    writeFileSync(path.join(dir, "plain-y"), "data");
    assert.equal(which("tool-x", { PATH: dir }), path.join(dir, "tool-x"));
    assert.equal(which("plain-y", { PATH: dir }), null);
    assert.equal(which("missing-z", { PATH: dir }), null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("utf8BoundaryBefore never ends inside a multi-byte character", () => {
  const bytes = new TextEncoder().encode("a阴b"); // 61 e9 98 b4 62
  assert.equal(utf8BoundaryBefore(bytes, 1), 1);
  assert.equal(utf8BoundaryBefore(bytes, 2), 1);
  assert.equal(utf8BoundaryBefore(bytes, 3), 1);
  assert.equal(utf8BoundaryBefore(bytes, 4), 4);
});

test("spawnProcess captures stdout, stderr and the exit code", { skip: !posix }, async () => {
  const p = spawnProcess("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"]);
  const r = await p.result;
  assert.equal(r.stdout, "out\n");
  assert.equal(r.stderr, "err\n");
  assert.equal(r.exitCode, 3);
  assert.equal(r.timedOut, false);
});

test("spawnProcess passes stdin text and environment", { skip: !posix }, async () => {
  const p = spawnProcess("/bin/sh", ["-c", 'cat; printf "%s" "$ZQ_T"'], {
    stdin: "hello ",
    env: { ZQ_T: "world", PATH: process.env.PATH ?? "" },
  });
  assert.equal((await p.result).stdout, "hello world");
});

test(
  "spawnProcess keeps the head and tail of output over the byte cap",
  { skip: !posix },
  async () => {
    const p = spawnProcess("/bin/sh", [
      "-c",
      "printf 'HEAD'; head -c 100000 /dev/zero | tr '\\0' x; printf 'TAIL'",
    ], {
      maxOutputBytes: 1000,
    });
    const r = await p.result;
    assert.equal(r.truncated, true);
    assert.equal(r.stdoutBytes, 100008);
    assert.ok(r.stdout.startsWith("HEAD"));
    assert.ok(r.stdout.endsWith("TAIL"));
    assert.match(r.stdout, /\[\.\.\. 99008 bytes omitted \.\.\.\]/);
  },
);

test("spawnProcess reports a missing program as spawnError", async () => {
  const r = await spawnProcess("/nonexistent/zq-no-such-program", []).result;
  assert.equal(r.exitCode, null);
  assert.ok(r.spawnError);
});

test("a timeout kills the whole process tree", { skip: !posix }, async () => {
  const marker = uniqueSleep();
  const p = spawnProcess("/bin/bash", ["-c", `sleep ${marker} & sleep ${marker} & wait`], {
    timeoutMs: 300,
    graceMs: 200,
  });
  const r = await p.result;
  assert.equal(r.timedOut, true);
  assert.deepEqual(processesWith(marker), []);
});

test("aborting the signal kills the whole process tree at once", { skip: !posix }, async () => {
  const marker = uniqueSleep();
  const ac = new AbortController();
  const p = spawnProcess("/bin/bash", ["-c", `sleep ${marker} & sleep ${marker}`], {
    signal: ac.signal,
    onStdout: () => {},
  });
  // Wait until both sleeps exist, then abort.
  for (let i = 0; i < 200 && processesWith(marker).length < 2; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(processesWith(marker).length, 2);
  ac.abort();
  const r = await p.result;
  assert.equal(r.aborted, true);
  assert.equal(r.signal, "SIGKILL");
  assert.deepEqual(processesWith(marker), []);
});

test("killProcessTree stops a child that ignores SIGTERM after the grace period", {
  skip: !posix,
}, async () => {
  const marker = uniqueSleep();
  const p = spawnProcess("/bin/bash", ["-c", `trap '' TERM; sleep ${marker} & wait; wait`]);
  for (let i = 0; i < 200 && processesWith(marker).length < 1; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  await killProcessTree(p.child, { graceMs: 200 });
  await p.result;
  assert.deepEqual(processesWith(marker), []);
});
