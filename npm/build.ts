/**
 * Builds the npm package of `@zqagent/core` into `npm/dist/` (DESIGN §1): `deno task build:npm`.
 *
 * Everything comes from `deno.json`: each export becomes an ESM (`.mjs`) and a CommonJS
 * (`.cjs`) entry with `.d.mts`/`.d.cts` declarations; npm packages stay external and become
 * `dependencies` with the ranges of the `imports` map (only those the built code loads);
 * `package.json` gets name, version and licence from `deno.json`, `engines.node >= 22` and
 * `sideEffects: false`; README.md and LICENSE are copied. Modules the package starts as their own
 * process ({@link STANDALONE_ENTRIES}: the isolated file-tool child of `sandbox.deno`) are
 * bundled into one self-contained `.mjs` each, placed next to the built code that starts them.
 *
 * The bundler is tsdown 0.21 (rolldown + rolldown-plugin-dts): a maintained library bundler
 * that writes dual ESM/CJS output with shared chunks (one copy of each class for all subpaths)
 * and bundled declarations, and works on Node 20 and 22. dnt is not reachable (JSR), so it is
 * not an option. tsdown and the checkers live in `npm/tools/package.json` (build-only, never in the
 * published package) and run on Node 22 (`npx -y node@22`).
 *
 * @example Build, then pack
 * ```sh
 * npx -y deno@2.9.6 task build:npm          # writes npm/dist/
 * npx -y deno@2.9.6 task build:npm --pack   # also writes npm/zqagent-core-<version>.tgz
 * npx -y deno@2.9.6 task build:npm --allow-missing   # skip exports whose file is not written yet
 * ```
 *
 * @module
 */
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import {
  bareSpecifiersOf,
  bundleEntries,
  classifySpecifiers,
  type DenoManifest,
  moduleDocSummary,
  npmDependencies,
  type NpmPackageJson,
  npmPackageJson,
  readDenoManifest,
} from "./_manifest.ts";
import {
  denoBinary,
  DIST_DIR,
  ensureBuildTools,
  mustRun,
  node22Binary,
  NPM_DIR,
  ROOT,
  TOOLS_DIR,
} from "./_run.ts";

/** Options of {@link buildNpm}. */
export interface BuildNpmOptions {
  /** Also `npm pack` the result into `npm/` (default false). */
  pack?: boolean;
  /** Less output (default false). */
  quiet?: boolean;
  /**
   * Leave out exports whose source file does not exist yet, with a warning (default false).
   * For local work while a subsystem is half-written; CI never sets it.
   */
  allowMissing?: boolean;
}

/**
 * A module the package starts as its own process instead of importing it: built into one
 * self-contained ESM file (its npm packages bundled in) and placed next to every built file that
 * loads it with `new URL("./<name>.ts", import.meta.url)`, a reference the build rewrites to
 * `./<output>` (npm/_bundle.mjs).
 */
export interface StandaloneEntry {
  /** Source file, relative to the project root (`./permissions/_file_tool_child.ts`). */
  source: string;
  /** Name of the bundled file (`_file_tool_child.mjs`). */
  output: string;
  /** npm packages left out of the bundle because its code never loads them. */
  external: string[];
}

/**
 * The standalone entries of the package: the isolated file-tool child of `sandbox.deno`
 * (DESIGN §5), run as `deno run --no-config <file>`, where nothing could resolve a bare import.
 * `undici` and `fetch-socks` are loaded only for a SOCKS proxy, which the child never uses (its
 * environment is cleared and it fetches no URL).
 */
export const STANDALONE_ENTRIES: readonly StandaloneEntry[] = [{
  source: "./permissions/_file_tool_child.ts",
  output: "_file_tool_child.mjs",
  external: ["undici", "fetch-socks"],
}];

