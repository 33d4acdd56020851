// The bubblewrap sandbox with the real bwrap (manual §8.4, issue 8): writes, protected paths,
// network, process trees, every shellPolicy with the sandbox on and off, and an adversarial
// corpus of escape attempts. Skipped where bwrap cannot run, unless CI_REQUIRE_REAL=1.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import process from "node:process";
import { spawnProcess } from "../_internal/process.ts";
import { createDefaultEngine } from "../engine/create_default_engine.ts";
import { EventType, type WsEvent } from "../engine/events.ts";
import { OpenAIProvider } from "../providers/mod.ts";
import { RiskClass, type ToolMetadata } from "../tools/mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "../tests/_util.ts";
import { Mode } from "./mode.ts";
import { PermissionEngine, type ShellPolicy } from "./permission_engine.ts";
import { resolveSandbox, type SandboxOptions, wrapWithSandbox } from "./sandbox.ts";

const requireReal = process.env.CI_REQUIRE_REAL === "1";
const probe = process.platform === "linux" ? resolveSandbox({ mode: "auto" }) : null;
const skip = probe?.enforced ? false : requireReal
  ? false // run, and fail on the assertion below
  : `bubblewrap is not usable here: ${probe?.reason ?? "not Linux"}`;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function assertReal(): void {
  assert.ok(probe?.enforced, `bubblewrap must work here (CI_REQUIRE_REAL=1): ${probe?.reason}`);
}

function workspace(files: Record<string, string> = {}): string {
  const ws = tempWorkspace(files);
  cleanups.push(() => removeDir(ws));
  return ws;
}

/** A folder outside the workspace and outside /tmp (which the sandbox replaces). */
function outsideDir(): string {
  const base = fs.existsSync("/var/tmp") ? "/var/tmp" : process.cwd();
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(base, "zqagent-outside-")));
  cleanups.push(() => removeDir(dir));
  return dir;
}

function gitRepo(dir: string): void {
  fs.mkdirSync(path.join(dir, ".git", "hooks"), { recursive: true });
  fs.writeFileSync(path.join(dir, ".git", "config"), "[core]\n");
  fs.writeFileSync(path.join(dir, ".git", "HEAD"), "ref: refs/heads/main\n");
}

async function sandboxed(
  ws: string,
  command: string,
  options: SandboxOptions = {},
): Promise<{ code: number | null; out: string; err: string }> {
  const status = resolveSandbox({ mode: "auto", ...options }, { workspace: ws });
  assert.equal(status.enforced, true, status.reason);
  const run = wrapWithSandbox(status, {
    program: "/bin/bash",
    args: ["-c", command],
    cwd: ws,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: ws },
  }, { workspace: ws });
  const r = await spawnProcess(run.program, run.args, {
    cwd: run.cwd,
    env: run.env,
    timeoutMs: 30_000,
  })
    .result;
  return { code: r.exitCode, out: r.stdout, err: r.stderr };
}

