// Runs tsdown (Node side) for npm/build.ts: `node npm/_bundle.mjs <plan.json> <tools dir>`.
// The plan is computed from deno.json by npm/build.ts; this file only hands it to tsdown.
// tsdown (rolldown + rolldown-plugin-dts) is the bundler the design names (DESIGN §1): it
// writes ESM (.mjs) and CommonJS (.cjs) with shared chunks, and .d.mts/.d.cts declarations.
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

await build({
  config: false,
  cwd: plan.root,
  entry: plan.entry,
  format: ["esm", "cjs"],
  platform: "node",
  target: "node22",
  outDir: plan.outDir,
  tsconfig: plan.tsconfig,
  clean: true,
  fixedExtension: true,
  hash: true,
  sourcemap: false,
  treeshake: true,
  deps: { neverBundle: isExternal },
  dts: { tsconfig: plan.tsconfig, sourcemap: false },
  shims: false,
  logLevel: plan.quiet ? "warn" : "info",
  failOnWarn: false,
  publint: false,
  attw: false,
  checks: { pluginTimings: false },
  exports: false,
  report: false,
});
