/**
 * `@zqagent/core`: an embeddable AI-agent engine — model + tools + permissions + event stream +
 * persistence, as a library (manual §1).
 *
 * @example Five-minute start (manual §4)
 * ```ts
 * import { ApprovalOutcome, createDefaultEngine, EventType, Mode } from "@zqagent/core";
 *
 * const engine = createDefaultEngine({
 *   workspace: ".",
 *   model: "gpt-4o-mini",
 *   mode: Mode.INTERACTIVE,
 * });
 * engine.setApprover(async () => ApprovalOutcome.ONCE);
 * for await (const event of engine.run("Read this project and tell me what it does")) {
 *   if (event.type === EventType.ASSISTANT_DELTA) console.log(event.data.text);
 *   if (event.type === EventType.TURN_END) console.log(event.data.status);
 * }
 * ```
 *
 * @module
 */
export * from "./engine/mod.ts";
export * from "./tools/mod.ts";
export * from "./providers/mod.ts";
export * from "./permissions/mod.ts";
export * from "./mcp/mod.ts";
export * from "./vcs/mod.ts";
export * from "./store/mod.ts";
