/**
 * Attachments (manual §13): validation of what a host received from its users, storage in the
 * session folder, reading back, and stripping the bytes from history so they reach the model
 * only in their own turn.
 *
 * @module
 */
import { writeFileAtomicSync } from "../_internal/atomic_write.ts";
import { readRegularFileSync } from "../_internal/file_checks.ts";
import { formatOverLimit } from "../_internal/size.ts";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { ContentPart, Message } from "../providers/mod.ts";

/** An attachment as sent with a message (manual §13.1). */
export interface MessageAttachment {
  /** File name as the user gave it (shown to the model and in UIs). */
  name: string;
  /** `image/*`, `audio/*` or `video/*`. */
  mimeType: string;
  /** `data:<mime>;base64,<payload>`. */
  dataUrl: string;
}

/** An attachment stored in the session folder; travels with messages and events (manual §13.1). */
export interface StoredAttachment {
  /** File name as the user gave it. */
  name: string;
  /** MIME type. */
  mimeType: string;
  /** Size in bytes. */
  size: number;
  /** Path relative to the session folder, always `attachments/<file>`. */
  path: string;
}

/** Attachments per message (manual §13.1). */
export const MAX_ATTACHMENTS = 4;

/** Bytes per file and in total per message: 10 MiB (manual §13.1 "10 MB", DESIGN §6). */
export const MAX_ATTACHMENT_BYTES: number = 10 * 1024 * 1024;

/** Sub-folder of the session folder holding attachments (manual §13.1). */
export const ATTACHMENT_DIR = "attachments";

/** What went wrong with an attachment. */
export type AttachmentErrorCode =
  | "too_many"
  | "too_large"
  | "bad_type"
  | "bad_data"
  | "bad_path"
  | "not_found";

/** An attachment was refused: too many, too large, wrong type, malformed, or a bad path. */
export class AttachmentError extends Error {
  /** Always `"AttachmentError"`. */
  override name = "AttachmentError";
  /** Machine-readable reason. */
  readonly code: AttachmentErrorCode;
  /** Creates the error. */
  constructor(message: string, code: AttachmentErrorCode) {
    super(message);
    this.code = code;
  }
}

const MIME_RE = /^(image|audio|video)\/[a-z0-9][a-z0-9.+-]*$/;
const DATA_URL_RE = /^data:([^;,]+)((?:;[^;,]*)*?);base64,([A-Za-z0-9+/=\s]*)$/;

const EXT_BY_MIME: Record<string, string> = {
  "image/png": ".png",
  "image/jpeg": ".jpg",
  "image/gif": ".gif",
  "image/webp": ".webp",
  "image/svg+xml": ".svg",
  "image/bmp": ".bmp",
  "image/heic": ".heic",
  "audio/mpeg": ".mp3",
  "audio/mp3": ".mp3",
  "audio/wav": ".wav",
  "audio/x-wav": ".wav",
  "audio/ogg": ".ogg",
  "audio/webm": ".weba",
  "audio/mp4": ".m4a",
  "audio/flac": ".flac",
  "video/mp4": ".mp4",
  "video/webm": ".webm",
  "video/quicktime": ".mov",
  "video/ogg": ".ogv",
};

const MIME_BY_EXT: Record<string, string> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".svg": "image/svg+xml",
  ".bmp": "image/bmp",
  ".heic": "image/heic",
  ".mp3": "audio/mpeg",
  ".wav": "audio/wav",
  ".ogg": "audio/ogg",
  ".weba": "audio/webm",
  ".m4a": "audio/mp4",
  ".flac": "audio/flac",
  ".mp4": "video/mp4",
  ".webm": "video/webm",
  ".mov": "video/quicktime",
  ".ogv": "video/ogg",
};

/** Bytes a base64 payload decodes to (without decoding it). */
function base64Bytes(payload: string): number {
  const clean = payload.replace(/\s+/g, "");
  const pad = clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0;
  return Math.floor(clean.length * 3 / 4) - pad;
}

