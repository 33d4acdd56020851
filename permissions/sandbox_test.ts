// Unit tests of the sandbox module that need no sandbox: argument lists, the macOS profile text,
// status resolution on other platforms, the cached probe, and required mode.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import {
  _resetSandboxProbes,
  buildBwrapArgs,
  buildMacProfile,
  describeSandbox,
  resolveSandbox,
  sandboxProtectedPaths,
  SandboxUnavailableError,
  wrapWithSandbox,
} from "./sandbox.ts";
import { createDefaultEngine } from "../engine/create_default_engine.ts";
import { EngineConfigError } from "../engine/errors.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function ws(files: Record<string, string> = {}): string {
  const dir = tempWorkspace(files);
  cleanups.push(() => removeDir(dir));
  return dir;
}

function gitRepo(dir: string): void {
  fs.mkdirSync(path.join(dir, ".git", "hooks"), { recursive: true });
  fs.writeFileSync(path.join(dir, ".git", "config"), "[core]\n");
}

test("bwrap arguments mount the root read-only, then /tmp, then the writable roots, then re-bind protected paths", () => {
  const args = buildBwrapArgs({
    workspace: "/srv/ws",
    extraWritable: ["/data/cache"],
    readOnly: ["/srv/ws/.git/hooks", "/srv/ws/.git/config"],
    cwd: "/srv/ws/src",
  });
  const at = (a: string, b: string): number => {
    for (let i = 0; i < args.length - 1; i++) if (args[i] === a && args[i + 1] === b) return i;
    return -1;
  };
  assert.ok(at("--ro-bind", "/") >= 0);
  assert.ok(at("--ro-bind", "/") < at("--tmpfs", "/tmp"));
  assert.ok(at("--tmpfs", "/tmp") < at("--bind", "/srv/ws"));
  assert.ok(at("--bind", "/srv/ws") < at("--bind", "/data/cache"));
  assert.ok(at("--bind", "/data/cache") < at("--ro-bind", "/srv/ws/.git/hooks"));
  assert.ok(at("--ro-bind", "/srv/ws/.git/config") > 0);
  for (const flag of ["--new-session", "--die-with-parent", "--unshare-pid", "--unshare-net"]) {
    assert.ok(args.includes(flag), flag);
  }
  assert.ok(at("--cap-drop", "ALL") >= 0);
  assert.ok(at("--chdir", "/srv/ws/src") >= 0);
});

test("bwrap arguments keep the network only when it is allowed", () => {
  assert.ok(
    !buildBwrapArgs({ workspace: "/w", network: true, readOnly: [] }).includes("--unshare-net"),
  );
  assert.ok(buildBwrapArgs({ workspace: "/w", readOnly: [] }).includes("--unshare-net"));
});

test("protected paths cover .git hooks and config, nested repositories, .git files and .agent", () => {
  const root = ws({ "src/a.ts": "x", "vendor/lib/readme": "x" });
  gitRepo(root);
  gitRepo(path.join(root, "vendor", "lib"));
  fs.mkdirSync(path.join(root, ".agent"));
  // A worktree-style .git file pointing at a git dir inside the workspace.
  const gitDir = path.join(root, "gitdirs", "wt");
  gitRepo(path.join(root, "gitdirs", "wt-holder"));
  fs.mkdirSync(path.join(gitDir, "hooks"), { recursive: true });
  fs.writeFileSync(path.join(gitDir, "config"), "");
  fs.mkdirSync(path.join(root, "wt"));
  fs.writeFileSync(path.join(root, "wt", ".git"), `gitdir: ${gitDir}\n`);
  const { readOnly: paths, pinned } = sandboxProtectedPaths([root]);
  assert.ok(pinned.includes(path.join(root, ".git")), "the .git folder is pinned");
  assert.ok(pinned.includes(path.join(root, "vendor", "lib", ".git")));
  for (
    const p of [
      ".git/hooks",
      ".git/config",
      "vendor/lib/.git/hooks",
      "vendor/lib/.git/config",
      "wt/.git",
      "gitdirs/wt/hooks",
      "gitdirs/wt/config",
      ".agent",
    ]
  ) {
    assert.ok(paths.includes(path.join(root, p)), `${p} in ${paths.join(", ")}`);
  }
});

test("a git folder whose hooks are a symlink is protected whole", () => {
  const root = ws();
  fs.mkdirSync(path.join(root, ".git"));
  fs.writeFileSync(path.join(root, ".git", "config"), "");
  fs.mkdirSync(path.join(root, "h"));
  fs.symlinkSync(path.join(root, "h"), path.join(root, ".git", "hooks"));
  assert.ok(sandboxProtectedPaths([root]).readOnly.includes(path.join(root, ".git")));
});

