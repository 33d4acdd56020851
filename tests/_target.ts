/**
 * Test helper: the code under test for the store suite (issue 11, "the same suite on Node 22
 * against the npm build"). The store tests and their helpers take every runtime value (classes,
 * enums, constants, `LeaseLostError` for `instanceof`) from here, so the same files run against
 * either target:
 *
 * - by default, the source tree (`../mod.ts`, `../store/mod.ts`, `../testing/mod.ts`);
 * - when env `ZQAGENT_TEST_PACKAGE_DIR` names a folder where `@zqagent/core` is installed (a
 *   project folder with `node_modules/`, or that `node_modules/` folder itself), the package's
 *   ESM entry points from there, each resolved through the installed `package.json`'s
 *   `exports[subpath].import`. npm/ci.ts's `store-npm` step sets it to a throwaway Node 22
 *   project where the packed tarball is installed, so the package's own dependencies (`pg`,
 *   `openai`) come from that project's `node_modules`, as for a user.
 *
 * Types always come from the source (the build's declarations are generated from it). Child
 * processes inherit the environment, so a child script that imports this module uses the same
 * target.
 *
 * @example A test file
 * ```ts
 * import type { SessionStore } from "../store/mod.ts";
 * import { store as target } from "../tests/_target.ts";
 *
 * const { MemorySessionStore } = target;
 * const store: SessionStore = new MemorySessionStore();
 * ```
 *
 * @module
 */
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { envString } from "../_internal/env.ts";

/** The environment variable naming the folder where the npm build is installed. */
export const PACKAGE_DIR_ENV = "ZQAGENT_TEST_PACKAGE_DIR";

/** The npm package's name. */
export const PACKAGE_NAME = "@zqagent/core";

/**
 * The root folder of the installed package (`…/node_modules/@zqagent/core`) under `dir`, which
 * is either a project folder (with `node_modules/`) or a `node_modules/` folder.
 *
 * @throws {Error} "Cannot load the npm build: …" when neither holds a `package.json` of
 *   `@zqagent/core`.
 */
export function installedPackageRoot(dir: string): string {
  const candidates = [
    path.join(dir, "node_modules", ...PACKAGE_NAME.split("/")),
    path.join(dir, ...PACKAGE_NAME.split("/")),
  ];
  for (const root of candidates) {
    const file = path.join(root, "package.json");
    if (!fs.existsSync(file)) continue;
    const name = JSON.parse(fs.readFileSync(file, "utf8")).name;
    if (name === PACKAGE_NAME) return fs.realpathSync(root);
  }
  throw new Error(
    `Cannot load the npm build: ${PACKAGE_DIR_ENV}="${dir}" holds no installed ${PACKAGE_NAME} ` +
      `(looked for ${candidates.map((c) => path.join(c, "package.json")).join(" and ")})`,
  );
}

/**
 * The absolute path of the ESM entry point of `subpath` (`"."`, `"./store"`, …) of the package
 * installed at `root`: `exports[subpath].import` of its `package.json` (a string, or an object
 * whose `default` is used).
 *
 * @throws {Error} "Cannot load the npm build: …" when the package exports no ESM entry for
 *   `subpath`, or the file it names is missing.
 */
export function entryPoint(root: string, subpath: string): string {
  const json = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
  const entry = json.exports?.[subpath]?.import;
  const rel = typeof entry === "string" ? entry : entry?.default;
  if (typeof rel !== "string") {
    throw new Error(
      `Cannot load the npm build: ${root}/package.json has no exports["${subpath}"].import`,
    );
  }
  const file = path.resolve(root, rel);
  if (!fs.existsSync(file)) {
    throw new Error(
      `Cannot load the npm build: exports["${subpath}"].import names ${file}, which is missing`,
    );
  }
  return file;
}

const packageDir = envString(PACKAGE_DIR_ENV);

/** Which code the tests run against: the source tree, or the installed npm build. */
export const TARGET: "source" | "npm" = packageDir === undefined ? "source" : "npm";

/**
 * The root folder of the installed package when {@link TARGET} is `"npm"` (real path), else
 * `undefined`.
 */
export const PACKAGE_ROOT: string | undefined = packageDir === undefined
  ? undefined
  : installedPackageRoot(packageDir);

async function load<T>(subpath: string, source: () => Promise<T>): Promise<T> {
  if (PACKAGE_ROOT === undefined) return await source();
  return await import(pathToFileURL(entryPoint(PACKAGE_ROOT, subpath)).href) as T;
}

/** `@zqagent/core` (`mod.ts`): engine, tools, providers, permissions, … */
export const core: typeof import("../mod.ts") = await load(".", () => import("../mod.ts"));

/** `@zqagent/core/store` (`store/mod.ts`): session stores, `SessionWorker`, `StoreHook`. */
export const store: typeof import("../store/mod.ts") = await load(
  "./store",
  () => import("../store/mod.ts"),
);

/** `@zqagent/core/testing` (`testing/mod.ts`): `MockOpenAIServer`, `ScriptedProvider`. */
export const testing: typeof import("../testing/mod.ts") = await load(
  "./testing",
  () => import("../testing/mod.ts"),
);
