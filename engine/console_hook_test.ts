import { test } from "node:test";
import assert from "node:assert/strict";
import { ConsoleHook, MarkdownRenderer } from "./mod.ts";

function hook(options: { live: boolean; color?: boolean; columns?: number }) {
  const out: string[] = [];
  const h = new ConsoleHook({
    write: (t) => out.push(t),
    color: options.color ?? false,
    live: options.live,
    columns: options.columns ?? 80,
  });
  return { h, out, text: () => out.join("") };
}

test("without live output a line is printed only when it is complete", () => {
  const { h, out, text } = hook({ live: false });
  h.onAssistantDelta("Hello ");
  h.onAssistantDelta("wor");
  assert.equal(text(), "");
  h.onAssistantDelta("ld\nnext");
  assert.equal(text(), "Hello world\n");
  h.onAssistantMessage("Hello world\nnext", []);
  assert.equal(text(), "Hello world\nnext\n");
  assert.ok(out.length > 0);
});

test("live output shows text as it streams and redraws the line with its styling", () => {
  const { h, text } = hook({ live: true, color: true });
  h.onAssistantDelta("some **bo");
  assert.equal(text(), "some **bo");
  h.onAssistantDelta("ld** text\n");
  assert.equal(text(), "some **bo\r\x1b[2Ksome \x1b[1mbold\x1b[22m text\n");
});

test("a streamed line wider than the terminal is finished raw instead of redrawn", () => {
  const { h, text } = hook({ live: true, columns: 10 });
  h.onAssistantDelta("a line that is long");
  h.onAssistantDelta(" **x**\n");
  assert.equal(text(), "a line that is long **x**\n");
});

test("wide East Asian characters count two columns when deciding to redraw", () => {
  const { h, text } = hook({ live: true, columns: 10 });
  h.onAssistantDelta("漢字漢字漢");
  h.onAssistantDelta("\n");
  assert.ok(!text().includes("\r"), JSON.stringify(text()));
});

test("the REPL can turn off echoing the user's input", () => {
  const a = hook({ live: false });
  a.h.onTurnStart("hi there");
  assert.match(a.text(), /hi there/);
  const out: string[] = [];
  const quiet = new ConsoleHook({ write: (t) => out.push(t), color: false, showInput: false });
  quiet.onTurnStart("hi there");
  assert.deepEqual(out, []);
});

test("MarkdownRenderer renders headings, lists, inline code and leaves code fences alone", () => {
  const md = new MarkdownRenderer({ color: false });
  const out = md.write("# Title\n- item `x`\n```\n**not bold**\n```\n") + md.flush();
  assert.equal(out, "Title\n• item x\n```\n**not bold**\n```\n");
  const colored = new MarkdownRenderer({ color: true });
  assert.equal(colored.renderLine("**b**"), "\x1b[1mb\x1b[22m");
});
