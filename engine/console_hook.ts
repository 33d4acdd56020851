/**
 * `ConsoleHook`: a reference terminal renderer built on the hook callbacks (manual §11.2). Not a
 * UI framework: hosts with a UI consume the event stream instead.
 *
 * @module
 */
import process from "node:process";
import type { TokenUsage, ToolCall } from "../providers/mod.ts";
import type { EngineHook } from "./hooks.ts";
import { MarkdownRenderer } from "./markdown.ts";

/** Options of {@link ConsoleHook}. */
export interface ConsoleHookOptions {
  /** Where text goes (default: `process.stdout`). */
  write?: (text: string) => void;
  /** ANSI colours (default: true when stdout is a TTY and `NO_COLOR` is unset). */
  color?: boolean;
  /** Show reasoning text, dimmed (default true). */
  showReasoning?: boolean;
  /** Characters of tool arguments shown (default 300). */
  maxArgChars?: number;
  /** Echo the user's input at the start of a turn (default true; a REPL where the user just
   * typed it turns this off). */
  showInput?: boolean;
  /**
   * Print answer text as it streams, redrawing each line with its Markdown styling once the line
   * is complete (default: `color`, i.e. on a terminal). Off, each line is printed when complete.
   */
  live?: boolean;
  /** Terminal width in columns, for redrawing streamed lines (default `process.stdout.columns`,
   * else 80). */
  columns?: number;
}

/** Display width of text: East Asian wide characters count 2 columns. */
function displayWidth(text: string): number {
  let width = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    width += cp >= 0x1100 && (cp <= 0x115f || (cp >= 0x2e80 && cp <= 0xa4cf) ||
        (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) ||
        (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
        (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1faff) ||
        (cp >= 0x20000 && cp <= 0x3fffd))
      ? 2
      : 1;
  }
  return width;
}

/**
 * Prints a turn to a terminal: answer text rendered from Markdown, reasoning dimmed, each tool
 * call with its arguments and outcome, approvals, errors and the final status.
 *
 * @example
 * ```ts
 * import { ConsoleHook } from "@zqagent/core";
 * const hook = new ConsoleHook({ color: false });
 * hook.onToolProposed("read_file", { path: "README.md" });
 * ```
 */
export class ConsoleHook implements EngineHook {
  #write: (text: string) => void;
  #color: boolean;
  #showReasoning: boolean;
  #maxArg: number;
  #md: MarkdownRenderer;
  #inReasoning = false;
  #lineOpen = false;
  #showInput: boolean;
  #live: boolean;
  #columns: number;
  /** The answer line being streamed (raw), and how much of it is already on screen. */
  #line = "";
  #shown = 0;

  /** Creates the hook. */
  constructor(options: ConsoleHookOptions = {}) {
    this.#write = options.write ?? ((t) => void process.stdout.write(t));
    this.#color = options.color ??
      (!!process.stdout.isTTY && process.env.NO_COLOR === undefined);
    this.#showReasoning = options.showReasoning ?? true;
    this.#maxArg = options.maxArgChars ?? 300;
    this.#md = new MarkdownRenderer({ color: this.#color });
    this.#showInput = options.showInput ?? true;
    this.#live = options.live ?? this.#color;
    this.#columns = options.columns ?? (process.stdout.columns || 80);
  }

