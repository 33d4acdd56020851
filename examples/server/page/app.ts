/// <reference lib="dom" />
/**
 * The reference server's browser page: a chat that streams text and reasoning, shows each tool
 * call with its arguments and result, an approval card (once / always this tool / always this
 * command / deny) for each pending call, a Stop button, and the turns with their diffs when VCS
 * snapshots are on. Plain TypeScript, no framework; the server strips the types.
 *
 * One page for both of the server's modes; it learns which from `mode` in
 * `GET /sessions/:id`:
 *
 * - `single` (`server.ts`): `POST /sessions/:id/messages` answers with the SSE of the turn, read
 *   to its end; Stop is `POST /sessions/:id/interrupt`.
 * - `cluster` (`cluster.ts`, multi-worker): `POST /sessions/:id/messages` answers 202 (sent with
 *   an `Idempotency-Key`, so a retry after a network error is not a second message), and the
 *   events come from `GET /sessions/:id/events`, one stream per open session, read with `fetch`
 *   (an `EventSource` cannot send the `Authorization` header). After a drop it reconnects with
 *   `Last-Event-ID` set to the last event shown, and skips any event at or below it, so nothing
 *   is shown twice. An approval card closes when the approval is settled anywhere: the call
 *   starts or finishes, the store records the answer (an `inbox` event of kind `approval`,
 *   written for answers from any front end and for the denials of a cancel), or the turn ends.
 *   Stop queues a cancel (`POST /sessions/:id/interrupt`, also with an `Idempotency-Key`).
 *   The turns panel reads `GET /sessions/:id/turns` as in single mode (the front end reads the
 *   workers' snapshots from git), again after each `turn_end`.
 *
 * Everything the model or a tool wrote is put in the page as text (`textContent`) or through
 * `approvalToHtmlTable`, which escapes it.
 *
 * @module
 */
import { approvalToHtmlTable } from "../../../engine/approval_view.ts";

type Data = Record<string, unknown>;
/** Which server the page talks to (see the module doc). */
type Mode = "single" | "cluster";

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
const log = $<HTMLDivElement>("log");
const input = $<HTMLTextAreaElement>("input");
const sendButton = $<HTMLButtonElement>("send");
const interruptButton = $<HTMLButtonElement>("interrupt");
const sessionSelect = $<HTMLSelectElement>("sessions");
const streamStatus = $<HTMLSpanElement>("stream-status");

let token = "";
let sessionId = "";
let busy = false;
let mode: Mode = "single";
/** The open session's event stream (cluster mode). */
let feed: EventFeed | null = null;

/** A 401: the token form is shown again. */
class Unauthorized extends Error {}

