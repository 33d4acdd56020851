/**
 * The `media` tool (manual §7.1 "Medios", §13): loads an image, audio or video file from the
 * workspace (or a granted directory) or from an http(s) URL, checks its type and the attachment
 * limits of §13, and queues it for the next model request, so a multimodal model can see it.
 *
 * - The type is read from the bytes with `file-type` (magic numbers; the maintained library for
 *   this, loaded lazily on first use), falling back to the file extension only for formats it
 *   cannot sniff (e.g. SVG). Only `image/*`, `audio/*` and `video/*` are accepted.
 * - Limits (manual §13): at most {@link MEDIA_MAX_FILES} (4) files per request and
 *   {@link MEDIA_MAX_BYTES} (10 MiB) per file and in total.
 * - The engine appends the queued files as one `user` message after the iteration's tool
 *   results, marked with `attachments` refs (`{name, mimeType, size, path}`) so the bytes can be
 *   stripped from later requests. Images go as `image_url` parts, audio as `input_audio` (Chat
 *   Completions), video as `video_url` (the convention of Qwen-VL / vLLM-style servers).
 * - URLs go through `SOCKS5_PROXY` when it is set, like `web_fetch`.
 *
 * @example Register the media tool
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerMediaTool } from "@zqagent/core/tools/media";
 * registerMediaTool(new ToolRegistry(), "/srv/workspace");
 * ```
 *
 * @module
 */
import { realpath } from "node:fs/promises";
import path from "node:path";
import { Buffer } from "node:buffer";
import { envAll } from "../_internal/env.ts";
import { formatBytes, formatOverLimit } from "../_internal/size.ts";
import { fsError, readRegularFile, refuseSpecialFile, statPath } from "../_internal/file_checks.ts";
import { urlScheme } from "../permissions/path_guard.ts";
import { createSocksFetch, type FetchLike } from "../_internal/socks_fetch.ts";
import { RiskClass, type ToolAttachment, type ToolContext, type ToolRegistry } from "./registry.ts";
import { abortError, displayPath, resolveToolPath } from "./_common.ts";
import { contentType, limitSignal, readCapped } from "./_http.ts";

/** Files one model request may carry (manual §13 `MAX_ATTACHMENTS`). */
export const MEDIA_MAX_FILES = 4;
/** Bytes per file and in total per request: 10 MiB (manual §13 `MAX_ATTACHMENT_BYTES`). */
export const MEDIA_MAX_BYTES = 10 * 1024 * 1024;

/** Options of {@link registerMediaTool}. */
export interface MediaToolOptions {
  /** Time limit of a URL download in ms (default 30,000). */
  timeoutMs?: number;
  /** The fetch for URLs (default: SOCKS5-proxied when `SOCKS5_PROXY` is set, else `fetch`). */
  fetch?: FetchLike;
  /** Environment to read `SOCKS5_PROXY` from (default: the process environment). */
  env?: Record<string, string | undefined>;
}

const EXT_TYPES: Record<string, string> = {
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".mp3": "audio/mpeg",
  ".wav": "audio/wav",
  ".ogg": "audio/ogg",
  ".m4a": "audio/mp4",
  ".flac": "audio/flac",
  ".mp4": "video/mp4",
  ".webm": "video/webm",
  ".mov": "video/quicktime",
};

/** `input_audio.format` names for audio MIME types. */
const AUDIO_FORMATS: Record<string, string> = {
  "audio/mpeg": "mp3",
  "audio/wav": "wav",
  "audio/vnd.wave": "wav",
  "audio/x-wav": "wav",
  "audio/ogg": "ogg",
  "audio/opus": "opus",
  "audio/flac": "flac",
  "audio/x-flac": "flac",
  "audio/mp4": "m4a",
  "audio/aac": "aac",
  "audio/webm": "webm",
};

let fileTypeLib: Promise<(b: Uint8Array) => Promise<{ mime: string } | undefined>> | undefined;

/** Sniffs the MIME type from the bytes (`file-type`, loaded once). */
async function sniff(bytes: Uint8Array): Promise<string | undefined> {
  fileTypeLib ??= import("file-type").then((m) => m.fileTypeFromBuffer);
  return (await (await fileTypeLib)(bytes))?.mime;
}

/** "X exceeds the 10 MiB limit", exact when rounding would hide the difference. */
function tooLarge(size: number): string {
  const shown = formatOverLimit(size, MEDIA_MAX_BYTES);
  return `${shown.size} exceeds the ${shown.limit} limit`;
}

/** "it would take this request's media to X, over the 10 MiB limit". */
function overTotal(total: number): string {
  const shown = formatOverLimit(total, MEDIA_MAX_BYTES);
  return `it would take this request's media to ${shown.size}, over the ${shown.limit} limit`;
}

