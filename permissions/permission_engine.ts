/**
 * The permission engine: decides, for each tool call, whether it runs, is refused, or needs a
 * person (manual §8.1, with DESIGN §5's deviation for reads outside the workspace).
 *
 * @module
 */
import { RiskClass, type ToolMetadata } from "../tools/mod.ts";
import { analyzeCommand, argvMatchesAllowlist, parseAllowlist, plainArgv } from "./command.ts";
import { type Decision, Mode } from "./mode.ts";
import { checkPath, isProtectedPath, resolveRoot, resolveWorkspacePath } from "./path_guard.ts";
import { missingRuntimeGrant, runtimeChecksActive } from "./_runtime_grants.ts";
import type { SandboxStatus } from "./sandbox.ts";
export type { SandboxStatus } from "./sandbox.ts";

/**
 * When `run_shell` may skip approval (manual §8.4):
 * - `"approve"`: never (only the allowlists apply);
 * - `"sandbox"`: when an OS sandbox is really enforced;
 * - `"workspace"`: when a sandbox is enforced, else when the command is one plain simple command
 *   whose path-like arguments and `cwd` all lie inside the workspace (a heuristic, not a
 *   security boundary);
 * - `"all"`: always (an AUTO mode for the shell only; high risk).
 */
export type ShellPolicy = "approve" | "sandbox" | "workspace" | "all";

/** The shell policies, for validation. */
const SHELL_POLICIES: readonly ShellPolicy[] = ["approve", "sandbox", "workspace", "all"];

/** A directory outside the workspace that a person granted (through `request_directory`). */
export interface GrantedDirectory {
  /** Absolute real path (resolved with symlinks followed). */
  path: string;
  /** True when tools may write there; otherwise read only. */
  writable: boolean;
}

/** Options of {@link PermissionEngine}. */
export interface PermissionEngineOptions {
  /**
   * The workspace root: the permission boundary for files and commands. Resolved to its real
   * path (symlinks followed); a missing tail is kept as written. Required.
   */
  workspaceRoot: string;
  /** Run mode (manual §8.2). Default `Mode.INTERACTIVE`. */
  mode?: Mode;
  /**
   * Command prefixes that run without asking (manual §8.5), e.g. `["git status", "ls"]`.
   * Matched on whole words; compound commands are never allowed. Default `[]`.
   */
  allowedCommands?: string[];
  /** When `run_shell` may skip approval (manual §8.4). Default `"approve"`. */
  shellPolicy?: ShellPolicy;
  /**
   * The OS sandbox status. Default: none, not enforced
   * (`{ mode: "off", kind: "none", enforced: false }`).
   */
  sandbox?: SandboxStatus;
  /** Directories granted up front (as {@link PermissionEngine.grantDirectory} does). Default none. */
  grantedDirectories?: GrantedDirectory[];
  /**
   * Deno permission layer (DESIGN §5): refuse a call that would need a runtime grant the
   * process lacks (`--allow-read=…`, `--allow-run=…`), naming the flag, instead of letting it
   * fail or prompt. Only acts under a permission model (Deno, Node `--permission`).
   * Default `true`.
   */
  checkRuntimeGrants?: boolean;
}

/** Options of {@link PermissionEngine.grantDirectory}. */
export interface GrantDirectoryOptions {
  /** True to allow writes too. Default `false` (read only). */
  writable?: boolean;
}

/** Risk class as the engine uses it: the tool's own, or derived for custom tools. */
type EffectiveClass = RiskClass | "unknown" | "custom";

/** Argument names that carry file paths in built-in and well-behaved tools (DESIGN §5). */
const PATH_KEYS = ["path", "destination", "to", "from", "source"] as const;

/** Default sandbox status: none. */
const NO_SANDBOX: SandboxStatus = {
  mode: "off",
  kind: "none",
  enforced: false,
  reason: "No sandbox configured",
};

