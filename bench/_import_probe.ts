/**
 * Child of `import_bench.ts`: imports one module in this fresh process and prints how long the
 * `import()` took (ms) as `@@<ms>`. Argument: `core` (this package's `mod.ts`), `openai`, or
 * `none` (an empty run, the process floor).
 *
 * @module
 */
import process from "node:process";

const which = process.argv[2];
const t0 = performance.now();
if (which === "core") await import("../mod.ts");
else if (which === "openai") await import("openai");
else if (which !== "none") throw new Error(`Cannot probe: unknown module ${which}`);
console.log(`@@${performance.now() - t0}`);
