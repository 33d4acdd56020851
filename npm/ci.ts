/**
 * The npm and Node checks of `@zqagent/core` (`deno task ci:npm`, run by `.ci/run` after the
 * Deno test suite). Each step runs even when an earlier one failed (publint, attw, smoke and
 * store-npm need the build), and a summary names the failures; the exit code is non-zero when
 * any step failed.
 *
 * 1. build `npm/dist/` and pack it (npm/build.ts);
 * 2. `publint --strict`: no errors, warnings or suggestions;
 * 3. `@arethetypeswrong/cli --profile node16`: green for node16 (CJS), node16 (ESM), bundler;
 * 4. smoke test of the tarball in a throwaway Node 22 project: `import` and `require` of every
 *    subpath, and a complete turn with tool calls and an approval against `MockOpenAIServer`
 *    (npm/smoke/); then, under Deno, the installed ESM build's isolated file tools
 *    (`sandbox.deno`) run in the child the package ships and refuse paths outside the workspace
 *    (npm/smoke/smoke_deno.mjs);
 * 5. store-npm: the distributed-session store suite (every `store/*_test.ts` and
 *    tests/target_test.ts) on Node 22 against the packed build, installed once (with its
 *    dependencies, `pg` among them, as `npm install` gives a user) in the throwaway project of
 *    step 4: `ZQAGENT_TEST_PACKAGE_DIR` points tests/_target.ts at it (issue 11);
 * 6. the test suite (every `*_test.ts` but `*_deno_test.ts`) on Node 22 from source with
 *    `--experimental-transform-types`, including npm/guard_test.ts against the fresh build;
 * 7. `deno check --doc` on every entry point: the `@example` code in the docs type-checks;
 * 8. `deno publish --dry-run` (JSR: no slow types, publishable file set).
 *
 * @example
 * ```sh
 * npx -y deno@2.9.6 task ci:npm
 * npx -y deno@2.9.6 task ci:npm --only smoke   # build, then one step (publint, attw, smoke,
 *                                             # store-npm, node-tests, doc-examples or jsr)
 * ```
 *
 * @module
 */
import { copyFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { buildNpm, type BuildNpmResult } from "./build.ts";
import { readDenoManifest } from "./_manifest.ts";
import {
  denoBinary,
  DIST_DIR,
  mustRun,
  node22Binary,
  NPM_DIR,
  ROOT,
  run,
  toolBin,
} from "./_run.ts";

/** Folders never searched for test files. */
const SKIP_DIRS = new Set([
  "node_modules",
  "dist",
  "fixtures",
  "demo_project",
  ".git",
  ".agent",
]);

/** Every `*_test.ts` under the project except `*_deno_test.ts`, relative, sorted. */
export function nodeTestFiles(dir: string = ROOT, prefix = ""): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      if (SKIP_DIRS.has(entry.name) || entry.name.startsWith(".")) continue;
      out.push(...nodeTestFiles(path.join(dir, entry.name), rel));
    } else if (
      entry.name.endsWith("_test.ts") && !entry.name.endsWith("_deno_test.ts")
    ) {
      out.push(rel);
    }
  }
  return out.sort();
}

async function publint(): Promise<void> {
  const node = await node22Binary();
  const r = await run(node, [toolBin("publint"), "--strict", DIST_DIR], {
    capture: true,
    cwd: NPM_DIR,
  });
  process.stdout.write(r.stdout + r.stderr);
  if (r.code !== 0 || !/All good!/.test(r.stdout)) {
    throw new Error("Cannot pass publint: it reported issues (see above)");
  }
}

async function attw(tarball: string): Promise<void> {
  const node = await node22Binary();
  await mustRun(
    "pass @arethetypeswrong/cli (node16 CJS, node16 ESM, bundler)",
    node,
    [
      toolBin("@arethetypeswrong/cli"),
      tarball,
      "--profile",
      "node16",
      "--format",
      "table-flipped",
    ],
    { cwd: NPM_DIR },
  );
}

/**
 * Installs the packed tarball into `dir`, a fresh throwaway Node project outside the source
 * tree, the way a user would (`npm install <tarball>`): the package's `dependencies` (`pg`,
 * `openai`, …) land in `dir/node_modules`, so nothing resolves from the source tree's
 * `node_modules`.
 */
