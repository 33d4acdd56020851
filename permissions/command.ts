/**
 * Shell command analysis for the command allowlist and the `workspace` shell policy (manual §8.4,
 * §8.5; DESIGN §5). Synchronous.
 *
 * Tokenising uses [`shell-quote`](https://www.npmjs.com/package/shell-quote), a small, widely used
 * and maintained POSIX-shell tokenizer that reports control operators, globs, comments and (through
 * an `env` callback) every `$` expansion as separate entries. It is not a full bash parser, so its
 * output is trusted only for commands it can vouch for; a few checks on the raw text close the
 * gaps where it and bash disagree:
 * - newlines, `\r`, other control characters and Unicode spaces or format characters: bash treats
 *   a newline as `;` and Unicode spaces as word characters, while `shell-quote` splits on both;
 * - backticks (`shell-quote` keeps them inside words), `$(`/`${`, and unbalanced quotes (it skips
 *   characters it cannot match);
 * - `#` anywhere (`shell-quote` starts a comment mid-word, bash does not, so text after it could
 *   run unseen).
 *
 * Anything that is not one plain simple command (words only) is never auto-allowed: operators
 * (`;` `&` `|` `&&` `||` `>` `<` `>>` `2>&1` `<(` `(` …), substitutions, variable expansions, globs,
 * brace or bracket patterns, comments, leading `NAME=value` assignments, and wrappers that run
 * another command (`bash -c`, `env`, `xargs`, `sudo`, `timeout`, …). Allowlist entries match on
 * argv-token prefixes, so `ls` never allows `lsof` and `git status` never allows `git`.
 *
 * @module
 */
// @ts-types="@types/shell-quote"
import { parse } from "shell-quote";

/** Why a command cannot be auto-allowed, as found by {@link analyzeCommand}. */
export type CommandHazard =
  /** Nothing to run. */
  | "empty"
  /** `shell-quote` failed, or quotes are unbalanced. */
  | "parse_error"
  /** A control operator or redirection: `;` `&` `|` `&&` `||` `>` `<` `>>` `<(` `(` … */
  | "operator"
  /** Command substitution: backticks or `$(`. */
  | "substitution"
  /** A `$VAR`, `${…}` or other `$` expansion. */
  | "expansion"
  /** A glob, brace or bracket pattern (`*`, `?`, `[…]`, `{…}`). */
  | "glob"
  /** A `#` (comment). */
  | "comment"
  /** A newline, `\r`, other control character, or a Unicode space or format character. */
  | "control_char"
  /** Leading `NAME=value` assignments (`LD_PRELOAD=… ls`). */
  | "assignment"
  /** The executable runs another command (`bash -c`, `env`, `xargs`, `sudo`, …). */
  | "wrapper";

/** One simple command found in a command line. */
export interface SimpleCommand {
  /** Leading `NAME=value` words. */
  assignments: string[];
  /** The words after the assignments; `argv[0]` is the executable. May be empty. */
  argv: string[];
}

/** The result of {@link analyzeCommand}. */
export interface CommandAnalysis {
  /** The command text analysed. */
  command: string;
  /**
   * The simple commands, split at control operators; empty when the text could not be parsed.
   * Words that are expansions or globs appear as their raw text (`$HOME`, `*.ts`) only for
   * display; a command with such words is never auto-allowed.
   */
  commands: SimpleCommand[];
  /** Control operators and redirections seen, in order. */
  operators: string[];
  /** Everything that keeps the command from being auto-allowed; empty for a plain command. */
  hazards: CommandHazard[];
  /**
   * True when the text is exactly one simple command of plain words with no operator,
   * substitution, expansion, glob, comment or control character. Assignments and wrappers are
   * reported in `hazards` but do not make a command non-simple.
   */
  simple: boolean;
}

/**
 * Executables that run another command or code given as arguments (shells, `env`, `xargs`,
 * privilege and scheduling wrappers, shell keywords). Commands starting with one of these are
 * never auto-allowed (DESIGN §5: "unless every inner command is allowed"; we never allow them).
 */
