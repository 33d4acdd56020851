/**
 * Turns `deno.json` into the npm package's shape (DESIGN §1): entry points for the bundler, the
 * `exports` map, the dependency list and the generated `package.json`. Everything is derived
 * from `deno.json` (`name`, `version`, `license`, `exports`, `imports`), so a subpath or an npm
 * dependency added there flows into the npm build without edits here.
 *
 * Pure functions plus two file readers on `node:fs`, so the build (under Deno), the guard test
 * (under Deno and Node) and the CI driver share one definition.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import path from "node:path";

/** The parts of `deno.json` the npm build reads. */
export interface DenoManifest {
  /** Package name, e.g. `@zqagent/core`. */
  name: string;
  /** Package version (semver). */
  version: string;
  /** SPDX licence id. */
  license: string;
  /** JSR exports: subpath (`"."`, `"./engine"`) → source file (`"./engine/mod.ts"`). */
  exports: Record<string, string>;
  /** Import map: bare name → `npm:name@range` (DESIGN §1). */
  imports: Record<string, string>;
  /** `tasks`, for the guard that every entry point is type-checked and doc-linted. */
  tasks: Record<string, string>;
}

/** An `npm:` specifier taken apart. */
export interface NpmSpecifier {
  /** Package name (`openai`, `@types/node`). */
  name: string;
  /** Version range (`^7.59.0`), `""` when none was given. */
  range: string;
  /** Path inside the package after the version (`/client`), `""` when none. */
  subpath: string;
}

/** One `exports` entry of the generated `package.json`. */
export interface NpmExportEntry {
  /** ESM: declarations and code. */
  import: { types: string; default: string };
  /** CommonJS: declarations and code. */
  require: { types: string; default: string };
}

/** The generated `package.json`. */
export interface NpmPackageJson {
  name: string;
  version: string;
  description?: string;
  license: string;
  type: "module";
  engines: { node: string };
  sideEffects: false;
  main: string;
  module: string;
  types: string;
  exports: Record<string, NpmExportEntry>;
  dependencies: Record<string, string>;
}

/** Oldest Node.js the package supports (DESIGN §1: the maintained LTS lines; `openai@7` needs 22). */
export const NODE_ENGINES = ">=22";

/**
 * Reads `<root>/deno.json`.
 *
 * @throws {Error} "Cannot read deno.json: …" when the file is missing, not JSON, or lacks
 *   `name`, `version`, `exports` (an object) or `imports`.
 */
export function readDenoManifest(root: string): DenoManifest {
  const file = path.join(root, "deno.json");
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new Error(`Cannot read deno.json: ${(error as Error).message}`);
  }
  for (const key of ["name", "version", "license"] as const) {
    if (typeof raw[key] !== "string" || raw[key] === "") {
      throw new Error(
        `Cannot read deno.json: "${key}" must be a non-empty string`,
      );
    }
  }
  const exports = raw.exports;
  if (
    typeof exports !== "object" || exports === null || Array.isArray(exports)
  ) {
    throw new Error(
      'Cannot read deno.json: "exports" must be an object of subpath → file',
    );
  }
  return {
    name: raw.name as string,
    version: raw.version as string,
    license: raw.license as string,
    exports: exports as Record<string, string>,
    imports: (raw.imports ?? {}) as Record<string, string>,
    tasks: (raw.tasks ?? {}) as Record<string, string>,
  };
}

/**
 * Takes an `npm:` specifier apart (`npm:openai@^7`, `npm:@scope/pkg@1/sub`, `npm:/x@1/`).
 *
 * @returns `null` when `spec` is not an `npm:` specifier.
 */
export function parseNpmSpecifier(spec: string): NpmSpecifier | null {
  const m = /^npm:\/?((?:@[^/@]+\/)?[^/@]+)(?:@([^/]*))?(\/.*)?$/.exec(spec);
  if (!m) return null;
  return { name: m[1], range: m[2] ?? "", subpath: m[3] ?? "" };
}

/**
 * The npm package a bare import specifier names: `openai/resources` → `openai`,
 * `@scope/pkg/sub` → `@scope/pkg`.
 */
