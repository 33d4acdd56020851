/**
 * The browser page's files. The page's script is TypeScript (`page/app.ts`) and the approval
 * card helpers are the library's own `engine/approval_view.ts`; both are served as JavaScript
 * by stripping their types with `amaro` — the type stripper Node itself uses for
 * `--experimental-strip-types`, a small, dependency-free, well-kept package — so there is no
 * build step and no bundler. Loaded lazily, once, on the first request for a script.
 *
 * @module
 */
import fs from "node:fs";
import { fileURLToPath } from "node:url";

/** One served file. */
export interface Asset {
  /** `Content-Type`. */
  type: string;
  /** The bytes. */
  body: string;
}

const here = (rel: string) => fileURLToPath(new URL(rel, import.meta.url));

/** Served path → source file, content type, and whether types are stripped. */
const FILES: Record<string, { file: string; type: string; ts?: boolean }> = {
  "/": { file: here("./page/index.html"), type: "text/html; charset=utf-8" },
  "/assets/style.css": { file: here("./page/style.css"), type: "text/css; charset=utf-8" },
  "/assets/app.js": {
    file: here("./page/app.ts"),
    type: "text/javascript; charset=utf-8",
    ts: true,
  },
  "/assets/approval_view.js": {
    file: here("../../engine/approval_view.ts"),
    type: "text/javascript; charset=utf-8",
    ts: true,
  },
};

/** The page imports the view helpers by their path in this repository; the browser by URL. */
const APPROVAL_VIEW_IMPORT = /(["'])\.\.\/\.\.\/\.\.\/engine\/approval_view\.ts\1/g;

const cache = new Map<string, Asset>();

async function strip(source: string): Promise<string> {
  const { transformSync } = await import("amaro");
  return transformSync(source, { mode: "strip-only" }).code;
}

/**
 * The file served at `pathname`, or `null` when there is none.
 *
 * @param pathname The request path (`/`, `/assets/app.js`, …).
 * @returns The file.
 * @throws {Error} When a source file cannot be read or its types cannot be stripped.
 */
export async function asset(pathname: string): Promise<Asset | null> {
  const hit = cache.get(pathname);
  if (hit) return hit;
  const spec = Object.hasOwn(FILES, pathname) ? FILES[pathname] : undefined;
  if (!spec) return null;
  let body = fs.readFileSync(spec.file, "utf8");
  if (spec.ts) body = (await strip(body)).replace(APPROVAL_VIEW_IMPORT, '"./approval_view.js"');
  const out = { type: spec.type, body };
  cache.set(pathname, out);
  return out;
}