function el(tag: string, className: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function scroll(): void {
  log.lastElementChild?.scrollIntoView({ block: "end" });
}

function setBusy(on: boolean): void {
  busy = on;
  sendButton.disabled = on;
  interruptButton.disabled = !on;
}

/** A random key for `Idempotency-Key` (`crypto.randomUUID` needs a secure context). */
function randomKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

async function api(path: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(path, {
    ...init,
    headers: {
      authorization: `Bearer ${token}`,
      ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
      ...(init.headers ?? {}),
    },
  });
  if (res.status === 401) {
    sessionStorage.removeItem("token");
    showTokenForm();
    throw new Unauthorized("unauthorized");
  }
  return res;
}

/**
 * A POST with an `Idempotency-Key` (cluster mode), retried with the same key when the request
 * gets no answer: the server takes the retry for a duplicate, not a second request.
 */
async function postOnce(path: string, body: Data, key = randomKey()): Promise<Response> {
  for (let i = 1;; i++) {
    try {
      return await api(path, {
        method: "POST",
        body: JSON.stringify(body),
        headers: { "idempotency-key": key },
      });
    } catch (err) {
      if (err instanceof Unauthorized || i >= 3) throw err;
      await sleep(500 * i);
    }
  }
}

function pretty(value: unknown): string {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

/** The element of the log with `data-<attr>="<value>"` and class `cls`, if any. */
function findIn(cls: string, attr: string, value: string): HTMLElement | null {
  for (const node of log.querySelectorAll<HTMLElement>(`.${cls}`)) {
    if (node.dataset[attr] === value) return node;
  }
  return null;
}

// --- approval cards ---

/**
 * Closes an open approval card: its buttons go, `text` says why. A card whose answer is being
 * sent from this page is left to its click handler.
 */
function settleCard(box: HTMLElement, text: string): void {
  if (box.dataset.state !== "open") return;
  box.dataset.state = "closed";
  box.querySelector(".buttons")?.remove();
  box.appendChild(el("div", "answered", text));
}

/** Closes the open approval cards of `reqId` (every open card when `reqId` is null). */
function settleCards(reqId: string | null, text: string): void {
  for (const box of log.querySelectorAll<HTMLElement>('.approval-card[data-state="open"]')) {
    if (reqId === null || box.dataset.req === reqId) settleCard(box, text);
  }
}

/** The approval card of a `permission_required` event (or a pending approval of the session). */
function approvalCard(data: Data): HTMLElement {
  const reqId = String(data.reqId ?? "");
  const name = String(data.name ?? "");
  const box = el("div", "approval-card");
  box.dataset.req = reqId;
  box.dataset.state = "open";
  box.appendChild(el("h3", "", "Approval needed"));
  const table = el("div", "fields");
  // The library's helper escapes every value (the arguments come from the model).
  table.innerHTML = approvalToHtmlTable({
    name,
    arguments: data.arguments,
    reason: data.reason,
  });
  box.appendChild(table);
  const buttons = box.appendChild(el("div", "buttons"));
  const args = (typeof data.arguments === "object" && data.arguments) as Data | false;
  const choices: [string, string, string][] = [
    ["once", "Allow once", "primary"],
    ["always_tool", `Always allow ${name}`, ""],
  ];
  if (args && typeof args.command === "string") {
    choices.push(["always_command", "Always allow this command", ""]);
  }
  choices.push(["deny", "Deny", "danger"]);
  for (const [outcome, text, cls] of choices) {
    const b = buttons.appendChild(el("button", cls, text)) as HTMLButtonElement;
    b.type = "button";
    b.dataset.outcome = outcome;
    b.addEventListener("click", async () => {
      if (box.dataset.state !== "open") return;
      box.dataset.state = "answering";
      for (const x of buttons.querySelectorAll("button")) (x as HTMLButtonElement).disabled = true;
      let answered = false;
      try {
        const res = await api(
          `/sessions/${sessionId}/approvals/${encodeURIComponent(reqId)}`,
          { method: "POST", body: JSON.stringify({ outcome }) },
        );
        answered = res.ok;
      } catch {
        // not answered: said below
      }
      box.dataset.state = "closed";
      buttons.remove();
      box.appendChild(
        el(
          "div",
          "answered",
          answered ? `Answered: ${text}` : "This approval is no longer pending.",
        ),
      );
    });
  }
  return box;
}

// --- rendering of events ---

/** Statuses of a call that has not finished. */
const OPEN_CALL = new Set(["proposed", "awaiting approval", "running"]);

/** Renders a session's events: one per turn in single mode, one per open session in cluster mode. */
class TurnView {
  #assistant: HTMLElement | null = null;
  #reasoning: HTMLElement | null = null;
  #tools = new Map<string, HTMLElement>();

  handle(type: string, data: Data): void {
    switch (type) {
      case "assistant_delta":
        this.#reasoning = null;
        if (!this.#assistant) this.#assistant = log.appendChild(el("div", "msg assistant", ""));
        this.#assistant.textContent += String(data.text ?? "");
        break;
      case "reasoning_delta": {
        if (!this.#reasoning) {
          const box = log.appendChild(el("details", "reasoning")) as HTMLDetailsElement;
          box.open = true;
          box.appendChild(el("summary", "", "Reasoning"));
          this.#reasoning = box.appendChild(el("div", "", ""));
        }
        this.#reasoning.textContent += String(data.text ?? "");
        break;
      }
      case "assistant_message":
        this.#assistant = null;
        this.#reasoning = null;
        break;
      case "tool_proposed":
        this.#tool(data);
        break;
      case "permission_required":
        this.#approval(data);
        break;
      case "approval.requested": {
        // Cluster mode: the store's copy of the request (shown when the page opened the
        // session between `permission_required` and it).
        const request = (data.request ?? {}) as Data;
        this.#approval({
          reqId: data.toolCallId,
          name: request.toolName,
          arguments: request.arguments,
          reason: request.reason,
        });
        break;
      }
      case "tool_started":
        this.#setStatus(data, "running");
        settleCards(String(data.reqId ?? ""), "Approved.");
        break;
      case "tool_finished": {
        const status = String(data.status);
        const card = this.#setStatus(data, status);
        settleCards(
          String(data.reqId ?? ""),
          status === "denied"
            ? "Denied."
            : status === "interrupted"
            ? "Closed: the turn was interrupted."
            : "Approved.",
        );
        const result = card.querySelector(".result") ?? card.appendChild(el("pre", "result"));
        result.textContent = String(data.result_preview ?? data.reason ?? "");
        break;
      }
      case "inbox":
        this.#inbox(data);
        break;
      case "parked":
        log.appendChild(
          el("div", "note", "Waiting for an answer (the session is parked until someone answers)."),
        );
        break;
      case "error": {
        const box = log.appendChild(el("div", "msg error", `Error: ${String(data.error ?? "")}`));
        // A retriable error (manual §9.4): the turn can be run again (POST /retry).
        if (data.retriable === true) box.appendChild(retryButton());
        break;
      }
      case "interrupted":
        log.appendChild(el("div", "note", "Interrupted."));
        break;
      case "compacting":
        log.appendChild(el("div", "note", "Compacting the context…"));
        break;
      case "turn_end": {
        this.#assistant = null;
        this.#reasoning = null;
        // Whatever this turn asked and did not run is moot once it ended.
        const interrupted = data.status === "interrupted";
        settleCards(
          null,
          interrupted ? "Closed: the turn was interrupted." : "Closed: the turn ended.",
        );
        for (const card of log.querySelectorAll<HTMLElement>(".tool")) {
          if (OPEN_CALL.has(String(card.dataset.status))) {
            this.#setStatus({ reqId: card.dataset.req }, interrupted ? "interrupted" : "not run");
          }
        }
        const end = log.appendChild(el("div", "note turn-end", `Turn ended: ${data.status}`));
        end.dataset.status = String(data.status);
        break;
      }
      case "server_error":
        log.appendChild(el("div", "msg error", String(data.error ?? "")));
        break;
    }
    scroll();
  }

  /** A store `inbox` event (cluster mode): a message taken for a turn, or a settled approval. */
  #inbox(data: Data): void {
    const item = (data.payload ?? {}) as Data;
    if (data.kind === "user_input") {
      const key = String(data.idemKey ?? "");
      // This page's own message is already shown (pending); it moves to where its turn starts.
      const mine = key ? findIn("msg.user", "key", key) : null;
      const bubble = mine ?? el("div", "msg user", String(item.text ?? ""));
      bubble.classList.remove("pending");
      if (key) bubble.dataset.key = key;
      this.#assistant = null;
      this.#reasoning = null;
      log.appendChild(bubble);
    } else if (data.kind === "approval") {
      const decision = (item.decision ?? {}) as Data;
      const note = typeof decision.note === "string" && decision.note ? ` ${decision.note}` : "";
      settleCards(String(item.toolCallId ?? ""), decision.approve ? "Approved." : `Denied.${note}`);
    }
  }

  #tool(data: Data): HTMLElement {
    const id = String(data.reqId ?? "");
    // A call shown from the history (or by an earlier view) gets its later events too.
    let card = this.#tools.get(id) ?? findIn("tool", "req", id) ?? undefined;
    if (card) {
      this.#tools.set(id, card);
      return card;
    }
    card = log.appendChild(el("div", "tool"));
    card.dataset.req = id;
    card.dataset.status = "proposed";
    const head = card.appendChild(el("div", "head", String(data.name ?? "tool")));
    head.appendChild(el("span", "status", "proposed"));
    card.appendChild(el("pre", "args", pretty(data.arguments)));
    this.#tools.set(id, card);
    return card;
  }

  #setStatus(data: Data, status: string): HTMLElement {
    const card = this.#tool(data);
    card.dataset.status = status;
    const label = card.querySelector(".status");
    if (label) label.textContent = status;
    return card;
  }

  #approval(data: Data): void {
    // One card per call: a resumed turn asks again for an approval already shown (and perhaps
    // answered), and cluster mode says it twice (`permission_required`, `approval.requested`).
    if (findIn("approval-card", "req", String(data.reqId ?? ""))) return;
    const card = this.#tool(data);
    card.dataset.status = "awaiting approval";
    const label = card.querySelector(".status");
    if (label) label.textContent = "awaiting approval";
    card.appendChild(approvalCard(data));
  }
}

