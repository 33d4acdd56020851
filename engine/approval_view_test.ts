import { test } from "node:test";
import assert from "node:assert/strict";
import { approvalFields, approvalToHtmlTable, approvalToMarkdownTable } from "./approval_view.ts";
import type { PermissionRequest } from "../permissions/mod.ts";

const shell: PermissionRequest = {
  toolName: "run_shell",
  arguments: { command: "npm test", timeout: 30 },
  metadata: null,
  reason: "shell command needs approval",
  toolCallId: "call_1",
};

test("approvalFields lists tool, reason and every argument in order", () => {
  const rows = approvalFields(shell);
  assert.deepEqual(rows.map((r) => [r.key, r.kind, r.value]), [
    ["tool", "tool", "run_shell"],
    ["reason", "reason", "shell command needs approval"],
    ["args.command", "command", "npm test"],
    ["args.timeout", "argument", "30"],
  ]);
});

test("approvalFields accepts the data of a permission_required event", () => {
  const rows = approvalFields({
    name: "write_file",
    arguments: JSON.stringify({ path: "a.md", content: "x" }),
    reason: "write",
    category: "fs",
    reqId: "c",
  });
  assert.deepEqual(rows.map((r) => r.key), [
    "tool",
    "reason",
    "category",
    "args.path",
    "args.content",
  ]);
  assert.equal(rows[3].kind, "path");
});

test("approvalFields shortens long values but never a shell command", () => {
  const long = "x".repeat(5000);
  const rows = approvalFields(
    { name: "run_shell", arguments: { command: long, note: long } },
    { maxValueChars: 100 },
  );
  assert.equal(rows.find((r) => r.key === "args.command")?.value, long);
  const note = rows.find((r) => r.key === "args.note")!;
  assert.equal(note.truncated, true);
  assert.match(note.value, /4900 characters not shown/);
});

test("approvalFields never splits a character made of two UTF-16 units", () => {
  const rows = approvalFields({ name: "t", arguments: { v: "😀".repeat(100) } }, {
    maxValueChars: 20,
  });
  assert.ok(!/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(rows[1].value));
});

test("approvalFields rejects a request without a tool name", () => {
  assert.throws(() => approvalFields({ name: "" }), /no tool name/);
});

test("approvalToHtmlTable escapes every value, label and key", () => {
  const html = approvalToHtmlTable({
    name: "write_file",
    arguments: { path: "<img src=x onerror=alert(1)>", ['"><script>']: "a&b 'q'" },
    reason: "<b>bold</b>",
  });
  assert.ok(!html.includes("<img"));
  assert.ok(!html.includes("<script>"));
  assert.ok(!html.includes("<b>"));
  assert.match(html, /&lt;img src=x onerror=alert\(1\)&gt;/);
  assert.match(html, /a&amp;b &#39;q&#39;/);
  assert.match(html, /data-key="args\.&quot;&gt;&lt;script&gt;"/);
  assert.match(html, /^<table class="approval"><tbody><tr data-key="tool"/);
});

test("approvalToMarkdownTable keeps pipes, markup and line breaks from breaking the table", () => {
  const md = approvalToMarkdownTable({
    name: "run_shell",
    arguments: { command: "ls | wc -l\n<script>[x](http://e)" },
  });
  const lines = md.split("\n");
  assert.equal(lines.length, 4);
  assert.equal(lines[0], "| Field | Value |");
  assert.equal(lines[2], "| Tool | run\\_shell |");
  assert.equal(
    lines[3],
    "| command | ls \\| wc \\-l<br>\\<script\\>\\[x\\]\\(http\\:\\/\\/e\\) |",
  );
  // Every cell separator left unescaped is one of the table's own.
  assert.equal(lines[3].replace(/\\\|/g, "").split("|").length, 3 + 0 + 1);
});
