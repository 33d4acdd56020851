/**
 * Test helper: a real PostgreSQL server for one test file (issue 11). Debian's `postgresql`
 * package (binaries in `/usr/lib/postgresql/<ver>/bin`) is started on 127.0.0.1 and a free port
 * with `initdb` into a temp dir (as the `postgres` user when running as root: initdb refuses
 * root), `fsync=off`, and stopped by `stop()`. When the binaries are missing,
 * {@link startPostgres} returns a skip reason, or throws under `CI_REQUIRE_REAL=1`.
 *
 * @module
 */
import { after } from "node:test";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import process from "node:process";

/** A running server. */
export interface TestPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  url: string;
  /** The port. */
  port: number;
  /** Stops the server and removes its files. */
  stop(): void;
  /** Restarts the server (`pg_ctl restart -m fast`), keeping its data. */
  restart(): void;
  /** The `bin` folder (initdb, pg_ctl, psql, …). */
  bin: string;
}

/** Finds Debian's PostgreSQL `bin` folder (highest version). */
export function findPostgresBin(): string | undefined {
  const root = "/usr/lib/postgresql";
  let versions: string[] = [];
  try {
    versions = fs.readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => +b - +a);
  } catch {
    return undefined;
  }
  for (const v of versions) {
    const bin = path.join(root, v, "bin");
    if (fs.existsSync(path.join(bin, "initdb")) && fs.existsSync(path.join(bin, "pg_ctl"))) {
      return bin;
    }
  }
  return undefined;
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts a server, or returns `{skip}` with the reason when PostgreSQL is not installed.
 *
 * @throws {Error} When it is missing and `CI_REQUIRE_REAL=1`, or when it fails to start.
 */
export async function startPostgres(): Promise<TestPostgres | { skip: string }> {
  const bin = findPostgresBin();
  if (!bin) {
    const reason = "PostgreSQL is not installed (apt-get install -y postgresql)";
    if (process.env.CI_REQUIRE_REAL === "1") throw new Error(`Cannot run the test: ${reason}`);
    return { skip: reason };
  }
  const asRoot = typeof process.getuid === "function" && process.getuid() === 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-pg-"));
  const data = path.join(dir, "data");
  const sock = path.join(dir, "sock");
  fs.mkdirSync(sock);
  if (asRoot) execFileSync("chown", ["-R", "postgres:postgres", dir]);
  const run = (cmd: string, args: string[]) => {
    const file = path.join(bin, cmd);
    return asRoot
      ? execFileSync("runuser", ["-u", "postgres", "--", file, ...args], { stdio: "pipe" })
      : execFileSync(file, args, { stdio: "pipe" });
  };
  run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  const port = await freePort();
  const opts = [
    "-c listen_addresses=127.0.0.1",
    `-p ${port}`,
    `-c unix_socket_directories=${sock}`,
    "-c fsync=off",
    "-c synchronous_commit=off",
    "-c full_page_writes=off",
    "-c max_connections=300",
  ].join(" ");
  const log = path.join(dir, "server.log");
  const start = () => run("pg_ctl", ["-D", data, "-o", opts, "-l", log, "-w", "start"]);
  try {
    start();
  } catch (err) {
    const text = fs.existsSync(log) ? fs.readFileSync(log, "utf8") : "";
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`Cannot start PostgreSQL: ${(err as Error).message}\n${text}`);
  }
  let stopped = false;
  const server: TestPostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    bin,
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
      } catch {
        // already down
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
    restart() {
      run("pg_ctl", ["-D", data, "-o", opts, "-l", log, "-m", "fast", "-w", "restart"]);
    },
  };
  // Also when the test runner exits without running `after` hooks: never leave a server behind.
  process.once("exit", () => server.stop());
  return server;
}

/**
 * {@link startPostgres} for a test file: the server is stopped after the file's tests. With
 * `skip` (a reason), no server is started and that reason is returned.
 */
export async function postgresForTests(
  skip?: string | false,
): Promise<TestPostgres | { skip: string }> {
  if (skip) return { skip };
  const pg = await startPostgres();
  after(() => {
    if (!("skip" in pg)) pg.stop();
  });
  return pg;
}

let prefixCounter = 0;

/** A table prefix unique within this process (one per test keeps tests apart). */
export function uniquePrefix(tag = "t"): string {
  return `${tag}${process.pid}_${++prefixCounter}_`;
}