export function packageNameOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/**
 * Problems with the `imports` map: each key must equal its npm package name (a trailing-slash
 * key `"x/"` maps to `npm:/x@range/`) and each value must be an `npm:` specifier with a range,
 * so one bare import works under Deno, under Node and in the built package (DESIGN §1).
 *
 * @returns One message per bad entry; empty when the map is fine.
 */
export function importMapProblems(imports: Record<string, string>): string[] {
  const problems: string[] = [];
  for (const [key, value] of Object.entries(imports)) {
    const spec = parseNpmSpecifier(value);
    if (!spec) {
      problems.push(`"${key}": "${value}" is not an npm: specifier`);
      continue;
    }
    const name = key.endsWith("/") ? key.slice(0, -1) : key;
    if (name !== spec.name) {
      problems.push(
        `"${key}" maps to the npm package "${spec.name}"; the key must be its name`,
      );
    }
    if (spec.range === "") {
      problems.push(`"${key}": "${value}" has no version range`);
    }
    if (!key.endsWith("/") && spec.subpath !== "") {
      problems.push(
        `"${key}": "${value}" points inside a package; import the subpath instead`,
      );
    }
  }
  return problems;
}

/**
 * The bundler's entry name for a source file: `./engine/mod.ts` → `engine/mod` (the built
 * files mirror the source tree: `engine/mod.mjs`, `engine/mod.cjs`, `engine/mod.d.mts`, …).
 *
 * @throws {Error} When the file is not a relative `.ts` path.
 */
export function entryName(source: string): string {
  const m = /^\.\/(.+)\.ts$/.exec(source);
  if (!m || m[1].includes("..")) {
    throw new Error(
      `Cannot build the npm package: export target "${source}" is not a ./….ts file`,
    );
  }
  return m[1];
}

/** Bundler entries: entry name → source file, one per `deno.json` export. */
export function bundleEntries(manifest: DenoManifest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const source of Object.values(manifest.exports)) {
    out[entryName(source)] = source;
  }
  return out;
}

/**
 * The npm `exports` map: the same subpaths as `deno.json`, each with ESM and CommonJS code and
 * their own declaration files (`.d.mts` / `.d.cts`, so TypeScript's node16 resolution sees the
 * right module kind for each condition).
 */
export function npmExports(
  manifest: DenoManifest,
): Record<string, NpmExportEntry> {
  const out: Record<string, NpmExportEntry> = {};
  for (const [subpath, source] of Object.entries(manifest.exports)) {
    const base = `./${entryName(source)}`;
    out[subpath] = {
      import: { types: `${base}.d.mts`, default: `${base}.mjs` },
      require: { types: `${base}.d.cts`, default: `${base}.cjs` },
    };
  }
  return out;
}

/**
 * npm dependencies for the packages the built code uses: each name with the range from
 * `deno.json` `imports`.
 *
 * @param used Package names the built files import.
 * @throws {Error} "Cannot build the npm package: …" when a used package is not in `imports`.
 */
export function npmDependencies(
  manifest: DenoManifest,
  used: Iterable<string>,
): Record<string, string> {
  const ranges = new Map<string, string>();
  for (const value of Object.values(manifest.imports)) {
    const spec = parseNpmSpecifier(value);
    if (spec) ranges.set(spec.name, spec.range);
  }
  const deps: Record<string, string> = {};
  const missing: string[] = [];
  for (const name of [...new Set(used)].sort()) {
    const range = ranges.get(name);
    if (range === undefined) missing.push(name);
    else deps[name] = range;
  }
  if (missing.length > 0) {
    throw new Error(
      `Cannot build the npm package: the built code imports ${missing.join(", ")}, ` +
        `which deno.json "imports" does not declare`,
    );
  }
  return deps;
}

/**
 * The generated `package.json` (name, version and licence from `deno.json`, `engines.node`
 * {@link NODE_ENGINES}, `sideEffects: false`, `exports` from {@link npmExports}).
 *
 * @param dependencies From {@link npmDependencies}.
 * @param description One line for the npm page (optional).
 */
