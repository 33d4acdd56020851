/**
 * `ConflictGuard`: refuses a write to a file that changed on disk since this engine last read
 * or wrote it (manual §6.1 step 3, FAQ "Varias sesiones en el mismo espacio de trabajo
 * sobrescriben archivos entre sí"; research notes on edit tools, §5.3 item 7).
 *
 * The guard remembers a SHA-256 digest of the bytes each file had when the engine last saw it
 * (a `read_file`, or its own write). Before a write, the tool passes the bytes now on disk; if
 * they differ from the remembered digest, another engine or the user edited the file in
 * between and the write is refused with a {@link FileConflictError}. Content digests are used
 * instead of modification times, which are too coarse on some file systems to see two edits in
 * the same tick, and which change on a `touch` that changes nothing.
 *
 * A file the engine never read can be written (there is nothing it could have overlooked), and
 * a remembered file that was deleted since may be created again (nothing is lost).
 *
 * @module
 */
import { createHash } from "node:crypto";
import { readFileSync, realpathSync } from "node:fs";
import path from "node:path";

/**
 * Thrown when a write is refused because the file changed on disk since the engine last read
 * it. Tools let it through, so the model gets `error_type: "FileConflictError"` and reads the
 * file again.
 */
export class FileConflictError extends Error {
  /** Always `"FileConflictError"`. */
  override name = "FileConflictError";
  /**
   * Creates the error.
   *
   * @param message "Cannot write X: reason".
   * @param path The absolute path of the file.
   */
  constructor(message: string, readonly path: string) {
    super(message);
  }
}

/** Options of {@link ConflictGuard.check}. */
export interface ConflictCheckOptions {
  /** The path to show in the error message (default: the absolute path). */
  shown?: string;
  /** What was being attempted, for the message: `"write"` (default), `"edit"`, `"delete"`. */
  action?: string;
}

function digest(content: string | Uint8Array): string {
  return createHash("sha256").update(content).digest("hex");
}

/**
 * Remembers what each file looked like when this engine last read or wrote it, and refuses
 * writes to files that changed since. One guard per engine: `createDefaultEngine` makes one and
 * gives it to the file tools and the patch tools (manual §6.1 step 3).
 *
 * Keys are real absolute paths (symlinks resolved when the file exists), so two spellings of the
 * same file share one record. Memory: one 64-char digest per file seen.
 *
 * @example Refuse a write after someone else changed the file
 * ```ts
 * import { ConflictGuard } from "@zqagent/core/tools";
 * const guard = new ConflictGuard();
 * guard.noteRead("/srv/ws/a.txt", "v1");
 * guard.check("/srv/ws/a.txt", "v1"); // fine: unchanged
 * try {
 *   guard.check("/srv/ws/a.txt", "v2 (edited by the user)");
 * } catch (e) {
 *   // FileConflictError: Cannot write /srv/ws/a.txt: it changed on disk since it was last read…
 * }
 * ```
 */
export class ConflictGuard {
  #seen = new Map<string, string>();

  /** Normalises a path to the key the guard stores it under. */
  #key(file: string): string {
    const abs = path.resolve(file);
    try {
      return realpathSync(abs);
    } catch {
      return abs;
    }
  }

  /**
   * Records the content a file had when the engine read it.
   *
   * @param file Absolute path (relative paths resolve against the current directory).
   * @param content The whole file's bytes (or text) as read.
   */
  noteRead(file: string, content: string | Uint8Array): void {
    this.#seen.set(this.#key(file), digest(content));
  }

  /**
   * Records the content the engine itself just wrote, so its own writes never count as
   * someone else's change.
   *
   * @param file Absolute path.
   * @param content The bytes (or text) written.
   */
  noteWrite(file: string, content: string | Uint8Array): void {
    this.noteRead(file, content);
  }

  /**
   * Forgets a file (after the engine deleted it).
   *
   * @param file Absolute path.
   * @returns False when the file was not remembered.
   */
  forget(file: string): boolean {
    return this.#seen.delete(this.#key(file));
  }

  /** True when the engine has read or written this file. */
  has(file: string): boolean {
    return this.#seen.has(this.#key(file));
  }

  /** Forgets every file (e.g. when a host resets a session). */
  clear(): void {
    this.#seen.clear();
  }

  /**
   * Checks that a file still has the content the engine last saw.
   *
   * @param file Absolute path.
   * @param current The file's bytes now, or `null` when it does not exist (always fine:
   *   creating a deleted file again loses nothing).
   * @param options The path to show and the action, for the message.
   * @throws {FileConflictError} When the file was read or written by this engine before and its
   *   content differs now.
   */
  check(
    file: string,
    current: string | Uint8Array | null,
    options: ConflictCheckOptions = {},
  ): void {
    if (current === null) return;
    const key = this.#key(file);
    const known = this.#seen.get(key);
    if (known === undefined || known === digest(current)) return;
    const shown = options.shown ?? key;
    throw new FileConflictError(
      `Cannot ${options.action ?? "write"} ${shown}: it changed on disk since it was last read ` +
        "(another session or the user edited it); read it again and redo the change on the " +
        "current content",
      key,
    );
  }

  /**
   * Like {@link ConflictGuard.check}, reading the file's current bytes from disk itself.
   *
   * @param file Absolute path.
   * @param options The path to show and the action, for the message.
   * @throws {FileConflictError} When the file changed since the engine last saw it.
   */
  checkFile(file: string, options: ConflictCheckOptions = {}): void {
    let current: Uint8Array | null = null;
    try {
      current = readFileSync(file);
    } catch (e) {
      if ((e as { code?: string }).code !== "ENOENT") throw e;
    }
    this.check(file, current, options);
  }
}
