/**
 * Splits `<think>…</think>` reasoning out of streamed answer text (vLLM, Ollama, MiniMax,
 * llama.cpp and other servers that inline reasoning in `content`). Tags may be split across any
 * number of deltas. Only a block that opens the answer (after optional whitespace) counts as
 * reasoning; a `<think>` later in the text is ordinary text.
 *
 * @module
 */

const OPEN = "<think>";
const CLOSE = "</think>";

/** Text routed to the two channels by one {@link ThinkTagSplitter.push}. */
export interface SplitText {
  /** Answer text ("" when none). */
  content: string;
  /** Reasoning text ("" when none). */
  reasoning: string;
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialTagSuffix(text: string, tag: string): number {
  const max = Math.min(text.length, tag.length - 1);
  for (let n = max; n > 0; n--) if (tag.startsWith(text.slice(text.length - n))) return n;
  return 0;
}

/** Incremental splitter; one per streamed response. */
export class ThinkTagSplitter {
  #state: "start" | "inside" | "text" = "start";
  #pending = "";
  #trimReasoning = false;
  #trimContent = false;

  /**
   * True once every further delta is answer text as it is (past a leading `<think>` block and
   * the whitespace after it, nothing held back): a caller may then skip {@link push}.
   */
  get passthrough(): boolean {
    return this.#state === "text" && !this.#trimContent && this.#pending === "";
  }

  /** Feeds one content delta; returns what can be emitted now (the rest is held back). */
  push(delta: string): SplitText {
    const out: SplitText = { content: "", reasoning: "" };
    let buf = this.#pending + delta;
    this.#pending = "";
    while (buf !== "") {
      if (this.#state === "start") {
        const lead = buf.length - buf.trimStart().length;
        const rest = buf.slice(lead);
        if (rest === "") {
          this.#pending = buf;
          break;
        }
        if (rest.startsWith(OPEN)) {
          this.#state = "inside";
          this.#trimReasoning = true;
          buf = rest.slice(OPEN.length);
          continue;
        }
        if (OPEN.startsWith(rest)) {
          this.#pending = buf;
          break;
        }
        this.#state = "text";
        continue;
      }
      if (this.#state === "inside") {
        const end = buf.indexOf(CLOSE);
        if (end >= 0) {
          out.reasoning += this.#reasoningText(buf.slice(0, end));
          this.#state = "text";
          this.#trimContent = true;
          buf = buf.slice(end + CLOSE.length);
          continue;
        }
        const keep = partialTagSuffix(buf, CLOSE);
        out.reasoning += this.#reasoningText(buf.slice(0, buf.length - keep));
        this.#pending = buf.slice(buf.length - keep);
        break;
      }
      // "text": everything is answer text.
      let text = buf;
      if (this.#trimContent) {
        text = text.trimStart();
        if (text !== "") this.#trimContent = false;
      }
      out.content += text;
      break;
    }
    return out;
  }

  /** Ends the stream: whatever is held back is released (an unclosed block stays reasoning). */
  flush(): SplitText {
    const rest = this.#pending;
    this.#pending = "";
    if (rest === "") return { content: "", reasoning: "" };
    if (this.#state === "inside") return { content: "", reasoning: this.#reasoningText(rest) };
    return { content: rest, reasoning: "" };
  }

  #reasoningText(text: string): string {
    if (!this.#trimReasoning) return text;
    const trimmed = text.trimStart();
    if (trimmed !== "") this.#trimReasoning = false;
    return trimmed;
  }
}