function processesWith(marker: string): string {
  const found: string[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${name}/cmdline`, "utf8").replaceAll("\0", " ");
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      if (cmd.includes(marker) && state !== "Z") found.push(`${name}: ${cmd}`);
    } catch {
      // gone
    }
  }
  return found.join("\n");
}

const shellMeta: ToolMetadata = {
  category: "shell",
  riskLevel: "high",
  capabilities: ["execute_commands"],
  requiresApproval: true,
  riskClass: RiskClass.EXEC,
};

// --- writes ----------------------------------------------------------------------------------

test("a sandboxed command can write in the workspace", { skip }, async () => {
  assertReal();
  const ws = workspace();
  const r = await sandboxed(ws, "echo hello > inside.txt && mkdir -p sub && echo x > sub/y");
  assert.equal(r.code, 0, r.err);
  assert.equal(fs.readFileSync(path.join(ws, "inside.txt"), "utf8"), "hello\n");
  assert.ok(fs.existsSync(path.join(ws, "sub", "y")));
});

test("a sandboxed command cannot write outside the workspace", { skip }, async () => {
  assertReal();
  const ws = workspace();
  const out = outsideDir();
  const r = await sandboxed(ws, `echo pwned > ${out}/x`);
  assert.notEqual(r.code, 0);
  assert.match(r.err, /Read-only file system/);
  assert.equal(fs.existsSync(path.join(out, "x")), false);
});

test("a sandboxed command cannot write to /etc", { skip }, async () => {
  assertReal();
  const ws = workspace();
  const marker = `/etc/zqagent-sandbox-${process.pid}`;
  const r = await sandboxed(ws, `touch ${marker}`);
  assert.notEqual(r.code, 0);
  assert.equal(fs.existsSync(marker), false);
});

test("a sandboxed command cannot change .git/hooks or .git/config, nested repositories too", {
  skip,
}, async () => {
  assertReal();
  const ws = workspace({ "lib/inner/README": "x" });
  gitRepo(ws);
  gitRepo(path.join(ws, "lib", "inner"));
  const r = await sandboxed(
    ws,
    [
      "echo evil > .git/hooks/pre-commit",
      "echo '[core] fsmonitor = evil' >> .git/config",
      "echo evil > lib/inner/.git/hooks/post-checkout",
      "echo evil >> lib/inner/.git/config",
      "mv .git .git-aside",
      "echo ok > .git/HEAD.test && echo git-internals-writable",
    ].join("; "),
  );
  assert.match(r.out, /git-internals-writable/, "other files under .git stay writable");
  assert.equal(fs.existsSync(path.join(ws, ".git", "hooks", "pre-commit")), false);
  assert.equal(fs.readFileSync(path.join(ws, ".git", "config"), "utf8"), "[core]\n");
  assert.equal(fs.existsSync(path.join(ws, "lib/inner/.git/hooks/post-checkout")), false);
  assert.equal(fs.readFileSync(path.join(ws, "lib/inner/.git/config"), "utf8"), "[core]\n");
  assert.ok(fs.existsSync(path.join(ws, ".git")), ".git cannot be renamed aside");
  assert.equal(fs.existsSync(path.join(ws, ".git-aside")), false);
});

test("a sandboxed command cannot change the engine's .agent folder", { skip }, async () => {
  assertReal();
  const ws = workspace({ ".agent/tool-results/r.txt": "saved" });
  const r = await sandboxed(ws, "echo x > .agent/tool-results/r.txt; rm -rf .agent; mv .agent .b");
  assert.notEqual(r.code, 0);
  assert.equal(fs.readFileSync(path.join(ws, ".agent/tool-results/r.txt"), "utf8"), "saved");
});

test("extraWritable paths are writable in the sandbox", { skip }, async () => {
  assertReal();
  const ws = workspace();
  const extra = outsideDir();
  const r = await sandboxed(ws, `echo cached > ${extra}/c`, { extraWritable: [extra] });
  assert.equal(r.code, 0, r.err);
  assert.equal(fs.readFileSync(path.join(extra, "c"), "utf8"), "cached\n");
});

// --- reads: hidden paths --------------------------------------------------------------------

/** A data folder outside /tmp holding two tenants: alice's workspace and bob's secret. */
function tenants(): { data: string; ws: string; secret: string } {
  const data = outsideDir();
  const ws = path.join(data, "alice", "ws");
  fs.mkdirSync(ws, { recursive: true });
  fs.writeFileSync(path.join(ws, "own.txt"), "alice's own\n");
  fs.mkdirSync(path.join(data, "bob"));
  const secret = path.join(data, "bob", "secret.txt");
  fs.writeFileSync(secret, "bob-secret\n");
  return { data, ws, secret };
}

test(
  "without hidePaths a sandboxed command can read a sibling tenant's file",
  { skip },
  async () => {
    assertReal();
    const { ws } = tenants();
    const r = await sandboxed(ws, "cat ../../bob/secret.txt");
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, "bob-secret\n");
  },
);

test("a hidden folder's files are unreadable while the workspace inside it stays usable", {
  skip,
}, async () => {
  assertReal();
  const { data, ws, secret } = tenants();
  const r = await sandboxed(
    ws,
    `cat ../../bob/secret.txt; cat ${secret}; ls ${data}; ` +
      "cat own.txt && echo written > new.txt && mkdir -p sub && echo deep > sub/f && echo ws-ok",
    { hidePaths: [data] },
  );
  assert.doesNotMatch(r.out, /bob-secret/);
  assert.match(r.err, /No such file or directory/);
  assert.match(r.out, /alice's own\n/);
  assert.match(r.out, /ws-ok/, r.err);
  assert.doesNotMatch(r.out, /^bob$/m, "the hidden folder lists only the path to the workspace");
  assert.equal(fs.readFileSync(path.join(ws, "new.txt"), "utf8"), "written\n");
  assert.equal(fs.readFileSync(path.join(ws, "sub", "f"), "utf8"), "deep\n");
  assert.equal(fs.readFileSync(secret, "utf8"), "bob-secret\n");
});

test("extraWritable paths inside a hidden folder stay visible and writable", { skip }, async () => {
  assertReal();
  const { data, ws } = tenants();
  const shared = path.join(data, "shared");
  fs.mkdirSync(shared);
  fs.writeFileSync(path.join(shared, "in.txt"), "shared\n");
  const r = await sandboxed(ws, `cat ${shared}/in.txt && echo out > ${shared}/out.txt`, {
    hidePaths: [data],
    extraWritable: [shared],
  });
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out, "shared\n");
  assert.equal(fs.readFileSync(path.join(shared, "out.txt"), "utf8"), "out\n");
});

test("a hidden file reads as empty and a hidden path inside the workspace is hidden too", {
  skip,
}, async () => {
  assertReal();
  const { data, ws } = tenants();
  const token = path.join(data, "token");
  fs.writeFileSync(token, "tok-secret\n");
  fs.mkdirSync(path.join(ws, "private"));
  fs.writeFileSync(path.join(ws, "private", "key"), "ws-private\n");
  const r = await sandboxed(ws, `cat ${token}; cat private/key; cat own.txt`, {
    hidePaths: [token, "private"],
  });
  assert.doesNotMatch(r.out, /tok-secret|ws-private/);
  assert.match(r.out, /alice's own/);
});

/** Points HOME at a fresh folder outside /tmp for one test; restored afterwards. */
function fakeHome(): string {
  const home = outsideDir();
  const old = process.env.HOME;
  process.env.HOME = home;
  cleanups.push(() => {
    if (old === undefined) delete process.env.HOME;
    else process.env.HOME = old;
  });
  return home;
}

test("the user's ~/.ssh, ~/.aws and ~/.netrc are hidden from sandboxed commands by default", {
  skip,
}, async () => {
  assertReal();
  const home = fakeHome();
  fs.mkdirSync(path.join(home, ".ssh"));
  fs.writeFileSync(path.join(home, ".ssh", "id_rsa"), "PRIVATE-KEY\n");
  fs.mkdirSync(path.join(home, ".aws"));
  fs.writeFileSync(path.join(home, ".aws", "credentials"), "AWS-KEY\n");
  fs.writeFileSync(path.join(home, ".netrc"), "machine x password NETRC\n");
  fs.writeFileSync(path.join(home, "notes.txt"), "plain\n");
  const ws = workspace();
  const cmd = `cat ${home}/.ssh/id_rsa; cat ${home}/.aws/credentials; cat ${home}/.netrc; ` +
    `cat ${home}/notes.txt`;
  const r = await sandboxed(ws, cmd);
  assert.doesNotMatch(r.out, /PRIVATE-KEY|AWS-KEY|NETRC/);
  assert.match(r.out, /plain/, "the rest of the home folder stays readable");
  const open = await sandboxed(ws, cmd, { hideHomeSecrets: false });
  assert.match(open.out, /PRIVATE-KEY/, "hideHomeSecrets: false shows them");
});

test("a credential folder that holds the workspace is not hidden", { skip }, async () => {
  assertReal();
  const home = fakeHome();
  const ws = path.join(home, ".docker", "project");
  fs.mkdirSync(ws, { recursive: true });
  fs.writeFileSync(path.join(home, ".docker", "config.json"), "{}\n");
  const r = await sandboxed(ws, "cat ../config.json && echo x > mine.txt");
  assert.equal(r.code, 0, r.err);
  assert.equal(fs.readFileSync(path.join(ws, "mine.txt"), "utf8"), "x\n");
});

test("the sandbox's /tmp is private", { skip }, async () => {
  assertReal();
  const ws = workspace();
  const name = `zqagent-private-tmp-${process.pid}-${Date.now()}`;
  const r = await sandboxed(ws, `echo x > /tmp/${name} && cat /tmp/${name} && echo $TMPDIR`);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^x\n\/tmp\n$/);
  assert.equal(fs.existsSync(path.join("/tmp", name)), false);
});

// --- network ---------------------------------------------------------------------------------

async function listener(): Promise<{ port: number; connections: () => number }> {
  let count = 0;
  const server = net.createServer((socket) => {
    count++;
    socket.on("error", () => {/* the probe closes without reading */});
    socket.end("hi\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as net.AddressInfo).port, connections: () => count };
}

test("the network is off in the sandbox unless allowed", { skip }, async () => {
  assertReal();
  const ws = workspace();
  const { port, connections } = await listener();
  const probeCmd = `exec 3<>/dev/tcp/127.0.0.1/${port} && echo connected`;
  const off = await sandboxed(ws, probeCmd);
  assert.notEqual(off.code, 0);
  assert.doesNotMatch(off.out, /connected/);
  assert.equal(connections(), 0);
  const on = await sandboxed(ws, probeCmd, { network: true });
  assert.equal(on.code, 0, on.err);
  assert.match(on.out, /connected/);
  assert.equal(connections(), 1);
});

// --- the engine: wiring, interrupts, shell policies ------------------------------------------

async function serve(turns: ScriptedTurn[]): Promise<MockOpenAIServer> {
  const server = new MockOpenAIServer({ turns });
  await server.start();
  cleanups.push(() => server.close());
  return server;
}

function provider(server: MockOpenAIServer): OpenAIProvider {
  return new OpenAIProvider({
    apiKey: "test-key",
    baseURL: server.baseURL,
    apiMode: "chat",
    maxRetries: 0,
  });
}

test("createDefaultEngine reports the enforced bwrap sandbox on engine.permissions.sandbox", {
  skip,
}, () => {
  assertReal();
  const ws = workspace();
  const engine = createDefaultEngine({ workspace: ws, model: "m", sandbox: { mode: "required" } });
  const status = engine.permissions.sandbox;
  assert.equal(status.kind, "bwrap");
  assert.equal(status.enforced, true);
  assert.equal(status.mode, "required");
  assert.equal(status.network, false);
});

test("with shellPolicy sandbox, run_shell runs without approval and stays confined", {
  skip,
}, async () => {
  assertReal();
  const ws = workspace();
  const out = outsideDir();
  const command = `echo in > inside.txt; echo out > ${out}/outside.txt; echo done`;
  const server = await serve([
    { toolCalls: [{ id: "s1", name: "run_shell", arguments: { command } }] },
    { text: "ok" },
  ]);
  const engine = createDefaultEngine({
    workspace: ws,
    model: "m",
    provider: provider(server),
    shellPolicy: "sandbox",
    defaultApproval: "error", // an approval request would throw
  });
  const { events, error } = await collect(engine.run("go"));
  assert.equal(error, undefined);
  assert.equal(ofType(events, EventType.PERMISSION_REQUIRED).length, 0);
  const finished = ofType(events, EventType.TOOL_FINISHED)[0];
  assert.equal(finished.data.status, "ok");
  assert.equal(fs.readFileSync(path.join(ws, "inside.txt"), "utf8"), "in\n");
  assert.equal(fs.existsSync(path.join(out, "outside.txt")), false);
});

test("background shell tasks run in the sandbox too", { skip }, async () => {
  assertReal();
  const ws = workspace();
  const out = outsideDir();
  const engine = createDefaultEngine({ workspace: ws, model: "m" });
  const run = engine.registry.get("run_shell")!.func;
  const read = engine.registry.get("shell_task_output")!.func;
  const started = String(
    await run({
      command: `echo in > bg.txt; echo out > ${out}/bg.txt; echo end`,
      background: true,
    }),
  );
  const id = /task_\d+/.exec(started)![0];
  let output = "";
  for (let i = 0; i < 50 && !/status: exited/.test(output); i++) {
    output = String(await read({ task_id: id, wait_ms: 200 }));
  }
  assert.match(output, /status: exited/);
  assert.equal(fs.readFileSync(path.join(ws, "bg.txt"), "utf8"), "in\n");
  assert.equal(fs.existsSync(path.join(out, "bg.txt")), false);
});

test("an interrupted turn kills the sandboxed process tree", { skip }, async () => {
  assertReal();
  const ws = workspace();
  const marker = `${700 + (process.pid % 97)}.${Date.now() % 100000}`;
  const command = `sleep ${marker} & setsid sleep ${marker} & sleep ${marker}; echo never`;
  const server = await serve([
    { toolCalls: [{ id: "s1", name: "run_shell", arguments: { command } }] },
    { text: "never" },
  ]);
  const engine = createDefaultEngine({
    workspace: ws,
    model: "m",
    provider: provider(server),
    mode: Mode.AUTO,
  });
  const events: WsEvent[] = [];
  for await (const e of engine.run("sleep")) {
    events.push(e);
    if (e.type === EventType.TOOL_STARTED) {
      // bwrap (twice), bash and three sleeps carry the marker in their command lines.
      for (let i = 0; i < 200 && processesWith(`sleep ${marker}`).split("\n").length < 6; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(processesWith(`sleep ${marker}`).split("\n").length, 6);
      engine.requestInterrupt();
    }
  }
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "interrupted");
  for (let i = 0; i < 100 && processesWith(`sleep ${marker}`) !== ""; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(processesWith(`sleep ${marker}`), "");
});

// Each shellPolicy with the real sandbox on (resolved "auto") and off (mode "off"), manual §8.4.
const expectations: Record<ShellPolicy, { on: string; off: string; offSimple: string }> = {
  approve: { on: "ask", off: "ask", offSimple: "ask" },
  sandbox: { on: "allow", off: "ask", offSimple: "ask" },
  workspace: { on: "allow", off: "ask", offSimple: "allow" },
  all: { on: "allow", off: "allow", offSimple: "allow" },
};

for (
  const [policy, expected] of Object.entries(expectations) as [
    ShellPolicy,
    typeof expectations.all,
  ][]
) {
  test(`shellPolicy ${policy} decides as §8.4 says with the sandbox on and off`, { skip }, () => {
    assertReal();
    const ws = workspace({ "src/a.txt": "a" });
    const verdict = (sandbox: SandboxOptions, command: string): string => {
      const permissions = new PermissionEngine({
        workspaceRoot: ws,
        shellPolicy: policy,
        sandbox: resolveSandbox(sandbox, { workspace: ws }),
      });
      const d = permissions.evaluate("run_shell", { command }, shellMeta);
      return d.allowed ? "allow" : d.needsUser ? "ask" : "deny";
    };
    const compound = "rm -rf build; cat /etc/hostname | wc -l";
    assert.equal(verdict({ mode: "auto" }, compound), expected.on, "sandbox on");
    assert.equal(verdict({ mode: "off" }, compound), expected.off, "sandbox off");
    assert.equal(verdict({ mode: "off" }, "cat src/a.txt"), expected.offSimple, "off, simple");
  });
}

// --- adversarial corpus ----------------------------------------------------------------------

test("nothing in the adversarial corpus escapes the sandbox", { skip }, async () => {
  assertReal();
  const ws = workspace({ "mnt/.keep": "" });
  gitRepo(ws);
  const out = outsideDir();
  fs.writeFileSync(path.join(out, "victim"), "orig\n");
  fs.symlinkSync(out, path.join(ws, "link")); // a symlink pointing out, made before the command
  fs.symlinkSync(path.join(out, "victim"), path.join(ws, "victim-link"));
  const rel = path.relative(ws, out);
  const corpus = [
    `echo pwned > ${out}/a`,
    `echo pwned > ${rel}/b`,
    `cd .. && echo pwned > ${path.relative(path.dirname(ws), out)}/b2`,
    "echo pwned > link/c",
    "echo pwned >> victim-link",
    `ln -s ${out} newlink && echo pwned > newlink/d`,
    `ln ${out}/victim hard && echo pwned >> hard`,
    `echo pwned > /proc/self/root${out}/e`,
    `echo pwned > /proc/1/root${out}/f`,
    `bash -c 'echo pwned > ${out}/g'`,
    `sh -c "echo pwned > '${out}/h'"`,
    `true\necho pwned > ${out}/i`,
    `echo pwned > "${out}"/'j'`,
    `echo pwned > $(printf %s ${out})/k`,
    `env LD_PRELOAD=/nonexistent.so sh -c 'echo pwned > ${out}/l'`,
    `LD_PRELOAD= PATH=/tmp:$PATH touch ${out}/m`,
    `mount -o remount,rw / ; echo pwned > ${out}/n`,
    `mount --bind ${out} mnt; echo pwned > mnt/o`,
    `unshare -rm sh -c 'mount -o remount,rw / && echo pwned > ${out}/p'`,
    `echo pwned >> ${out}/victim`,
    `cd / && echo pwned > ${out.slice(1)}/q`,
    `echo pwned > ${out}/./r; echo pwned > ${out}//s`,
    `(sleep 0.2; echo pwned > ${out}/t) & wait`,
    `nohup sh -c 'echo pwned > ${out}/u' >/dev/null 2>&1`,
    `export HOME=${out}; echo pwned > ~/v`,
    `echo pwned > /etc/zqagent-pwned-${process.pid}`,
    "echo evil > .git/hooks/pre-commit",
    "git config core.fsmonitor evil 2>/dev/null; echo '[core]fsmonitor=evil' >> .git/config",
    "mv .git .git-aside && mkdir -p .git && echo evil > .git/config",
    "rm -rf .git/hooks",
    `python3 -c "open('${out}/w','w').write('pwned')" 2>/dev/null`,
    `perl -e 'open(F,">${out}/x"); print F "pwned"' 2>/dev/null`,
  ];
  for (const command of corpus) await sandboxed(ws, command);
  assert.deepEqual(fs.readdirSync(out).sort(), ["victim"], "nothing new outside the workspace");
  assert.equal(fs.readFileSync(path.join(out, "victim"), "utf8"), "orig\n");
  assert.equal(fs.existsSync(`/etc/zqagent-pwned-${process.pid}`), false);
  assert.deepEqual(fs.readdirSync(path.join(ws, ".git", "hooks")), []);
  assert.equal(fs.readFileSync(path.join(ws, ".git", "config"), "utf8"), "[core]\n");
  assert.equal(fs.existsSync(path.join(ws, ".git-aside")), false);
});
