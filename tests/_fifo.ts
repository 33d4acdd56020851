/**
 * Named pipes (FIFOs) for the tests that check no file tool ever waits on one (private).
 *
 * A pipe is made with coreutils' `mkfifo` (a real one, as a user or a tool would make it).
 * Tests that use one are skipped on Windows, and skipped with a reason when `mkfifo` cannot run,
 * unless `CI_REQUIRE_REAL=1`, where that fails instead. Opening the writing end of a pipe wakes
 * code that (wrongly) waits on it: {@link makeFifo} does that when the test's signal aborts (the
 * test timed out), so a regression fails that test instead of holding a thread of the file
 * system pool forever, and {@link releaseFifos} does it for every pipe left at the end.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import process from "node:process";

/** `skip` option of a test using a pipe: Windows has no FIFOs in the file system. */
export const NO_FIFOS: string | false = process.platform === "win32"
  ? "Windows has no named pipes in the file system"
  : false;

/** Time limit of a test using a pipe, in ms: a test that hangs fails instead of never ending. */
export const FIFO_TEST_TIMEOUT_MS = 30_000;

const made: string[] = [];

/**
 * Makes a named pipe at `file` with `mkfifo`.
 *
 * @param file Where.
 * @param signal The test's signal (`t.signal`): when it aborts, the pipe is released.
 * @returns `undefined` when it was made, else why not (the caller skips the test).
 * @throws {Error} When it cannot be made and `CI_REQUIRE_REAL=1`.
 */
export function makeFifo(file: string, signal?: AbortSignal): string | undefined {
  try {
    execFileSync("mkfifo", [file], { stdio: "pipe" });
  } catch (err) {
    const why = `mkfifo could not run: ${(err as Error).message}`;
    if (process.env.CI_REQUIRE_REAL === "1") throw new Error(`${why} (CI_REQUIRE_REAL=1)`);
    return why;
  }
  made.push(file);
  signal?.addEventListener("abort", () => release(file), { once: true });
  return undefined;
}

function release(file: string): void {
  try {
    fs.closeSync(fs.openSync(file, fs.constants.O_WRONLY | (fs.constants.O_NONBLOCK ?? 0)));
  } catch {
    // no reader waiting (ENXIO) or already removed
  }
}

/** Opens and closes the writing end of every pipe made, waking whatever waits on one. */
export function releaseFifos(): void {
  for (const file of made.splice(0)) release(file);
}