  #c(code: string, text: string): string {
    return this.#color ? `\x1b[${code}m${text}\x1b[0m` : text;
  }

  #out(text: string): void {
    if (!text) return;
    this.#write(text);
    this.#lineOpen = !text.endsWith("\n");
  }

  /** Prints a completed answer line: rendered, redrawing the raw text already shown when it fits
   * on one terminal row, else finishing it raw. */
  #completeLine(newline: boolean): void {
    const raw = this.#line;
    const rendered = this.#md.renderLine(raw);
    if (this.#shown === 0) this.#out(rendered);
    else if (displayWidth(raw) < this.#columns) this.#out("\r\x1b[2K" + rendered);
    else this.#out(raw.slice(this.#shown));
    if (newline) this.#out("\n");
    this.#line = "";
    this.#shown = 0;
  }

  #endLine(): void {
    if (this.#line) this.#completeLine(false);
    this.#md.flush();
    if (this.#lineOpen) this.#out("\n");
    this.#inReasoning = false;
  }

  /** Prints the user's input header. */
  onTurnStart(input: string): void {
    if (!this.#showInput) return;
    this.#out(this.#c("2", `› ${input.split("\n")[0].slice(0, 200)}`) + "\n");
  }

  /** Streams answer text through the Markdown renderer. */
  onAssistantDelta(text: string): void {
    if (this.#inReasoning) {
      this.#out("\n");
      this.#inReasoning = false;
    }
    const pieces = text.split("\n");
    pieces.forEach((piece, i) => {
      this.#line += piece;
      if (i < pieces.length - 1) {
        this.#completeLine(true);
      } else if (this.#live && this.#line.length > this.#shown) {
        this.#out(this.#line.slice(this.#shown));
        this.#shown = this.#line.length;
      }
    });
  }

  /** Streams reasoning text, dimmed. */
  onReasoningDelta(text: string): void {
    if (!this.#showReasoning) return;
    if (!this.#inReasoning) {
      this.#out(this.#c("2", "thinking: "));
      this.#inReasoning = true;
    }
    this.#out(this.#c("2", text));
  }

  /** Ends the streamed message. */
  onAssistantMessage(_text: string, _toolCalls: ToolCall[], _usage?: TokenUsage): void {
    this.#endLine();
  }

  /** Shows a proposed tool call with its arguments. */
  onToolProposed(name: string, args: Record<string, unknown>): void {
    let shown = JSON.stringify(args);
    if (shown.length > this.#maxArg) shown = shown.slice(0, this.#maxArg) + "…";
    this.#out(`${this.#c("36", "▸ " + name)} ${this.#c("2", shown)}\n`);
  }

  /** Shows that a call needs approval. */
  onPermissionRequired(name: string, reason: string): void {
    this.#out(this.#c("33", `  ? ${name} needs approval: ${reason}`) + "\n");
  }

  /** Shows a tool call's outcome. */
  onToolFinished(name: string, status: string, resultPreview: string): void {
    const mark = status === "ok" ? this.#c("32", "✓") : this.#c("31", "✗");
    const preview = resultPreview.replace(/\s+/g, " ").slice(0, 120);
    this.#out(`  ${mark} ${name} ${this.#c("2", `${status}  ${preview}`)}\n`);
  }

  /** Shows an error. */
  onError(error: string, errorType: string, info?: Record<string, unknown>): void {
    this.#endLine();
    const retry = info?.retriable ? " (retriable)" : "";
    this.#out(this.#c("31", `error [${errorType}]${retry}: ${error}`) + "\n");
  }

  /** Shows an automatic retry. */
  onRetry(attempt: number, max: number, reason: string): void {
    this.#out(this.#c("33", `  retrying (${attempt}/${max}): ${reason}`) + "\n");
  }

  /** Shows an interrupt. */
  onInterrupted(iterations: number): void {
    this.#endLine();
    this.#out(this.#c("33", `interrupted after ${iterations} iteration(s)`) + "\n");
  }

  /** Prints the turn's final status. */
  onTurnEnd(status: string, iterations: number, producedFiles: string[]): void {
    this.#endLine();
    const files = producedFiles.length ? `, wrote ${producedFiles.join(", ")}` : "";
    const colour = status === "completed" ? "32" : status === "interrupted" ? "33" : "31";
    this.#out(
      this.#c(colour, `[turn_end] ${status}`) +
        this.#c("2", ` (${iterations} iteration(s)${files})`) + "\n",
    );
  }

  /** Shows steering injections and compaction notices. */
  onEvent(type: string, data: Record<string, unknown>): void {
    if (type === "queue_steering") this.#out(this.#c("2", `› (steering) ${data.text}`) + "\n");
    if (type === "ask_user_question") {
      this.#endLine();
      this.#out(this.#c("35", `? ${data.question}`) + "\n");
    }
  }
}
