/**
 * Starts the reference server: `deno task server` (or `node --experimental-transform-types
 * examples/server/main.ts` on Node 22). Listens on `HOST`:`PORT` (default 127.0.0.1:8787) and
 * serves the browser page at `/`. See `config.ts` for every environment variable and
 * `server.ts` for the routes. SIGINT / SIGTERM stop it gracefully.
 *
 * @module
 */
import process from "node:process";
import { configFromEnv } from "./config.ts";
import { AgentServer } from "./server.ts";

let config;
try {
  config = configFromEnv(process.env);
} catch (err) {
  console.error((err as Error).message);
  process.exit(2);
}
const server = new AgentServer(config);
const url = await server.listen();
console.log(`listening on ${url}`);
if (config.generatedToken) {
  // The fragment never reaches the server's logs; the page reads it and forgets it.
  console.log(`open ${url}/#token=${config.tenants[0].token}`);
}
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await server.close();
  console.log("stopped");
  process.exit(0);
};
process.on("SIGINT", () => void stop());
process.on("SIGTERM", () => void stop());
