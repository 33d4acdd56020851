// Runs tsdown (Node side) for npm/build.ts: `node npm/_bundle.mjs <plan.json> <tools dir>`.
// The plan is computed from deno.json by npm/build.ts; this file only hands it to tsdown.
// tsdown (rolldown + rolldown-plugin-dts) is the bundler the design names (DESIGN §1): it
// writes ESM (.mjs) and CommonJS (.cjs) with shared chunks, and .d.mts/.d.cts declarations.
//
// Standalone entries (plan.standalone: modules the package starts as their own process, such as
// the isolated file-tool child of DESIGN §5) are built afterwards, each into one self-contained
// ESM file in plan.standaloneDir (npm packages bundled in, no chunks), and every
// `new URL("./<name>.ts", import.meta.url)` naming one in the library code is rewritten to the
// bundled file's name, which npm/build.ts then places next to the output that loads it.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
// tsdown is installed in npm/tools/node_modules (build-only), not beside this file.
const fromTools = createRequire(path.join(process.argv[3], "package.json"));
const { build } = await import(pathToFileURL(fromTools.resolve("tsdown")).href);

/** Bare specifiers (npm packages, node: built-ins) stay external; our own files are bundled. */
function isExternal(id) {
  if (id.startsWith("node:")) return true;
  if (id.startsWith(".") || id.startsWith("/") || id.startsWith("\0")) {
    return false;
  }
  if (/^[A-Za-z]:[\\/]/.test(id)) return false; // Windows absolute path
  if (/^[a-z][a-z0-9+.-]*:/i.test(id)) return false; // other URL schemes: let rolldown fail
  return true;
}

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * Rewrites `new URL("./_x.ts", import.meta.url)` to `new URL("./_x.mjs", import.meta.url)` in
 * modules beside a standalone entry's source `_x.ts`, so the built code loads the bundled file.
 */
function standaloneReferences(entries) {
  const rules = entries.map((e) => {
    const source = path.resolve(plan.root, e.source);
    const base = path.basename(source);
    return {
      dir: path.dirname(source),
      output: e.output,
      pattern: new RegExp(
        `new URL\\(\\s*(["'])\\./${escapeRegExp(base)}\\1\\s*,\\s*import\\.meta\\.url\\s*\\)`,
        "g",
      ),
    };
  });
  return {
    name: "zqagent:standalone-references",
    transform(code, id) {
      let out = code;
      for (const rule of rules) {
        if (path.dirname(id) !== rule.dir) continue;
        out = out.replace(rule.pattern, `new URL("./${rule.output}", import.meta.url)`);
      }
      return out === code ? null : { code: out, map: null };
    },
  };
}

const common = {
  config: false,
  cwd: plan.root,
  platform: "node",
  target: "node22",
  tsconfig: plan.tsconfig,
  fixedExtension: true,
  sourcemap: false,
  treeshake: true,
  shims: false,
  logLevel: plan.quiet ? "warn" : "info",
  failOnWarn: false,
  publint: false,
  attw: false,
  checks: { pluginTimings: false },
  exports: false,
  report: false,
};

await build({
  ...common,
  entry: plan.entry,
  format: ["esm", "cjs"],
  outDir: plan.outDir,
  clean: true,
  hash: true,
  deps: { neverBundle: isExternal },
  dts: { tsconfig: plan.tsconfig, sourcemap: false },
  plugins: [standaloneReferences(plan.standalone ?? [])],
});

for (const entry of plan.standalone ?? []) {
  const keepOut = new Set(entry.external);
  await build({
    ...common,
    entry: { [entry.output.replace(/\.mjs$/, "")]: entry.source },
    format: ["esm"],
    outDir: plan.standaloneDir,
    clean: false,
    hash: false,
    // Started as `deno run <file>` with no config or node_modules to resolve from: everything
    // it loads is bundled in, in one file, except packages its code never loads.
    deps: {
      neverBundle: (id) => id.startsWith("node:") || keepOut.has(id),
      alwaysBundle: (id) => !id.startsWith("node:") && !keepOut.has(id),
      onlyBundle: false,
    },
    outputOptions: { codeSplitting: false },
    dts: false,
  });
}