const WRAPPERS: ReadonlySet<string> = new Set([
  "sh",
  "bash",
  "zsh",
  "dash",
  "ksh",
  "mksh",
  "fish",
  "csh",
  "tcsh",
  "busybox",
  "env",
  "xargs",
  "parallel",
  "sudo",
  "doas",
  "su",
  "runuser",
  "pkexec",
  "nohup",
  "timeout",
  "nice",
  "ionice",
  "chrt",
  "taskset",
  "stdbuf",
  "setsid",
  "unbuffer",
  "exec",
  "eval",
  "source",
  ".",
  "command",
  "builtin",
  "time",
  "watch",
  "ssh",
  "chroot",
  "unshare",
  "nsenter",
  "flock",
  "script",
  "strace",
  "ltrace",
  "gdb",
  "firejail",
  "caffeinate",
  "trap",
  "coproc",
  "!",
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "do",
  "done",
  "while",
  "until",
  "for",
  "case",
  "esac",
  "select",
  "function",
]);

/** Options that make an otherwise harmless program run code or write files. */
interface DangerousOptions {
  /** Whole-word options; also matched as `--opt=value`. */
  words: readonly string[];
  /** Single-letter options, also matched inside clusters (`-ni`) and with attached values. */
  letters: string;
}

/**
 * Per-program dangerous options (research "coding-engines" §3.4; Codex `is_safe_command.rs`).
 * They are refused after the allowlisted prefix; an allowlist entry may name them explicitly.
 */
const DANGEROUS_OPTIONS: Readonly<Record<string, DangerousOptions>> = {
  find: {
    words: [
      "-exec",
      "-execdir",
      "-ok",
      "-okdir",
      "-delete",
      "-fls",
      "-fprint",
      "-fprint0",
      "-fprintf",
    ],
    letters: "",
  },
  rg: { words: ["--pre", "--hostname-bin", "--search-zip"], letters: "z" },
  git: {
    words: [
      "--config-env",
      "--exec-path",
      "--git-dir",
      "--work-tree",
      "--output",
      "--ext-diff",
      "--upload-pack",
      "--receive-pack",
      "--exec",
    ],
    letters: "cC",
  },
  sed: { words: ["--in-place"], letters: "i" },
  tar: {
    words: [
      "--to-command",
      "--checkpoint-action",
      "--use-compress-program",
      "--info-script",
      "--new-volume-script",
    ],
    letters: "IF",
  },
  sort: { words: ["--compress-program", "--output"], letters: "o" },
  python: { words: [], letters: "c" },
  python2: { words: [], letters: "c" },
  python3: { words: [], letters: "c" },
  node: { words: ["--eval", "--print", "--require", "--import"], letters: "epr" },
  perl: { words: [], letters: "eE" },
  ruby: { words: [], letters: "e" },
  php: { words: [], letters: "r" },
};

/** Raw-text characters bash reads differently from `shell-quote`, or that hide text. */
const CONTROL_CHARS = /[\p{Cc}\p{Cf}\p{Z}\u2028\u2029]/u;

/** True for an allowed ordinary character in {@link CONTROL_CHARS}' classes (space, tab). */
function hasControlChar(text: string): boolean {
  for (const ch of text) {
    if (ch === " " || ch === "\t") continue;
    if (CONTROL_CHARS.test(ch)) return true;
  }
  return false;
}

/**
 * True when quotes are balanced under bash rules (single quotes literal; double quotes and
 * `$'…'` honour backslash; a trailing lone backslash is unbalanced).
 */
function quotesBalanced(text: string): boolean {
  let state: "none" | "single" | "double" | "ansi" = "none";
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (state === "none") {
      if (c === "\\") {
        if (i + 1 >= text.length) return false;
        i++;
      } else if (c === "'") state = "single";
      else if (c === '"') state = "double";
      else if (c === "$" && text[i + 1] === "'") {
        state = "ansi";
        i++;
      }
    } else if (state === "single") {
      if (c === "'") state = "none";
    } else {
      if (c === "\\") i++;
      else if ((state === "double" && c === '"') || (state === "ansi" && c === "'")) {
        state = "none";
      }
    }
  }
  return state === "none";
}

