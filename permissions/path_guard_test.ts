import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import path from "node:path";
import {
  checkPath,
  expandHome,
  isInside,
  isProtectedPath,
  pathFromFileUrl,
  PathResolutionError,
  resolveRoot,
  resolveWorkspacePath,
  urlScheme,
} from "./path_guard.ts";
import { pathToFileURL } from "node:url";

// Layout (all real files in a temp dir):
//   base/ws/               the workspace (src/a.ts inside)
//   base/ws-evil/          a sibling sharing the workspace's name as a prefix
//   base/outside/secret    a file outside
//   base/ws/out-link       -> base/outside           (directory symlink pointing out)
//   base/ws/file-link      -> base/outside/secret    (file symlink pointing out)
//   base/ws/dangling       -> base/outside/new-file  (dangling symlink pointing out)
//   base/ws/rel-link       -> ../outside             (relative symlink pointing out)
//   base/ws/in-link        -> base/ws/src            (symlink staying inside)
//   base/ws/loop-a <-> loop-b                         (symlink loop)
//   base/ws/way-a -> base/outside/way-b -> base/ws/way-a  (a loop through a folder outside)
//   base/ws/chain-0 -> chain-1 -> … -> chain-41 -> base/outside/secret (a long chain, no cycle)
//   base/ws-link           -> base/ws                (a symlinked workspace root)
const base = realpathSync(mkdtempSync(path.join(tmpdir(), "zq-path-guard-")));
const ws = path.join(base, "ws");
const outside = path.join(base, "outside");
mkdirSync(path.join(ws, "src"), { recursive: true });
mkdirSync(path.join(base, "ws-evil"), { recursive: true });
mkdirSync(outside, { recursive: true });
writeFileSync(path.join(ws, "src", "a.ts"), "export {};\n");
writeFileSync(path.join(outside, "secret"), "s3cret\n");
symlinkSync(outside, path.join(ws, "out-link"));
symlinkSync(path.join(outside, "secret"), path.join(ws, "file-link"));
symlinkSync(path.join(outside, "new-file"), path.join(ws, "dangling"));
symlinkSync("../outside", path.join(ws, "rel-link"));
symlinkSync(path.join(ws, "src"), path.join(ws, "in-link"));
symlinkSync(path.join(ws, "loop-b"), path.join(ws, "loop-a"));
symlinkSync(path.join(ws, "loop-a"), path.join(ws, "loop-b"));
symlinkSync(path.join(outside, "way-b"), path.join(ws, "way-a"));
symlinkSync(path.join(ws, "way-a"), path.join(outside, "way-b"));
for (let i = 0; i <= 41; i++) {
  const target = i === 41 ? path.join(outside, "secret") : `chain-${i + 1}`;
  symlinkSync(target, path.join(ws, `chain-${i}`));
}
symlinkSync(ws, path.join(base, "ws-link"));

after(() => rmSync(base, { recursive: true, force: true }));

function inside(p: string, root = ws): boolean {
  return checkPath(root, p, [resolveRoot(root)]).inside;
}

const ESCAPES: Array<[string, string]> = [
  ["../outside/secret", "a .. escape"],
  ["src/../../outside/secret", "a .. escape through a real directory"],
  ["nope/../../outside", "a .. escape through a missing directory"],
  ["/etc/passwd", "an absolute path"],
  ["~/.ssh/id_rsa", "a ~ path"],
  ["~", "the home directory"],
  ["~root/.ssh/id_rsa", "a ~user path"],
  ["out-link/secret", "a directory symlink pointing out"],
  ["out-link", "the directory symlink itself"],
  ["file-link", "a file symlink pointing out"],
  ["dangling", "a dangling symlink pointing out"],
  ["rel-link/secret", "a relative symlink pointing out"],
  ["out-link/new/deep/file.txt", "a missing nested target under a symlink pointing out"],
  ["in-link/../../outside", "a .. applied after an inside symlink"],
  ["out-link/../src/a.ts", "a .. after a symlink pointing out (lexically inside)"],
  ["way-a", "a symlink loop through a folder outside"],
  ["way-a/x", "a path under a symlink loop through a folder outside"],
  ["chain-0", "a chain of more symlinks than the kernel follows, without a cycle"],
  ["", "an empty path"],
  [pathToFileURL(path.join(outside, "secret")).href, "a file URL outside"],
  [pathToFileURL(path.join(ws, "out-link", "secret")).href, "a file URL through a symlink out"],
  ["file://evil.example/etc/passwd", "a file URL of another host"],
  [`${pathToFileURL(ws).href}/src%00.ts`, "a file URL encoding a NUL"],
];

