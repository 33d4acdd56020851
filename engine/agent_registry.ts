/**
 * `AgentRegistry` (manual §16.2): an in-memory table of agent roles — name, description, system
 * prompt and an optional model — with the current role. Persisting it (e.g. to `agents.json`) is
 * the caller's job.
 *
 * @module
 */
import { buildEnvBlock, buildInstructions, getPrompts } from "./prompts.ts";

/** One agent role. */
export interface AgentDef {
  /** Unique name (letters, digits, `_`, `-`, `.`; at most 64 chars). */
  name: string;
  /** What the role is for (shown to people). */
  description: string;
  /**
   * The role's system prompt. Empty for the built-in roles, whose prompt is written per
   * language (`buildInstructions`).
   */
  prompt: string;
  /** A model for this role; `undefined` keeps the engine's model. */
  model?: string;
  /** True for `code` and `cowork`. */
  builtin?: boolean;
}

/** The built-in roles (manual §16.2): `code` (programming) and `cowork` (general collaboration). */
export const BUILTIN_AGENTS: readonly Readonly<AgentDef>[] = Object.freeze([
  Object.freeze({
    name: "code",
    description: "Programming assistant: reads, changes and verifies code in the workspace",
    prompt: "",
    builtin: true,
  }),
  Object.freeze({
    name: "cowork",
    description: "General collaboration: documents, data and everyday tasks",
    prompt: "",
    builtin: true,
  }),
]);

/** Options of {@link AgentRegistry}. */
export interface AgentRegistryOptions {
  /** Roles to add after the built-ins (e.g. loaded from the host's `agents.json`). */
  agents?: AgentDef[];
  /** The current role (default `"code"`). */
  current?: string;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

function copy(def: Readonly<AgentDef>): AgentDef {
  const out: AgentDef = { name: def.name, description: def.description, prompt: def.prompt };
  if (def.model !== undefined) out.model = def.model;
  if (def.builtin) out.builtin = true;
  return out;
}

/**
 * The agent roles of a session or host, with the current one (manual §16.2).
 *
 * @example Add a role and switch to it
 * ```ts
 * import { AgentRegistry } from "@zqagent/core";
 * const agents = new AgentRegistry(); // built-in code / cowork
 * agents.add({ name: "analyst", description: "Data analysis", prompt: "You are a data analyst." });
 * agents.update("analyst", { model: "deepseek-chat" });
 * agents.switch("analyst");
 * const prompt = agents.buildSystemPrompt("analyst", "/srv/ws", "2026-11-29", "en");
 * ```
 */
export class AgentRegistry {
  #agents = new Map<string, AgentDef>();
  #current = "code";

  /**
   * Creates a registry with the built-in roles and `options.agents`.
   *
   * @throws {Error} When an extra role is invalid or repeats a name, or `options.current` is
   *   unknown.
   */
  constructor(options: AgentRegistryOptions = {}) {
    for (const def of BUILTIN_AGENTS) this.#agents.set(def.name, copy(def));
    for (const def of options.agents ?? []) this.add(def);
    if (options.current !== undefined) this.switch(options.current);
  }

  /** The current role's name. */
  get current(): string {
    return this.#current;
  }

