/**
 * The unattended worker (manual §18.3): no person to ask, so approvals follow static business
 * rules and everything else is denied (`defaultApproval: "deny"`). Each job gets its own
 * workspace, cleaned up or archived at the end; `maxIterations`, `contextWindow` and `capTokens`
 * are explicit so tokens cannot run away; usage is counted from `onAssistantMessage`; a turn that
 * does not end `completed` is a failed job, logged as such.
 *
 * ```sh
 * export OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4o-mini
 * echo '{"id":"job-1","prompt":"Run the tests and fix what fails","template":"./repo"}' |
 *   deno run -A examples/worker.ts
 * ```
 *
 * A job is one JSON object on standard input (or the first argument); the report is printed as
 * one JSON line; the exit code is 0 only for a completed job.
 *
 * @module
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import {
  ApprovalOutcome,
  createDefaultEngine,
  type EngineHook,
  Mode,
  type PermissionRequest,
  type ProviderClient,
  type TokenUsage,
} from "../mod.ts";

/** One job. */
export interface WorkerJob {
  /** Job id (letters, digits, `.`, `_`, `-`); names the workspace. */
  id: string;
  /** What the agent should do. */
  prompt: string;
  /** A folder copied into the job's fresh workspace first (default: start empty). */
  template?: string;
}

/** Options of {@link runJob}. */
export interface WorkerOptions {
  /** Where job workspaces are made (default `<os tmp>/zqagent-jobs`). */
  jobsRoot?: string;
  /** Keep the workspace here as `<archiveDir>/<job id>` when the job ends (default: delete it). */
  archiveDir?: string;
  /** Model id (default env `OPENAI_MODEL`; the job fails when neither is set). */
  model?: string;
  /** Provider (default `OpenAIProvider` from the `OPENAI_*` environment). */
  provider?: ProviderClient;
  /** Iterations per turn (default 30). */
  maxIterations?: number;
  /** Context window in tokens (default 128,000). */
  contextWindow?: number;
  /** Absolute cap of the compaction threshold in tokens (default 64,000). */
  capTokens?: number;
  /** Commands run without asking (default `["npm test", "npm run build"]`, manual §18.3). */
  allowedCommands?: string[];
  /** Where failures are logged (default `console.error`). */
  log?: (line: string) => void;
}

/** What a job did. */
export interface JobReport {
  /** Job id. */
  id: string;
  /** True when the turn ended `completed`. */
  ok: boolean;
  /** `turn_end.status`. */
  status: string;
  /** The model's final answer text. */
  answer: string;
  /** Tokens used, summed over every model reply (from `onAssistantMessage`). */
  usage: { inputTokens: number; outputTokens: number; totalTokens: number; replies: number };
  /** Tool calls and their outcomes, in order (`name:status`). */
  tools: string[];
  /** Where the workspace was archived, or `null` when it was deleted. */
  archivedTo: string | null;
}

const JOB_ID_RE = /^[A-Za-z0-9._-]{1,100}$/;

/**
 * Static approval rules (manual §18.3): business rules, not a person. `npm test` runs; every
 * other request that reaches the approver is denied.
 *
 * @param req The permission request.
 * @returns The outcome.
 */
export function staticApprover(req: PermissionRequest): Promise<ApprovalOutcome> {
  if (req.toolName === "run_shell" && String(req.arguments.command).startsWith("npm test")) {
    return Promise.resolve(ApprovalOutcome.ONCE);
  }
  return Promise.resolve(ApprovalOutcome.DENY);
}

/**
 * Runs one job in its own workspace and reports it.
 *
 * @param job The job.
 * @param options See {@link WorkerOptions}.
 * @returns The report; `ok` is false for any status but `completed`.
 * @throws {TypeError} When the job id or prompt is missing or malformed.
 */
