/**
 * The npm and Node checks of `@zqagent/core` (`deno task ci:npm`, run by `.ci/run` after the
 * Deno test suite). Each step runs even when an earlier one failed (publint, attw and the smoke
 * test need the build), and a summary names the failures; the exit code is non-zero when any
 * step failed.
 *
 * 1. build `npm/dist/` and pack it (npm/build.ts);
 * 2. `publint --strict`: no errors, warnings or suggestions;
 * 3. `@arethetypeswrong/cli --profile node16`: green for node16 (CJS), node16 (ESM), bundler;
 * 4. smoke test of the tarball in a throwaway Node 22 project: `import` and `require` of every
 *    subpath, and a complete turn with tool calls and an approval against `MockOpenAIServer`
 *    (npm/smoke/);
 * 5. the test suite (every `*_test.ts` but `*_deno_test.ts`) on Node 22 with
 *    `--experimental-transform-types`, including npm/guard_test.ts against the fresh build;
 * 6. `deno check --doc` on every entry point: the `@example` code in the docs type-checks;
 * 7. `deno publish --dry-run` (JSR: no slow types, publishable file set).
 *
 * @example
 * ```sh
 * npx -y deno@2.9.6 task ci:npm
 * npx -y deno@2.9.6 task ci:npm --only smoke   # build, then one step (publint, attw, smoke,
 *                                             # node-tests, doc-examples or jsr)
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

async function smoke(build: BuildNpmResult): Promise<void> {
  const node = await node22Binary();
  const dir = mkdtempSync(path.join(os.tmpdir(), "zqagent-npm-smoke-"));
  try {
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
      build.tarball!,
    ], { cwd: dir });
    for (const f of ["_turn.cjs", "smoke.mjs", "smoke.cjs"]) {
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
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One Node test may run this long (ms) before it fails; a hung test never blocks CI. */
const NODE_TEST_TIMEOUT_MS = 120_000;
/** The whole Node test run is killed after this long (ms). */
const NODE_SUITE_TIMEOUT_MS = 20 * 60_000;

/** Counts of the Node test run, read from its summary lines. */
let nodeCounts: { passed: number; failed: number; skipped: number } | undefined;

async function nodeTests(): Promise<void> {
  const node = await node22Binary();
  const files = nodeTestFiles();
  const r = await run(node, [
    "--experimental-transform-types",
    "--no-warnings",
    "--test",
    "--test-reporter=spec",
    `--test-timeout=${NODE_TEST_TIMEOUT_MS}`,
    ...files,
  ], {
    capture: "tee",
    env: { NPM_DIST_REQUIRED: "1", NO_COLOR: "1" },
    timeoutMs: NODE_SUITE_TIMEOUT_MS,
  });
  if (r.timedOut) {
    throw new Error(
      `Cannot pass the test suite on Node 22: still running after ${NODE_SUITE_TIMEOUT_MS} ms`,
    );
  }
  const count = (label: string) => Number(new RegExp(`ℹ ${label} (\\d+)`).exec(r.stdout)?.[1] ?? 0);
  nodeCounts = {
    passed: count("pass"),
    failed: count("fail"),
    skipped: count("skipped"),
  };
  if (r.code !== 0 || nodeCounts.passed === 0) {
    throw new Error(
      `Cannot pass the test suite on Node 22: exit code ${r.code}, ${nodeCounts.failed} failed`,
    );
  }
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
  "node-tests",
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
    await step("smoke", () => smoke(build!));
    rmSync(build.tarball!, { force: true });
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
  if (nodeCounts) {
    console.log(
      `node: ${nodeCounts.passed} passed, ${nodeCounts.failed} failed, ${nodeCounts.skipped} skipped`,
    );
  }
  return failedSteps === 0 ? 0 : 1;
}

if (import.meta.main) process.exitCode = await main();
