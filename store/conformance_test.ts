import { after } from "node:test";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { store as target } from "../tests/_target.ts";
import { storeConformance } from "../tests/_store_conformance.ts";
import { startPostgres, uniquePrefix } from "../tests/_postgres.ts";

const { FileSessionStore, MemorySessionStore, PostgresSessionStore } = target;

storeConformance(
  "MemorySessionStore",
  () => Promise.resolve(new MemorySessionStore({ pollMs: 100 })),
);

const dirs: string[] = [];
after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
storeConformance("FileSessionStore", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-store-"));
  dirs.push(dir);
  return Promise.resolve(new FileSessionStore(dir, { pollMs: 100 }));
});

const pg = await startPostgres();
after(() => {
  if (!("skip" in pg)) pg.stop();
});
storeConformance(
  "PostgresSessionStore",
  () =>
    Promise.resolve(
      new PostgresSessionStore({
        connectionString: "skip" in pg ? "postgres://unused" : pg.url,
        tablePrefix: uniquePrefix(),
        pollMs: 100,
      }),
    ),
  "skip" in pg ? pg.skip : undefined,
);
