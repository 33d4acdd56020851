import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { RiskClass, type ToolContext, ToolRegistry } from "./registry.ts";
import { isSecretEnvName, registerShellTool, ShellTaskManager } from "./shell.ts";

const posix = process.platform !== "win32";

/** Live (non-zombie) `sleep <marker>` processes. */
function sleepers(marker: string): string[] {
  const out = execFileSync("ps", ["-eo", "stat=,args="], { encoding: "utf8" });
  return out.split("\n").filter((l) =>
    /^\s*[^Z\s]/.test(l) && l.includes(`sleep ${marker}`) && !l.includes("-c")
  );
}

function uniqueSleep(): string {
  return `${300 + Math.floor(Math.random() * 600)}.${Math.floor(Math.random() * 1e6)}`;
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 20));
}

function setup(options: Parameters<typeof registerShellTool>[2] = {}) {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), "zq-shell-")));
  const registry = new ToolRegistry();
  const manager = registerShellTool(registry, dir, options);
  return {
    dir,
    manager,
    call: async (name: string, args: Record<string, unknown>, ctx?: ToolContext) =>
      String(await registry.get(name)!.func(args, ctx)),
    async dispose() {
      await manager.killAll();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs `fn` with fresh shell tools in a temp workspace; kills tasks and cleans up after. */
async function inSetup(
  options: Parameters<typeof registerShellTool>[2],
  fn: (ws: ReturnType<typeof setup>) => void | Promise<void>,
): Promise<void> {
  const ws = setup(options);
  try {
    await fn(ws);
  } finally {
    await ws.dispose();
  }
}

test("registerShellTool registers run_shell and the task tools with the issue's metadata", () =>
  inSetup({}, (ws) => {
    const registry = new ToolRegistry();
    const manager = registerShellTool(registry, ws.dir);
    assert.ok(manager instanceof ShellTaskManager);
    assert.deepEqual(registry.names(), ["run_shell", "shell_task_output", "shell_task_kill"]);
    const run = registry.get("run_shell")!.metadata;
    assert.deepEqual([run.riskClass, run.riskLevel, run.requiresApproval], [
      RiskClass.EXEC,
      "high",
      true,
    ]);
    for (const name of ["shell_task_output", "shell_task_kill"]) {
      const m = registry.get(name)!.metadata;
      assert.deepEqual([m.riskClass, m.riskLevel, m.requiresApproval], [
        RiskClass.READ,
        "low",
        false,
      ]);
    }
  }));

test(
  "run_shell returns exit code, stdout, stderr and duration",
  { skip: !posix },
  () =>
    inSetup({}, async (ws) => {
      const out = await ws.call("run_shell", { command: "echo hello; echo oops >&2; exit 4" });
      assert.match(out, /^exit_code: 4\ntimed_out: false\nduration_ms: \d+\n/);
      assert.match(out, /stdout:\nhello\n/);
      assert.match(out, /stderr:\noops\n/);
    }),
);

test(
  "a foreground run_shell leaves no process behind when the command backgrounds one",
  { skip: !posix },
  () =>
    inSetup({}, async (ws) => {
      const marker = uniqueSleep();
      const out = await ws.call("run_shell", { command: `sleep ${marker} & echo started` });
      assert.match(out, /stdout:\nstarted\n/);
      await until(() => sleepers(marker).length === 0);
      assert.deepEqual(sleepers(marker), []);
    }),
);

test(
  "run_shell runs in the workspace or in a relative cwd",
  { skip: !posix },
  () =>
    inSetup({}, async (ws) => {
      mkdirSync(path.join(ws.dir, "sub"));
      assert.match(
        await ws.call("run_shell", { command: "pwd" }),
        new RegExp(`stdout:\n${ws.dir}\n`),
      );
      assert.match(
        await ws.call("run_shell", { command: "pwd", cwd: "sub" }),
        new RegExp(`stdout:\n${path.join(ws.dir, "sub")}\n`),
      );
      await assert.rejects(
        ws.call("run_shell", { command: "pwd", cwd: "missing" }),
        /is not a directory/,
      );
    }),
);

test(
  "run_shell runs non-interactively: stdin closed, pagers off",
  { skip: !posix },
  () =>
    inSetup({}, async (ws) => {
      const out = await ws.call("run_shell", {
        command: 'cat; echo "pager=$PAGER git=$GIT_PAGER prompt=$GIT_TERMINAL_PROMPT"',
        timeout_ms: 20_000,
      });
      assert.match(out, /exit_code: 0/);
      assert.match(out, /pager=cat git=cat prompt=0/);
    }),
);

test(
  "run_shell kills the process tree when the timeout fires",
  { skip: !posix },
  () =>
    inSetup({ killGraceMs: 200 }, async (ws) => {
      const marker = uniqueSleep();
      const out = await ws.call("run_shell", {
        command: `sleep ${marker} & sleep ${marker}; echo never`,
        timeout_ms: 300,
      });
      assert.match(out, /timed_out: true/);
      assert.doesNotMatch(out, /never/);
      assert.deepEqual(sleepers(marker), []);
    }),
);

test("aborting ctx.signal kills every process of the command and throws AbortError", {
  skip: !posix,
}, () =>
  inSetup({}, async (ws) => {
    const marker = uniqueSleep();
    const ac = new AbortController();
    const pending = ws.call(
      "run_shell",
      { command: `bash -c "sleep ${marker} & sleep ${marker}"` },
      {
        signal: ac.signal,
      },
    );
    await until(() => sleepers(marker).length === 2);
    assert.equal(sleepers(marker).length, 2);
    ac.abort();
    await assert.rejects(pending, (e: Error) => e.name === "AbortError");
    assert.deepEqual(sleepers(marker), []);
  }));

test(
  "run_shell with an already aborted signal throws without running",
  { skip: !posix },
  () =>
    inSetup({}, async (ws) => {
      const ac = new AbortController();
      ac.abort();
      await assert.rejects(
        ws.call("run_shell", { command: "touch ran" }, { signal: ac.signal }),
        (e: Error) => e.name === "AbortError",
      );
      assert.throws(() => execFileSync("test", ["-e", path.join(ws.dir, "ran")]));
    }),
);

test("a background task returns a task id and its new output is read incrementally", {
  skip: !posix,
}, () =>
  inSetup({}, async (ws) => {
    const started = await ws.call("run_shell", {
      command: "echo first; read _ < /dev/null; sleep 0.3; echo second",
      background: true,
    });
    const id = /task_\d+/.exec(started)![0];
    let seen = "";
    // shell_task_output waits for output with wait_ms.
    const first = await ws.call("shell_task_output", { task_id: id, wait_ms: 10_000 });
    seen += first;
    assert.match(first, /output:\nfirst\n/);
    let rest = "";
    for (let i = 0; i < 50 && !/status: exited/.test(rest); i++) {
      rest = await ws.call("shell_task_output", { task_id: id, wait_ms: 5000 });
      seen += rest;
    }
    assert.match(rest, /status: exited \(exit_code: 0\)/);
    // Each read returns only what is new: "first" appears once overall.
    assert.equal(seen.match(/first/g)!.length, 1);
    assert.equal(seen.match(/second/g)!.length, 1);
  }));

test(
  "shell_task_kill stops a background task and its whole tree",
  { skip: !posix },
  () =>
    inSetup({ killGraceMs: 500 }, async (ws) => {
      const marker = uniqueSleep();
      const started = await ws.call("run_shell", {
        command: `sleep ${marker} & sleep ${marker}`,
        background: true,
      });
      const id = /task_\d+/.exec(started)![0];
      await until(() => sleepers(marker).length === 2);
      assert.equal(sleepers(marker).length, 2);
      assert.match(await ws.call("shell_task_kill", { task_id: id }), /Stopped task task_\d+/);
      assert.deepEqual(sleepers(marker), []);
      assert.match(await ws.call("shell_task_output", { task_id: id }), /status: killed/);
    }),
);

test(
  "killAll stops every running background task",
  { skip: !posix },
  () =>
    inSetup({ killGraceMs: 500 }, async (ws) => {
      const marker = uniqueSleep();
      await ws.call("run_shell", { command: `sleep ${marker}`, background: true });
      await ws.call("run_shell", { command: `sleep ${marker}`, background: true });
      await until(() => sleepers(marker).length === 2);
      await ws.manager.killAll();
      assert.deepEqual(sleepers(marker), []);
      assert.deepEqual(ws.manager.list().map((t) => t.status), ["killed", "killed"]);
    }),
);

test(
  "the background output buffer is bounded and reports dropped output",
  { skip: !posix },
  async () => {
    const manager = new ShellTaskManager({ maxBufferChars: 1000 });
    await inSetup({ manager }, async (ws) => {
      const started = await ws.call("run_shell", {
        command: "head -c 5000 /dev/zero | tr '\\0' a; echo; echo END",
        background: true,
      });
      const id = /task_\d+/.exec(started)![0];
      await until(() => manager.get(id)?.status === "exited");
      const out = await ws.call("shell_task_output", { task_id: id });
      assert.match(out, /chars of output were dropped/);
      assert.match(out, /END\n$/);
      const body = out.slice(out.indexOf("output:\n") + 8);
      assert.ok(body.length <= 1000);
    });
  },
);

test("shell_task_output and shell_task_kill reject an unknown task id", () =>
  inSetup({}, async (ws) => {
    await assert.rejects(ws.call("shell_task_output", { task_id: "task_99" }), /no such task/);
    await assert.rejects(ws.call("shell_task_kill", { task_id: "task_99" }), /no such task/);
  }));

test("background tasks are killed when the host process exits", { skip: !posix }, async () => {
  const marker = uniqueSleep();
  const dir = mkdtempSync(path.join(os.tmpdir(), "zq-exit-"));
  try {
    const script = path.join(dir, "host.ts");
    const shellModule = new URL("./shell.ts", import.meta.url).href;
    writeFileSync(
      script,
      `import process from "node:process";
import { ShellTaskManager } from ${JSON.stringify(shellModule)};
const m = new ShellTaskManager();
const t = m.start({
  command: "sleep ${marker}",
  shell: { path: "/bin/sh", kind: "sh", args: ["-c"] },
  cwd: ${JSON.stringify(dir)},
  env: { PATH: process.env.PATH ?? "" },
});
console.log(t.pid);
`,
    );
    const isDeno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
    const args = isDeno
      ? ["run", "-A", "--no-config", script]
      : [...process.execArgv.filter((a) => a.startsWith("--experimental")), script];
    const out = execFileSync(process.execPath, args, { encoding: "utf8" });
    assert.match(out, /^\d+/);
    await until(() => sleepers(marker).length === 0);
    assert.deepEqual(sleepers(marker), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test(
  "run_shell does not pass the host's credentials to commands, unless passEnv names them",
  { skip: !posix },
  async () => {
    const saved = { ...process.env };
    Object.assign(process.env, {
      ZQ_TEST_API_KEY: "sk-leak-1",
      ZQ_TEST_TOKEN: "tok-leak-2",
      MY_SECRET: "leak-3",
      DATABASE_URL: "postgres://u:p@127.0.0.1/db",
      ZQ_MIRROR: "https://user:hunter2@127.0.0.1/repo",
      ZQ_PLAIN: "visible",
    });
    try {
      await inSetup({}, async (ws) => {
        const out = await ws.call("run_shell", { command: "env" });
        assert.doesNotMatch(out, /leak-|hunter2|u:p@/);
        assert.match(out, /ZQ_PLAIN=visible/);
        assert.match(out, /\nPATH=/);
      });
      await inSetup({ passEnv: ["ZQ_TEST_TOKEN"] }, async (ws) => {
        const out = await ws.call("run_shell", { command: "env" });
        assert.match(out, /ZQ_TEST_TOKEN=tok-leak-2/);
        assert.doesNotMatch(out, /sk-leak-1/);
      });
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  },
);

test("isSecretEnvName recognises credential names and URLs with passwords, not ordinary names", () => {
  for (const name of ["OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD"]) {
    assert.equal(isSecretEnvName(name), true, name);
  }
  for (const name of ["PATH", "HOME", "PWD", "KEYBOARD", "TOKENIZERS_PARALLELISM", "LANG"]) {
    assert.equal(isSecretEnvName(name), false, name);
  }
  assert.equal(isSecretEnvName("MIRROR", "https://a:b@example.invalid/x"), true);
  assert.equal(isSecretEnvName("MIRROR", "https://example.invalid/x"), false);
});