async function installTarball(tarball: string, dir: string): Promise<void> {
  writeFileSync(
    path.join(dir, "package.json"),
    JSON.stringify(
      { name: "zqagent-smoke", private: true, type: "commonjs" },
      null,
      2,
    ),
  );
  await mustRun("install the tarball in a throwaway project", "npm", [
    "install",
    "--no-audit",
    "--no-fund",
    "--loglevel=error",
    tarball,
  ], { cwd: dir });
}

async function smoke(build: BuildNpmResult, dir: string): Promise<void> {
  const node = await node22Binary();
  for (const f of ["_turn.cjs", "smoke.mjs", "smoke.cjs", "smoke_deno.mjs"]) {
    copyFileSync(path.join(NPM_DIR, "smoke", f), path.join(dir, f));
  }
  const env = {
    SMOKE_PACKAGE: build.manifest.name,
    SMOKE_SUBPATHS: JSON.stringify(Object.keys(build.manifest.exports)),
  };
  await mustRun("import every subpath and run a turn (ESM)", node, [
    "smoke.mjs",
  ], {
    cwd: dir,
    env,
  });
  await mustRun("require every subpath and run a turn (CommonJS)", node, [
    "smoke.cjs",
  ], {
    cwd: dir,
    env,
  });
  await mustRun("isolate the file tools of the packed build under Deno", denoBinary(), [
    "run",
    "-A",
    "--no-lock",
    "smoke_deno.mjs",
  ], { cwd: dir, env });
}

/** One Node test may run this long (ms) before it fails; a hung test never blocks CI. */
const NODE_TEST_TIMEOUT_MS = 120_000;
/** The whole Node test run is killed after this long (ms). */
const NODE_SUITE_TIMEOUT_MS = 20 * 60_000;

/** Counts of a Node test run, read from its summary lines. */
interface NodeCounts {
  passed: number;
  failed: number;
  skipped: number;
}

/** Counts of the node-tests step (the whole suite from source). */
let nodeCounts: NodeCounts | undefined;
/** Counts of the store-npm step (the store suite against the packed build). */
let storeNpmCounts: NodeCounts | undefined;

/**
 * Runs `files` with `node --test` (Node 22, spec reporter, output streamed and captured) and
 * hands the pass/fail/skip counts to `onCounts`, also when the run failed.
 *
 * @throws {Error} "Cannot pass <what>: …" on a non-zero exit, no passing test, or a timeout.
 */
async function runNodeTests(
  what: string,
  files: string[],
  options: { env: Record<string, string>; onCounts: (counts: NodeCounts) => void },
): Promise<void> {
  const node = await node22Binary();
  const r = await run(node, [
    "--experimental-transform-types",
    "--no-warnings",
    "--test",
    "--test-reporter=spec",
    `--test-timeout=${NODE_TEST_TIMEOUT_MS}`,
    ...files,
  ], {
    capture: "tee",
    env: { NO_COLOR: "1", ...options.env },
    timeoutMs: NODE_SUITE_TIMEOUT_MS,
  });
  if (r.timedOut) {
    throw new Error(`Cannot pass ${what}: still running after ${NODE_SUITE_TIMEOUT_MS} ms`);
  }
  const count = (label: string) => Number(new RegExp(`ℹ ${label} (\\d+)`).exec(r.stdout)?.[1] ?? 0);
  const counts = { passed: count("pass"), failed: count("fail"), skipped: count("skipped") };
  options.onCounts(counts);
  if (r.code !== 0 || counts.passed === 0) {
    throw new Error(`Cannot pass ${what}: exit code ${r.code}, ${counts.failed} failed`);
  }
}

function nodeTests(): Promise<void> {
  return runNodeTests("the test suite on Node 22", nodeTestFiles(), {
    env: { NPM_DIST_REQUIRED: "1" },
    onCounts: (c) => (nodeCounts = c),
  });
}

/**
 * The store suite's files for the store-npm step: every `store/*_test.ts` (they take the code
 * under test from tests/_target.ts) but the unit tests of private modules (`store/_*_test.ts`,
 * not in the package), and tests/target_test.ts (which proves the npm build is the one loaded),
 * relative to the project root.
 */
export function storeNpmTestFiles(): string[] {
  const store = nodeTestFiles(path.join(ROOT, "store"), "store")
    .filter((f) => !path.basename(f).startsWith("_"));
  return [...store, "tests/target_test.ts"];
}

