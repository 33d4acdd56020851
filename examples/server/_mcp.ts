/**
 * A tenant's MCP servers (manual §15, §18.4) as both server modes start them: the tenant's own
 * `<DATA_DIR>/tenants/<id>/mcp.json` (outside the workspace the agent can write), tools named
 * `mcp__<server>__<tool>` behind approval, and no server secrets for `${VAR}` (children get only
 * `PATH`, and `HOME` set to the workspace). Plus {@link McpToolMirror}, which lets one set of
 * servers serve the engines of many sessions (the multi-worker mode: one set per tenant per
 * worker).
 *
 * @module
 */
import path from "node:path";
import process from "node:process";
import {
  loadMcpConfigFile,
  McpManager,
  type ToolFunc,
  type ToolMetadata,
  ToolRegistry,
  type ToolSchema,
  type ToolSpec,
} from "../../mod.ts";

/** Options of {@link startTenantMcp}. */
export interface TenantMcpOptions {
  /** The tenant's id (names it in messages). */
  tenantId: string;
  /** The tenant's folder, holding `mcp.json`. */
  tenantDir: string;
  /** The tenant's workspace: the servers' working folder and `HOME`. */
  workspace: string;
  /** Where config warnings and connect failures go (default `console.error`). */
  log?: (message: string) => void;
}

/** The tenant's servers, from {@link startTenantMcp}. */
export interface TenantMcp {
  /** The manager (close it with `closeAll()`). */
  manager: McpManager;
  /** Resolves when every server is connected or failed (failures are logged); never rejects. */
  ready: Promise<void>;
}

/**
 * Reads the tenant's `mcp.json` and starts connecting its servers, registering their tools in
 * `registry` as each connects.
 *
 * @param registry Receives the tools (an engine's, or a {@link McpToolMirror}).
 * @param options The tenant and where to log.
 * @returns The manager and its `ready` promise, or `null` when the tenant has no servers (no
 *   `mcp.json`, or an empty or unreadable one: the reason is logged).
 */
export function startTenantMcp(
  registry: ToolRegistry,
  options: TenantMcpOptions,
): TenantMcp | null {
  const log = options.log ?? ((m: string) => console.error(m));
  const prefix = `mcp (${options.tenantId})`;
  const { configs, warnings } = loadMcpConfigFile(path.join(options.tenantDir, "mcp.json"));
  for (const w of warnings) log(`${prefix}: ${w}`);
  if (configs.length === 0) return null;
  const workspace = options.workspace;
  const env = { PATH: process.env.PATH, HOME: workspace };
  const manager = new McpManager(registry, configs, { builtin: { workspace, env }, env });
  const ready = manager.connectAll().then(
    (r) => {
      for (const f of r.failed) log(`${prefix}: ${JSON.stringify(f)}`);
    },
    (err) => log(`${prefix}: ${(err as Error).message}`),
  );
  return { manager, ready };
}

function isMcp(spec: ToolSpec | undefined): boolean {
  return spec?.source === "mcp" || (spec?.source.startsWith("mcp:") ?? false);
}

function copyInto(target: ToolRegistry, spec: ToolSpec): void {
  const there = target.get(spec.name);
  if (there && !isMcp(there)) return; // never shadows the engine's own tool
  target.register(spec.func, spec.metadata, spec.schema, spec.source);
  if (!spec.enabled) target.disable(spec.name);
}

/**
 * A tool registry for an {@link McpManager} shared by many engines: every MCP tool it holds is
 * mirrored, live, into each engine registry {@link McpToolMirror.attach}ed to it — registered,
 * removed, enabled and disabled as the manager does it here (servers connecting late, a tool
 * list that changes, lazy loading), with the same names, metadata (approval) and schemas. An
 * engine's own tools are never replaced or removed. Engine registries are held weakly: an
 * engine that is dropped needs no detaching.
 *
 * What the manager keeps per registry is shared by the attached engines: in lazy mode
 * (manual §15.4), a tool loaded by one session's search is loaded for all of them.
 *
 * @example
 * ```ts
 * const mirror = new McpToolMirror();
 * const mcp = startTenantMcp(mirror, { tenantId, tenantDir, workspace });
 * await mcp?.ready;
 * mirror.attach(engine.registry); // the tenant's MCP tools, in this engine too
 * ```
 */
export class McpToolMirror extends ToolRegistry {
  readonly #targets = new Set<WeakRef<ToolRegistry>>();

  /**
   * Mirrors this registry's MCP tools into `target` from now on.
   *
   * @param target An engine's registry.
   */
  attach(target: ToolRegistry): void {
    for (const spec of this.list()) if (isMcp(spec)) copyInto(target, spec);
    this.#targets.add(new WeakRef(target));
  }

  #each(fn: (target: ToolRegistry) => void): void {
    for (const ref of this.#targets) {
      const target = ref.deref();
      if (target) fn(target);
      else this.#targets.delete(ref);
    }
  }

  /** Registers here, and in every attached registry when it is an MCP tool. */
  override register(
    func: ToolFunc,
    metadata: ToolMetadata,
    schema?: ToolSchema,
    source = "internal",
  ): ToolSpec {
    const spec = super.register(func, metadata, schema, source);
    if (isMcp(spec)) this.#each((t) => copyInto(t, spec));
    return spec;
  }

  /** Removes here, and the MCP tool of that name from every attached registry. */
  override remove(name: string): boolean {
    const removed = super.remove(name);
    this.#each((t) => {
      if (isMcp(t.get(name))) t.remove(name);
    });
    return removed;
  }

  /** Disables here, and the MCP tool of that name in every attached registry. */
  override disable(name: string): boolean {
    const done = super.disable(name);
    this.#each((t) => {
      if (isMcp(t.get(name))) t.disable(name);
    });
    return done;
  }

  /** Enables here, and the MCP tool of that name in every attached registry. */
  override enable(name: string): boolean {
    const done = super.enable(name);
    this.#each((t) => {
      if (isMcp(t.get(name))) t.enable(name);
    });
    return done;
  }
}
