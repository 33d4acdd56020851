// The path check of the isolated file tools (DESIGN §5): real paths, links (dangling ones
// too), granted directories, and the arguments it looks at. Runtime-neutral: Deno and Node.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { checkToolPath, pathArguments, realPathOf, within } from "./_file_tool_guard.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function dirs(): { ws: string; outside: string } {
  const ws = tempWorkspace({ "a.txt": "a\n", "sub/b.txt": "b\n" });
  const outside = tempWorkspace({ "secret.txt": "s\n" });
  cleanups.push(() => removeDir(ws), () => removeDir(outside));
  return { ws, outside };
}

test("within compares whole path segments", () => {
  assert.equal(within("/srv/ws", "/srv/ws"), true);
  assert.equal(within("/srv/ws", "/srv/ws/a/b"), true);
  assert.equal(within("/srv/ws", "/srv/ws-evil/a"), false);
  assert.equal(within("/srv/ws", "/srv/ws/../x"), false);
  assert.equal(within("/srv/ws", "/srv/ws/..data"), true);
});

test("realPathOf follows a dangling link to where a write through it would land", () => {
  const { ws, outside } = dirs();
  fs.symlinkSync(path.join(outside, "new.txt"), path.join(ws, "dangling"));
  fs.symlinkSync(outside, path.join(ws, "linkdir"));
  assert.equal(realPathOf(path.join(ws, "dangling")), path.join(outside, "new.txt"));
  assert.equal(realPathOf(path.join(ws, "linkdir/x/y.txt")), path.join(outside, "x/y.txt"));
  assert.equal(realPathOf(path.join(ws, "sub/new/c.txt")), path.join(ws, "sub/new/c.txt"));
});

test("realPathOf gives up on a symlink loop", () => {
  const { ws } = dirs();
  fs.symlinkSync(path.join(ws, "b"), path.join(ws, "a-link"));
  fs.symlinkSync(path.join(ws, "a-link"), path.join(ws, "b"));
  assert.throws(() => realPathOf(path.join(ws, "a-link")), /too many symlinks|ELOOP/);
});

test("checkToolPath accepts workspace paths and refuses those that leave it", () => {
  const { ws, outside } = dirs();
  fs.symlinkSync(path.join(outside, "planted.txt"), path.join(ws, "dangling"));
  fs.symlinkSync(outside, path.join(ws, "linkdir"));
  const scope = { workspace: ws, realRoot: ws, grants: [], write: true };
  for (const ok of ["a.txt", "sub/new.txt", path.join(ws, "a.txt"), "sub/../a.txt"]) {
    assert.doesNotThrow(() => checkToolPath("write_file", ok, scope), ok);
  }
  assert.doesNotThrow(() =>
    checkToolPath("write_file", pathToFileURL(path.join(ws, "a.txt")).href, scope)
  );
  for (
    const bad of [
      "../x.txt",
      path.join(outside, "secret.txt"),
      "linkdir/secret.txt",
      "dangling",
      "~/x.txt",
      pathToFileURL(path.join(outside, "secret.txt")).href,
    ]
  ) {
    assert.throws(
      () => checkToolPath("write_file", bad, scope),
      /outside the workspace.*\(refused by the isolated file-tool process\)/,
      bad,
    );
  }
});

test("checkToolPath lets granted directories in, writable ones only for writes", () => {
  const { ws, outside } = dirs();
  const target = path.join(outside, "secret.txt");
  const readOnly = [{ path: outside, writable: false }];
  assert.doesNotThrow(() =>
    checkToolPath("read_file", target, {
      workspace: ws,
      realRoot: ws,
      grants: readOnly,
      write: false,
    })
  );
  assert.throws(
    () =>
      checkToolPath("write_file", target, {
        workspace: ws,
        realRoot: ws,
        grants: readOnly,
        write: true,
      }),
    /outside the workspace and the writable granted directories/,
  );
  assert.doesNotThrow(() =>
    checkToolPath("write_file", target, {
      workspace: ws,
      realRoot: ws,
      grants: [{ path: outside, writable: true }],
      write: true,
    })
  );
});

test("pathArguments takes the path keys as written and trimmed, paths[] and a file: url", () => {
  assert.deepEqual(
    pathArguments({
      path: " a.txt ",
      destination: "b",
      paths: ["c", 3],
      url: "file:///srv/ws/d.png",
      content: "/etc/passwd",
    }),
    [" a.txt ", "a.txt", "b", "c", "file:///srv/ws/d.png"],
  );
  assert.deepEqual(pathArguments({ url: "https://example.test/x.png", path: "" }), []);
});
