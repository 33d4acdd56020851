/**
 * Terminal approval prompt of the reference CLI (manual §8.3: "CLI / escritorio: bloquea a la
 * espera de que el usuario pulse un botón").
 *
 * @module
 */
import type { Interface } from "node:readline/promises";
import { ApprovalOutcome, type PermissionRequest } from "../mod.ts";

/** The approval card as text lines: tool, reason and arguments. */
export function approvalCard(request: PermissionRequest): string {
  const args = Object.entries(request.arguments).flatMap(([k, v]) => {
    let text = typeof v === "string" ? v : JSON.stringify(v);
    if (text.length > 400) text = text.slice(0, 400) + "…";
    const [first, ...rest] = text.replace(/\n+$/, "").split("\n");
    return [`  │   ${k}: ${first}`, ...rest.map((l) => `  │     ${l}`)];
  });
  return [
    `  ┌ approval needed: ${request.toolName}`,
    `  │ ${request.reason}`,
    ...args,
    "  └",
  ].join("\n");
}

/** Maps an answer typed by the user to an outcome; `undefined` when it is not understood. */
export function parseApprovalAnswer(answer: string, isShell: boolean): ApprovalOutcome | undefined {
  const a = answer.trim().toLowerCase();
  if (a === "y" || a === "yes" || a === "o" || a === "once") return ApprovalOutcome.ONCE;
  if (a === "a" || a === "always") return ApprovalOutcome.ALWAYS_TOOL;
  if ((a === "c" || a === "command") && isShell) return ApprovalOutcome.ALWAYS_COMMAND;
  if (a === "n" || a === "no" || a === "d" || a === "deny") return ApprovalOutcome.DENY;
  return undefined;
}

/**
 * Asks on the terminal until the user gives a valid answer: once / always this tool / always
 * this command (run_shell only) / deny.
 */
export async function askApproval(
  rl: Interface,
  request: PermissionRequest,
  write: (text: string) => void,
): Promise<ApprovalOutcome> {
  const isShell = typeof request.arguments.command === "string";
  write(approvalCard(request) + "\n");
  const choices = isShell
    ? "[y] once  [a] always this tool  [c] always this command  [n] deny"
    : "[y] once  [a] always this tool  [n] deny";
  for (;;) {
    const answer = await rl.question(`  ${choices} > `);
    const outcome = parseApprovalAnswer(answer, isShell);
    if (outcome) return outcome;
    write("  please answer y, a" + (isShell ? ", c" : "") + " or n\n");
  }
}