for (const [p, what] of ESCAPES) {
  test(`${what} does not resolve inside the workspace (${JSON.stringify(p)})`, () => {
    assert.equal(inside(p), false);
  });
}

test("a sibling directory sharing the workspace's name as a prefix is outside", () => {
  assert.equal(inside(path.join(base, "ws-evil", "x")), false);
});

test("the sibling prefix check is by segment even without resolution", () => {
  assert.equal(isInside("/srv/ws", "/srv/ws-evil/x"), false);
  assert.equal(isInside("/srv/ws", "/srv/ws/x"), true);
  assert.equal(isInside("/srv/ws", "/srv/ws"), true);
  assert.equal(isInside("/srv/ws", "/srv"), false);
});

test("a relative file inside the workspace resolves inside", () => {
  assert.equal(resolveWorkspacePath(ws, "src/a.ts"), path.join(ws, "src", "a.ts"));
});

test("a missing nested target inside the workspace resolves inside", () => {
  assert.equal(resolveWorkspacePath(ws, "new/deep/f.txt"), path.join(ws, "new", "deep", "f.txt"));
});

test("an absolute path into the workspace resolves inside", () => {
  assert.equal(inside(path.join(ws, "src", "a.ts")), true);
});

test("a .. that stays inside the workspace resolves inside", () => {
  assert.equal(resolveWorkspacePath(ws, "src/../src/a.ts"), path.join(ws, "src", "a.ts"));
});

test("a symlink that stays inside the workspace resolves to its target", () => {
  assert.equal(resolveWorkspacePath(ws, "in-link/a.ts"), path.join(ws, "src", "a.ts"));
});

test("a .. after a symlink is applied to the symlink's target, as the kernel does", () => {
  assert.equal(resolveWorkspacePath(ws, "out-link/../src/a.ts"), path.join(base, "src", "a.ts"));
});

test("a dangling symlink resolves to the file it would create", () => {
  assert.equal(resolveWorkspacePath(ws, "dangling"), path.join(outside, "new-file"));
});

test("a symlinked workspace root resolves to its real path", () => {
  assert.equal(resolveRoot(path.join(base, "ws-link")), ws);
});

test("paths under a symlinked workspace root are inside it", () => {
  const linkRoot = path.join(base, "ws-link");
  assert.equal(inside(path.join(linkRoot, "src", "a.ts"), linkRoot), true);
  assert.equal(inside("src/a.ts", linkRoot), true);
});

test("escapes from a symlinked workspace root are still outside", () => {
  const linkRoot = path.join(base, "ws-link");
  assert.equal(inside("out-link/secret", linkRoot), false);
  assert.equal(inside("../outside/secret", linkRoot), false);
});

test("~ expands to the home directory", () => {
  assert.equal(expandHome("~/x"), path.join(homedir(), "x"));
});

test("~user is refused with a PathResolutionError", () => {
  assert.throws(() => resolveWorkspacePath(ws, "~root/x"), PathResolutionError);
});

test("a symlink loop is refused with a PathResolutionError naming the loop", () => {
  assert.throws(
    () => resolveWorkspacePath(ws, "loop-a/x"),
    (e) =>
      e instanceof PathResolutionError && e.code === "symlink_loop" &&
      e.message === "Cannot resolve loop-a/x: too many levels of symbolic links (a symlink loop)",
  );
});

test("a symlink loop inside the workspace stays inside the workspace", () => {
  for (const p of ["loop-a", "loop-b", "loop-a/x", path.join(ws, "loop-a"), "src/../loop-a"]) {
    assert.deepEqual(checkPath(ws, p, [ws]), { resolved: null, inside: true }, p);
  }
});

test("a symlink loop inside the workspace is outside a root that does not hold it", () => {
  assert.equal(checkPath(ws, "loop-a", [path.join(ws, "src")]).inside, false);
});

test("a symlink loop reached through a symlinked workspace root stays inside", () => {
  const linkRoot = path.join(base, "ws-link");
  assert.equal(inside("loop-a", linkRoot), true);
  assert.equal(inside(path.join(linkRoot, "loop-a"), linkRoot), true);
});