export async function runJob(job: WorkerJob, options: WorkerOptions = {}): Promise<JobReport> {
  if (!job || typeof job.id !== "string" || !JOB_ID_RE.test(job.id) || /^\.+$/.test(job.id)) {
    throw new TypeError("Cannot run job: id must be 1–100 letters, digits, '.', '_' or '-'");
  }
  if (typeof job.prompt !== "string" || job.prompt.trim() === "") {
    throw new TypeError(`Cannot run job ${job.id}: prompt is empty`);
  }
  const log = options.log ?? ((line: string) => console.error(line));
  const jobsRoot = options.jobsRoot ?? path.join(os.tmpdir(), "zqagent-jobs");
  fs.mkdirSync(jobsRoot, { recursive: true });
  // One workspace per job, never shared (checklist §19: not `/`, not home).
  const workspace = fs.mkdtempSync(path.join(jobsRoot, `${job.id}-`));
  if (job.template) fs.cpSync(job.template, workspace, { recursive: true });

  const usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0, replies: 0 };
  const tools: string[] = [];
  let status = "error";
  const hook: EngineHook = {
    // Usage accounting (manual §18.3: "Usa onAssistantMessage para contabilizar el uso").
    onAssistantMessage(_text: string, _calls: unknown, u?: TokenUsage) {
      usage.replies++;
      if (!u) return;
      usage.inputTokens += u.inputTokens;
      usage.outputTokens += u.outputTokens;
      usage.totalTokens += u.totalTokens;
    },
    onToolFinished(name: string, toolStatus: string) {
      tools.push(`${name}:${toolStatus}`);
    },
    // Manual §18.3: "Usa onTurnEnd para evaluar status; si no es completed, considéralo fallo".
    onTurnEnd(s: string) {
      status = s;
    },
  };

  let answer = "";
  let archivedTo: string | null = null;
  try {
    const engine = createDefaultEngine({
      workspace,
      model: options.model,
      provider: options.provider,
      mode: Mode.INTERACTIVE,
      defaultApproval: "deny", // nobody to ask: deny by default
      allowedCommands: options.allowedCommands ?? ["npm test", "npm run build"],
      maxIterations: options.maxIterations ?? 30,
      contextWindow: options.contextWindow ?? 128_000,
      capTokens: options.capTokens ?? 64_000,
      hook,
    });
    engine.setApprover(staticApprover);
    try {
      for await (const event of engine.run(job.prompt, job.id)) {
        if (event.type === "assistant_message") answer = String(event.data.text ?? "");
        if (event.type === "error") log(`job ${job.id}: error: ${event.data.error}`);
      }
    } catch (err) {
      // Host mistakes (no model, no API key) are thrown after the events (DESIGN §3).
      log(`job ${job.id}: ${(err as Error).message}`);
      status = "error";
    }
  } finally {
    if (options.archiveDir) {
      fs.mkdirSync(options.archiveDir, { recursive: true });
      archivedTo = path.join(options.archiveDir, job.id);
      fs.rmSync(archivedTo, { recursive: true, force: true });
      fs.cpSync(workspace, archivedTo, { recursive: true });
    }
    fs.rmSync(workspace, { recursive: true, force: true });
  }
  const ok = status === "completed";
  if (!ok) log(`job ${job.id} failed: turn ended ${status}`);
  return { id: job.id, ok, status, answer, usage, tools, archivedTo };
}

async function readStdin(): Promise<string> {
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  return text;
}

const isMain = (import.meta as { main?: boolean }).main ??
  (process.argv[1] !== undefined &&
    path.resolve(process.argv[1]) === fileURLToPath(import.meta.url));
if (isMain) {
  const raw = process.argv[2] ?? await readStdin();
  let job: WorkerJob;
  try {
    job = JSON.parse(raw);
  } catch {
    console.error("Cannot run job: give one JSON object on standard input or as the argument");
    process.exit(2);
  }
  const report = await runJob(job, {
    jobsRoot: process.env.JOBS_ROOT,
    archiveDir: process.env.ARCHIVE_DIR,
  });
  console.log(JSON.stringify(report));
  process.exit(report.ok ? 0 : 1);
}