/**
 * Decides, for each tool call, whether it runs without asking, is refused, or needs a person
 * (manual §8.1). {@link PermissionEngine.evaluate} is synchronous and follows this fixed order:
 *
 * 1. `DISCUSS`/`PLAN`: writes, execution and custom tools that do not count as read-only are
 *    refused (`needsUser: false`); external tools ask. Interactive tools (`ask_user`,
 *    `propose_plan`, `request_directory`) are allowed in every mode.
 * 2. A write tool whose `path`, `paths[]`, `destination`, `to`, `from` or `source` resolves
 *    outside the workspace and the writable granted directories, or to a git hook, a
 *    `.git/config` or a `.git` file at any depth ({@link isProtectedPath}), is refused, in
 *    every mode (AUTO included).
 * 3. Read-only tools are allowed when every path they name lies inside the workspace or a granted
 *    directory; a read outside asks, except in AUTO (DESIGN §5 deviation: the manual allows every
 *    read).
 * 4. `AUTO`: allowed.
 * 5. `run_shell` and other exec tools with a `command`: the shell policy may exempt it.
 * 6. The command allowlist and the session's "always allow this command" names, for plain
 *    simple commands only; an allowlisted command whose path-like words resolve outside the
 *    workspace (`cat ~/.ssh/id_rsa`) asks (DESIGN §5: reads outside are never auto-allowed).
 * 7. The session's "always allow this tool" names.
 * 8. Everything else needs a person.
 *
 * A custom tool without `riskClass` counts as read-only only when `riskLevel` is `"low"` and
 * `requiresApproval` is false. An unknown tool (`metadata` null) always needs a person (and is
 * refused in read-only modes). A `cwd` argument outside the workspace stops steps 5–7.
 *
 * Under a runtime permission model (Deno; DESIGN §5) a call that steps 1–8 would allow or ask
 * about is refused when it needs a grant the process lacks; the reason names the flag
 * (`--allow-read=…`), and the runtime is never left to prompt.
 *
 * @example Evaluate a shell command
 * ```ts
 * import { Mode, PermissionEngine } from "@zqagent/core/permissions";
 * import { RiskClass } from "@zqagent/core/tools";
 * const permissions = new PermissionEngine({
 *   workspaceRoot: "/srv/ws",
 *   mode: Mode.INTERACTIVE,
 *   allowedCommands: ["git status", "ls"],
 * });
 * const shell = {
 *   category: "shell",
 *   riskLevel: "high" as const,
 *   capabilities: [],
 *   requiresApproval: true,
 *   riskClass: RiskClass.EXEC,
 * };
 * permissions.evaluate("run_shell", { command: "ls -la" }, shell).allowed; // true
 * permissions.evaluate("run_shell", { command: "ls; rm -rf ." }, shell).needsUser; // true
 * ```
 */
export class PermissionEngine {
  #mode: Mode;
  #workspaceRoot: string;
  #shellPolicy: ShellPolicy;
  #sandbox: SandboxStatus;
  #allowedCommands: string[];
  #allowlist: string[][];
  #sessionTools = new Set<string>();
  #sessionCommands = new Set<string>();
  #granted = new Map<string, boolean>();
  #checkRuntime: boolean;

  /**
   * Creates an engine for one session.
   *
   * @param options See {@link PermissionEngineOptions}.
   * @throws {TypeError} When `workspaceRoot` is missing, or `mode` or `shellPolicy` is not a
   *   known value.
   */
  constructor(options: PermissionEngineOptions) {
    if (!options || typeof options.workspaceRoot !== "string" || options.workspaceRoot === "") {
      throw new TypeError("Cannot create PermissionEngine: workspaceRoot is required");
    }
    this.#workspaceRoot = resolveRoot(options.workspaceRoot);
    this.#mode = validMode(options.mode ?? Mode.INTERACTIVE, "create PermissionEngine");
    const policy = options.shellPolicy ?? "approve";
    if (!SHELL_POLICIES.includes(policy)) {
      throw new TypeError(
        `Cannot create PermissionEngine: unknown shellPolicy ${JSON.stringify(policy)}`,
      );
    }
    this.#shellPolicy = policy;
    this.#sandbox = { ...(options.sandbox ?? NO_SANDBOX) };
    this.#checkRuntime = (options.checkRuntimeGrants ?? true) && runtimeChecksActive();
    this.#allowedCommands = [...(options.allowedCommands ?? [])];
    this.#allowlist = parseAllowlist(this.#allowedCommands);
    for (const dir of options.grantedDirectories ?? []) {
      this.grantDirectory(dir.path, { writable: dir.writable });
    }
  }

  /** The run mode (manual §8.2); may be changed at any time (`engine.permissions.mode = …`). */
  get mode(): Mode {
    return this.#mode;
  }