  /** A copy of the current role's definition. */
  get currentDef(): AgentDef {
    return copy(this.#agents.get(this.#current)!);
  }

  /** A copy of a role, or `undefined` when unknown. */
  get(name: string): AgentDef | undefined {
    const def = this.#agents.get(name);
    return def ? copy(def) : undefined;
  }

  /** True when a role of that name exists. */
  has(name: string): boolean {
    return this.#agents.has(name);
  }

  /** Copies of all roles, built-ins first, then in the order added. */
  list(): AgentDef[] {
    return [...this.#agents.values()].map(copy);
  }

  /**
   * Adds a role.
   *
   * @param def `{name, description, prompt, model?}`.
   * @returns A copy of the stored role.
   * @throws {Error} "Cannot add agent …" when the name is invalid or taken, or the prompt is
   *   empty.
   */
  add(def: Omit<AgentDef, "builtin">): AgentDef {
    if (!def || typeof def.name !== "string" || !NAME.test(def.name)) {
      throw new Error(
        `Cannot add agent ${JSON.stringify(def?.name)}: a name is letters, digits, _ . - ` +
          "(at most 64 chars)",
      );
    }
    if (this.#agents.has(def.name)) {
      throw new Error(`Cannot add agent ${def.name}: that name exists (use update)`);
    }
    if (typeof def.prompt !== "string" || def.prompt.trim() === "") {
      throw new Error(`Cannot add agent ${def.name}: prompt is empty`);
    }
    const stored: AgentDef = {
      name: def.name,
      description: typeof def.description === "string" ? def.description : "",
      prompt: def.prompt,
    };
    if (def.model) stored.model = def.model;
    this.#agents.set(def.name, stored);
    return copy(stored);
  }

  /**
   * Changes fields of a role (`description`, `prompt`, `model`; `model: undefined` clears it).
   * Built-in roles may get a model or a custom prompt.
   *
   * @returns A copy of the updated role.
   * @throws {Error} "Cannot update agent …" when the role is unknown or the prompt would be
   *   emptied on a custom role.
   */
  update(name: string, patch: Partial<Omit<AgentDef, "name" | "builtin">>): AgentDef {
    const def = this.#agents.get(name);
    if (!def) throw new Error(`Cannot update agent ${name}: no such agent`);
    const next: AgentDef = { ...def };
    if (patch.description !== undefined) next.description = String(patch.description);
    if (patch.prompt !== undefined) {
      if (!def.builtin && String(patch.prompt).trim() === "") {
        throw new Error(`Cannot update agent ${name}: prompt is empty`);
      }
      next.prompt = String(patch.prompt);
    }
    if ("model" in patch) {
      if (patch.model) next.model = patch.model;
      else delete next.model;
    }
    this.#agents.set(name, next);
    return copy(next);
  }

  /**
   * Removes a custom role; the current role falls back to `code` when it was removed.
   *
   * @returns False when there was no such role.
   * @throws {Error} "Cannot remove agent …" for a built-in role.
   */
  remove(name: string): boolean {
    const def = this.#agents.get(name);
    if (!def) return false;
    if (def.builtin) throw new Error(`Cannot remove agent ${name}: it is built in`);
    this.#agents.delete(name);
    if (this.#current === name) this.#current = "code";
    return true;
  }

  /**
   * Makes `name` the current role. The caller then applies it to the engine
   * (`engine.setSystemPrompt(...)`, `engine.model = agents.currentDef.model ?? engine.model`).
   *
   * @returns A copy of the new current role.
   * @throws {Error} "Cannot switch to agent …" when unknown.
   */
  switch(name: string): AgentDef {
    if (!this.#agents.has(name)) throw new Error(`Cannot switch to agent ${name}: no such agent`);
    this.#current = name;
    return this.currentDef;
  }

  /**
   * The system prompt of a role: for built-ins without a custom prompt, the language's own
   * `code` / `cowork` prompt (`buildInstructions`); otherwise the role's prompt followed by the
   * language's shared rules (untrusted data, approvals, workspace) and environment block.
   *
   * @param name The role (default: the current one).
   * @param workspace Absolute workspace path.
   * @param today Date text (default: today, `YYYY-MM-DD`).
   * @param lang Prompt language (default `"zh"`).
   * @throws {Error} "Cannot build the prompt of agent …" when the role is unknown.
   */
  buildSystemPrompt(
    name: string = this.#current,
    workspace: string,
    today: string = new Date().toISOString().slice(0, 10),
    lang = "zh",
  ): string {
    const def = this.#agents.get(name);
    if (!def) throw new Error(`Cannot build the prompt of agent ${name}: no such agent`);
    if (def.builtin && def.prompt.trim() === "") {
      return buildInstructions(def.name, workspace, today, lang);
    }
    const p = getPrompts(lang);
    return [def.prompt.trim(), p.rules, buildEnvBlock(workspace, today, lang)].join("\n\n");
  }
}