/** Marker returned from the `env` callback for every `$` expansion. */
interface ExpansionMarker {
  expansion: string;
}

/** `NAME=value` at the start of a simple command. */
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;

/** Bash glob, brace and bracket characters that `shell-quote` leaves inside words. */
const PATTERN_CHARS = /[[\]{}]/;

/**
 * Splits a command line into simple commands and lists everything that keeps it from being
 * auto-allowed (manual §8.5). Synchronous, never throws; anything it cannot classify gets a
 * hazard.
 *
 * @param command The shell command text, as the model sent it.
 * @returns The analysis; `simple` is true only for one plain simple command.
 *
 * @example
 * ```ts
 * import { analyzeCommand } from "@zqagent/core/permissions";
 * analyzeCommand("ls -la").simple; // true
 * analyzeCommand("ls; rm -rf /").hazards; // ["operator"]
 * ```
 */
export function analyzeCommand(command: string): CommandAnalysis {
  const hazards = new Set<CommandHazard>();
  const operators: string[] = [];
  const text = typeof command === "string" ? command : "";
  if (hasControlChar(text)) hazards.add("control_char");
  if (text.includes("`") || text.includes("$(")) hazards.add("substitution");
  if (text.includes("${")) hazards.add("expansion");
  if (text.includes("#")) hazards.add("comment");
  if (!quotesBalanced(text)) hazards.add("parse_error");

  let entries: Array<ReturnType<typeof parse>[number] | ExpansionMarker> = [];
  try {
    entries = parse(text, (key: string): ExpansionMarker => ({ expansion: key }));
  } catch {
    hazards.add("parse_error");
  }

  const commands: SimpleCommand[] = [];
  let words: string[] = [];
  const flush = () => {
    let i = 0;
    while (i < words.length && ASSIGNMENT.test(words[i])) i++;
    commands.push({ assignments: words.slice(0, i), argv: words.slice(i) });
    words = [];
  };
  for (const entry of entries) {
    if (typeof entry === "string") {
      if (PATTERN_CHARS.test(entry)) hazards.add("glob");
      words.push(entry);
    } else if ("expansion" in entry) {
      hazards.add("expansion");
      words.push(`$${entry.expansion}`);
    } else if ("comment" in entry) {
      hazards.add("comment");
    } else {
      const op = entry as { op: string; pattern?: string };
      if (op.op === "glob") {
        hazards.add("glob");
        words.push(op.pattern ?? "*");
      } else {
        hazards.add("operator");
        operators.push(String(op.op));
        flush();
      }
    }
  }
  flush();
  const nonEmpty = commands.filter((c) => c.argv.length > 0 || c.assignments.length > 0);
  if (nonEmpty.length === 0) hazards.add("empty");
  for (const c of nonEmpty) {
    if (c.assignments.length > 0) hazards.add("assignment");
    if (c.argv.length > 0 && WRAPPERS.has(baseName(c.argv[0]))) hazards.add("wrapper");
  }
  const structural = [...hazards].filter((h) => h !== "assignment" && h !== "wrapper");
  return {
    command: text,
    commands: nonEmpty,
    operators,
    hazards: [...hazards],
    simple: structural.length === 0 && nonEmpty.length === 1 && nonEmpty[0].argv.length > 0,
  };
}

/** The last path segment of an executable (`/usr/bin/env` → `env`). */
function baseName(executable: string): string {
  const parts = executable.split(/[\\/]/);
  return parts[parts.length - 1];
}

/**
 * Returns the argv of a command that may be auto-allowed at all: one plain simple command with no
 * hazard (no assignment, no wrapper); otherwise `null`.
 *
 * @param command The shell command text.
 */
export function plainArgv(command: string): string[] | null {
  const analysis = analyzeCommand(command);
  if (!analysis.simple || analysis.hazards.length > 0) return null;
  return analysis.commands[0].argv;
}

/**
 * Tokenises allowlist entries; entries that are empty or are not plain words are dropped.
 *
 * @param entries Allowlist entries such as `"git status"` or `"ls"`.
 * @returns One token array per usable entry.
 */
