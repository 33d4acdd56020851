import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { RiskClass, type ToolMetadata } from "../tools/mod.ts";
import { Mode } from "./mode.ts";
import {
  PermissionEngine,
  type PermissionEngineOptions,
  type SandboxStatus,
} from "./permission_engine.ts";

const base = realpathSync(mkdtempSync(path.join(tmpdir(), "zq-permissions-")));
const ws = path.join(base, "ws");
const outside = path.join(base, "outside");
const shared = path.join(base, "shared");
mkdirSync(path.join(ws, "src"), { recursive: true });
mkdirSync(path.join(ws, "sub"), { recursive: true });
mkdirSync(outside, { recursive: true });
mkdirSync(shared, { recursive: true });
writeFileSync(path.join(ws, "src", "a.ts"), "export {};\n");
writeFileSync(path.join(outside, "secret"), "s3cret\n");
symlinkSync(outside, path.join(ws, "out-link"));
symlinkSync(ws, path.join(base, "ws-link"));
symlinkSync(outside, path.join(ws, "sub", "deep-link"));

after(() => rmSync(base, { recursive: true, force: true }));

function meta(riskClass: RiskClass | undefined, extra: Partial<ToolMetadata> = {}): ToolMetadata {
  const high = riskClass !== RiskClass.READ && riskClass !== RiskClass.INTERACTIVE;
  return {
    category: "test",
    riskLevel: high ? "high" : "low",
    capabilities: [],
    requiresApproval: high,
    ...(riskClass ? { riskClass } : {}),
    ...extra,
  };
}

const READ = meta(RiskClass.READ);
const WRITE = meta(RiskClass.WRITE);
const EXEC = meta(RiskClass.EXEC);
const EXTERNAL = meta(RiskClass.EXTERNAL);
const INTERACTIVE = meta(RiskClass.INTERACTIVE);
const CUSTOM_LOW: ToolMetadata = {
  category: "business",
  riskLevel: "low",
  capabilities: [],
  requiresApproval: false,
};
const CUSTOM_HIGH: ToolMetadata = {
  category: "business",
  riskLevel: "medium",
  capabilities: [],
  requiresApproval: true,
};
const ENFORCED: SandboxStatus = { mode: "auto", kind: "bwrap", enforced: true };
const NOT_ENFORCED: SandboxStatus = {
  mode: "auto",
  kind: "none",
  enforced: false,
  reason: "bwrap is not installed",
};

const ALL_MODES = [Mode.DISCUSS, Mode.PLAN, Mode.INTERACTIVE, Mode.AUTO];
const READ_ONLY_MODES = [Mode.DISCUSS, Mode.PLAN];

function engine(options: Partial<PermissionEngineOptions> = {}): PermissionEngine {
  return new PermissionEngine({ workspaceRoot: ws, ...options });
}

function verdict(d: { allowed: boolean; needsUser: boolean }): "allow" | "ask" | "deny" {
  if (d.allowed) return "allow";
  return d.needsUser ? "ask" : "deny";
}

// --- construction and state ------------------------------------------------------------------

test("the default mode is INTERACTIVE and the default shell policy is approve", () => {
  const p = engine();
  assert.equal(p.mode, Mode.INTERACTIVE);
  assert.equal(p.shellPolicy, "approve");
});

test("the default sandbox status is not enforced", () => {
  assert.equal(engine().sandbox.enforced, false);
});

test("a symlinked workspace root is resolved to its real path", () => {
  assert.equal(engine({ workspaceRoot: path.join(base, "ws-link") }).workspaceRoot, ws);
});

test("a workspace that does not exist yet does not make construction fail", () => {
  const p = engine({ workspaceRoot: path.join(base, "later", "ws") });
  assert.equal(p.workspaceRoot, path.join(base, "later", "ws"));
});

test("a missing workspaceRoot is a TypeError", () => {
  assert.throws(() => new PermissionEngine({} as PermissionEngineOptions), TypeError);
});

test("an unknown shellPolicy is a TypeError", () => {
  assert.throws(
    () => engine({ shellPolicy: "yolo" as unknown as PermissionEngineOptions["shellPolicy"] }),
    TypeError,
  );
});

