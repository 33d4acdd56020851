/**
 * Starts the reference server: `deno task server` (or `node --experimental-transform-types
 * examples/server/main.ts` on Node 22). Listens on `HOST`:`PORT` (default 127.0.0.1:8787) and
 * serves the browser page at `/`. See `config.ts` for every environment variable and
 * `server.ts` for the routes. SIGINT / SIGTERM stop it gracefully.
 *
 * With `DATABASE_URL` set it runs the multi-worker mode (`cluster.ts`): this command starts an
 * HTTP front end, and `deno task server:worker` (this file with `--worker`) a worker that runs
 * the turns; start as many of each as needed, on any machine that reaches the database.
 *
 * @module
 */
import process from "node:process";
import { configFromEnv, type ServerConfig } from "./config.ts";
import { AgentServer } from "./server.ts";

let config: ServerConfig;
try {
  config = configFromEnv(process.env);
} catch (err) {
  console.error((err as Error).message);
  process.exit(2);
}
const worker = process.argv.includes("--worker");
if (worker && !config.databaseUrl) {
  console.error("Cannot start a worker: set DATABASE_URL (workers share a PostgreSQL store)");
  process.exit(2);
}

let stop: () => Promise<void>;
if (config.databaseUrl) {
  const { ClusterFrontEnd, createClusterWorker, openClusterStore } = await import("./cluster.ts");
  let cluster;
  try {
    cluster = await openClusterStore(config);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(2);
  }
  if (worker) {
    const w = createClusterWorker(config, cluster.store);
    w.start();
    console.log(`worker ${w.ownerId} ready`);
    stop = async () => {
      await w.stop();
      await cluster.close();
    };
  } else {
    const front = new ClusterFrontEnd({
      ...config,
      store: cluster.store,
      listSessions: cluster.listSessions,
    });
    const url = await front.listen();
    console.log(`listening on ${url} (front end; turns run on workers)`);
    stop = async () => {
      await front.close();
      await cluster.close();
    };
  }
} else {
  const server = new AgentServer(config);
  const url = await server.listen();
  console.log(`listening on ${url}`);
  if (config.generatedToken) {
    // The fragment never reaches the server's logs; the page reads it and forgets it.
    console.log(`open ${url}/#token=${config.tenants[0].token}`);
  }
  stop = () => server.close();
}
let stopping = false;
const onSignal = async () => {
  if (stopping) return;
  stopping = true;
  await stop();
  console.log("stopped");
  process.exit(0);
};
process.on("SIGINT", () => void onSignal());
process.on("SIGTERM", () => void onSignal());
