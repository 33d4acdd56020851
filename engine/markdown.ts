/**
 * `MarkdownRenderer`: renders streamed Markdown to ANSI terminal text, one complete line at a
 * time, so deltas can be printed as they arrive.
 *
 * Hand-written on purpose: full Markdown renderers for terminals (marked-terminal and the like)
 * render whole documents and pull in a large dependency tree, while a streaming agent needs a
 * line-at-a-time renderer for the subset models write (headings, emphasis, code, lists, quotes).
 *
 * @module
 */

/** Options of {@link MarkdownRenderer}. */
export interface MarkdownRendererOptions {
  /** Emit ANSI colours and styles (default true). */
  color?: boolean;
}

const ESC = "\x1b[";
const style = {
  bold: [`${ESC}1m`, `${ESC}22m`],
  italic: [`${ESC}3m`, `${ESC}23m`],
  dim: [`${ESC}2m`, `${ESC}22m`],
  cyan: [`${ESC}36m`, `${ESC}39m`],
  magenta: [`${ESC}35m`, `${ESC}39m`],
  yellow: [`${ESC}33m`, `${ESC}39m`],
} as const;

/**
 * Streams Markdown to terminal text. Feed deltas to {@link MarkdownRenderer.write}; print what it
 * returns; call {@link MarkdownRenderer.flush} at the end of a message.
 *
 * @example
 * ```ts
 * import { MarkdownRenderer } from "@zqagent/core";
 * const md = new MarkdownRenderer({ color: false });
 * const out = md.write("# Title\nSome **bold** text\n") + md.flush();
 * ```
 */
export class MarkdownRenderer {
  #color: boolean;
  #buffer = "";
  #inFence = false;

  /** Creates a renderer. */
  constructor(options: MarkdownRendererOptions = {}) {
    this.#color = options.color ?? true;
  }

  /** Adds a delta; returns the rendered text of the lines it completed (may be ""). */
  write(delta: string): string {
    this.#buffer += delta;
    let out = "";
    let nl: number;
    while ((nl = this.#buffer.indexOf("\n")) >= 0) {
      out += this.renderLine(this.#buffer.slice(0, nl)) + "\n";
      this.#buffer = this.#buffer.slice(nl + 1);
    }
    return out;
  }

  /** Renders what is left (an unfinished last line) and resets the renderer. */
  flush(): string {
    const rest = this.#buffer;
    this.#buffer = "";
    const out = rest ? this.renderLine(rest) : "";
    this.#inFence = false;
    return out;
  }

  #s(kind: keyof typeof style, text: string): string {
    return this.#color ? style[kind][0] + text + style[kind][1] : text;
  }

  /**
   * Renders one complete line (without its newline). Stateful: code fences opened by earlier
   * lines are honoured, so lines must be given in order. {@link MarkdownRenderer.write} calls it.
   */
  renderLine(line: string): string {
    if (/^\s*(```|~~~)/.test(line)) {
      this.#inFence = !this.#inFence;
      return this.#s("dim", line);
    }
    if (this.#inFence) return this.#s("cyan", line);
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) return this.#s("bold", this.#s("magenta", this.#inline(heading[2])));
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) return this.#s("dim", "─".repeat(40));
    const quote = /^\s*>\s?(.*)$/.exec(line);
    if (quote) return this.#s("dim", "│ ") + this.#s("italic", this.#inline(quote[1]));
    const bullet = /^(\s*)[-*+]\s+(.*)$/.exec(line);
    if (bullet) return `${bullet[1]}${this.#s("yellow", "•")} ${this.#inline(bullet[2])}`;
    return this.#inline(line);
  }

  #inline(text: string): string {
    const parts = text.split(/(`[^`]+`)/g);
    return parts.map((part) => {
      if (part.startsWith("`") && part.endsWith("`") && part.length > 1) {
        return this.#s("cyan", part.slice(1, -1));
      }
      return part
        .replace(/\*\*([^*]+)\*\*|__([^_]+)__/g, (_m, a, b) => this.#s("bold", a ?? b))
        .replace(/(^|[^*\w])\*([^*\s][^*]*)\*(?!\w)/g, (_m, pre, a) => pre + this.#s("italic", a));
    }).join("");
  }
}