function isInside(root: string, target: string): boolean {
  const rel = path.relative(root, target);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

interface Loaded {
  name: string;
  bytes: Uint8Array;
  declared?: string;
  source: string;
}

/** The roots a local file may come from: the workspace and the granted directories. */
function readRoots(workspace: string, ctx: ToolContext | undefined): string[] {
  const perms = (ctx?.engine as {
    permissions?: { workspaceRoot?: string; grantedDirectories?: () => { path: string }[] };
  } | undefined)?.permissions;
  const roots = [perms?.workspaceRoot ?? workspace];
  for (const g of perms?.grantedDirectories?.() ?? []) roots.push(g.path);
  return roots;
}

async function loadFile(
  workspace: string,
  raw: string,
  room: number,
  ctx: ToolContext | undefined,
): Promise<Loaded> {
  const abs = resolveToolPath(workspace, raw, { verb: "attach" });
  const shown = displayPath(workspace, abs);
  const label = { verb: "attach", shown };
  const st = await statPath(abs, label);
  if (!st) throw new Error(`Cannot attach ${shown}: no such file`);
  if (st.isDirectory()) throw new Error(`Cannot attach ${shown}: it is a directory`);
  refuseSpecialFile(st, label); // a named pipe would never finish reading
  const real = await realpath(abs).catch((err) => {
    throw fsError(err, label);
  });
  let roots = readRoots(workspace, ctx);
  roots = await Promise.all(roots.map((r) => realpath(r).catch(() => r)));
  if (!roots.some((r) => isInside(r, real))) {
    throw new Error(
      `Cannot attach ${shown}: it is outside the workspace (ask for the directory with ` +
        "request_directory first)",
    );
  }
  if (st.size > MEDIA_MAX_BYTES) throw new Error(`Cannot attach ${shown}: ${tooLarge(st.size)}`);
  if (st.size > room) {
    throw new Error(`Cannot attach ${shown}: ${overTotal(MEDIA_MAX_BYTES - room + st.size)}`);
  }
  return { name: path.basename(abs), bytes: await readRegularFile(real, label), source: shown };
}

async function loadUrl(
  raw: string,
  room: number,
  fetchFn: FetchLike,
  timeoutMs: number,
  ctx: ToolContext | undefined,
): Promise<Loaded> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`Cannot attach ${JSON.stringify(raw)}: not a valid URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`Cannot attach ${raw}: only http and https URLs are allowed`);
  }
  const limit = limitSignal(timeoutMs, ctx?.signal);
  try {
    const res = await fetchFn(url, { signal: limit.signal });
    if (!res.ok) {
      await res.body?.cancel().catch(() => {});
      throw new Error(`Cannot attach ${url.href}: HTTP ${res.status}`);
    }
    const declared = contentType(res.headers.get("content-type")).mime;
    const length = Number(res.headers.get("content-length") ?? NaN);
    if (length > MEDIA_MAX_BYTES) {
      await res.body?.cancel().catch(() => {});
      throw new Error(`Cannot attach ${url.href}: ${tooLarge(length)}`);
    }
    const { bytes, cut } = await readCapped(res, Math.min(room, MEDIA_MAX_BYTES) + 1);
    if (cut || bytes.byteLength > room) {
      throw new Error(
        bytes.byteLength > MEDIA_MAX_BYTES || room >= MEDIA_MAX_BYTES
          ? `Cannot attach ${url.href}: it exceeds the ${formatBytes(MEDIA_MAX_BYTES)} limit`
          : `Cannot attach ${url.href}: it would take this request's media over the ` +
            `${formatBytes(MEDIA_MAX_BYTES)} limit`,
      );
    }
    const name = decodeURIComponent(url.pathname.split("/").pop() || url.hostname);
    return { name, bytes, declared, source: url.href };
  } catch (err) {
    if (ctx?.signal?.aborted) throw abortError("media");
    if (limit.timedOut()) {
      throw new Error(`Cannot attach ${url.href}: no complete answer within ${timeoutMs} ms`);
    }
    if (err instanceof Error && err.message.startsWith("Cannot ")) throw err;
    throw new Error(`Cannot attach ${url.href}: ${(err as Error)?.message ?? err}`);
  } finally {
    limit.dispose();
  }
}

/** The content part for a file of `mime`. */
function partFor(mime: string, base64: string): Record<string, unknown> {
  if (mime.startsWith("image/")) {
    return { type: "image_url", image_url: { url: `data:${mime};base64,${base64}` } };
  }
  if (mime.startsWith("audio/")) {
    const format = AUDIO_FORMATS[mime] ?? mime.slice("audio/".length).replace(/^x-/, "");
    return { type: "input_audio", input_audio: { data: base64, format } };
  }
  return { type: "video_url", video_url: { url: `data:${mime};base64,${base64}` } };
}