// --- single mode: a turn's SSE answer ---

interface SseFrame {
  /** `id:` (the event's `seq` in cluster mode), or null. */
  id: number | null;
  type: string;
  data: Data;
}

/** Reads SSE frames from `body` until it ends; comments and frames without JSON data are skipped. */
async function readFrames(
  body: NonNullable<Response["body"]>,
  onFrame: (frame: SseFrame) => void,
): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut: number;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const raw = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const frame: SseFrame = { id: null, type: "message", data: {} };
      let data = "";
      for (const line of raw.split("\n")) {
        if (line.startsWith("id: ")) frame.id = Number(line.slice(4));
        else if (line.startsWith("event: ")) frame.type = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue;
      try {
        frame.data = JSON.parse(data);
      } catch {
        continue; // not an event of this server's
      }
      onFrame(frame);
    }
  }
}

/**
 * A Retry button for a retriable error: runs the last turn again (single-process mode: the SSE
 * of `POST /retry`; cluster mode: a retry queued for the workers, whose events come on the
 * session's stream). It disables itself once used.
 */
function retryButton(): HTMLButtonElement {
  const button = el("button", "retry", "Retry") as HTMLButtonElement;
  button.type = "button";
  button.addEventListener("click", () => {
    if (busy) return;
    button.disabled = true;
    const path = `/sessions/${sessionId}/retry`;
    if (mode === "cluster") {
      void postOnce(path, {}).then(async (res) => {
        if (res.ok) return;
        const err = await res.json().catch(() => ({ error: res.statusText }));
        log.appendChild(el("div", "msg error", `${res.status}: ${err.error}`));
      }).catch(() => {
        button.disabled = false;
      });
    } else {
      void stream(path, {});
    }
  });
  return button;
}

