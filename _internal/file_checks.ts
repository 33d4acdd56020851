/**
 * Checks made before opening a file whose path a model or a host chose (private).
 *
 * Opening a named pipe (FIFO) blocks until the other end opens it, and reading one without a
 * writer never ends; a character device such as `/dev/zero` never ends either. So every file
 * tool `stat`s a path first and refuses anything that is not a regular file (or, where it
 * lists, a directory) with "Cannot read x: it is not a regular file (a named pipe)", and opens
 * what it reads with `O_NONBLOCK` and checks the open handle again, so a pipe swapped in
 * between the check and the open cannot hang it either. File-system errors become reasons a
 * person can read ("too many levels of symbolic links (a symlink loop)" for `ELOOP`).
 *
 * @module
 */
import fs from "node:fs";
import type { Stats } from "node:fs";
import { type FileHandle, open, stat } from "node:fs/promises";

/** How a file is named in messages: "Cannot <verb> <shown>: …". */
export interface FileLabel {
  /** What the caller was doing: `"read"`, `"write"`, `"edit"`, `"search"`. */
  verb: string;
  /** The path as shown to the model or the host (workspace-relative when inside). */
  shown: string;
}

/** `O_NONBLOCK` where the platform has it (not on Windows, which has no FIFOs in the tree). */
const O_NONBLOCK = fs.constants.O_NONBLOCK ?? 0;
const READ_FLAGS = fs.constants.O_RDONLY | O_NONBLOCK;

/**
 * The reason a file-system call failed, in words for a "Cannot X y: reason" message.
 *
 * @param err What the call threw.
 * @returns `"too many levels of symbolic links (a symlink loop)"` for `ELOOP`, plain words for
 *   the other common codes, the error's own message otherwise.
 */
export function fsErrorReason(err: unknown): string {
  switch ((err as { code?: unknown } | null)?.code) {
    case "ELOOP":
      return "too many levels of symbolic links (a symlink loop)";
    case "ENOENT":
      return "no such file or directory";
    case "ENOTDIR":
      return "a folder on its path is a file";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "ENAMETOOLONG":
      return "the path is too long";
    case "EISDIR":
      return "it is a directory";
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * What a file that is neither a regular file nor a directory is, for messages.
 *
 * @param st The file's `stat` (or `lstat`) result.
 * @returns `"a named pipe"`, `"a socket"`, `"a character device"`, `"a block device"` (or
 *   `"a special file"`); `undefined` for a regular file or a directory.
 */
export function specialFileKind(st: Stats): string | undefined {
  if (st.isFile() || st.isDirectory()) return undefined;
  if (st.isFIFO()) return "a named pipe";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  if (st.isSymbolicLink()) return "a symbolic link";
  return "a special file";
}

/**
 * Throws when `st` is not a regular file nor a directory (directories are left to the caller,
 * whose message differs per tool).
 *
 * @throws {Error} "Cannot read x: it is not a regular file (a named pipe)".
 */
export function refuseSpecialFile(st: Stats, label: FileLabel): void {
  const kind = specialFileKind(st);
  if (kind !== undefined) {
    throw new Error(`Cannot ${label.verb} ${label.shown}: it is not a regular file (${kind})`);
  }
}

/** The error for a failed file-system call: "Cannot read x: <reason>", with the cause kept. */
export function fsError(err: unknown, label: FileLabel): Error {
  return new Error(`Cannot ${label.verb} ${label.shown}: ${fsErrorReason(err)}`, { cause: err });
}

/**
 * `stat` that follows symlinks and returns `null` for a missing file.
 *
 * @param abs Absolute path.
 * @param label How to name it in errors.
 * @returns The stats, or `null` when nothing is there (`ENOENT`, a dangling symlink).
 * @throws {Error} "Cannot read x: too many levels of symbolic links (a symlink loop)" and the
 *   like for every other failure.
 */
export async function statPath(abs: string, label: FileLabel): Promise<Stats | null> {
  try {
    return await stat(abs);
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return null;
    throw fsError(err, label);
  }
}

/**
 * Opens a file for reading without ever blocking on a named pipe: opened with `O_NONBLOCK`,
 * then refused unless the open handle is a regular file.
 *
 * @param abs Absolute path.
 * @param label How to name it in errors.
 * @returns The open handle; the caller closes it.
 * @throws {Error} "Cannot read x: it is not a regular file (a named pipe)", "… it is a
 *   directory", or the file-system error in words.
 */
export async function openRegularFile(abs: string, label: FileLabel): Promise<FileHandle> {
  let fh: FileHandle;
  try {
    fh = await open(abs, READ_FLAGS);
  } catch (err) {
    throw fsError(err, label);
  }
  try {
    const st = await fh.stat();
    if (st.isDirectory()) throw new Error(`Cannot ${label.verb} ${label.shown}: it is a directory`);
    refuseSpecialFile(st, label);
    return fh;
  } catch (err) {
    await fh.close().catch(() => {});
    throw err;
  }
}

/**
 * Reads a whole regular file (see {@link openRegularFile}).
 *
 * @param abs Absolute path.
 * @param label How to name it in errors.
 * @returns The bytes.
 * @throws {Error} As {@link openRegularFile}.
 */
export async function readRegularFile(abs: string, label: FileLabel): Promise<Uint8Array> {
  const fh = await openRegularFile(abs, label);
  try {
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}

/**
 * Synchronous {@link readRegularFile}.
 *
 * @throws {Error} As {@link openRegularFile}.
 */
export function readRegularFileSync(abs: string, label: FileLabel): Uint8Array {
  let fd: number;
  try {
    fd = fs.openSync(abs, READ_FLAGS);
  } catch (err) {
    throw fsError(err, label);
  }
  try {
    const st = fs.fstatSync(fd);
    if (st.isDirectory()) throw new Error(`Cannot ${label.verb} ${label.shown}: it is a directory`);
    refuseSpecialFile(st, label);
    return fs.readFileSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Checks the target of a write that replaces a file (temp file + rename): nothing there, or a
 * regular file (through symlinks). Renaming over a named pipe or a device would silently
 * replace it with a file, and whoever reads the pipe would wait forever.
 *
 * @param target Absolute path of the file to be replaced.
 * @throws {Error} "Cannot write x: it is not a regular file (a named pipe)", "… it is a
 *   directory", "… too many levels of symbolic links (a symlink loop)".
 */
export function checkWriteTargetSync(target: string): void {
  let st: Stats;
  try {
    st = fs.statSync(target);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ELOOP") throw fsError(err, { verb: "write", shown: target });
    return; // missing (or unreadable): the write itself says what is wrong
  }
  checkWriteStat(st, target);
}

/** Asynchronous {@link checkWriteTargetSync}. */
export async function checkWriteTarget(target: string): Promise<void> {
  let st: Stats;
  try {
    st = await stat(target);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ELOOP") throw fsError(err, { verb: "write", shown: target });
    return;
  }
  checkWriteStat(st, target);
}

function checkWriteStat(st: Stats, target: string): void {
  if (st.isDirectory()) throw new Error(`Cannot write ${target}: it is a directory`);
  refuseSpecialFile(st, { verb: "write", shown: target });
}