/** A name safe as the tail of a file name: no folders, no control characters. */
function safeName(name: string): string {
  const base = name.replace(/\\/g, "/").split("/").pop() ?? "";
  // deno-lint-ignore no-control-regex
  const cleaned = base.replace(/[\u0000-\u001f\u007f<>:"|?*]/g, "_").replace(/^\.+/, "").trim();
  return (cleaned || "attachment").slice(0, 120);
}

/**
 * Validates and normalises attachments a host received (manual §13.2 step 1): at most
 * {@link MAX_ATTACHMENTS}, each an `image/*`, `audio/*` or `video/*` base64 data URL whose type
 * matches `mimeType` (taken from the data URL when missing), at most {@link MAX_ATTACHMENT_BYTES}
 * decoded bytes each and in total. Names lose any folder part.
 *
 * @param raw The attachments as received (an array), or `null`/`undefined`.
 * @returns The normalised list, or `null` when there is none.
 * @throws {AttachmentError} `too_many`, `too_large`, `bad_type` or `bad_data`, naming the file.
 * @example
 * ```ts
 * import { normalizeAttachments } from "@zqagent/core";
 * const list = normalizeAttachments([
 *   { name: "dot.png", mimeType: "image/png", dataUrl: "data:image/png;base64,iVBORw0KGgo=" },
 * ]) ?? [];
 * ```
 */
export function normalizeAttachments(raw: unknown): MessageAttachment[] | null {
  if (raw === null || raw === undefined) return null;
  if (!Array.isArray(raw)) {
    throw new AttachmentError("Cannot read attachments: expected an array", "bad_data");
  }
  if (raw.length === 0) return null;
  if (raw.length > MAX_ATTACHMENTS) {
    throw new AttachmentError(
      `Cannot attach ${raw.length} files: at most ${MAX_ATTACHMENTS} per message`,
      "too_many",
    );
  }
  let total = 0;
  const out: MessageAttachment[] = [];
  raw.forEach((item, i) => {
    const a = (item && typeof item === "object" ? item : {}) as Record<string, unknown>;
    const name = safeName(typeof a.name === "string" && a.name ? a.name : `attachment-${i + 1}`);
    if (typeof a.dataUrl !== "string") {
      throw new AttachmentError(`Cannot attach ${name}: dataUrl is missing`, "bad_data");
    }
    const m = DATA_URL_RE.exec(a.dataUrl);
    if (!m) {
      throw new AttachmentError(
        `Cannot attach ${name}: dataUrl is not a base64 data URL (data:<mime>;base64,<payload>)`,
        "bad_data",
      );
    }
    const urlMime = m[1].trim().toLowerCase();
    const mimeType = (typeof a.mimeType === "string" && a.mimeType ? a.mimeType : urlMime)
      .trim().toLowerCase();
    if (!MIME_RE.test(mimeType)) {
      throw new AttachmentError(
        `Cannot attach ${name}: type ${mimeType} is not image/*, audio/* or video/*`,
        "bad_type",
      );
    }
    if (urlMime !== mimeType) {
      throw new AttachmentError(
        `Cannot attach ${name}: mimeType ${mimeType} does not match the data URL's ${urlMime}`,
        "bad_type",
      );
    }
    const payload = m[3].replace(/\s+/g, "");
    if (payload.length === 0 || payload.length % 4 === 1) {
      throw new AttachmentError(
        `Cannot attach ${name}: the base64 payload is empty or cut`,
        "bad_data",
      );
    }
    const size = base64Bytes(payload);
    if (size > MAX_ATTACHMENT_BYTES) {
      const shown = formatOverLimit(size, MAX_ATTACHMENT_BYTES);
      throw new AttachmentError(
        `Cannot attach ${name}: ${shown.size} exceeds the ${shown.limit} limit`,
        "too_large",
      );
    }
    total += size;
    if (total > MAX_ATTACHMENT_BYTES) {
      const shown = formatOverLimit(total, MAX_ATTACHMENT_BYTES);
      throw new AttachmentError(
        `Cannot attach ${name}: the attachments add up to ${shown.size}, over the ${shown.limit} ` +
          "limit per message",
        "too_large",
      );
    }
    out.push({ name, mimeType, dataUrl: `data:${mimeType};base64,${payload}` });
  });
  return out;
}

/**
 * Stores attachments under `<sessionDir>/attachments/` (manual §13.2 step 2). Each file is
 * written to a temporary name and renamed, so no half-written file is ever visible; on an error
 * the files of this call already written are removed again. Files are private to their owner
 * (mode 0600; folders created for them 0700): users' uploads may be personal.
 *
 * @param sessionDir The session's folder (created when missing).
 * @param attachments Attachments; validated again with {@link normalizeAttachments}.
 * @returns One {@link StoredAttachment} per attachment, `path` = `attachments/<file>`.
 * @throws {AttachmentError} When the attachments are invalid.
 * @throws {Error} When the folder cannot be written (the file-system error).
 */
export function saveAttachments(
  sessionDir: string,
  attachments: MessageAttachment[],
): StoredAttachment[] {
  const list = normalizeAttachments(attachments) ?? [];
  if (list.length === 0) return [];
  const dir = path.join(sessionDir, ATTACHMENT_DIR);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stamp = `${Date.now().toString(36)}${randomUUID().slice(0, 6)}`;
  const written: string[] = [];
  try {
    return list.map((a, i) => {
      let file = `${stamp}-${i}-${a.name}`;
      const ext = EXT_BY_MIME[a.mimeType];
      if (ext && !(MIME_BY_EXT[path.extname(file).toLowerCase()] === a.mimeType)) file += ext;
      const bytes = Buffer.from(a.dataUrl.slice(a.dataUrl.indexOf(",") + 1), "base64");
      const target = path.join(dir, file);
      writeFileAtomicSync(target, bytes, { mode: 0o600 });
      written.push(target);
      return {
        name: a.name,
        mimeType: a.mimeType,
        size: bytes.length,
        path: `${ATTACHMENT_DIR}/${file}`,
      };
    });
  } catch (err) {
    for (const f of written) fs.rmSync(f, { force: true });
    throw err;
  }
}

/**
 * Reads a stored attachment back (manual §13.2). Only `attachments/<file>` is accepted: `..`,
 * sub-folders, absolute paths and symlinks leading outside the folder are refused.
 *
 * @param sessionDir The session's folder.
 * @param relPath The `path` of a {@link StoredAttachment}.
 * @returns Name (without the storage prefix), MIME type (from the extension), size in bytes and
 *   the content as base64.
 * @throws {AttachmentError} `bad_path` for any other path shape or a file that is not a regular
 *   file (a named pipe is never opened), `not_found` when missing.
 */
export function readStoredAttachment(
  sessionDir: string,
  relPath: string,
): { name: string; mimeType: string; size: number; base64: string } {
  const parts = typeof relPath === "string" ? relPath.split("/") : [];
  if (
    parts.length !== 2 || parts[0] !== ATTACHMENT_DIR || !parts[1] || parts[1] === "." ||
    parts[1] === ".." || parts[1].includes("\\") || parts[1].includes("\0")
  ) {
    throw new AttachmentError(
      `Cannot read attachment ${
        JSON.stringify(relPath)
      }: only ${ATTACHMENT_DIR}/<file> is accepted`,
      "bad_path",
    );
  }
  const dir = path.join(sessionDir, ATTACHMENT_DIR);
  const target = path.join(dir, parts[1]);
  let real: string;
  let realDir: string;
  try {
    real = fs.realpathSync(target);
    realDir = fs.realpathSync(dir);
  } catch {
    throw new AttachmentError(`Cannot read attachment ${relPath}: it does not exist`, "not_found");
  }
  if (path.dirname(real) !== realDir) {
    throw new AttachmentError(
      `Cannot read attachment ${relPath}: it leads outside ${ATTACHMENT_DIR}/`,
      "bad_path",
    );
  }
  let bytes: Buffer;
  try {
    // Never blocks on a named pipe: refused unless it is a regular file.
    const data = readRegularFileSync(real, { verb: "read attachment", shown: relPath });
    bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  } catch (err) {
    throw new AttachmentError((err as Error).message, "bad_path");
  }
  const file = parts[1];
  const name = file.replace(/^[a-z0-9]+-\d+-/, "");
  const mimeType = MIME_BY_EXT[path.extname(file).toLowerCase()] ?? "application/octet-stream";
  return { name, mimeType, size: bytes.length, base64: bytes.toString("base64") };
}

/** Text standing in for an attachment once its bytes are gone from history. */
export function attachmentReference(
  ref: StoredAttachment | { name?: string; mimeType?: string },
): string {
  const r = ref as Partial<StoredAttachment>;
  const size = typeof r.size === "number" ? `, ${Math.max(1, Math.round(r.size / 1024))} KB` : "";
  const where = r.path ? ` stored at ${r.path}` : "";
  return `[attachment ${r.name ?? "file"} (${r.mimeType ?? "unknown type"}${size})${where}; ` +
    "its content was shown in an earlier turn]";
}

function hasInlineData(m: Message): boolean {
  return Array.isArray(m.content) &&
    m.content.some((p) => p.type === "image_url" && p.image_url.url.startsWith("data:"));
}

/**
 * Replaces inline attachment bytes (`data:` image parts) in messages by short text references,
 * so later requests carry the reference instead of the bytes (manual §13.2 step 3). Messages
 * without inline data are returned as they are (same objects); changed ones are copies.
 *
 * @param messages A history.
 * @returns A new array; the input is not modified.
 */
export function stripAttachments(messages: readonly Message[]): Message[] {
  return messages.map((m) => {
    if (!hasInlineData(m)) return m;
    const refs = Array.isArray(m.attachments) ? m.attachments as StoredAttachment[] : [];
    const parts = m.content as ContentPart[];
    const out: ContentPart[] = [];
    let image = 0;
    for (const p of parts) {
      if (p.type === "image_url" && p.image_url.url.startsWith("data:")) {
        const mime = /^data:([^;,]+)/.exec(p.image_url.url)?.[1];
        const ref = refs.filter((r) => r?.mimeType?.startsWith("image/"))[image++];
        out.push({ type: "text", text: attachmentReference(ref ?? { mimeType: mime }) });
      } else out.push(p);
    }
    return { ...m, content: out };
  });
}

/**
 * The content parts of a user message with attachments: the text, each image as an
 * `image_url` part, and a text note for audio and video (the Chat shape carries images only).
 *
 * @param text The message text.
 * @param attachments Normalised attachments.
 * @param refs Their stored refs, when saved.
 */
export function attachmentParts(
  text: string,
  attachments: MessageAttachment[],
  refs?: readonly StoredAttachment[],
): ContentPart[] {
  const parts: ContentPart[] = [{ type: "text", text }];
  attachments.forEach((a, i) => {
    if (a.mimeType.startsWith("image/")) {
      parts.push({ type: "image_url", image_url: { url: a.dataUrl } });
    } else {
      const ref = refs?.[i] ?? { name: a.name, mimeType: a.mimeType };
      parts.push({
        type: "text",
        text: `[attachment ${ref.name} (${ref.mimeType})${
          "path" in ref && ref.path ? ` stored at ${ref.path}` : ""
        }: this model input carries images only]`,
      });
    }
  });
  return parts;
}
