/**
 * Atomic file writes: the data goes to a temporary file in the target's folder, is flushed to
 * disk, then renamed over the target, so a reader (or a crash) sees the old file or the new one,
 * never half of one. Used by every subsystem that writes state (checkpoints, configs, tool
 * results, attachments, edited files).
 *
 * @module
 */
import fs from "node:fs";
import { chmod, open, rm } from "node:fs/promises";
import path from "node:path";
import process from "node:process";
import { randomUUID } from "node:crypto";

/** Options of {@link writeFileAtomicSync} and {@link writeFileAtomic}. */
export interface AtomicWriteOptions {
  /** File mode of the new file (e.g. `0o600` for files holding secrets); default: umask's. */
  mode?: number;
  /** Create missing parent folders (default false). */
  mkdir?: boolean;
}

function tempPath(target: string): string {
  return path.join(
    path.dirname(target),
    `.${path.basename(target)}.${process.pid}.${randomUUID().slice(0, 8)}.tmp`,
  );
}

/**
 * Writes `data` to `target` atomically (temp file, fsync, rename).
 *
 * @throws {Error} The file system's error; the temporary file is removed first.
 */
export function writeFileAtomicSync(
  target: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): void {
  if (options.mkdir) fs.mkdirSync(path.dirname(target), { recursive: true });
  const temp = tempPath(target);
  try {
    const fd = options.mode === undefined
      ? fs.openSync(temp, "w")
      : fs.openSync(temp, "w", options.mode);
    try {
      fs.writeFileSync(fd, data);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    if (options.mode !== undefined) fs.chmodSync(temp, options.mode & 0o7777);
    fs.renameSync(temp, target);
  } catch (err) {
    fs.rmSync(temp, { force: true });
    throw err;
  }
}

/**
 * Asynchronous {@link writeFileAtomicSync}.
 *
 * @throws {Error} The file system's error; the temporary file is removed first.
 */
export async function writeFileAtomic(
  target: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  if (options.mkdir) await fs.promises.mkdir(path.dirname(target), { recursive: true });
  const temp = tempPath(target);
  try {
    const handle = options.mode === undefined
      ? await open(temp, "w")
      : await open(temp, "w", options.mode);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (options.mode !== undefined) await chmod(temp, options.mode & 0o7777);
    fs.renameSync(temp, target);
  } catch (err) {
    await rm(temp, { force: true }).catch(() => {});
    throw err;
  }
}
