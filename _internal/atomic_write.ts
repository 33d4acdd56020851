/**
 * Atomic file writes: the data goes to a temporary file in the target's folder, is flushed to
 * disk, then renamed over the target, so a reader (or a crash) sees the old file or the new one,
 * never half of one. Used by every subsystem that writes state (checkpoints, configs, tool
 * results, attachments, edited files).
 *
 * The target must be missing or a regular file: renaming over a named pipe or a device would
 * silently replace it (and whoever reads the pipe would wait forever), so that is refused with
 * "Cannot write x: it is not a regular file (a named pipe)". The temporary file is created
 * exclusively (`O_EXCL`, never through a symlink someone planted at its random name) with the
 * requested mode, so a file meant to be private (`mode: 0o600`) is never readable by others,
 * not even for a moment.
 *
 * @module
 */
import fs from "node:fs";
import { chmod, open, rm } from "node:fs/promises";
import path from "node:path";
import process from "node:process";
import { randomUUID } from "node:crypto";
import { checkWriteTarget, checkWriteTargetSync } from "./file_checks.ts";

/** Options of {@link writeFileAtomicSync} and {@link writeFileAtomic}. */
export interface AtomicWriteOptions {
  /** File mode of the new file (e.g. `0o600` for files holding secrets); default: umask's. */
  mode?: number;
  /** Create missing parent folders (default false). */
  mkdir?: boolean;
  /**
   * Mode of the parent folders `mkdir` creates (e.g. `0o700` for folders holding secrets;
   * folders that exist keep theirs); default: umask's.
   */
  dirMode?: number;
}

function tempPath(target: string): string {
  return path.join(
    path.dirname(target),
    `.${path.basename(target)}.${process.pid}.${randomUUID().slice(0, 8)}.tmp`,
  );
}

function mkdirOptions(dirMode: number | undefined): fs.MakeDirectoryOptions {
  return dirMode === undefined ? { recursive: true } : { recursive: true, mode: dirMode };
}

/**
 * Writes `data` to `target` atomically (temp file, fsync, rename).
 *
 * @throws {Error} "Cannot write x: it is not a regular file (a named pipe)" (or "… it is a
 *   directory", "… too many levels of symbolic links (a symlink loop)") when `target` exists
 *   and is not a regular file; otherwise the file system's error; the temporary file is removed
 *   first.
 */
export function writeFileAtomicSync(
  target: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): void {
  if (options.mkdir) fs.mkdirSync(path.dirname(target), mkdirOptions(options.dirMode));
  checkWriteTargetSync(target);
  const temp = tempPath(target);
  // Exclusive: never opens a file (or follows a symlink) already at the random name.
  const fd = options.mode === undefined
    ? fs.openSync(temp, "wx")
    : fs.openSync(temp, "wx", options.mode);
  try {
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
 * @throws {Error} As {@link writeFileAtomicSync}.
 */
export async function writeFileAtomic(
  target: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  if (options.mkdir) {
    await fs.promises.mkdir(path.dirname(target), mkdirOptions(options.dirMode));
  }
  await checkWriteTarget(target);
  const temp = tempPath(target);
  const handle = options.mode === undefined
    ? await open(temp, "wx")
    : await open(temp, "wx", options.mode);
  try {
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
