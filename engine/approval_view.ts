/**
 * View helpers for approval cards (manual §20.1, "hooks y vistas"): the rows a host shows a
 * person before a tool call runs, as data ({@link approvalFields}), as an HTML table
 * ({@link approvalToHtmlTable}) or as a Markdown table ({@link approvalToMarkdownTable}).
 *
 * Everything rendered is escaped: tool arguments come from the model, which may be steered by a
 * prompt injection, so a value like `<img src=x onerror=…>` must show as text, never run.
 *
 * This file imports nothing at run time, so a browser page can load it as a module too (the
 * reference server in `examples/server/` does).
 *
 * @module
 */
import type { PermissionRequest } from "../permissions/mod.ts";

/**
 * What the helpers accept: a {@link PermissionRequest} as the approver receives it, or the data
 * of a `permission_required` event (`name`, `arguments`, `reason`, `category`, `reqId`).
 */
export type ApprovalSubject =
  | PermissionRequest
  | {
    /** Tool name (`permission_required.data.name`). */
    name: string;
    /** Tool arguments (an object, or the raw JSON text). */
    arguments?: unknown;
    /** Why approval is needed. */
    reason?: unknown;
    /** Risk category, when known. */
    category?: unknown;
    /** The tool call id. */
    reqId?: unknown;
  };

/** What kind of row a field is. */
export type ApprovalFieldKind = "tool" | "reason" | "category" | "command" | "path" | "argument";

/** One row of an approval card. */
export interface ApprovalField {
  /** Machine key: `tool`, `reason`, `category`, or `args.<argument name>`. */
  key: string;
  /** Label shown to the person (the argument name for arguments). */
  label: string;
  /** The value as text (objects as indented JSON); may be shortened, see `truncated`. */
  value: string;
  /** What the row is: commands and paths deserve a monospace, never-wrapped look. */
  kind: ApprovalFieldKind;
  /** True when the middle of a long value was left out. */
  truncated: boolean;
}

/** Options of the approval view helpers. */
export interface ApprovalViewOptions {
  /**
   * Longest value shown, in characters (default 2,000); longer values show their head and tail
   * with a note of how much was left out. A shell `command` is always shown whole: what runs
   * must be what the person approves.
   */
  maxValueChars?: number;
  /** Labels of the fixed rows (defaults `Tool`, `Reason`, `Category`). */
  labels?: { tool?: string; reason?: string; category?: string };
}

/** Default longest value shown (characters). */
const DEFAULT_MAX_VALUE_CHARS = 2000;

function text(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === undefined) return "";
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Shortens by code points (never splits a surrogate pair). */
function shorten(value: string, max: number): { value: string; truncated: boolean } {
  const chars = Array.from(value);
  if (chars.length <= max) return { value, truncated: false };
  const half = Math.max(1, Math.floor(max / 2));
  const left = chars.length - 2 * half;
  return {
    value: `${chars.slice(0, half).join("")}\n… ${left} characters not shown …\n${
      chars.slice(-half).join("")
    }`,
    truncated: true,
  };
}

function argsOf(subject: ApprovalSubject): Record<string, unknown> {
  const raw = subject.arguments;
  if (typeof raw === "string") {
    try {
      const parsed = JSON.parse(raw);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed;
    } catch {
      // not JSON: shown as one row
    }
    return raw === "" ? {} : { arguments: raw };
  }
  if (raw && typeof raw === "object" && !Array.isArray(raw)) return raw as Record<string, unknown>;
  return raw === undefined || raw === null ? {} : { arguments: raw };
}

const PATH_KEYS = new Set(["path", "file", "file_path", "directory", "dir", "cwd"]);

/**
 * The rows of an approval card: the tool, the reason, the category when known, then every
 * argument in the order given (manual §8.3: the person must see what will run).
 *
 * @param request A {@link PermissionRequest} or the data of a `permission_required` event.
 * @param options See {@link ApprovalViewOptions}.
 * @returns The rows, values as plain (unescaped) text.
 * @throws {TypeError} When `request` has no tool name.
 * @example
 * ```ts
 * import { approvalFields } from "@zqagent/core";
 * const rows = approvalFields({ name: "run_shell", arguments: { command: "npm test" }, reason: "shell" });
 * // [{ key: "tool", value: "run_shell", … }, { key: "reason", … }, { key: "args.command", kind: "command", … }]
 * ```
 */