/** POSTs to a streaming route and feeds each SSE frame to a new {@link TurnView}. */
async function stream(path: string, body: Data): Promise<void> {
  setBusy(true);
  const view = new TurnView();
  try {
    const res = await api(path, { method: "POST", body: JSON.stringify(body) });
    if (!res.ok || !res.body) {
      const err = await res.json().catch(() => ({ error: res.statusText }));
      view.handle("server_error", { error: `${res.status}: ${err.error}` });
      return;
    }
    await readFrames(res.body, (f) => view.handle(f.type, f.data));
  } finally {
    setBusy(false);
    void loadTurns();
  }
}

// --- cluster mode: the session's event stream ---

/**
 * `GET /sessions/:id/events` of one session, kept open until {@link EventFeed.close}. After a
 * drop it reconnects (0.5 s, doubling to 5 s) with `Last-Event-ID` = the last `seq` shown;
 * events at or below it are skipped, so none is shown twice.
 */
class EventFeed {
  readonly #ac = new AbortController();
  readonly #session: string;
  readonly #view = new TurnView();
  #last: number;
  /** Between a `turn_start` and its `turn_end`. */
  #inTurn: boolean;

  constructor(session: string, after: number, running: boolean) {
    this.#session = session;
    this.#last = after;
    this.#inTurn = running;
    void this.#run();
  }

  close(): void {
    this.#ac.abort();
  }