async function media(
  workspace: string,
  options: MediaToolOptions,
  fetchFn: FetchLike,
  args: Record<string, unknown>,
  ctx: ToolContext | undefined,
): Promise<string> {
  let p = typeof args.path === "string" && args.path.trim() !== "" ? args.path.trim() : "";
  let u = typeof args.url === "string" && args.url.trim() !== "" ? args.url.trim() : "";
  // A file: URL names a local file: it takes the path route (workspace and grants checked).
  if (!p && urlScheme(u) === "file") [p, u] = [u, ""];
  if (!p && !u) throw new Error("Cannot attach media: give path (a workspace file) or url");
  if (p && u) throw new Error("Cannot attach media: give either path or url, not both");
  const queue = ctx?.attachments;
  if (!queue) {
    throw new Error("Cannot attach media: this engine cannot add media to model requests");
  }
  if (queue.length >= MEDIA_MAX_FILES) {
    throw new Error(
      `Cannot attach media: ${MEDIA_MAX_FILES} files are already attached to the next request ` +
        "(the limit)",
    );
  }
  const used = queue.reduce((n, a) => n + a.size, 0);
  const room = MEDIA_MAX_BYTES - used;
  const loaded = p
    ? await loadFile(workspace, p, room, ctx)
    : await loadUrl(u, room, fetchFn, options.timeoutMs ?? 30_000, ctx);
  if (loaded.bytes.byteLength === 0) throw new Error(`Cannot attach ${loaded.source}: it is empty`);
  const sniffed = await sniff(loaded.bytes);
  const byExt = EXT_TYPES[path.extname(loaded.name).toLowerCase()];
  let mime = sniffed;
  if (!mime) {
    // Formats without magic numbers: SVG is XML text; a server may name a type we cannot sniff.
    const head = new TextDecoder().decode(loaded.bytes.subarray(0, 4096));
    if (/<svg[\s>]/i.test(head)) mime = "image/svg+xml";
    else if (
      loaded.declared && /^(image|audio|video)\//.test(loaded.declared) &&
      loaded.bytes.subarray(0, 512).some((b) => b < 9 || b >= 0x80)
    ) {
      mime = loaded.declared;
    }
  }
  if (!mime || !/^(image|audio|video)\//.test(mime)) {
    const what = sniffed ?? loaded.declared ?? byExt ?? "not a recognised media format";
    throw new Error(
      `Cannot attach ${loaded.source}: its content is ${what}; only image, audio and video ` +
        "files can be attached",
    );
  }
  const attachment: ToolAttachment = {
    name: loaded.name,
    mimeType: mime,
    size: loaded.bytes.byteLength,
    path: loaded.source,
    part: partFor(mime, Buffer.from(loaded.bytes).toString("base64")),
  };
  queue.push(attachment);
  return `Attached ${attachment.name} (${mime}, ${attachment.size} bytes). It is shown to you ` +
    "with the next request.";
}

/**
 * Registers `media {path? | url?}` (manual §7.1, risk class EXTERNAL). Errors given to the
 * model: neither or both of path/url, a missing file or one outside the workspace and the
 * granted directories, a URL that is not http(s) or fails, content that is not image/audio/video,
 * a file over 10 MiB, a fifth file or more than 10 MiB in total for one request.
 *
 * @param registry The registry to add the tool to.
 * @param workspace Workspace root; relative paths resolve against it.
 * @param options Download time limit (ms), fetch and environment.
 * @example
 * ```ts
 * import { ToolRegistry } from "@zqagent/core/tools";
 * import { registerMediaTool } from "@zqagent/core/tools/media";
 * registerMediaTool(new ToolRegistry(), "/srv/workspace", { timeoutMs: 10_000 });
 * ```
 */
export function registerMediaTool(
  registry: ToolRegistry,
  workspace: string,
  options: MediaToolOptions = {},
): void {
  const root = path.resolve(workspace);
  const proxy = (options.env ?? envAll()).SOCKS5_PROXY;
  const fetchFn: FetchLike = options.fetch ??
    (proxy ? createSocksFetch(proxy) : (input, init) => fetch(input, init));
  registry.register(
    (args, ctx) => media(root, options, fetchFn, args, ctx),
    {
      category: "media",
      riskLevel: "medium",
      capabilities: ["read_media", "network"],
      requiresApproval: false,
      riskClass: RiskClass.EXTERNAL,
    },
    {
      type: "function",
      function: {
        name: "media",
        description: "Look at an image, audio or video file: load it from the workspace (path) " +
          "or an http(s) URL (url) and attach it to your next request. At most 4 files and " +
          "10 MiB per request.",
        parameters: {
          type: "object",
          properties: {
            path: { type: "string", description: "Workspace file (relative or absolute)" },
            url: { type: "string", description: "http or https URL" },
          },
        },
      },
    },
  );
}
