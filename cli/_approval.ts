/**
 * Terminal approval prompt of the reference CLI (manual §8.3: "CLI / escritorio: bloquea a la
 * espera de que el usuario pulse un botón").
 *
 * @module
 */
import type { Interface } from "node:readline/promises";
import { ApprovalOutcome, commandExecutable, type PermissionRequest } from "../mod.ts";

/** Characters of one non-command argument shown in full; longer ones show head and tail. */
const ARG_SHOWN_CHARS = 1200;

function showValue(key: string, value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2) ?? String(value);
  // A command is always shown whole: what runs must be what the person approves.
  if (key === "command" || text.length <= ARG_SHOWN_CHARS) return text;
  const half = Math.floor(ARG_SHOWN_CHARS / 2);
  return `${text.slice(0, half)}\n… ${text.length - 2 * half} characters not shown …\n` +
    text.slice(-half);
}

/** The approval card as text lines: tool, reason and every argument. */
export function approvalCard(request: PermissionRequest): string {
  const args = Object.entries(request.arguments).flatMap(([k, v]) => {
    const [first, ...rest] = showValue(k, v).replace(/\n+$/, "").split("\n");
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
 * this program (run_shell only; the manual remembers the executable name, §8.5) / deny. An
 * aborted `signal` (Ctrl-C) ends the question with DENY.
 */
export async function askApproval(
  rl: Interface,
  request: PermissionRequest,
  options: { write: (text: string) => void; signal?: AbortSignal },
): Promise<ApprovalOutcome> {
  const { write, signal } = options;
  const command = typeof request.arguments.command === "string"
    ? request.arguments.command
    : undefined;
  const program = command === undefined ? null : commandExecutable(command);
  write(approvalCard(request) + "\n");
  const choices = program
    ? `[y] once  [a] always ${request.toolName}  [c] always "${program}" (any arguments)  [n] deny`
    : `[y] once  [a] always ${request.toolName}  [n] deny`;
  for (;;) {
    let answer: string;
    try {
      answer = await rl.question(`  ${choices} > `, { signal });
    } catch {
      return ApprovalOutcome.DENY; // interrupted while asking
    }
    const outcome = parseApprovalAnswer(answer, program !== null);
    if (outcome) return outcome;
    write("  please answer y, a" + (program ? ", c" : "") + " or n\n");
  }
}