test("the mode can be changed at run time", () => {
  const p = engine();
  p.mode = Mode.AUTO;
  assert.equal(verdict(p.evaluate("run_shell", { command: "rm -rf build" }, EXEC)), "allow");
});

test("setting an unknown mode is a TypeError", () => {
  const p = engine();
  assert.throws(() => (p.mode = "yolo" as Mode), TypeError);
});

// --- step 1: read-only modes -------------------------------------------------------------------

for (const mode of READ_ONLY_MODES) {
  test(`${mode} mode refuses a write without asking`, () => {
    const d = engine({ mode }).evaluate("write_file", { path: "src/a.ts" }, WRITE);
    assert.equal(verdict(d), "deny");
  });

  test(`${mode} mode refuses an allowlisted command even with shell policy all`, () => {
    const p = engine({ mode, allowedCommands: ["ls"], shellPolicy: "all", sandbox: ENFORCED });
    assert.equal(verdict(p.evaluate("run_shell", { command: "ls" }, EXEC)), "deny");
  });

  test(`${mode} mode refuses a custom tool that does not count as read-only`, () => {
    assert.equal(verdict(engine({ mode }).evaluate("refund", {}, CUSTOM_HIGH)), "deny");
  });

  test(`${mode} mode allows a low-risk custom tool without approval`, () => {
    assert.equal(verdict(engine({ mode }).evaluate("lookup", {}, CUSTOM_LOW)), "allow");
  });

  test(`${mode} mode asks before an external tool`, () => {
    const d = engine({ mode }).evaluate("web_fetch", { url: "https://example.com" }, EXTERNAL);
    assert.equal(verdict(d), "ask");
  });

  test(`${mode} mode refuses an unknown tool`, () => {
    assert.equal(verdict(engine({ mode }).evaluate("mystery", {}, null)), "deny");
  });

  test(`${mode} mode is not overridden by the session tool allowlist for writes`, () => {
    const p = engine({ mode });
    p.allowToolForSession("write_file");
    assert.equal(verdict(p.evaluate("write_file", { path: "src/a.ts" }, WRITE)), "deny");
  });
}

for (const mode of ALL_MODES) {
  test(`interactive tools are allowed in ${mode} mode`, () => {
    const d = engine({ mode }).evaluate("ask_user", { question: "ok?" }, INTERACTIVE);
    assert.equal(verdict(d), "allow");
  });
}

// --- step 2: writes outside the workspace ------------------------------------------------------

for (const mode of ALL_MODES) {
  test(`a write outside the workspace is refused in ${mode} mode`, () => {
    const d = engine({ mode }).evaluate("write_file", { path: "../outside/x" }, WRITE);
    assert.equal(verdict(d), "deny");
  });

  test(`a write through a symlink pointing out is refused in ${mode} mode`, () => {
    const d = engine({ mode }).evaluate("write_file", { path: "out-link/x" }, WRITE);
    assert.equal(verdict(d), "deny");
  });
}

for (const mode of ALL_MODES) {
  test(`a write to a git hook or git config is refused in ${mode} mode`, () => {
    const p = engine({ mode });
    for (
      const args of [
        { path: ".git/hooks/pre-commit" },
        { path: ".git/config" },
        { path: "sub/vendored/.git/hooks/post-checkout" },
        { path: "sub/vendored/.git/config" },
        { path: path.join(ws, ".git", "modules", "lib", "hooks", "pre-push") },
        { path: "src/a.ts", destination: ".git/hooks/pre-commit" },
      ]
    ) {
      const d = p.evaluate("write_file", args, WRITE);
      assert.equal(verdict(d), "deny", JSON.stringify(args));
      if (mode !== Mode.DISCUSS && mode !== Mode.PLAN) {
        assert.match(d.reason, /git hooks and config run commands later/);
      }
    }
  });
}

test("a write to a git hook is refused even when the tool is allowed for the session", () => {
  const p = engine({ mode: Mode.AUTO });
  p.allowToolForSession("write_file");
  assert.equal(verdict(p.evaluate("write_file", { path: ".git/hooks/pre-commit" }, WRITE)), "deny");
});

