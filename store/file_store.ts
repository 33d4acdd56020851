/**
 * `FileSessionStore`: the embedded default {@link SessionStore} — plain files in one folder, for
 * one process (issue 11). The file layout is the one `FileLogHook` has always written, with a
 * `seq` added:
 *
 * - `<id>.jsonl`: the event log, one JSON object `{type, data, time, seq, epoch, idemKey?}` per
 *   line (`type` = event kind, `data` = payload), appended synchronously; a torn last line (a
 *   crash mid-write) is skipped and never glued to the next line. Lines without `seq` (logs
 *   written before it existed) are numbered by position.
 * - `<id>_state.json`: the latest checkpoint, the `SavedState` fields plus `schemaVersion` and
 *   `seq`, written atomically (temp file, fsync, rename). A file without `schemaVersion` is a
 *   version-0 checkpoint and still loads.
 * - `<id>_session.json`: status, lease (owner, epoch, expiry), approvals and inbox, written
 *   atomically on every change.
 *
 * Every file is created with mode 0600 and a folder the store creates with 0700: they hold the
 * conversation (secrets pasted into it included) and decide what ran, so only their owner may
 * read them. (A folder that already exists keeps its mode.)
 *
 * **Single process.** Records are cached in memory and leases use this process's clock, so only
 * one process (holding one `FileSessionStore` per folder: use {@link FileSessionStore.forDir}) may
 * write a folder. Never share it between machines (NFS) or processes; use
 * `PostgresSessionStore` for that. `capabilities.multiProcess` is false. A viewer in another
 * process may `read`/`tail` (tails poll the file).
 *
 * @module
 */
import { safeJson } from "../_internal/safe_json.ts";
import { writeFileAtomicSync } from "../_internal/atomic_write.ts";
import fs from "node:fs";
import path from "node:path";
import { type LocalRecord, LocalStore, newRecord, recordToJson } from "./local_store.ts";
import {
  type AppendResult,
  type Checkpoint,
  CHECKPOINT_SCHEMA_VERSION,
  checkSessionId,
  type NewEvent,
  type StoredEvent,
} from "./types.ts";

/** Options of {@link FileSessionStore}. */
export interface FileSessionStoreOptions {
  /** Safety-net poll interval of tails in ms (default 500). */
  pollMs?: number;
  /**
   * Called with the size in bytes of each checkpoint written; default: a warning on stderr when
   * it exceeds `checkpointWarnBytes` (peers' checkpoints grew unbounded: mastra PR #21002).
   */
  onCheckpointSize?: (sessionId: string, bytes: number) => void;
  /** Checkpoint size above which the default `onCheckpointSize` warns (default 8 MiB). */
  checkpointWarnBytes?: number;
}

/**
 * Files and folders of a session hold the conversation and decide what ran: only their owner
 * may read or write them (files 0600, folders the store creates 0700), like the event log.
 */
const FILE_MODE = 0o600;
const DIR_MODE = 0o700;

/** Writes `text` to `file` atomically (temp file, fsync, rename), mode 0600. */
function writeAtomic(file: string, text: string): void {
  writeFileAtomicSync(file, text, { mode: FILE_MODE });
}

/** Creates the store's folder (0700) when missing. */
function ensureDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: DIR_MODE });
}