export function npmPackageJson(
  manifest: DenoManifest,
  dependencies: Record<string, string>,
  description?: string,
): NpmPackageJson {
  const exports = npmExports(manifest);
  const root = exports["."];
  const pkg: NpmPackageJson = {
    name: manifest.name,
    version: manifest.version,
    license: manifest.license,
    type: "module",
    engines: { node: NODE_ENGINES },
    sideEffects: false,
    main: root?.require.default ?? "",
    module: root?.import.default ?? "",
    types: root?.require.types ?? "",
    exports,
    dependencies,
  };
  if (description) pkg.description = description;
  if (!root) {
    delete (pkg as Partial<NpmPackageJson>).main;
    delete (pkg as Partial<NpmPackageJson>).module;
    delete (pkg as Partial<NpmPackageJson>).types;
  }
  return pkg;
}

/** Strips block comments and `//` comment lines, so doc examples are not taken for imports. */
function stripComments(code: string): string {
  return code.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

/**
 * Bare module specifiers (not relative, not absolute) that built JavaScript or declaration
 * code loads: `import … from`, `export … from`, side-effect `import "x"`, `import("x")`,
 * `require("x")`. Comments are ignored.
 */
export function bareSpecifiersOf(code: string): string[] {
  const text = stripComments(code);
  const found = new Set<string>();
  const patterns = [
    /^\s*(?:import|export)\b[^;"']*?\bfrom\s*["']([^"']+)["']/gm,
    /^\s*import\s*["']([^"']+)["']/gm,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
    /\brequire\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const re of patterns) {
    for (const m of text.matchAll(re)) {
      const spec = m[1];
      if (spec.startsWith(".") || spec.startsWith("/")) continue;
      found.add(spec);
    }
  }
  return [...found].sort();
}

const BUILTINS = new Set(builtinModules);

/**
 * Splits bare specifiers into npm package names and problems (an inline `npm:`/`jsr:`/URL
 * specifier). Node built-ins, with or without `node:`, are neither.
 */
export function classifySpecifiers(
  specifiers: Iterable<string>,
): { packages: string[]; problems: string[] } {
  const packages = new Set<string>();
  const problems: string[] = [];
  for (const spec of specifiers) {
    if (spec.startsWith("node:")) continue;
    if (/^[a-z][a-z0-9+.-]*:/i.test(spec)) {
      problems.push(`"${spec}" is an inline URL/registry specifier`);
      continue;
    }
    // The bundler itself writes `require("url")` for `import.meta.url` in CommonJS output.
    if (BUILTINS.has(packageNameOf(spec))) continue;
    packages.add(packageNameOf(spec));
  }
  return { packages: [...packages].sort(), problems };
}

/**
 * Inline `npm:`/`jsr:` specifiers in a source file (DESIGN §1 forbids them: dependencies are
 * declared once in `deno.json` `imports`).
 *
 * @returns The offending specifiers, in order of appearance.
 */
export function inlineRegistrySpecifiers(code: string): string[] {
  const text = stripComments(code);
  const found: string[] = [];
  const scheme = "(?:npm|jsr):";
  const patterns = [
    new RegExp(`\\bfrom\\s*["'](${scheme}[^"']*)["']`, "g"),
    new RegExp(`^\\s*import\\s*["'](${scheme}[^"']*)["']`, "gm"),
    new RegExp(`\\bimport\\(\\s*["'](${scheme}[^"']*)["']`, "g"),
    new RegExp(`\\brequire\\(\\s*["'](${scheme}[^"']*)["']`, "g"),
    new RegExp(
      `\\bimport\\.meta\\.resolve\\(\\s*["'](${scheme}[^"']*)["']`,
      "g",
    ),
  ];
  for (const re of patterns) {
    for (const m of text.matchAll(re)) found.push(m[1]);
  }
  return found;
}

/**
 * The first paragraph of a module doc (`/** … @module *\/`), as one line without Markdown
 * code ticks or "(manual §…)" references: the npm `description`.
 */
export function moduleDocSummary(code: string): string | undefined {
  const m = /^\s*\/\*\*([\s\S]*?)\*\//.exec(code);
  if (!m) return undefined;
  const lines = m[1].split("\n").map((l) => l.replace(/^\s*\* ?/, "").trim());
  const para: string[] = [];
  for (const line of lines) {
    if (line === "" && para.length > 0) break;
    if (line.startsWith("@")) break;
    if (line !== "") para.push(line);
  }
  const text = para.join(" ").replaceAll("`", "").replace(
    /\s*\((?:manual|DESIGN) [^)]*\)/g,
    "",
  )
    .trim();
  return text === "" ? undefined : text;
}