export function parseAllowlist(entries: readonly string[]): string[][] {
  const out: string[][] = [];
  for (const entry of entries) {
    if (typeof entry !== "string") continue;
    const argv = plainArgv(entry);
    if (argv && argv.length > 0) out.push(argv);
  }
  return out;
}

/**
 * True when `argv[index]` is a dangerous option of `program`. For `git`, single letters (`-c`,
 * `-C`) count only before the subcommand, where they are global options.
 */
function isDangerousOption(program: string, argv: readonly string[], index: number): boolean {
  const table = DANGEROUS_OPTIONS[program];
  if (!table) return false;
  const token = argv[index];
  for (const word of table.words) {
    if (token === word || token.startsWith(`${word}=`)) return true;
  }
  const global = program !== "git" || argv.slice(1, index).every((t) => t.startsWith("-"));
  if (global && table.letters !== "" && /^-[^-]/.test(token)) {
    const cluster = token.slice(1);
    // `-ni` (cluster) and `-i.bak` / `-cfoo` (attached value): any listed letter counts.
    for (const ch of cluster) {
      if (!/[A-Za-z0-9]/.test(ch)) break;
      if (table.letters.includes(ch)) return true;
    }
  }
  return false;
}

/**
 * True when `argv` is matched by one of the tokenised `entries`: the entry's tokens are a prefix
 * of argv at token boundaries, and no token after the prefix is a dangerous option of the program
 * (`find -exec`, `git -c`, `sed -i`, `rg --pre`, `python -c`, …).
 *
 * @param argv A plain command's words (see {@link plainArgv}).
 * @param entries Tokenised allowlist entries (see {@link parseAllowlist}).
 */
export function argvMatchesAllowlist(
  argv: readonly string[],
  entries: readonly (readonly string[])[],
): boolean {
  if (argv.length === 0) return false;
  const program = baseName(argv[0]);
  for (const entry of entries) {
    if (entry.length === 0 || entry.length > argv.length) continue;
    if (!entry.every((token, i) => argv[i] === token)) continue;
    let dangerous = false;
    for (let i = entry.length; i < argv.length && !dangerous; i++) {
      dangerous = isDangerousOption(program, argv, i);
    }
    if (dangerous) continue;
    return true;
  }
  return false;
}

/**
 * True when `command` may run without asking because of `allowlist` (manual §8.5): it is one
 * plain simple command (no operator, redirection, substitution, expansion, glob, comment,
 * control character, leading assignment or wrapper), an entry's words are a prefix of its words
 * (`ls` allows `ls -la` but never `lsof`; `git status` allows `git status -s` but neither
 * `git statusx` nor `git`), and no dangerous option follows the prefix.
 *
 * @param command The shell command text.
 * @param allowlist Entries such as `["git status", "ls", "pnpm test"]`; entries that are not plain
 *   words are ignored.
 *
 * @example
 * ```ts
 * import { isCommandAllowed } from "@zqagent/core/permissions";
 * isCommandAllowed("git status -s", ["git status"]); // true
 * isCommandAllowed("ls; rm -rf /", ["ls"]); // false
 * ```
 */
export function isCommandAllowed(command: string, allowlist: readonly string[]): boolean {
  const argv = plainArgv(command);
  if (!argv) return false;
  return argvMatchesAllowlist(argv, parseAllowlist(allowlist));
}

/**
 * The executable name to remember for "always allow this command" (manual §8.3
 * `ApprovalOutcome.ALWAYS_COMMAND`, §8.5): `argv[0]` of one plain simple command, or `null` when
 * the command is compound, has hazards, or starts with a wrapper.
 *
 * @param command The shell command text, or an executable name from a saved session.
 *
 * @example
 * ```ts
 * import { commandExecutable } from "@zqagent/core/permissions";
 * commandExecutable("npm test -- --watch"); // "npm"
 * commandExecutable("npm test && rm -rf ."); // null
 * ```
 */
export function commandExecutable(command: string): string | null {
  const argv = plainArgv(command);
  return argv ? argv[0] : null;
}