function readJson(file: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(fs.readFileSync(file, "utf8"));
    return v && typeof v === "object" && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

const instances = new Map<string, FileSessionStore>();

/**
 * Sessions as files in one folder, for one process (see the module doc).
 *
 * @example
 * ```ts
 * import { FileSessionStore } from "@zqagent/core/store";
 * const store = FileSessionStore.forDir("/var/lib/myapp/sessions");
 * await store.create("s1");
 * const lease = await store.acquire("s1", { ownerId: "w1" });
 * await store.append(lease!, [{ kind: "note", payload: { text: "hi" } }]);
 * console.log(await store.read("s1", 0));
 * ```
 */
export class FileSessionStore extends LocalStore {
  /** The folder. */
  readonly dir: string;
  #onSize: (sessionId: string, bytes: number) => void;

  /**
   * Creates a store over `dir` (created on first write). Prefer {@link FileSessionStore.forDir},
   * which returns one shared instance per folder.
   *
   * @throws {TypeError} When `dir` is empty.
   */
  constructor(dir: string, options: FileSessionStoreOptions = {}) {
    super(options.pollMs ?? 500);
    if (typeof dir !== "string" || dir === "") {
      throw new TypeError("Cannot create FileSessionStore: dir is required");
    }
    this.dir = dir;
    const warnAt = options.checkpointWarnBytes ?? 8 * 1024 * 1024;
    this.#onSize = options.onCheckpointSize ?? ((id, bytes) => {
      if (bytes > warnAt) {
        console.warn(`[zqagent] checkpoint of session ${id} is ${bytes} bytes (over ${warnAt})`);
      }
    });
  }

  /**
   * The one store of a folder in this process (created on first use); `FileLogHook` writes
   * through it.
   *
   * @param dir The folder (resolved to an absolute path).
   */
  static forDir(dir: string): FileSessionStore {
    const key = path.resolve(dir);
    let s = instances.get(key);
    if (!s) {
      s = new FileSessionStore(key);
      instances.set(key, s);
    }
    return s;
  }

  #file(sessionId: string, suffix: string): string {
    return path.join(this.dir, `${sessionId}${suffix}`);
  }

  /** Parses the log; lines without `seq` are numbered by position. */
  #parseLog(sessionId: string): StoredEvent[] {
    let text: string;
    try {
      text = fs.readFileSync(this.#file(sessionId, ".jsonl"), "utf8");
    } catch {
      return [];
    }
    const out: StoredEvent[] = [];
    let last = 0;
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      let e: Record<string, unknown>;
      try {
        e = JSON.parse(line);
      } catch {
        continue; // a torn line
      }
      if (!e || typeof e.type !== "string" || !e.data || typeof e.data !== "object") continue;
      const seq = Number.isInteger(e.seq) && (e.seq as number) > last ? e.seq as number : last + 1;
      last = seq;
      out.push({
        seq,
        kind: e.type,
        payload: e.data as Record<string, unknown>,
        ...(typeof e.idemKey === "string" ? { idemKey: e.idemKey } : {}),
        epoch: Number.isInteger(e.epoch) ? e.epoch as number : 0,
        at: typeof e.time === "string" ? e.time : "",
      });
    }
    return out;
  }

  /** Reads a session from its files (a `FileLogHook` folder without `_session.json` too). */
  protected loadRecord(sessionId: string): LocalRecord | undefined {
    try {
      checkSessionId(sessionId, "load a session");
    } catch {
      return undefined;
    }
    const json = readJson(this.#file(sessionId, "_session.json"));
    const hasLog = fs.existsSync(this.#file(sessionId, ".jsonl"));
    const hasState = fs.existsSync(this.#file(sessionId, "_state.json"));
    if (!json && !hasLog && !hasState) return undefined;
    const r = newRecord(sessionId);
    if (json) {
      Object.assign(r, {
        status: json.status ?? "idle",
        meta: json.meta ?? {},
        ownerId: json.ownerId ?? null,
        epoch: json.epoch ?? 0,
        expiresAt: json.expiresAt ?? 0,
        approvals: json.approvals ?? [],
        inbox: json.inbox ?? [],
        inboxNext: json.inboxNext ?? 1,
        createdAt: json.createdAt ?? Date.now(),
        updatedAt: json.updatedAt ?? Date.now(),
        ttlMs: json.ttlMs ?? null,
        checkpointSeq: json.checkpointSeq ?? 0,
      });
    }
    const events = this.#parseLog(sessionId);
    r.nextSeq = events.at(-1)?.seq ?? 0;
    for (const e of events) if (e.idemKey) r.idem.add(e.idemKey);
    return r;
  }

  /** Writes `<id>_session.json` atomically. */
  protected saveRecord(r: LocalRecord): void {
    ensureDir(this.dir);
    writeAtomic(this.#file(r.sessionId, "_session.json"), safeJson(recordToJson(r)));
  }

  /** Appends lines to `<id>.jsonl` in one write. */
  protected writeEvents(r: LocalRecord, events: StoredEvent[]): void {
    ensureDir(this.dir);
    const file = this.#file(r.sessionId, ".jsonl");
    let prefix = "";
    {
      // Checked on every write: another writer (or a crash) may have left a torn last line.
      try {
        const fd = fs.openSync(file, "r");
        try {
          const size = fs.fstatSync(fd).size;
          if (size > 0) {
            const last = Buffer.alloc(1);
            fs.readSync(fd, last, 0, 1, size - 1);
            if (last[0] !== 0x0a) prefix = "\n"; // a torn line stays alone on its line
          }
        } finally {
          fs.closeSync(fd);
        }
      } catch {
        // no log yet
      }
    }
    const lines = events.map((e) =>
      safeJson({
        type: e.kind,
        data: e.payload,
        time: e.at,
        seq: e.seq,
        epoch: e.epoch,
        ...(e.idemKey !== undefined ? { idemKey: e.idemKey } : {}),
      })
    );
    // An explicit mode: Deno's appendFileSync ignores the umask and would create the log 0666.
    // The log holds the conversation and decides what ran, so only its owner may write it.
    fs.appendFileSync(file, `${prefix}${lines.join("\n")}\n`, { mode: FILE_MODE });
  }

  /** Events after `after`, parsed from the log. */
  protected readEvents(sessionId: string, after: number, limit?: number): StoredEvent[] {
    const out = this.#parseLog(sessionId).filter((e) => e.seq > after);
    return limit === undefined ? out : out.slice(0, limit);
  }

  /** Writes `<id>_state.json` atomically (only the latest checkpoint is kept). */
  protected writeCheckpoint(r: LocalRecord, cp: Checkpoint): void {
    ensureDir(this.dir);
    const text = safeJson({ ...cp.state, schemaVersion: cp.schemaVersion, seq: cp.seq });
    writeAtomic(this.#file(r.sessionId, "_state.json"), text);
    try {
      this.#onSize(r.sessionId, Buffer.byteLength(text));
    } catch {
      // a logging callback never fails a checkpoint
    }
  }

  /** The checkpoint file; version 0 when it has no `schemaVersion`. */
  protected readCheckpoint(sessionId: string): Checkpoint | undefined {
    const raw = readJson(this.#file(sessionId, "_state.json"));
    if (!raw) return undefined;
    const { schemaVersion, seq, ...state } = raw;
    return {
      seq: Number.isInteger(seq) ? seq as number : 0,
      schemaVersion: Number.isInteger(schemaVersion) ? schemaVersion as number : 0,
      state,
    };
  }

  /** Deletes the session's files. */
  protected removeSession(sessionId: string): void {
    for (const s of [".jsonl", "_state.json", "_session.json"]) {
      fs.rmSync(this.#file(sessionId, s), { force: true });
    }
  }

  /** Sessions with a `_session.json` in the folder, plus those loaded. */
  protected listSessions(): string[] {
    const ids = new Set(this.records.keys());
    try {
      for (const f of fs.readdirSync(this.dir)) {
        if (f.endsWith("_session.json")) ids.add(f.slice(0, -"_session.json".length));
      }
    } catch {
      // no folder yet
    }
    return [...ids];
  }

  /**
   * Appends events without a lease, synchronously (what `FileLogHook` uses: the single process
   * owning the folder needs no fencing). The session is created on first write.
   *
   * @param sessionId Session id (letters, digits, `.`, `_`, `-`).
   * @param events Events to append; keys already stored are dropped.
   * @throws {TypeError} On a bad session id or event.
   * @throws {Error} When the log cannot be written (the file-system error).
   */
  appendLocal(sessionId: string, events: NewEvent[]): AppendResult {
    checkSessionId(sessionId, "append events");
    let r = this.rec(sessionId);
    if (!r) {
      r = newRecord(sessionId);
      this.records.set(sessionId, r);
    }
    const written = this.appendTo(r, events, 0);
    return {
      firstSeq: written[0]?.seq ?? r.nextSeq + 1,
      lastSeq: r.nextSeq,
      deduped: events.length - written.length,
    };
  }

  /**
   * Writes a checkpoint without a lease, synchronously, as of the last event appended (what
   * `FileLogHook.saveState` uses).
   *
   * @param sessionId Session id.
   * @param state The snapshot (`SavedState`).
   * @returns The checkpoint written (`schemaVersion` {@link CHECKPOINT_SCHEMA_VERSION}).
   * @throws {Error} When the file cannot be written; the previous checkpoint then stays.
   */
  writeCheckpointLocal(sessionId: string, state: Record<string, unknown>): Checkpoint {
    checkSessionId(sessionId, "store a checkpoint");
    let r = this.rec(sessionId);
    if (!r) {
      r = newRecord(sessionId);
      this.records.set(sessionId, r);
    }
    const cp = { seq: r.nextSeq, schemaVersion: CHECKPOINT_SCHEMA_VERSION, state };
    this.writeCheckpoint(r, cp);
    r.checkpointSeq = cp.seq;
    return cp;
  }
}