test("a write through a symlink into .git/hooks is refused", () => {
  mkdirSync(path.join(ws, ".git", "hooks"), { recursive: true });
  symlinkSync(path.join(ws, ".git", "hooks"), path.join(ws, "hooks-link"));
  const d = engine({ mode: Mode.AUTO }).evaluate("write_file", { path: "hooks-link/x" }, WRITE);
  assert.equal(verdict(d), "deny");
});

test("other files under .git and folders merely named hooks stay writable in AUTO mode", () => {
  const p = engine({ mode: Mode.AUTO });
  for (const file of [".git/HEAD", ".git/info/exclude", "src/hooks/use_it.ts", "config"]) {
    assert.equal(verdict(p.evaluate("write_file", { path: file }, WRITE)), "allow", file);
  }
});

test("a write outside is refused even when the tool is allowed for the session", () => {
  const p = engine();
  p.allowToolForSession("write_file");
  assert.equal(verdict(p.evaluate("write_file", { path: "/etc/x" }, WRITE)), "deny");
});

test("a write with one of several paths outside is refused", () => {
  const d = engine({ mode: Mode.AUTO }).evaluate(
    "apply_patch",
    { paths: ["src/a.ts", "~/.bashrc"] },
    WRITE,
  );
  assert.equal(verdict(d), "deny");
});

test("a move whose destination is outside is refused", () => {
  const d = engine({ mode: Mode.AUTO }).evaluate(
    "move_file",
    { path: "src/a.ts", destination: outside },
    WRITE,
  );
  assert.equal(verdict(d), "deny");
});

test("a copy whose to argument is outside is refused", () => {
  const d = engine({ mode: Mode.AUTO }).evaluate("copy", { from: "src/a.ts", to: "/tmp" }, WRITE);
  assert.equal(verdict(d), "deny");
});

test("a write into a sibling folder sharing the workspace name as a prefix is refused", () => {
  const d = engine({ mode: Mode.AUTO }).evaluate("write_file", { path: `${ws}-evil/x` }, WRITE);
  assert.equal(verdict(d), "deny");
});

test("a write into a writable granted directory is allowed in AUTO mode", () => {
  const p = engine({ mode: Mode.AUTO, grantedDirectories: [{ path: shared, writable: true }] });
  assert.equal(verdict(p.evaluate("write_file", { path: `${shared}/x` }, WRITE)), "allow");
});

test("a write into a read-only granted directory is refused", () => {
  const p = engine({ mode: Mode.AUTO });
  p.grantDirectory(shared, { writable: false });
  assert.equal(verdict(p.evaluate("write_file", { path: `${shared}/x` }, WRITE)), "deny");
});

test("a write inside the workspace asks in INTERACTIVE mode", () => {
  const d = engine().evaluate("write_file", { path: "src/new.ts" }, WRITE);
  assert.equal(verdict(d), "ask");
});

test("a write inside the workspace is allowed in AUTO mode", () => {
  const d = engine({ mode: Mode.AUTO }).evaluate("write_file", { path: "src/new.ts" }, WRITE);
  assert.equal(verdict(d), "allow");
});

// --- step 3: reads -----------------------------------------------------------------------------

for (const mode of ALL_MODES) {
  test(`a read inside the workspace is allowed in ${mode} mode`, () => {
    assert.equal(
      verdict(engine({ mode }).evaluate("read_file", { path: "src/a.ts" }, READ)),
      "allow",
    );
  });

  test(`a read tool without a path is allowed in ${mode} mode`, () => {
    assert.equal(verdict(engine({ mode }).evaluate("todo_write", { items: [] }, READ)), "allow");
  });
}

for (const mode of [Mode.DISCUSS, Mode.PLAN, Mode.INTERACTIVE]) {
  test(`a read outside the workspace asks in ${mode} mode`, () => {
    const d = engine({ mode }).evaluate("read_file", { path: "~/.ssh/id_rsa" }, READ);
    assert.equal(verdict(d), "ask");
  });

  test(`a read through a symlink pointing out asks in ${mode} mode`, () => {
    const d = engine({ mode }).evaluate("read_file", { path: "out-link/secret" }, READ);
    assert.equal(verdict(d), "ask");
  });
}

