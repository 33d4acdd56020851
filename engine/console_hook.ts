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

  /** Creates the hook. */
  constructor(options: ConsoleHookOptions = {}) {
    this.#write = options.write ?? ((t) => void process.stdout.write(t));
    this.#color = options.color ??
      (!!process.stdout.isTTY && process.env.NO_COLOR === undefined);
    this.#showReasoning = options.showReasoning ?? true;
    this.#maxArg = options.maxArgChars ?? 300;
    this.#md = new MarkdownRenderer({ color: this.#color });
  }

  #c(code: string, text: string): string {
    return this.#color ? `\x1b[${code}m${text}\x1b[0m` : text;
  }

  #out(text: string): void {
    if (!text) return;
    this.#write(text);
    this.#lineOpen = !text.endsWith("\n");
  }

  #endLine(): void {
    const rest = this.#md.flush();
    if (rest) this.#out(rest);
    if (this.#lineOpen) this.#out("\n");
    this.#inReasoning = false;
  }

  /** Prints the user's input header. */
  onTurnStart(input: string): void {
    this.#out(this.#c("2", `› ${input.split("\n")[0].slice(0, 200)}`) + "\n");
  }

  /** Streams answer text through the Markdown renderer. */
  onAssistantDelta(text: string): void {
    if (this.#inReasoning) {
      this.#out("\n");
      this.#inReasoning = false;
    }
    this.#out(this.#md.write(text));
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
