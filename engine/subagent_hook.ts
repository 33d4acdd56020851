/**
 * `SubagentHook`: the reference terminal view of a subagent (manual §16.1). It prints the
 * subagent's tool calls indented under the parent's output, as the CLI does.
 *
 * @module
 */
import process from "node:process";
import type { EngineHook } from "./hooks.ts";

/** Options of {@link SubagentHook}. */
export interface SubagentHookOptions {
  /** Where text goes (default: `process.stdout`). */
  write?: (text: string) => void;
  /** ANSI colours (default: true when stdout is a TTY and `NO_COLOR` is unset). */
  color?: boolean;
  /** Indentation of every line (default four spaces). */
  indent?: string;
  /** Characters of tool arguments shown (default 160). */
  maxArgChars?: number;
}

/**
 * Prints a subagent's run indented: its task, each tool call with arguments and outcome,
 * errors, and how it ended. One instance per subagent call (use it from a factory).
 *
 * @example
 * ```ts
 * import { createDefaultEngine, SubagentHook } from "@zqagent/core";
 * const engine = createDefaultEngine({
 *   workspace: ".",
 *   model: "gpt-4o-mini",
 *   subagentHookFactory: () => new SubagentHook("explore"), // one per subagent call
 * });
 * ```
 */
export class SubagentHook implements EngineHook {
  /** The subagent's name, shown on its lines. */
  readonly name: string;
  #write: (text: string) => void;
  #color: boolean;
  #indent: string;
  #maxArg: number;

  /**
   * Creates the hook.
   *
   * @param name The subagent's name (default `"explore"`).
   * @param options Output, colour, indentation.
   */
  constructor(name = "explore", options: SubagentHookOptions = {}) {
    this.name = name;
    this.#write = options.write ?? ((t) => void process.stdout.write(t));
    this.#color = options.color ??
      (!!process.stdout.isTTY && process.env.NO_COLOR === undefined);
    this.#indent = options.indent ?? "    ";
    this.#maxArg = options.maxArgChars ?? 160;
  }

  #line(code: string, text: string): void {
    const shown = this.#color ? `\x1b[${code}m${text}\x1b[0m` : text;
    this.#write(`${this.#indent}${shown}\n`);
  }

  /** Prints the subagent's task. */
  onTurnStart(input: string): void {
    this.#line("2", `↳ [${this.name}] ${input.split("\n")[0].slice(0, 160)}`);
  }

  /** Prints a proposed tool call. */
  onToolProposed(name: string, args: Record<string, unknown>): void {
    let shown = JSON.stringify(args);
    if (shown.length > this.#maxArg) shown = `${shown.slice(0, this.#maxArg)}…`;
    this.#line("36", `▸ ${name} ${shown}`);
  }

  /** Prints a tool call's outcome. */
  onToolFinished(name: string, status: string, _resultPreview: string): void {
    this.#line(status === "ok" ? "32" : "31", `  ${status === "ok" ? "✓" : "✗"} ${name} ${status}`);
  }

  /** Prints an error of the subagent. */
  onError(error: string, errorType: string): void {
    this.#line("31", `✗ [${this.name}] ${errorType}: ${error}`);
  }

  /** Prints how the subagent ended. */
  onTurnEnd(status: string, iterations: number, _producedFiles: string[]): void {
    this.#line("2", `↳ [${this.name}] ${status} (${iterations} iteration(s))`);
  }
}
