/**
 * Test helpers for the browser tests of the reference server's page: Playwright (playwright-core)
 * in Debian's headless Chromium, and a page that may contact nothing but 127.0.0.1.
 *
 * @module
 */
import fs from "node:fs";
import process from "node:process";
import type { Page } from "playwright-core";

/** Debian's Chromium. */
export const CHROMIUM = "/usr/bin/chromium";

/** playwright-core, or null when it is not installed. */
export async function loadPlaywright(): Promise<typeof import("playwright-core") | null> {
  try {
    return await import("playwright-core");
  } catch {
    return null;
  }
}

/**
 * What the browser tests miss here (`[]` when nothing), from Chromium and playwright-core plus
 * `extra` (a name per missing component, "" when present).
 *
 * @throws {Error} When something is missing and `CI_REQUIRE_REAL=1`.
 */
export function missingForBrowser(
  playwright: unknown,
  extra: string[] = [],
): string[] {
  const missing = [
    fs.existsSync(CHROMIUM) ? "" : `${CHROMIUM} (apt-get install chromium)`,
    playwright ? "" : "playwright-core (deno install)",
    ...extra,
  ].filter(Boolean);
  if (missing.length && process.env.CI_REQUIRE_REAL === "1") {
    throw new Error(`Cannot run the browser test: missing ${missing.join(", ")}`);
  }
  return missing;
}

/** A page of a fresh headless Chromium, and what it did that a test checks afterwards. */
export interface TestPage {
  /** The page (1100 × 800). */
  page: Page;
  /** Addresses other than 127.0.0.1 the page tried (they were blocked). */
  outside: string[];
  /** Uncaught errors of the page's scripts. */
  problems: string[];
}

/** Launches Chromium and opens a page; the browser is closed by the pushed clean-up. */
export async function openPage(
  playwright: typeof import("playwright-core"),
  cleanups: (() => Promise<void> | void)[],
): Promise<TestPage> {
  const browser = await playwright.chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      "--disable-sync",
    ],
  });
  cleanups.push(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  // Nothing but the server on 127.0.0.1 is ever contacted.
  const outside: string[] = [];
  await context.route((url) => url.hostname !== "127.0.0.1", (route) => {
    outside.push(route.request().url());
    return route.abort();
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(String(e)));
  return { page, outside, problems };
}

/** Whether a `sleep <nap>` process is alive (Linux: /proc); tests name commands by their nap. */
export function sleeping(nap: string): boolean {
  for (const pid of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (cmd[0].endsWith("sleep") && cmd[1] === nap) return true;
    } catch {
      // gone
    }
  }
  return false;
}