  /**
   * Sets the run mode.
   *
   * @throws {TypeError} When the value is not a {@link Mode}.
   */
  set mode(value: Mode) {
    this.#mode = validMode(value, "set mode");
  }

  /** The workspace root as a real absolute path. */
  get workspaceRoot(): string {
    return this.#workspaceRoot;
  }

  /** The OS sandbox status given at construction (a copy). */
  get sandbox(): SandboxStatus {
    return { ...this.#sandbox };
  }

  /** The shell policy (manual §8.4). */
  get shellPolicy(): ShellPolicy {
    return this.#shellPolicy;
  }

  /** The configured command allowlist (a copy). */
  get allowedCommands(): string[] {
    return [...this.#allowedCommands];
  }

  /**
   * Remembers "always allow this tool" for the rest of the session (`ApprovalOutcome.ALWAYS_TOOL`).
   *
   * @param name Tool name.
   */
  allowToolForSession(name: string): void {
    if (typeof name === "string" && name !== "") this.#sessionTools.add(name);
  }

  /**
   * Remembers "always allow this command" (`ApprovalOutcome.ALWAYS_COMMAND`, manual §8.5): the
   * executable name of a plain simple command. Later plain simple commands with that executable
   * run without asking; compound commands still ask.
   *
   * @param command The approved command (`"npm test"`) or a saved executable name (`"npm"`).
   * @returns True when a name was remembered; false for compound commands, wrappers and the like.
   */
  allowCommandForSession(command: string): boolean {
    const argv = typeof command === "string" ? plainArgv(command) : null;
    if (!argv) return false;
    this.#sessionCommands.add(argv[0]);
    return true;
  }

  /** Tool names allowed for this session, for `SavedState.allowTools` (manual §11.3). */
  sessionAllowedTools(): string[] {
    return [...this.#sessionTools];
  }

  /** Executable names allowed for this session, for `SavedState.allowCommands` (manual §11.3). */
  sessionAllowedCommands(): string[] {
    return [...this.#sessionCommands];
  }

  /**
   * Grants access to a directory outside the workspace (what `request_directory` does once a
   * person agrees). Granting again with `writable: true` upgrades a read-only grant.
   *
   * @param dir Absolute, `~`-prefixed or workspace-relative path; resolved with symlinks followed.
   * @param options `writable` (default false).
   * @returns The grant as stored.
   * @throws {PathResolutionError} When the path cannot be resolved (`~user`, symlink loop).
   */
  grantDirectory(dir: string, options: GrantDirectoryOptions = {}): GrantedDirectory {
    const resolved = resolveWorkspacePath(this.#workspaceRoot, dir);
    const writable = (options.writable ?? false) || (this.#granted.get(resolved) ?? false);
    this.#granted.set(resolved, writable);
    return { path: resolved, writable };
  }

  /** The granted directories (copies). */
  grantedDirectories(): GrantedDirectory[] {
    return [...this.#granted].map(([p, writable]) => ({ path: p, writable }));
  }

  /**
   * Decides one tool call (manual §8.1; the order is described on the class). Synchronous; never
   * throws.
   *
   * @param toolName The tool's name.
   * @param args The parsed tool arguments.
   * @param metadata The tool's metadata, or `null` for a tool the registry does not know.
   * @returns `allowed` when it may run now, `needsUser` when a person must decide; neither means
   *   refused.
   */
  evaluate(
    toolName: string,
    args: Record<string, unknown>,
    metadata: ToolMetadata | null,
  ): Decision {
    const decision = this.#decide(toolName, args, metadata);
    if (!this.#checkRuntime || (!decision.allowed && !decision.needsUser)) return decision;
    // Deno permission layer: a grant the process lacks ends the call as denied, never a prompt.
    const missing = missingRuntimeGrant(
      toolName,
      args && typeof args === "object" ? args : {},
      metadata,
      {
        workspace: this.#workspaceRoot,
        sandbox: this.#sandbox,
      },
    );
    return missing ? deny(missing.reason) : decision;
  }

  /** Steps 1–8 of {@link PermissionEngine.evaluate}. */
  #decide(
    toolName: string,
    args: Record<string, unknown>,
    metadata: ToolMetadata | null,
  ): Decision {
    const safeArgs: Record<string, unknown> = args && typeof args === "object" ? args : {};
    const cls = effectiveClass(metadata);
    const mode = this.#mode;
    const readOnlyMode = mode === Mode.DISCUSS || mode === Mode.PLAN;

    if (cls === RiskClass.INTERACTIVE) return allow(`${toolName} asks a person`);

    // 1. Read-only modes.
    if (readOnlyMode) {
      if (cls === "unknown") {
        return deny(`${toolName} is not a known tool; ${mode} mode is read-only`);
      }
      if (cls === RiskClass.EXTERNAL) {
        if (this.#sessionTools.has(toolName)) {
          return allow(`${toolName} is allowed for this session`);
        }
        return ask(`${toolName} reaches outside this machine`);
      }
      if (cls !== RiskClass.READ) {
        return deny(`${mode} mode is read-only: ${toolName} has side effects`);
      }
    }

    // 2. Writes outside the workspace and writable granted directories, and writes to git
    //    hooks and config (they run later outside the sandbox): refused in every mode.
    if (cls === RiskClass.WRITE) {
      const paths = toolPaths(safeArgs);
      const outside = this.#firstOutside(paths, true);
      if (outside !== undefined) {
        return deny(`${toolName} would write outside the workspace: ${outside}`);
      }
      const guarded = paths.find((p) => isProtectedPath(p, this.#workspaceRoot));
      if (guarded !== undefined) {
        return deny(
          `${toolName} would change ${guarded}: git hooks and config run commands later, ` +
            "outside the sandbox, so no tool may write them",
        );
      }
    }

    // 3. Read-only tools: inside the workspace or a granted directory.
    if (cls === RiskClass.READ && !metadata?.requiresApproval) {
      const outside = this.#firstOutside([...toolPaths(safeArgs), ...cwdOf(safeArgs)], false);
      if (outside === undefined) return allow(`${toolName} only reads inside the workspace`);
      if (mode === Mode.AUTO) return allow(`${toolName} reads outside the workspace (auto mode)`);
      return ask(`${toolName} reads outside the workspace: ${outside}`);
    }
    if (cls === "unknown") return ask(`${toolName} is not a known tool`);

    // 4. AUTO mode.
    if (mode === Mode.AUTO) return allow(`Auto mode allows ${toolName}`);

    const command = cls === RiskClass.EXEC && typeof safeArgs.command === "string"
      ? safeArgs.command
      : undefined;
    const cwd = cwdOf(safeArgs)[0];
    const cwdOutside = this.#firstOutside(cwdOf(safeArgs), true);

    // 5. Shell policy exemptions.
    if (command !== undefined) {
      const exemption = this.#shellExemption(command, cwdOutside, cwd);
      if (exemption) return exemption;
    }
    if (cwdOutside !== undefined) {
      return ask(`${toolName} would run outside the workspace: ${cwdOutside}`);
    }

    // 6. Command allowlists: plain simple commands whose path-like words stay inside.
    if (command !== undefined) {
      const argv = plainArgv(command);
      if (argv) {
        const listed = argvMatchesAllowlist(argv, this.#allowlist);
        const remembered = !listed &&
          argvMatchesAllowlist(argv, [...this.#sessionCommands].map((name) => [name]));
        if (listed || remembered) {
          if (!this.#argvStaysInside(argv, this.#commandBase(cwd))) {
            return ask(`${describeCommand(command)} (it names paths outside the workspace)`);
          }
          return allow(
            listed ? "The command is on the allowlist" : `${argv[0]} is allowed for this session`,
          );
        }
      }
    }

    // 7. Session tool allowlist.
    if (this.#sessionTools.has(toolName)) return allow(`${toolName} is allowed for this session`);

    // 8. A person decides.
    if (command !== undefined) return ask(describeCommand(command));
    if (cls === RiskClass.WRITE) return ask(`${toolName} changes files`);
    if (cls === RiskClass.EXEC) return ask(`${toolName} runs programs`);
    if (cls === RiskClass.EXTERNAL) return ask(`${toolName} reaches outside this machine`);
    return ask(`${toolName} needs approval`);
  }

  /** Step 5: the shell policy's exemption, or null. */
  #shellExemption(
    command: string,
    cwdOutside: string | undefined,
    cwd: string | undefined,
  ): Decision | null {
    switch (this.#shellPolicy) {
      case "all":
        return allow("Shell policy allows every command");
      case "sandbox":
        if (this.#sandbox.enforced && cwdOutside === undefined) {
          return allow(`The command runs in the ${this.#sandbox.kind} sandbox`);
        }
        return null;
      case "workspace": {
        if (cwdOutside !== undefined) return null;
        if (this.#sandbox.enforced) {
          return allow(`The command runs in the ${this.#sandbox.kind} sandbox`);
        }
        const argv = plainArgv(command);
        if (!argv) return null;
        if (!this.#argvStaysInside(argv, this.#commandBase(cwd))) return null;
        return allow("The command only touches the workspace");
      }
      default:
        return null;
    }
  }

  /**
   * The directory a command's relative words are taken from: its resolved `cwd` (already known
   * to be inside), else the workspace root.
   */
  #commandBase(cwd: string | undefined): string {
    if (cwd === undefined) return this.#workspaceRoot;
    return checkPath(this.#workspaceRoot, cwd, []).resolved ?? this.#workspaceRoot;
  }

  /** True when every path-like word of a plain command resolves inside the writable roots. */
  #argvStaysInside(argv: readonly string[], base: string): boolean {
    const candidates: string[] = [];
    if (/[\\/]/.test(argv[0])) candidates.push(argv[0]);
    for (const word of argv.slice(1)) {
      if (word.startsWith("-")) {
        const eq = word.indexOf("=");
        if (eq > 0) candidates.push(word.slice(eq + 1));
        // `-o/etc/x`: an attached value we cannot separate; refuse to guess.
        else if (/[\\/~]/.test(word) || word.includes("..")) return false;
        continue;
      }
      candidates.push(word);
      const eq = word.indexOf("=");
      if (eq > 0) candidates.push(word.slice(eq + 1)); // `of=/etc/x`
    }
    return this.#firstOutside(candidates.filter((c) => c !== ""), true, base) === undefined;
  }

  /**
   * The first of `paths` (relative ones taken from `base`, default the workspace) that resolves
   * outside the workspace and the granted directories (writable ones only when `write`), as
   * written; `undefined` when all are inside.
   */
  #firstOutside(
    paths: readonly string[],
    write: boolean,
    base: string = this.#workspaceRoot,
  ): string | undefined {
    if (paths.length === 0) return undefined;
    const roots = [this.#workspaceRoot];
    for (const [dir, writable] of this.#granted) if (writable || !write) roots.push(dir);
    for (const p of paths) {
      if (!checkPath(base, p, roots).inside) return p;
    }
    return undefined;
  }
}

/** Validates a mode value. */
function validMode(value: Mode, action: string): Mode {
  if (!Object.values(Mode).includes(value)) {
    throw new TypeError(`Cannot ${action}: unknown mode ${JSON.stringify(value)}`);
  }
  return value;
}

/** The risk class the engine uses for a tool (DESIGN §5). */
function effectiveClass(metadata: ToolMetadata | null): EffectiveClass {
  if (!metadata || typeof metadata !== "object") return "unknown";
  if (metadata.riskClass && Object.values(RiskClass).includes(metadata.riskClass)) {
    return metadata.riskClass;
  }
  if (metadata.riskLevel === "low" && metadata.requiresApproval === false) return RiskClass.READ;
  return "custom";
}

/** File path arguments of a tool call: `path`, `paths[]`, `destination`, `to`, `from`, `source`. */
function toolPaths(args: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const key of PATH_KEYS) {
    const value = args[key];
    if (typeof value === "string" && value !== "") out.push(value);
  }
  if (Array.isArray(args.paths)) {
    for (const value of args.paths) if (typeof value === "string" && value !== "") out.push(value);
  }
  return out;
}

/** The `cwd` argument, when present. */
function cwdOf(args: Record<string, unknown>): string[] {
  return typeof args.cwd === "string" && args.cwd !== "" ? [args.cwd] : [];
}

/** A short approval-card sentence for a shell command. */
function describeCommand(command: string): string {
  const analysis = analyzeCommand(command);
  const shown = command.length > 80 ? `${command.slice(0, 77)}...` : command;
  if (analysis.simple && analysis.hazards.length === 0) return `Run ${shown}`;
  if (analysis.hazards.includes("operator")) return `Run a compound command: ${shown}`;
  return `Run ${shown} (${analysis.hazards.join(", ")})`;
}

function allow(reason: string): Decision {
  return { allowed: true, reason, needsUser: false };
}

function ask(reason: string): Decision {
  return { allowed: false, reason, needsUser: true };
}

function deny(reason: string): Decision {
  return { allowed: false, reason, needsUser: false };
}
