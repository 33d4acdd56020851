// Guards of the npm build and of DESIGN §1: the npm exports equal deno.json's, every imports
// key is its npm package name, no inline npm:/jsr: specifiers, Deno-only code only in
// _internal/, no global augmentation, every entry point type-checked and doc-linted.
// Runs under Deno (`deno task test`) and on Node 22 (`deno task ci:npm`, which sets
// NPM_DIST_REQUIRED=1 after building npm/dist/ so the built package.json is checked too).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import process from "node:process";
import {
  bareSpecifiersOf,
  classifySpecifiers,
  entryName,
  importMapProblems,
  inlineRegistrySpecifiers,
  moduleDocSummary,
  npmDependencies,
  npmExports,
  type NpmPackageJson,
  npmPackageJson,
  parseNpmSpecifier,
  readDenoManifest,
} from "./_manifest.ts";
import { codeOnly, denoUses, globalAugmentations, readSource, sourceFiles } from "./_audit.ts";
import { DIST_DIR, ROOT } from "./_run.ts";

const manifest = readDenoManifest(ROOT);
const files = sourceFiles(ROOT);
const distPackage = path.join(DIST_DIR, "package.json");
const distRequired = process.env.NPM_DIST_REQUIRED === "1";

// --- deno.json → npm package ---

test("every imports key equals the npm package name it maps to", () => {
  assert.deepEqual(importMapProblems(manifest.imports), []);
});

test("an imports key that differs from its package name is reported", () => {
  const problems = importMapProblems({
    ok: "npm:ok@^1",
    oai: "npm:openai@^7",
    "@s/p": "npm:@s/p",
    std: "jsr:@std/path@1",
  });
  assert.equal(problems.length, 3);
  assert.match(problems[0], /"oai" maps to the npm package "openai"/);
  assert.match(problems[1], /no version range/);
  assert.match(problems[2], /not an npm: specifier/);
});

test("npm: specifiers are taken apart into name, range and subpath", () => {
  assert.deepEqual(parseNpmSpecifier("npm:openai@^7.59.0"), {
    name: "openai",
    range: "^7.59.0",
    subpath: "",
  });
  assert.deepEqual(
    parseNpmSpecifier("npm:@modelcontextprotocol/sdk@^1.2/client"),
    {
      name: "@modelcontextprotocol/sdk",
      range: "^1.2",
      subpath: "/client",
    },
  );
  assert.equal(parseNpmSpecifier("jsr:@std/path"), null);
});

test("the npm exports have the same subpaths as deno.json, each with ESM, CJS and types", () => {
  const exports = npmExports(manifest);
  assert.deepEqual(Object.keys(exports), Object.keys(manifest.exports));
  for (const [subpath, source] of Object.entries(manifest.exports)) {
    const base = `./${source.slice(2, -3)}`;
    assert.deepEqual(exports[subpath], {
      import: { types: `${base}.d.mts`, default: `${base}.mjs` },
      require: { types: `${base}.d.cts`, default: `${base}.cjs` },
    });
  }
});

test("an export target outside the project or not a .ts file is refused", () => {
  assert.throws(
    () => entryName("./a/../../b.ts"),
    /Cannot build the npm package/,
  );
  assert.throws(() => entryName("mod.js"), /is not a \.\/….ts file/);
});

test("the generated package.json carries name, version, licence, engines and sideEffects", () => {
  const pkg = npmPackageJson(manifest, { openai: "^7" }, "An engine.");
  assert.equal(pkg.name, manifest.name);
  assert.equal(pkg.version, manifest.version);
  assert.equal(pkg.license, manifest.license);
  assert.deepEqual(pkg.engines, { node: ">=22" });
  assert.equal(pkg.sideEffects, false);
  assert.equal(pkg.description, "An engine.");
  assert.deepEqual(pkg.dependencies, { openai: "^7" });
  assert.equal(pkg.main, "./mod.cjs");
});

test("dependencies take their ranges from the imports map; an undeclared package fails", () => {
  const m = {
    ...manifest,
    imports: { openai: "npm:openai@^7.1.0", zod: "npm:zod@^4" },
  };
  assert.deepEqual(npmDependencies(m, ["openai", "openai"]), {
    openai: "^7.1.0",
  });
  assert.throws(
    () => npmDependencies(m, ["left-pad"]),
    /imports left-pad, which deno.json/,
  );
});

test("bare specifiers of built code are found in imports, requires and dynamic imports", () => {
  const code = [
    "/** @example",
    ' * import { x } from "@zqagent/core";',
    " */",
    'import { a as b } from "./chunk.mjs";',
    'import OpenAI from "openai";',
    'export { c } from "@scope/pkg/sub";',
    'const u = await import("undici");',
    'const f = require("node:fs");',
    'import "side-effect";',
  ].join("\n");
  assert.deepEqual(bareSpecifiersOf(code), [
    "@scope/pkg/sub",
    "node:fs",
    "openai",
    "side-effect",
    "undici",
  ]);
  const jsr = ["js", "r:"].join("");
  assert.deepEqual(
    classifySpecifiers(["node:fs", "openai/x", "@scope/pkg/sub", "url"]),
    {
      packages: ["@scope/pkg", "openai"],
      problems: [],
    },
  );
  assert.deepEqual(classifySpecifiers([`${jsr}@std/path`]).problems, [
    `"${jsr}@std/path" is an inline URL/registry specifier`,
  ]);
});

