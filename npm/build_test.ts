// The npm build's standalone entries (npm/build.ts): a module the package starts as its own
// process, such as the isolated file-tool child of `sandbox.deno` (DESIGN §5), is bundled on its
// own and placed next to the built code that loads it; these checks keep the source reference
// and the build's reading of it in step. The packed build itself is checked under Deno by the
// smoke step of `deno task ci:npm` (npm/smoke/smoke_deno.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { relativeUrlReferences, STANDALONE_ENTRIES } from "./build.ts";
import { ROOT } from "./_run.ts";

test("relative file references are found in ESM and in tsdown's CommonJS form", () => {
  const esm = 'const a = new URL("./_child.mjs", import.meta.url);\n' +
    "const b = new URL( '../x/y.js' , import.meta.url );\n" +
    'const c = new URL("https://example.test/", import.meta.url);';
  assert.deepEqual(relativeUrlReferences(esm), ["./_child.mjs", "../x/y.js"]);
  const cjs =
    'const runner = new URL("./_child.mjs", require("url").pathToFileURL(__filename).href);';
  assert.deepEqual(relativeUrlReferences(cjs), ["./_child.mjs"]);
  assert.deepEqual(relativeUrlReferences('new URL("./a.mjs", base)'), []);
});

test("every standalone entry is started by a module beside it, as the build rewrites it", () => {
  assert.ok(STANDALONE_ENTRIES.length > 0);
  for (const entry of STANDALONE_ENTRIES) {
    const source = path.join(ROOT, entry.source);
    assert.ok(existsSync(source), `${entry.source} exists`);
    assert.match(entry.output, /^_[a-z_]+\.mjs$/);
    const dir = path.dirname(source);
    const reference = `./${path.basename(source)}`;
    const starters = readdirSync(dir).filter((f) => f.endsWith(".ts") && !f.endsWith("_test.ts"))
      .filter((f) =>
        relativeUrlReferences(readFileSync(path.join(dir, f), "utf8")).includes(reference)
      );
    assert.ok(starters.length > 0, `a module in ${path.relative(ROOT, dir)} starts ${reference}`);
  }
});