export function approvalFields(
  request: ApprovalSubject,
  options: ApprovalViewOptions = {},
): ApprovalField[] {
  const name = request && typeof request === "object"
    ? ("toolName" in request ? request.toolName : (request as { name?: unknown }).name)
    : undefined;
  if (typeof name !== "string" || name === "") {
    throw new TypeError("Cannot build approval fields: the request has no tool name");
  }
  const max = Math.max(16, Math.floor(options.maxValueChars ?? DEFAULT_MAX_VALUE_CHARS));
  const labels = options.labels ?? {};
  const rows: ApprovalField[] = [
    { key: "tool", label: labels.tool ?? "Tool", value: name, kind: "tool", truncated: false },
  ];
  const reason = text(request.reason);
  if (reason !== "") {
    rows.push({
      key: "reason",
      label: labels.reason ?? "Reason",
      ...shorten(reason, max),
      kind: "reason",
    });
  }
  const category = "category" in request ? text(request.category) : "";
  if (category !== "") {
    rows.push({
      key: "category",
      label: labels.category ?? "Category",
      ...shorten(category, max),
      kind: "category",
    });
  }
  for (const [key, value] of Object.entries(argsOf(request))) {
    const kind: ApprovalFieldKind = key === "command"
      ? "command"
      : PATH_KEYS.has(key)
      ? "path"
      : "argument";
    const shown = kind === "command"
      ? { value: text(value), truncated: false }
      : shorten(text(value), max);
    rows.push({ key: `args.${key}`, label: key, ...shown, kind });
  }
  return rows;
}

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

/**
 * An approval card as an HTML `<table class="approval">`: one row per field
 * (`<tr data-key="…" data-kind="…"><th scope="row">label</th><td>value</td></tr>`), values in
 * `<pre>` so line breaks show. Every label, key and value is HTML-escaped, so the result is safe
 * to put in `innerHTML` whatever the model wrote.
 *
 * @param request A {@link PermissionRequest} or the data of a `permission_required` event.
 * @param options See {@link ApprovalViewOptions}.
 * @returns The HTML text.
 * @throws {TypeError} When `request` has no tool name.
 * @example
 * ```ts
 * import { approvalToHtmlTable } from "@zqagent/core";
 * const html = approvalToHtmlTable({ name: "write_file", arguments: { path: "a.md", content: "<b>" } });
 * // … <td><pre>&lt;b&gt;</pre></td> …
 * ```
 */
export function approvalToHtmlTable(
  request: ApprovalSubject,
  options: ApprovalViewOptions = {},
): string {
  const rows = approvalFields(request, options).map((f) =>
    `<tr data-key="${escapeHtml(f.key)}" data-kind="${f.kind}"><th scope="row">${
      escapeHtml(f.label)
    }</th><td><pre>${escapeHtml(f.value)}</pre></td></tr>`
  );
  return `<table class="approval"><tbody>${rows.join("")}</tbody></table>`;
}

/** Backslash-escapes every ASCII punctuation character (CommonMark allows it for all of them). */
function escapeMarkdown(value: string): string {
  return value
    .replace(/[!-/:-@[-`{-~]/g, (c) => `\\${c}`)
    .replace(/\r?\n/g, "<br>");
}

/**
 * An approval card as a GitHub-flavoured Markdown table with the columns `Field` and `Value`
 * (for chat tools, tickets and IM approvals). Every ASCII punctuation character of labels and
 * values is backslash-escaped (so `|`, `*`, `` ` ``, `<` and `[` stay text) and line breaks
 * become `<br>`, so a value can neither break the table nor inject markup or links.
 *
 * @param request A {@link PermissionRequest} or the data of a `permission_required` event.
 * @param options See {@link ApprovalViewOptions}.
 * @returns The Markdown text (header, separator, one line per field).
 * @throws {TypeError} When `request` has no tool name.
 * @example
 * ```ts
 * import { approvalToMarkdownTable } from "@zqagent/core";
 * const md = approvalToMarkdownTable({ name: "run_shell", arguments: { command: "ls | wc -l" } });
 * // | Field | Value |\n| --- | --- |\n| Tool | run\_shell |\n| command | ls \| wc \-l |
 * ```
 */
export function approvalToMarkdownTable(
  request: ApprovalSubject,
  options: ApprovalViewOptions = {},
): string {
  const rows = approvalFields(request, options).map((f) =>
    `| ${escapeMarkdown(f.label)} | ${escapeMarkdown(f.value)} |`
  );
  return ["| Field | Value |", "| --- | --- |", ...rows].join("\n");
}