  #status(state: "live" | "reconnecting"): void {
    streamStatus.dataset.state = state;
    streamStatus.hidden = state === "live";
    streamStatus.textContent = state === "live" ? "" : "Reconnecting…";
  }

  async #run(): Promise<void> {
    const signal = this.#ac.signal;
    let delay = 500;
    while (!signal.aborted) {
      try {
        const res = await api(`/sessions/${this.#session}/events`, {
          headers: { accept: "text/event-stream", "last-event-id": String(this.#last) },
          cache: "no-store",
          signal,
        });
        if (res.status === 404 || res.status === 400) {
          const err = await res.json().catch(() => ({ error: res.statusText }));
          this.#view.handle("server_error", { error: `${res.status}: ${err.error}` });
          return;
        }
        if (res.ok && res.body) {
          this.#status("live");
          delay = 500;
          await readFrames(res.body, (f) => this.#frame(f));
        } else {
          await res.body?.cancel();
        }
      } catch (err) {
        if (err instanceof Unauthorized) return;
        // a drop, or the front end is away: reconnect below
      }
      if (signal.aborted) return;
      this.#status("reconnecting");
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 5000);
    }
  }

  #frame(f: SseFrame): void {
    if (this.#ac.signal.aborted) return;
    if (f.id !== null) {
      if (f.id <= this.#last) return; // already shown
      this.#last = f.id;
    }
    this.#view.handle(f.type, f.data);
    if (f.type === "turn_start") {
      this.#inTurn = true;
      setBusy(true);
    } else if (f.type === "turn_end") {
      this.#inTurn = false;
      setBusy(false);
      void loadTurnsAfterTurn(this.#session, this.#ac.signal);
    } else if (f.type === "inbox" && f.data.kind === "cancel" && !this.#inTurn) {
      // A cancel taken before its turn started: the inputs before it are dropped, nothing runs.
      setBusy(false);
    }
  }
}

/** Sends a message in cluster mode: shown at once, queued with an `Idempotency-Key`. */
async function sendQueued(text: string): Promise<void> {
  const key = randomKey();
  const bubble = log.appendChild(el("div", "msg user pending", text));
  bubble.dataset.key = key;
  scroll();
  setBusy(true);
  let error = "";
  try {
    const res = await postOnce(`/sessions/${sessionId}/messages`, { text }, key);
    if (res.status !== 202) {
      const err = await res.json().catch(() => ({ error: res.statusText }));
      error = `${res.status}: ${err.error}`;
    }
  } catch (err) {
    if (err instanceof Unauthorized) return;
    error = `Cannot send the message: ${(err as Error).message}`;
  }
  if (error) {
    bubble.classList.replace("pending", "failed");
    log.appendChild(el("div", "msg error", error));
    setBusy(false);
  }
}

// --- sessions ---

async function loadSessions(): Promise<void> {
  const res = await api("/sessions");
  const { sessions } = await res.json() as { sessions: { id: string }[] };
  if (sessions.length === 0) {
    await newSession();
    return;
  }
  sessionSelect.replaceChildren(...sessions.map((s) => {
    const o = document.createElement("option");
    o.value = o.textContent = s.id;
    return o;
  }));
  const remembered = sessionStorage.getItem("session");
  sessionId = sessions.some((s) => s.id === remembered) ? remembered! : sessions.at(-1)!.id;
  sessionSelect.value = sessionId;
  await openSession();
}

async function newSession(): Promise<void> {
  const res = await api("/sessions", { method: "POST", body: "{}" });
  sessionId = (await res.json()).id;
  sessionStorage.setItem("session", sessionId);
  await loadSessions();
}

async function openSession(): Promise<void> {
  feed?.close();
  feed = null;
  sessionStorage.setItem("session", sessionId);
  log.replaceChildren();
  const res = await api(`/sessions/${sessionId}`);
  const s = await res.json();
  mode = s.mode === "cluster" ? "cluster" : "single";
  const results = new Map<string, string>();
  for (const m of s.messages) if (m.role === "tool") results.set(m.toolCallId, m.text);
  for (const m of s.messages) {
    if (m.role === "user") log.appendChild(el("div", "msg user", m.text));
    if (m.role === "assistant") {
      if (m.text) log.appendChild(el("div", "msg assistant", m.text));
      for (const c of m.toolCalls) {
        const card = log.appendChild(el("div", "tool"));
        card.dataset.req = c.id;
        // The status is filled in by later events of the call (a turn still running).
        card.appendChild(el("div", "head", c.name)).appendChild(el("span", "status", ""));
        card.appendChild(el("pre", "args", pretty(c.arguments)));
        if (results.has(c.id)) card.appendChild(el("pre", "result", results.get(c.id)));
      }
    }
  }
  for (const p of s.pendingApprovals) {
    const call = findIn("tool", "req", String(p.reqId));
    if (call) {
      call.dataset.status = "awaiting approval";
      call.querySelector(".status")!.textContent = "awaiting approval";
    }
    (call ?? log).appendChild(approvalCard(p));
  }
  scroll();
  void loadTurns();
  if (mode === "cluster") {
    // The session's events come from its stream.
    const running = s.status === "running";
    setBusy(running || s.status === "runnable" || s.status === "waiting_approval");
    feed = new EventFeed(sessionId, Number(s.lastSeq ?? 0), running);
    return;
  }
  // After a server restart, calls that were waiting for approval are asked again.
  if (s.needsResume && !busy) await stream(`/sessions/${sessionId}/resume`, {});
}

/** Number of turns the turns panel shows. */
let shownTurns = 0;

/**
 * Fills the turns panel from `GET /sessions/:id/turns` (both modes: in cluster mode the front
 * end reads the snapshots the workers took).
 *
 * @returns How many turns it shows (unchanged when the request failed).
 */
async function loadTurns(): Promise<number> {
  if (!sessionId) return shownTurns;
  const session = sessionId;
  const res = await api(`/sessions/${session}/turns`);
  if (!res.ok || session !== sessionId) return shownTurns;
  const { enabled, turns } = await res.json();
  $("turns-off").hidden = enabled;
  shownTurns = turns.length;
  const list = $("turns");
  list.replaceChildren(...turns.map((t: { turn: number; status: string; files: unknown[] }) => {
    const li = el("li", "");
    const b = li.appendChild(
      el("button", "", `Turn ${t.turn} — ${t.status}, ${t.files.length} file(s)`),
    ) as HTMLButtonElement;
    b.type = "button";
    b.addEventListener("click", async () => {
      const r = await api(`/sessions/${sessionId}/turns/${t.turn}/diff`);
      const diff = $("diff");
      diff.hidden = false;
      diff.textContent = (await r.json()).patch ?? "";
    });
    return li;
  }));
  return shownTurns;
}

/**
 * Cluster mode, after a `turn_end`: the worker writes the turn's snapshot just after that
 * event is stored, so the list is asked for again, a few times, until it changes (a turn that
 * changed no file adds nothing).
 */
async function loadTurnsAfterTurn(session: string, signal: AbortSignal): Promise<void> {
  const before = shownTurns;
  for (const ms of [0, 500, 1500, 3000]) {
    await sleep(ms, signal);
    if (signal.aborted || session !== sessionId) return;
    try {
      if (await loadTurns() !== before) return;
    } catch {
      return; // a 401 shows the token form; a drop: the next turn's end asks again
    }
  }
}

// --- wiring ---

function showTokenForm(): void {
  feed?.close();
  feed = null;
  $("token-form").hidden = false;
  $("session-bar").hidden = true;
}

async function start(): Promise<void> {
  $("token-form").hidden = true;
  $("session-bar").hidden = false;
  await loadSessions();
}

$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $<HTMLInputElement>("token").value.trim();
  sessionStorage.setItem("token", token);
  void start();
});

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || busy) return;
  input.value = "";
  if (mode === "cluster") {
    void sendQueued(text);
    return;
  }
  log.appendChild(el("div", "msg user", text));
  void stream(`/sessions/${sessionId}/messages`, { text });
});

input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $<HTMLFormElement>("composer").requestSubmit();
});

interruptButton.addEventListener("click", () => {
  const path = `/sessions/${sessionId}/interrupt`;
  // Cluster mode: a cancel queued for whichever worker runs the turn; the turn's end shows it.
  const sent = mode === "cluster" ? postOnce(path, {}) : api(path, { method: "POST", body: "{}" });
  sent.catch(() => {});
});

$("new-session").addEventListener("click", () => void newSession());
sessionSelect.addEventListener("change", () => {
  sessionId = sessionSelect.value;
  void openSession();
});

// The token comes from the link's fragment (never sent to the server) or this tab's storage.
const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromHash) {
  sessionStorage.setItem("token", fromHash);
  history.replaceState(null, "", location.pathname);
}
token = sessionStorage.getItem("token") ?? "";
if (token) void start();
else showTokenForm();