test("the macOS profile names paths only as parameters", () => {
  const root = ws();
  gitRepo(root);
  const profile = buildMacProfile({
    workspace: root,
    extraWritable: ["/data/cache"],
    tempDirs: ["/private/tmp"],
  });
  assert.ok(!profile.profile.includes(root), "the workspace path is not spliced into the text");
  assert.ok(!profile.profile.includes("/data/cache"));
  assert.match(profile.profile, /\(deny file-write\*\)/);
  assert.match(profile.profile, /\(subpath \(param "WRITABLE_ROOT_0"\)\)/);
  assert.match(profile.profile, /\(deny network\*\)/);
  assert.equal(profile.params.WRITABLE_ROOT_0, root);
  assert.equal(profile.params.WRITABLE_ROOT_1, "/data/cache");
  assert.equal(profile.params.WRITABLE_ROOT_2, "/private/tmp");
  const ro = Object.entries(profile.params).filter(([k]) => k.startsWith("WRITABLE_ROOT_0_RO_"));
  assert.deepEqual(ro.map(([, v]) => v).sort(), [
    path.join(root, ".git", "config"),
    path.join(root, ".git", "hooks"),
  ]);
  for (const [k] of ro) {
    assert.match(profile.profile, new RegExp(`\\(require-not \\(literal \\(param "${k}"\\)\\)\\)`));
    assert.match(profile.profile, new RegExp(`\\(require-not \\(subpath \\(param "${k}"\\)\\)\\)`));
  }
  assert.equal(profile.params.WRITABLE_ROOT_0_PIN_0, path.join(root, ".git"));
  assert.match(profile.profile, /\(require-not \(literal \(param "WRITABLE_ROOT_0_PIN_0"\)\)\)/);
  assert.equal(profile.args[0], "-p");
  assert.equal(profile.args[1], profile.profile);
  assert.ok(profile.args.includes(`WRITABLE_ROOT_0=${root}`));
});

test("the macOS profile allows the network when asked", () => {
  const profile = buildMacProfile({ workspace: "/w", network: true, readOnly: [], tempDirs: [] });
  assert.ok(!profile.profile.includes("deny network"));
});

test("mode off resolves to no sandbox", () => {
  const status = resolveSandbox({ mode: "off" });
  assert.equal(status.enforced, false);
  assert.equal(status.kind, "none");
  assert.match(describeSandbox(status), /not enforced/);
});

test("Windows is reported as not enforced with path heuristics only", () => {
  const status = resolveSandbox({ mode: "auto" }, { platform: "win32" });
  assert.equal(status.enforced, false);
  assert.match(describeSandbox(status), /Windows.*heuristics/);
});

test("required mode throws when no sandbox can be enforced", () => {
  assert.throws(
    () => resolveSandbox({ mode: "required" }, { platform: "win32" }),
    (e: unknown) => e instanceof SandboxUnavailableError && /required/.test(e.message),
  );
});

test("a bwrap that cannot create namespaces is probed once and its reason reported", () => {
  const dir = ws();
  const counter = path.join(dir, "count");
  const fake = path.join(dir, "bwrap");
  fs.writeFileSync(
    fake,
    `#!/bin/sh\necho x >> ${counter}\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n`,
    { mode: 0o755 },
  );
  _resetSandboxProbes();
  const first = resolveSandbox({ mode: "auto" }, { platform: "linux", bwrapPath: fake });
  const second = resolveSandbox({ mode: "auto" }, { platform: "linux", bwrapPath: fake });
  assert.equal(first.enforced, false);
  assert.match(first.reason ?? "", /No permissions to creating new namespace/);
  assert.equal(second.reason, first.reason);
  assert.equal(fs.readFileSync(counter, "utf8").trim().split("\n").length, 1);
  assert.throws(
    () => resolveSandbox({ mode: "required" }, { platform: "linux", bwrapPath: fake }),
    SandboxUnavailableError,
  );
});

test("wrapping with a sandbox that is not enforced leaves the command unchanged", () => {
  const command = { program: "/bin/sh", args: ["-c", "true"], cwd: "/w", env: { A: "1" } };
  const wrapped = wrapWithSandbox(resolveSandbox({ mode: "off" }), command, { workspace: "/w" });
  assert.deepEqual(wrapped, command);
});

test("extraWritable entries are resolved against the workspace", () => {
  const root = ws({ "cache/x": "" });
  const status = resolveSandbox({ mode: "off", extraWritable: ["cache"] }, { workspace: root });
  assert.deepEqual(status.extraWritable, [path.join(root, "cache")]);
});

test("createDefaultEngine with sandbox required fails at creation when no sandbox exists", {
  skip: process.platform === "linux" ? false : "the PATH trick hides bwrap only on Linux",
}, () => {
  const root = ws();
  const empty = ws();
  const saved = process.env.PATH;
  process.env.PATH = empty; // no bwrap to be found
  try {
    assert.throws(
      () => createDefaultEngine({ workspace: root, model: "m", sandbox: { mode: "required" } }),
      (e: unknown) => e instanceof EngineConfigError && /sandbox/.test(e.message),
    );
  } finally {
    process.env.PATH = saved;
  }
});
