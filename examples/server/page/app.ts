/// <reference lib="dom" />
/**
 * The reference server's browser page: a chat that streams text and reasoning, shows each tool
 * call with its arguments and result, an approval card (once / always this tool / always this
 * command / deny) for each pending call, an interrupt button, and the turns with their diffs
 * when VCS snapshots are on. Plain TypeScript, no framework; the server strips the types.
 *
 * Everything the model or a tool wrote is put in the page as text (`textContent`) or through
 * `approvalToHtmlTable`, which escapes it.
 *
 * @module
 */
import { approvalToHtmlTable } from "../../../engine/approval_view.ts";

type Data = Record<string, unknown>;

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
const log = $<HTMLDivElement>("log");
const input = $<HTMLTextAreaElement>("input");
const sendButton = $<HTMLButtonElement>("send");
const interruptButton = $<HTMLButtonElement>("interrupt");
const sessionSelect = $<HTMLSelectElement>("sessions");

let token = "";
let sessionId = "";
let busy = false;

function el(tag: string, className: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function scroll(): void {
  log.lastElementChild?.scrollIntoView({ block: "end" });
}

async function api(path: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(path, {
    ...init,
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      ...(init.headers ?? {}),
    },
  });
  if (res.status === 401) {
    sessionStorage.removeItem("token");
    showTokenForm();
    throw new Error("unauthorized");
  }
  return res;
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

// --- rendering of one turn's events ---

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
      case "tool_started":
        this.#setStatus(data, "running");
        break;
      case "tool_finished": {
        const card = this.#setStatus(data, String(data.status));
        card.querySelector(".approval-card .buttons")?.remove();
        const result = card.querySelector(".result") ?? card.appendChild(el("pre", "result"));
        result.textContent = String(data.result_preview ?? data.reason ?? "");
        break;
      }
      case "error":
        log.appendChild(el("div", "msg error", `Error: ${String(data.error ?? "")}`));
        break;
      case "interrupted":
        log.appendChild(el("div", "note", "Interrupted."));
        break;
      case "compacting":
        log.appendChild(el("div", "note", "Compacting the context…"));
        break;
      case "turn_end": {
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

  #tool(data: Data): HTMLElement {
    const id = String(data.reqId ?? "");
    let card = this.#tools.get(id);
    if (card) return card;
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
    const card = this.#tool(data);
    card.dataset.status = "awaiting approval";
    const label = card.querySelector(".status");
    if (label) label.textContent = "awaiting approval";
    card.appendChild(approvalCard(data));
  }
}

/** The approval card of a `permission_required` event (or a pending approval of the session). */
function approvalCard(data: Data): HTMLElement {
  const reqId = String(data.reqId ?? "");
  const name = String(data.name ?? "");
  const box = el("div", "approval-card");
  box.dataset.req = reqId;
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
      for (const x of buttons.querySelectorAll("button")) (x as HTMLButtonElement).disabled = true;
      const res = await api(
        `/sessions/${sessionId}/approvals/${encodeURIComponent(reqId)}`,
        { method: "POST", body: JSON.stringify({ outcome }) },
      );
      buttons.remove();
      box.appendChild(
        el("div", "answered", res.ok ? `Answered: ${text}` : "This approval is no longer pending."),
      );
    });
  }
  return box;
}

// --- streaming ---

/** POSTs to a streaming route and feeds each SSE frame to a new {@link TurnView}. */
async function stream(path: string, body: Data): Promise<void> {
  busy = true;
  sendButton.disabled = true;
  interruptButton.disabled = false;
  const view = new TurnView();
  try {
    const res = await api(path, { method: "POST", body: JSON.stringify(body) });
    if (!res.ok || !res.body) {
      const err = await res.json().catch(() => ({ error: res.statusText }));
      view.handle("server_error", { error: `${res.status}: ${err.error}` });
      return;
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let type = "message";
        let data = "";
        for (const line of frame.split("\n")) {
          if (line.startsWith("event: ")) type = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (data) view.handle(type, JSON.parse(data));
      }
    }
  } finally {
    busy = false;
    sendButton.disabled = false;
    interruptButton.disabled = true;
    void loadTurns();
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
  sessionStorage.setItem("session", sessionId);
  log.replaceChildren();
  const res = await api(`/sessions/${sessionId}`);
  const s = await res.json();
  const results = new Map<string, string>();
  for (const m of s.messages) if (m.role === "tool") results.set(m.toolCallId, m.text);
  for (const m of s.messages) {
    if (m.role === "user") log.appendChild(el("div", "msg user", m.text));
    if (m.role === "assistant") {
      if (m.text) log.appendChild(el("div", "msg assistant", m.text));
      for (const c of m.toolCalls) {
        const card = log.appendChild(el("div", "tool"));
        card.dataset.req = c.id;
        card.appendChild(el("div", "head", c.name));
        card.appendChild(el("pre", "args", pretty(c.arguments)));
        if (results.has(c.id)) card.appendChild(el("pre", "result", results.get(c.id)));
      }
    }
  }
  for (const p of s.pendingApprovals) log.appendChild(approvalCard(p));
  scroll();
  void loadTurns();
  // After a server restart, calls that were waiting for approval are asked again.
  if (s.needsResume && !busy) await stream(`/sessions/${sessionId}/resume`, {});
}

async function loadTurns(): Promise<void> {
  if (!sessionId) return;
  const res = await api(`/sessions/${sessionId}/turns`);
  const { enabled, turns } = await res.json();
  $("turns-off").hidden = enabled;
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
}

// --- wiring ---

function showTokenForm(): void {
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
  log.appendChild(el("div", "msg user", text));
  void stream(`/sessions/${sessionId}/messages`, { text });
});

input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $<HTMLFormElement>("composer").requestSubmit();
});

interruptButton.addEventListener("click", () => {
  void api(`/sessions/${sessionId}/interrupt`, { method: "POST", body: "{}" });
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