test("a symlink loop entered from outside the workspace is outside", () => {
  assert.equal(inside("out-link/../ws/way-a"), false);
  assert.equal(inside(path.join(outside, "way-b")), false);
});

test("isProtectedPath names git hooks, git config and .git files at any depth", () => {
  for (
    const p of [
      "/srv/ws/.git/hooks",
      "/srv/ws/.git/hooks/pre-commit",
      "/srv/ws/.git/config",
      "/srv/ws/.git/config.worktree",
      "/srv/ws/lib/inner/.git/hooks/post-checkout",
      "/srv/ws/lib/inner/.git/config",
      "/srv/ws/.git/modules/sub/hooks/pre-push",
      "/srv/ws/.git/modules/sub/config",
      "/srv/ws/sub/.git",
      "/srv/ws/.GIT/Hooks/pre-commit",
      "/srv/ws/src/../.git/hooks/x",
    ]
  ) {
    assert.equal(isProtectedPath(p), true, p);
  }
  for (
    const p of [
      "/srv/ws/.git/HEAD",
      "/srv/ws/.git/info/exclude",
      "/srv/ws/src/hooks/use_it.ts",
      "/srv/ws/config",
      "/srv/ws/.github/hooks/x",
      "/srv/ws/.gitignore",
      "",
    ]
  ) {
    assert.equal(isProtectedPath(p), false, p);
  }
});

test("isProtectedPath with a base checks relative paths and symlinks into .git/hooks", () => {
  const hooks = path.join(base, "repo", ".git", "hooks");
  mkdirSync(hooks, { recursive: true });
  symlinkSync(hooks, path.join(ws, "hooks-alias"));
  assert.equal(isProtectedPath(".git/config", ws), true);
  assert.equal(isProtectedPath("a/b/../../.git/hooks/x", ws), true);
  assert.equal(isProtectedPath("hooks-alias/pre-commit", ws), true);
  assert.equal(isProtectedPath("hooks-alias/pre-commit"), false, "without a base: as written");
  assert.equal(isProtectedPath("src/a.ts", ws), false);
});

test("a file URL resolves to the path it names, like the plain path", () => {
  const plain = resolveWorkspacePath(ws, "src/a.ts");
  assert.equal(resolveWorkspacePath(ws, pathToFileURL(path.join(ws, "src", "a.ts")).href), plain);
  assert.equal(resolveWorkspacePath(ws, `file:${path.join(ws, "src", "a.ts")}`), plain);
  assert.equal(
    resolveWorkspacePath(ws, pathToFileURL(path.join(ws, "in-link", "my file.ts")).href),
    path.join(ws, "src", "my file.ts"),
    "percent-escapes decoded, symlinks followed",
  );
  assert.equal(inside(pathToFileURL(path.join(ws, "new", "x.txt")).href), true);
});

test("urlScheme tells URLs from paths, Windows drives included", () => {
  assert.equal(urlScheme("http://example.com/x"), "http");
  assert.equal(urlScheme("HTTPS://example.com/x"), "https");
  assert.equal(urlScheme("file:///x"), "file");
  assert.equal(urlScheme("file:/x"), "file");
  assert.equal(urlScheme("C://x"), undefined);
  assert.equal(urlScheme("C:\\x"), undefined);
  assert.equal(urlScheme("notes:today.md"), undefined);
  assert.equal(urlScheme("src/file:x"), undefined);
});

test("pathFromFileUrl leaves paths alone and refuses a file URL of another host", () => {
  assert.equal(pathFromFileUrl("src/a.ts"), "src/a.ts");
  assert.equal(pathFromFileUrl("file:notes.md"), "file:notes.md", "no slash: a file name");
  assert.throws(
    () => pathFromFileUrl("file://evil.example/etc/passwd"),
    (e) => e instanceof PathResolutionError && /Cannot resolve file:\/\/evil/.test(e.message),
  );
});

test("isProtectedPath sees through a file URL, percent-escapes included", () => {
  assert.equal(isProtectedPath("file:///srv/ws/%2Egit/hooks/pre-commit"), true);
  assert.equal(isProtectedPath("file:///srv/ws/sub/%2Egit/config", ws), true);
  assert.equal(isProtectedPath("file:///srv/ws/src/%2Egitignore", ws), false);
});
