// A host that runs one turn under the least-privilege Deno flags the README documents
// (DESIGN §5). Started by tests/least_privilege_deno_test.ts as
// `deno run <README flags> tests/_least_privilege_host.ts <workspace>`.
import process from "node:process";
import { createDefaultEngine, EventType, Mode } from "../mod.ts";

// The provider comes from OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL, as in a real host.
// A second argument `deno` turns on the Deno permission layer's child process for file tools.
const [workspace, layer] = process.argv.slice(2);
const engine = createDefaultEngine({
  workspace,
  mode: Mode.AUTO,
  ...(layer === "deno" ? { sandbox: { deno: true } } : {}),
});
const finished: Array<{ name: unknown; status: unknown; reason: unknown }> = [];
let status: unknown;
for await (const event of engine.run("work")) {
  if (event.type === EventType.TOOL_FINISHED) {
    finished.push({ name: event.data.name, status: event.data.status, reason: event.data.reason });
  }
  if (event.type === EventType.TURN_END) status = event.data.status;
}
console.log(JSON.stringify({ status, finished, sandbox: engine.permissions.sandbox }));
