// ESM smoke test of the packed package, run by npm/ci.ts in a throwaway Node 22 project:
// `import`s every subpath (SMOKE_SUBPATHS, from deno.json), then runs a complete turn.
import assert from "node:assert/strict";
import process from "node:process";
import turn from "./_turn.cjs";

const name = process.env.SMOKE_PACKAGE;
const subpaths = JSON.parse(process.env.SMOKE_SUBPATHS);
assert.ok(
  name && subpaths.length > 0,
  "SMOKE_PACKAGE and SMOKE_SUBPATHS are set",
);
for (const subpath of subpaths) {
  const spec = subpath === "." ? name : `${name}/${subpath.slice(2)}`;
  const mod = await import(spec);
  assert.ok(Object.keys(mod).length > 0, `${spec} has exports`);
  console.log(`esm: import ${spec} (${Object.keys(mod).length} exports)`);
}
const core = await import(name);
const testing = await import(`${name}/testing`);
const r = await turn.runTurn(core, testing, "esm");
console.log(
  `esm: a complete turn ran: ${r.events} events, ${r.tools} tool calls, completed`,
);