test("the package description is the first paragraph of the root module doc", () => {
  const code =
    "/**\n * `@x/y`: an engine —\n * as a library (manual §1).\n *\n * More.\n * @module\n */";
  assert.equal(moduleDocSummary(code), "@x/y: an engine — as a library.");
});

test(
  "the built package.json has exactly the deno.json exports, and its files exist",
  {
    skip: distRequired ? false : "run by deno task ci:npm right after the build",
  },
  () => {
    const pkg = JSON.parse(readFileSync(distPackage, "utf8")) as NpmPackageJson;
    assert.deepEqual(Object.keys(pkg.exports), Object.keys(manifest.exports));
    assert.deepEqual(pkg.exports, npmExports(manifest));
    assert.equal(pkg.name, manifest.name);
    assert.equal(pkg.version, manifest.version);
    for (const entry of Object.values(pkg.exports)) {
      for (const target of [entry.import, entry.require]) {
        assert.ok(existsSync(path.join(DIST_DIR, target.types)), target.types);
        assert.ok(
          existsSync(path.join(DIST_DIR, target.default)),
          target.default,
        );
      }
    }
    const ranges = Object.values(manifest.imports).map((v) => parseNpmSpecifier(v));
    for (const [name, range] of Object.entries(pkg.dependencies)) {
      assert.ok(
        ranges.some((r) => r?.name === name && r.range === range),
        `${name}@${range}`,
      );
    }
    assert.ok(existsSync(path.join(DIST_DIR, "README.md")));
    assert.ok(existsSync(path.join(DIST_DIR, "LICENSE")));
  },
);

// --- source rules (DESIGN §1, §2) ---

test("no source file has an inline npm: or jsr: specifier", () => {
  const offenders: string[] = [];
  for (const file of files) {
    for (const spec of inlineRegistrySpecifiers(readSource(ROOT, file))) {
      offenders.push(`${file}: ${spec}`);
    }
  }
  assert.deepEqual(offenders, []);
});

test("inline registry specifiers are found in code but not in comments", () => {
  // Not written whole, so this file passes its own guard.
  const scheme = ["np", "m:"].join("");
  const jsr = ["js", "r:"].join("");
  const code = [
    `// import x from "${scheme}openai";`,
    `import a from "${scheme}openai@7";`,
    `const b = await import("${scheme}undici");`,
    `export * from "${jsr}@std/path";`,
  ].join("\n");
  assert.deepEqual(inlineRegistrySpecifiers(code).sort(), [
    `${jsr}@std/path`,
    `${scheme}openai@7`,
    `${scheme}undici`,
  ]);
});

/** Library code: not _internal/, not tests or their helpers, not the apps around the library. */
function isLibraryFile(file: string): boolean {
  if (/^(_internal|npm|tests|bench|examples)\//.test(file)) return false;
  return !/(_test|_test_util|_test_helpers)\.ts$/.test(file);
}

test("no library file outside _internal/ uses the Deno namespace", () => {
  const offenders: string[] = [];
  for (const file of files) {
    if (!isLibraryFile(file)) continue;
    for (const line of denoUses(codeOnly(readSource(ROOT, file)))) {
      offenders.push(`${file}:${line}`);
    }
  }
  assert.deepEqual(
    offenders,
    [],
    "Deno-only code belongs in _internal/ with a Node fallback",
  );
});

test("the Deno namespace is found in code but not in comments or strings", () => {
  const code = '// Deno.Command\nconst s = "Deno.serve";\nconst p = Deno.permissions;\n';
  assert.deepEqual(denoUses(codeOnly(code)), [3]);
});

test("no source file augments the global scope", () => {
  const offenders: string[] = [];
  for (const file of files) {
    for (const hit of globalAugmentations(codeOnly(readSource(ROOT, file)))) {
      offenders.push(`${file}: ${hit}`);
    }
  }
  assert.deepEqual(offenders, []);
});

test("global augmentation is recognised in its usual forms", () => {
  const code = [
    "declare global { var x: number }",
    "globalThis.fetch = f;",
    "Object.defineProperty(globalThis, 'y', {});",
    "if (globalThis.Deno === undefined) {}",
  ].join("\n");
  assert.equal(globalAugmentations(code).length, 3);
});

test("every entry point is type-checked and doc-linted by deno task test", () => {
  const listed = (task: string) => new Set((manifest.tasks[task] ?? "").split(/\s+/));
  const missing: string[] = [];
  for (const source of Object.values(manifest.exports)) {
    const file = source.slice(2);
    for (const task of ["check", "doc-lint"]) {
      if (!listed(task).has(file)) missing.push(`${task}: ${file}`);
    }
  }
  assert.deepEqual(
    missing,
    [],
    'add these deno.json exports to the "check"/"doc-lint" tasks',
  );
});