test("a read outside the workspace is allowed in AUTO mode", () => {
  const d = engine({ mode: Mode.AUTO }).evaluate("read_file", { path: "/etc/hostname" }, READ);
  assert.equal(verdict(d), "allow");
});

test("a read with a cwd outside the workspace asks", () => {
  assert.equal(verdict(engine().evaluate("grep", { pattern: "x", cwd: outside }, READ)), "ask");
});

test("a read inside a read-only granted directory is allowed", () => {
  const p = engine();
  p.grantDirectory(shared);
  assert.equal(verdict(p.evaluate("read_file", { path: `${shared}/doc.md` }, READ)), "allow");
});

test("a low-risk custom tool with a path outside asks like a read", () => {
  assert.equal(verdict(engine().evaluate("lookup", { path: "/etc/passwd" }, CUSTOM_LOW)), "ask");
});

test("a read tool that requires approval asks in INTERACTIVE mode", () => {
  const d = engine().evaluate("private_read", {}, meta(RiskClass.READ, { requiresApproval: true }));
  assert.equal(verdict(d), "ask");
});

// --- steps 4 and 8: AUTO and the rest ----------------------------------------------------------

test("AUTO mode allows a compound shell command", () => {
  const d = engine({ mode: Mode.AUTO }).evaluate(
    "run_shell",
    { command: "make && make test" },
    EXEC,
  );
  assert.equal(verdict(d), "allow");
});

test("AUTO mode allows a custom high-risk tool", () => {
  assert.equal(verdict(engine({ mode: Mode.AUTO }).evaluate("refund", {}, CUSTOM_HIGH)), "allow");
});

for (const mode of [Mode.INTERACTIVE, Mode.AUTO]) {
  test(`an unknown tool needs the user in ${mode} mode`, () => {
    assert.equal(verdict(engine({ mode }).evaluate("mystery", {}, null)), "ask");
  });
}

test("a custom high-risk tool asks in INTERACTIVE mode", () => {
  assert.equal(verdict(engine().evaluate("refund", { order: 1 }, CUSTOM_HIGH)), "ask");
});

test("an external tool asks in INTERACTIVE mode", () => {
  assert.equal(verdict(engine().evaluate("web_search", { query: "x" }, EXTERNAL)), "ask");
});

test("a shell command that nothing allows asks with the command in the reason", () => {
  const d = engine().evaluate("run_shell", { command: "make deploy" }, EXEC);
  assert.equal(verdict(d), "ask");
  assert.match(d.reason, /make deploy/);
});

// --- step 5: shell policy and sandbox status ---------------------------------------------------

test("shell policy approve gives no exemption even with an enforced sandbox", () => {
  const p = engine({ shellPolicy: "approve", sandbox: ENFORCED });
  assert.equal(verdict(p.evaluate("run_shell", { command: "make" }, EXEC)), "ask");
});

for (const sandbox of [ENFORCED, NOT_ENFORCED]) {
  test(`shell policy all allows a compound command (sandbox enforced: ${sandbox.enforced})`, () => {
    const p = engine({ shellPolicy: "all", sandbox });
    assert.equal(
      verdict(p.evaluate("run_shell", { command: "rm -rf / ; curl x | sh" }, EXEC)),
      "allow",
    );
  });
}

test("shell policy sandbox allows a command when the sandbox is enforced", () => {
  const p = engine({ shellPolicy: "sandbox", sandbox: ENFORCED });
  assert.equal(verdict(p.evaluate("run_shell", { command: "make && make test" }, EXEC)), "allow");
});

test("shell policy sandbox asks when the sandbox is not enforced", () => {
  const p = engine({ shellPolicy: "sandbox", sandbox: NOT_ENFORCED });
  assert.equal(verdict(p.evaluate("run_shell", { command: "make" }, EXEC)), "ask");
});

test("shell policy sandbox asks when no sandbox status is given", () => {
  const p = engine({ shellPolicy: "sandbox" });
  assert.equal(verdict(p.evaluate("run_shell", { command: "make" }, EXEC)), "ask");
});

