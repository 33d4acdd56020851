import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { envString } from "../_internal/env.ts";
import {
  core,
  entryPoint,
  PACKAGE_DIR_ENV,
  PACKAGE_ROOT,
  store,
  TARGET,
  testing,
} from "./_target.ts";

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const packageDir = envString(PACKAGE_DIR_ENV);

test(
  "the store suite runs against the npm build installed in ZQAGENT_TEST_PACKAGE_DIR when it is set",
  { skip: packageDir === undefined ? `${PACKAGE_DIR_ENV} is not set` : false },
  async () => {
    assert.equal(TARGET, "npm");
    const dir = fs.realpathSync(packageDir!);
    assert.ok(PACKAGE_ROOT?.startsWith(dir + path.sep), `${PACKAGE_ROOT} is inside ${dir}`);
    for (const [sub, ns] of [[".", core], ["./store", store], ["./testing", testing]] as const) {
      const file = entryPoint(PACKAGE_ROOT!, sub);
      assert.ok(file.startsWith(dir + path.sep), `${sub}: ${file} is inside ${dir}`);
      // The same module record: a fallback to the source tree would be a different namespace.
      assert.equal(ns, await import(pathToFileURL(file).href), `${sub} is loaded from ${file}`);
    }
    const source = await import("../store/mod.ts");
    assert.notEqual(store.MemorySessionStore, source.MemorySessionStore);
    // The package's dependencies resolve inside the install, never from the source tree's
    // node_modules.
    const require = createRequire(entryPoint(PACKAGE_ROOT!, "./store"));
    for (const dep of ["pg", "openai"]) {
      const resolved = fs.realpathSync(require.resolve(dep));
      assert.ok(resolved.startsWith(dir + path.sep), `${dep}: ${resolved} is inside ${dir}`);
      assert.ok(!resolved.startsWith(ROOT + path.sep), `${dep}: ${resolved} is not in the source`);
    }
  },
);

test(
  "the store suite runs against the source tree when ZQAGENT_TEST_PACKAGE_DIR is not set",
  { skip: packageDir !== undefined ? `${PACKAGE_DIR_ENV} is set` : false },
  async () => {
    assert.equal(TARGET, "source");
    assert.equal(PACKAGE_ROOT, undefined);
    assert.equal(store, await import("../store/mod.ts"));
    assert.equal(core, await import("../mod.ts"));
    assert.equal(testing, await import("../testing/mod.ts"));
  },
);

/** The store tests and their helpers: the files that must run against either target. */
function storeSuiteFiles(): string[] {
  const storeTests = fs.readdirSync(path.join(ROOT, "store"))
    // Unit tests of private modules (`_json_test.ts`) test the source: not in the package.
    .filter((f) => f.endsWith("_test.ts") && !f.startsWith("_"))
    .map((f) => `store/${f}`);
  const helpers = fs.readdirSync(path.join(ROOT, "tests"))
    .filter((f) => /^_(store_.*|postgres)\.ts$/.test(f))
    .map((f) => `tests/${f}`);
  return [...storeTests, ...helpers].sort();
}

/** Value (not type-only) imports of the library's own modules in `file`, as `specifier: names`. */
function libraryValueImports(file: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), "utf8");
  const bad: string[] = [];
  for (const m of text.matchAll(/^import\s+(type\s+)?([^;]*?)\s+from\s+"([^"]+)";/gms)) {
    const [, typeOnly, clause, spec] = m;
    if (typeOnly || !spec.startsWith(".")) continue;
    const rel = path.relative(ROOT, path.resolve(path.dirname(path.join(ROOT, file)), spec));
    if (rel.split(path.sep)[0] === "tests") continue; // test helpers (tests/_target.ts, …)
    const names = /^\{(.*)\}$/s.exec(clause.trim())?.[1].split(",").map((n) => n.trim())
      .filter((n) => n !== "");
    const values = names === undefined ? [clause.trim()] : names.filter((n) => !/^type\s/.test(n));
    if (values.length > 0) bad.push(`${spec}: ${values.join(", ")}`);
  }
  return bad;
}

test("the store tests and their helpers take every runtime value from tests/_target.ts", () => {
  const files = storeSuiteFiles();
  assert.ok(files.includes("store/session_worker_test.ts"), files.join(", "));
  const offenders = files.flatMap((f) => libraryValueImports(f).map((i) => `${f} imports ${i}`));
  assert.deepEqual(offenders, [], "use `import type` for the source, values from tests/_target.ts");
});
