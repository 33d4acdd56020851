// CommonJS smoke test of the packed package, run by npm/ci.ts in a throwaway Node 22 project:
// `require`s every subpath (SMOKE_SUBPATHS, from deno.json), checks that the CommonJS and ESM
// builds export the same names, then runs a complete turn with the required modules.
"use strict";
const assert = require("node:assert/strict");
const process = require("node:process");
const { runTurn } = require("./_turn.cjs");

async function main() {
  const name = process.env.SMOKE_PACKAGE;
  const subpaths = JSON.parse(process.env.SMOKE_SUBPATHS);
  assert.ok(
    name && subpaths.length > 0,
    "SMOKE_PACKAGE and SMOKE_SUBPATHS are set",
  );
  for (const subpath of subpaths) {
    const spec = subpath === "." ? name : `${name}/${subpath.slice(2)}`;
    const mod = require(spec);
    const esm = await import(spec);
    const cjsNames = Object.keys(mod).filter((k) => k !== "__esModule").sort();
    const esmNames = Object.keys(esm).filter((k) => k !== "default" && k !== "module.exports")
      .sort();
    assert.ok(cjsNames.length > 0, `${spec} has exports`);
    assert.deepEqual(
      cjsNames,
      esmNames,
      `${spec}: CommonJS and ESM export the same names`,
    );
    console.log(
      `cjs: require ${spec} (${cjsNames.length} exports, same as ESM)`,
    );
  }
  const r = await runTurn(require(name), require(`${name}/testing`), "cjs");
  console.log(
    `cjs: a complete turn ran: ${r.events} events, ${r.tools} tool calls, completed`,
  );
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