test("shell policy sandbox asks when cwd is outside the workspace", () => {
  const p = engine({ shellPolicy: "sandbox", sandbox: ENFORCED });
  assert.equal(verdict(p.evaluate("run_shell", { command: "make", cwd: outside }, EXEC)), "ask");
});

test("shell policy workspace allows any command when the sandbox is enforced", () => {
  const p = engine({ shellPolicy: "workspace", sandbox: ENFORCED });
  assert.equal(
    verdict(p.evaluate("run_shell", { command: "cat /etc/hostname | wc" }, EXEC)),
    "allow",
  );
});

test("shell policy workspace without a sandbox allows a simple command on workspace paths", () => {
  const p = engine({ shellPolicy: "workspace", sandbox: NOT_ENFORCED });
  const d = p.evaluate(
    "run_shell",
    { command: "rm -rf src/old build --verbose", cwd: "src" },
    EXEC,
  );
  assert.equal(verdict(d), "allow");
});

const WORKSPACE_POLICY_ASKS: Array<[string, string]> = [
  ["cat /etc/passwd", "an absolute path outside"],
  ["rm -rf ../outside", "a .. path outside"],
  ["cat ~/.ssh/id_rsa", "a ~ path"],
  ["cat ~root/.ssh/id_rsa", "a ~user path"],
  ["cat out-link/secret", "a symlink pointing out"],
  ["cp src/a.ts --target-directory=/tmp", "an --option=path outside"],
  ["dd if=src/a.ts of=/etc/x", "an operand=path outside"],
  ["sort -o/etc/x src/a.ts", "an attached short-option path"],
  ["/bin/rm -rf src", "an executable outside the workspace given by path"],
  ["ls src; rm -rf /", "a compound command"],
  ["bash -c 'rm -rf ~'", "a wrapper"],
  ["cat $HOME/.ssh/id_rsa", "a variable"],
  ["FOO=1 make", "a leading assignment"],
];

for (const [command, what] of WORKSPACE_POLICY_ASKS) {
  test(`shell policy workspace without a sandbox asks for ${what} (${command})`, () => {
    const p = engine({ shellPolicy: "workspace", sandbox: NOT_ENFORCED });
    assert.equal(verdict(p.evaluate("run_shell", { command }, EXEC)), "ask");
  });
}

test("shell policy workspace resolves relative words from the command's cwd", () => {
  const p = engine({ shellPolicy: "workspace", sandbox: NOT_ENFORCED });
  const d = p.evaluate("run_shell", { command: "cat deep-link/secret", cwd: "sub" }, EXEC);
  assert.equal(verdict(d), "ask");
});

test("shell policy workspace allows a .. that stays inside from a nested cwd", () => {
  const p = engine({ shellPolicy: "workspace", sandbox: NOT_ENFORCED });
  const d = p.evaluate("run_shell", { command: "cat ../src/a.ts", cwd: "sub" }, EXEC);
  assert.equal(verdict(d), "allow");
});

test("shell policy workspace without a sandbox asks when cwd is outside", () => {
  const p = engine({ shellPolicy: "workspace", sandbox: NOT_ENFORCED });
  assert.equal(verdict(p.evaluate("run_shell", { command: "ls", cwd: "/" }, EXEC)), "ask");
});

// --- step 6: command allowlists ----------------------------------------------------------------

test("an allowlisted command runs without asking in INTERACTIVE mode", () => {
  const p = engine({ allowedCommands: ["git status", "ls"] });
  assert.equal(verdict(p.evaluate("run_shell", { command: "git status -s" }, EXEC)), "allow");
});

test("an allowlisted prefix does not allow a longer executable name", () => {
  const p = engine({ allowedCommands: ["ls"] });
  assert.equal(verdict(p.evaluate("run_shell", { command: "lsof" }, EXEC)), "ask");
});

test("an allowlisted command followed by ; is never auto-allowed", () => {
  const p = engine({ allowedCommands: ["ls"] });
  assert.equal(verdict(p.evaluate("run_shell", { command: "ls; rm -rf ." }, EXEC)), "ask");
});