/**
 * The files a built module loads relative to its own location:
 * `new URL("./x", import.meta.url)` in ESM, and the form tsdown gives it in CommonJS
 * (`new URL("./x", require("url").pathToFileURL(__filename).href)`).
 *
 * @param code Built JavaScript.
 * @returns The relative specifiers, in order of appearance.
 */
export function relativeUrlReferences(code: string): string[] {
  const re =
    /new URL\(\s*["'](\.{1,2}\/[^"']+)["']\s*,\s*(?:import\.meta\.url|require\(["'](?:node:)?url["']\)\.pathToFileURL\(__filename\)\.href)\s*\)/g;
  return [...code.matchAll(re)].map((m) => m[1]);
}

/** What {@link buildNpm} produced. */
export interface BuildNpmResult {
  /** The `deno.json` the build read. */
  manifest: DenoManifest;
  /** The generated `package.json`. */
  packageJson: NpmPackageJson;
  /** Absolute path of the packed tarball, when `pack` was set. */
  tarball?: string;
}

/** All files under `dir`, relative, sorted. */
function listFiles(dir: string, prefix = ""): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      out.push(...listFiles(path.join(dir, entry.name), rel));
    } else out.push(rel);
  }
  return out.sort();
}

/**
 * Copies each bundled standalone entry from `builtDir` next to every built file that loads it.
 *
 * @throws {Error} "Cannot build the npm package: …" when an entry was not built, or no built
 *   file loads it (its reference in the source changed and was not rewritten).
 */
function placeStandaloneEntries(builtDir: string): void {
  const files = listFiles(DIST_DIR).filter((f) => /\.[mc]js$/.test(f));
  for (const entry of STANDALONE_ENTRIES) {
    const built = path.join(builtDir, entry.output);
    if (!existsSync(built)) {
      throw new Error(`Cannot build the npm package: ${entry.source} was not bundled`);
    }
    const dirs = new Set<string>();
    for (const file of files) {
      const code = readFileSync(path.join(DIST_DIR, file), "utf8");
      if (relativeUrlReferences(code).includes(`./${entry.output}`)) {
        dirs.add(path.dirname(file));
      }
    }
    if (dirs.size === 0) {
      throw new Error(
        `Cannot build the npm package: no built file loads ${entry.output} (${entry.source} ` +
          `is started as new URL("./${path.basename(entry.source)}", import.meta.url))`,
      );
    }
    for (const dir of dirs) copyFileSync(built, path.join(DIST_DIR, dir, entry.output));
  }
}

/**
 * Builds `npm/dist/` from `deno.json`.
 *
 * @throws {Error} "Cannot build the npm package: …" when tsdown fails, when the built code
 *   imports a package that `deno.json` `imports` does not declare (or a bare Node built-in),
 *   when an export's files are missing from the output, or when a built file loads a file
 *   relative to itself that is not in the package.
 */
export async function buildNpm(
  options: BuildNpmOptions = {},
): Promise<BuildNpmResult> {
  const manifest = readDenoManifest(ROOT);
  if (options.allowMissing) {
    for (const [subpath, source] of Object.entries(manifest.exports)) {
      if (existsSync(path.join(ROOT, source))) continue;
      console.warn(
        `warning: leaving out "${subpath}": ${source} does not exist`,
      );
      delete manifest.exports[subpath];
    }
  }
  await ensureBuildTools();
  // The declaration build resolves npm types (openai, …) from the project's node_modules.
  await mustRun("install the deno.json imports (deno install)", denoBinary(), [
    "install",
  ]);
  const node = await node22Binary();

  const tmp = mkdtempSync(path.join(os.tmpdir(), "zqagent-npm-build-"));
  try {
    const standaloneDir = path.join(tmp, "standalone");
    const plan = {
      root: ROOT,
      entry: bundleEntries(manifest),
      outDir: DIST_DIR,
      tsconfig: path.join(NPM_DIR, "tsconfig.build.json"),
      quiet: options.quiet ?? false,
      standalone: STANDALONE_ENTRIES,
      standaloneDir,
    };
    const planFile = path.join(tmp, "plan.json");
    writeFileSync(planFile, JSON.stringify(plan));
    await mustRun("build the npm package (tsdown)", node, [
      path.join(NPM_DIR, "_bundle.mjs"),
      planFile,
      TOOLS_DIR,
    ], { cwd: NPM_DIR });
    placeStandaloneEntries(standaloneDir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }

  const files = listFiles(DIST_DIR);
  const fileSet = new Set(files);
  const have = (rel: string) => fileSet.has(rel);
  const specifiers = new Set<string>();
  for (const file of files) {
    if (!/\.(mjs|cjs|d\.mts|d\.cts)$/.test(file)) continue;
    for (
      const s of bareSpecifiersOf(
        readFileSync(path.join(DIST_DIR, file), "utf8"),
      )
    ) {
      specifiers.add(s);
    }
  }
  // Files a module loads relative to its own URL must be in the package too.
  for (const file of files) {
    if (!/\.[mc]js$/.test(file)) continue;
    const code = readFileSync(path.join(DIST_DIR, file), "utf8");
    for (const ref of relativeUrlReferences(code)) {
      const target = path.posix.join(path.posix.dirname(file), ref);
      if (!have(target)) {
        throw new Error(
          `Cannot build the npm package: dist/${file} loads ${ref} relative to itself, and ` +
            "it is not in the package",
        );
      }
    }
  }
  const { packages, problems } = classifySpecifiers(specifiers);
  if (problems.length > 0) {
    throw new Error(`Cannot build the npm package: ${problems.join("; ")}`);
  }
  const dependencies = npmDependencies(manifest, packages);
  const description = moduleDocSummary(
    readFileSync(path.join(ROOT, "mod.ts"), "utf8"),
  );
  const packageJson = npmPackageJson(manifest, dependencies, description);

  for (const [subpath, entry] of Object.entries(packageJson.exports)) {
    for (
      const target of [
        entry.import.types,
        entry.import.default,
        entry.require.types,
      ]
    ) {
      if (!have(target.slice(2))) {
        throw new Error(
          `Cannot build the npm package: "${subpath}" has no ${target} in dist/`,
        );
      }
    }
    if (!have(entry.require.default.slice(2))) {
      throw new Error(
        `Cannot build the npm package: "${subpath}" has no ${entry.require.default} in dist/`,
      );
    }
  }

  writeFileSync(
    path.join(DIST_DIR, "package.json"),
    JSON.stringify(packageJson, null, 2) + "\n",
  );
  copyFileSync(path.join(ROOT, "README.md"), path.join(DIST_DIR, "README.md"));
  copyFileSync(path.join(ROOT, "LICENSE"), path.join(DIST_DIR, "LICENSE"));

  let tarball: string | undefined;
  if (options.pack) {
    const r = await mustRun("pack the npm package", "npm", [
      "pack",
      "--json",
      "--pack-destination",
      NPM_DIR,
    ], { cwd: DIST_DIR, capture: true });
    const info = JSON.parse(r.stdout) as { filename: string }[];
    tarball = path.join(NPM_DIR, info[0].filename);
  }
  if (!options.quiet) {
    const deps = Object.entries(dependencies).map(([n, r]) => `${n}@${r}`).join(
      ", ",
    );
    console.log(
      `npm/dist: ${manifest.name}@${manifest.version}, ` +
        `${Object.keys(packageJson.exports).length} subpaths, dependencies: ${deps || "none"}` +
        (tarball ? `\npacked: ${path.relative(ROOT, tarball)}` : ""),
    );
  }
  return { manifest, packageJson, tarball };
}

if (import.meta.main) {
  try {
    await buildNpm({
      pack: process.argv.includes("--pack"),
      allowMissing: process.argv.includes("--allow-missing"),
    });
  } catch (error) {
    console.error((error as Error).message);
    process.exit(1);
  }
}