/**
 * The store suite on Node 22 against the build installed in `dir` (`ZQAGENT_TEST_PACKAGE_DIR`,
 * read by tests/_target.ts; `CI_REQUIRE_REAL` and the rest of the environment pass through, so
 * under CI a missing PostgreSQL fails instead of skipping).
 */
function storeNpm(dir: string): Promise<void> {
  return runNodeTests("the store suite on Node 22 against the npm build", storeNpmTestFiles(), {
    env: { ZQAGENT_TEST_PACKAGE_DIR: dir },
    onCounts: (c) => (storeNpmCounts = c),
  });
}

async function docExamples(build: BuildNpmResult | undefined): Promise<void> {
  const manifest = build?.manifest ?? readDenoManifest(ROOT);
  await mustRun(
    "type-check the @example code of every entry point (deno check --doc)",
    denoBinary(),
    [
      "check",
      "--doc",
      ...Object.values(manifest.exports),
    ],
  );
}

async function jsrDryRun(): Promise<void> {
  await mustRun("pass deno publish --dry-run", denoBinary(), [
    "publish",
    "--dry-run",
    "--allow-dirty",
  ]);
}

/** Step names accepted by `--only`. */
const STEPS = [
  "build",
  "publint",
  "attw",
  "smoke",
  "store-npm",
  "node-tests",
  "doc-examples",
  "jsr",
] as const;

async function main(): Promise<number> {
  const onlyAt = process.argv.indexOf("--only");
  const only = onlyAt >= 0 ? process.argv[onlyAt + 1] : undefined;
  if (only !== undefined && !(STEPS as readonly string[]).includes(only)) {
    console.error(
      `Cannot run step "${only}": choose one of ${STEPS.join(", ")}`,
    );
    return 2;
  }
  const wants = (step: string) => only === undefined || only === step || step === "build";
  const results: { step: string; error?: string }[] = [];
  const step = async (name: string, fn: () => Promise<void>) => {
    if (!wants(name)) return;
    console.log(`\n=== npm ci: ${name} ===`);
    try {
      await fn();
      results.push({ step: name });
    } catch (error) {
      console.error((error as Error).message);
      results.push({
        step: name,
        error: (error as Error).message.split("\n")[0],
      });
    }
  };

  let build: BuildNpmResult | undefined;
  await step("build", async () => {
    build = await buildNpm({
      pack: true,
      allowMissing: process.argv.includes("--allow-missing"),
    });
  });
  if (build) {
    await step("publint", publint);
    await step("attw", () => attw(build!.tarball!));
    // One throwaway project outside the source tree for smoke and store-npm: the tarball is
    // installed once, by whichever of them runs first; both are removed after the last.
    const project = mkdtempSync(path.join(os.tmpdir(), "zqagent-npm-smoke-"));
    let install: Promise<void> | undefined;
    const installed = async () => {
      await (install ??= installTarball(build!.tarball!, project));
      return project;
    };
    try {
      await step("smoke", async () => smoke(build!, await installed()));
      await step("store-npm", async () => storeNpm(await installed()));
    } finally {
      rmSync(project, { recursive: true, force: true });
      rmSync(build.tarball!, { force: true });
    }
  }
  await step("node-tests", nodeTests);
  await step("doc-examples", () => docExamples(build));
  await step("jsr", jsrDryRun);

  console.log("\n=== npm ci: summary ===");
  for (const r of results) {
    console.log(
      `${r.error ? "FAIL" : "ok  "} ${r.step}${r.error ? `: ${r.error}` : ""}`,
    );
  }
  const failedSteps = results.filter((r) => r.error).length;
  console.log(
    `npm checks: ${results.length - failedSteps} passed, ${failedSteps} failed`,
  );
  if (storeNpmCounts) {
    const c = storeNpmCounts;
    console.log(
      `store-npm (Node 22, npm build): ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`,
    );
  }
  if (nodeCounts) {
    console.log(
      `node: ${nodeCounts.passed} passed, ${nodeCounts.failed} failed, ${nodeCounts.skipped} skipped`,
    );
  }
  return failedSteps === 0 ? 0 : 1;
}

if (import.meta.main) process.exitCode = await main();