test("an allowlisted command naming a path outside the workspace asks", () => {
  const p = engine({ allowedCommands: ["cat"] });
  assert.equal(verdict(p.evaluate("run_shell", { command: "cat ~/.ssh/id_rsa" }, EXEC)), "ask");
});

test("a session-allowed executable naming a path outside the workspace asks", () => {
  const p = engine();
  p.allowCommandForSession("cat");
  assert.equal(verdict(p.evaluate("run_shell", { command: "cat /etc/passwd" }, EXEC)), "ask");
});

test("an allowlisted command naming a workspace path is allowed", () => {
  const p = engine({ allowedCommands: ["cat"] });
  assert.equal(verdict(p.evaluate("run_shell", { command: "cat src/a.ts" }, EXEC)), "allow");
});

test("an allowlisted command with a cwd outside the workspace asks", () => {
  const p = engine({ allowedCommands: ["ls"] });
  assert.equal(verdict(p.evaluate("run_shell", { command: "ls", cwd: outside }, EXEC)), "ask");
});

test("always allow this command remembers the executable name", () => {
  const p = engine();
  assert.equal(p.allowCommandForSession("npm test"), true);
  assert.deepEqual(p.sessionAllowedCommands(), ["npm"]);
  assert.equal(verdict(p.evaluate("run_shell", { command: "npm run build" }, EXEC)), "allow");
});

test("a session-allowed executable does not allow a compound command", () => {
  const p = engine();
  p.allowCommandForSession("npm");
  assert.equal(verdict(p.evaluate("run_shell", { command: "npm test && rm -rf ." }, EXEC)), "ask");
});

test("a session-allowed executable does not allow a dangerous option", () => {
  const p = engine();
  p.allowCommandForSession("git status");
  assert.equal(
    verdict(p.evaluate("run_shell", { command: "git -c core.pager=sh log" }, EXEC)),
    "ask",
  );
});

test("always allow this command remembers nothing for a compound command", () => {
  const p = engine();
  assert.equal(p.allowCommandForSession("npm test && rm -rf ."), false);
  assert.deepEqual(p.sessionAllowedCommands(), []);
});

test("always allow this command remembers nothing for a wrapper", () => {
  const p = engine();
  assert.equal(p.allowCommandForSession("sudo npm test"), false);
  assert.deepEqual(p.sessionAllowedCommands(), []);
});

test("saved executable names restore the session command allowlist", () => {
  const first = engine();
  first.allowCommandForSession("pnpm test");
  const restored = engine();
  for (const name of first.sessionAllowedCommands()) restored.allowCommandForSession(name);
  assert.equal(verdict(restored.evaluate("run_shell", { command: "pnpm lint" }, EXEC)), "allow");
});

// --- step 7: session tool allowlist ------------------------------------------------------------

test("always allow this tool lets the tool run without asking", () => {
  const p = engine();
  p.allowToolForSession("write_file");
  assert.deepEqual(p.sessionAllowedTools(), ["write_file"]);
  assert.equal(verdict(p.evaluate("write_file", { path: "src/new.ts" }, WRITE)), "allow");
});

test("a session-allowed shell tool still asks when cwd is outside the workspace", () => {
  const p = engine();
  p.allowToolForSession("run_shell");
  assert.equal(verdict(p.evaluate("run_shell", { command: "ls", cwd: outside }, EXEC)), "ask");
});

test("a session-allowed external tool runs in PLAN mode", () => {
  const p = engine({ mode: Mode.PLAN });
  p.allowToolForSession("web_search");
  assert.equal(verdict(p.evaluate("web_search", { query: "x" }, EXTERNAL)), "allow");
});

// --- granted directories -----------------------------------------------------------------------

test("granting a directory again as writable upgrades it", () => {
  const p = engine();
  p.grantDirectory(shared);
  p.grantDirectory(shared, { writable: true });
  assert.deepEqual(p.grantedDirectories(), [{ path: shared, writable: true }]);
});

test("granting a directory read-only after writable keeps it writable", () => {
  const p = engine();
  p.grantDirectory(shared, { writable: true });
  p.grantDirectory(shared);
  assert.deepEqual(p.grantedDirectories(), [{ path: shared, writable: true }]);
});
