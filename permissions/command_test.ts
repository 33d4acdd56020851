import { test } from "node:test";
import assert from "node:assert/strict";
import { analyzeCommand, commandExecutable, isCommandAllowed } from "./command.ts";

/** A generous allowlist: every dangerous case below must still be refused. */
const BROAD = [
  "ls",
  "cat",
  "echo",
  "true",
  "git status",
  "git",
  "find",
  "rm",
  "bash",
  "sh",
  "env",
  "sudo",
  "xargs",
  "timeout",
  "nohup",
  "python",
  "node",
  "sed",
  "rg",
  "tar",
  "curl",
];

const DANGEROUS: Array<[string, string]> = [
  ["ls; rm -rf /", "a semicolon"],
  ["ls ;rm -rf /", "a semicolon without space"],
  ["ls && rm -rf /", "&&"],
  ["ls || rm -rf /", "||"],
  ["ls | sh", "a pipe"],
  ["cat x |& sh", "|&"],
  ["ls & rm -rf /", "a background &"],
  ["ls > /etc/passwd", "an output redirection"],
  ["ls >> ~/.bashrc", "an append redirection"],
  ["cat < /etc/shadow", "an input redirection"],
  ["ls 2>&1", "2>&1"],
  ["ls 2> err.txt", "2>"],
  ["ls &> out", "&>"],
  ["cat <<EOF", "a heredoc"],
  ["cat <<< hi", "a here-string"],
  ["echo $(rm -rf /)", "$(...)"],
  ['echo "$(rm -rf /)"', "$(...) inside double quotes"],
  ["echo `rm -rf /`", "backticks"],
  ['echo "`id`"', "backticks inside double quotes"],
  ["cat <(curl evil)", "process substitution <("],
  ["tee >(sh)", "process substitution >("],
  ["(rm -rf /)", "a subshell"],
  ["{ rm -rf /; }", "a brace group"],
  ["ls\nrm -rf /", "a newline"],
  ["ls\r\nrm -rf /", "\\r\\n"],
  ["ls\rrm -rf /", "a bare \\r"],
  ["ls\u2028rm -rf /", "a Unicode line separator"],
  ["ls\u0085rm", "a NEL character"],
  ["ls\u00a0-la", "a no-break space (bash reads it as part of the word)"],
  ["ls\u200b", "a zero-width space"],
  ["ls\u0000rm", "a NUL"],
  ["ls\x1b[2J", "an escape sequence"],
  ["ls$IFS-la", "$IFS"],
  ["cat ${IFS}/etc/passwd", "${IFS}"],
  ["echo $HOME", "a variable"],
  ['echo "$HOME"', "a variable inside double quotes"],
  ["echo ${X:-$(id)}", "a parameter expansion with a default"],
  ["echo $$", "$$"],
  ["ls *", "a glob"],
  ["cat ?ecret", "a ? glob"],
  ["cat [/]etc/passwd", "a bracket pattern"],
  ["cat {/etc/passwd,x}", "a brace expansion"],
  ["ls #; rm -rf /", "a comment"],
  ["ls a#b; rm", "a mid-word # (shell-quote would call it a comment)"],
  ['echo "unterminated', "an unbalanced quote"],
  ["ls \\", "a trailing backslash"],
  ["FOO=1 ls", "a leading assignment"],
  ["LD_PRELOAD=/tmp/evil.so ls", "LD_PRELOAD"],
  ["PATH=. ls", "a PATH override"],
  ["bash -c 'rm -rf /'", "bash -c"],
  ["sh -c ls", "sh -c even around an allowed command"],
  ["env rm -rf /", "env"],
  ["/usr/bin/env ls", "env by absolute path"],
  ["xargs rm", "xargs"],
  ["sudo ls", "sudo"],
  ["nohup ls", "nohup"],
  ["timeout 5 ls", "timeout"],
  ["nice ls", "nice"],
  ["exec ls", "exec"],
  ["eval ls", "eval"],
  ["command ls", "command"],
  ["time ls", "time"],
  ["watch ls", "watch"],
  ["ssh host ls", "ssh"],
  ["find . -exec rm {} +", "find -exec"],
  ["find . -delete", "find -delete"],
  ["find . -fprint /tmp/x", "find -fprint"],
  ["git -c core.pager=sh status", "git -c"],
  ["git -C /etc status", "git -C"],
  ["git --config-env=core.pager=X log", "git --config-env"],
  ["git diff --output=/etc/x", "git diff --output"],
  ["sed -i s/a/b/ f", "sed -i"],
  ["sed -ni p f", "sed with i in a flag cluster"],
  ["sed -i.bak s/a/b/ f", "sed -i with a suffix"],
  ["rg --pre sh x", "rg --pre"],
  ["rg --pre=sh x", "rg --pre="],
  ["tar --to-command=sh -xf a.tar", "tar --to-command"],
  ["python -c 'import os'", "python -c"],
  ["node -e 'process.exit()'", "node -e"],
  ["", "an empty command"],
  ["   ", "a blank command"],
];

for (const [command, what] of DANGEROUS) {
  test(`a command with ${what} is never auto-allowed (${JSON.stringify(command)})`, () => {
    assert.equal(isCommandAllowed(command, BROAD), false);
  });
}

test("a plain command matching an entry is allowed", () => {
  assert.equal(isCommandAllowed("ls -la src", ["ls"]), true);
});

test("ls never allows lsof", () => {
  assert.equal(isCommandAllowed("lsof -i", ["ls"]), false);
});

test("git status allows git status -s", () => {
  assert.equal(isCommandAllowed("git status -s", ["git status"]), true);
});

test("git status does not allow git statusx", () => {
  assert.equal(isCommandAllowed("git statusx", ["git status"]), false);
});

test("git status does not allow bare git", () => {
  assert.equal(isCommandAllowed("git", ["git status"]), false);
});

test("git status does not allow git push", () => {
  assert.equal(isCommandAllowed("git push --force", ["git status"]), false);
});

test("an allowlist entry does not match a different executable path", () => {
  assert.equal(isCommandAllowed("./ls", ["ls"]), false);
});

test("a fullwidth lookalike executable does not match", () => {
  assert.equal(isCommandAllowed("ｌｓ -la", ["ls"]), false);
});

test("a Cyrillic lookalike in the entry's second word does not match", () => {
  assert.equal(isCommandAllowed("git statuѕ", ["git status"]), false);
});

test("a quoted semicolon is one argument of a simple command", () => {
  assert.equal(isCommandAllowed('echo "a;b"', ["echo"]), true);
});

test("quoted operators and pipes are arguments of a simple command", () => {
  const analysis = analyzeCommand("echo 'a | b > c && d'");
  assert.equal(analysis.simple, true);
  assert.deepEqual(analysis.commands[0].argv, ["echo", "a | b > c && d"]);
});

test("a single-quoted dollar sign is a literal argument", () => {
  assert.equal(isCommandAllowed("echo '$HOME'", ["echo"]), true);
});

test("an escaped semicolon is a literal argument", () => {
  assert.deepEqual(analyzeCommand("echo a\\;b").commands[0].argv, ["echo", "a;b"]);
});

test("an entry naming a dangerous option explicitly allows it", () => {
  assert.equal(isCommandAllowed("sed -i s/a/b/ f", ["sed -i"]), true);
});

test("git log -c after the subcommand is not the global -c option", () => {
  assert.equal(isCommandAllowed("git log -c", ["git"]), true);
});

test("an entry that is itself compound is ignored", () => {
  assert.equal(isCommandAllowed("ls", ["ls; rm -rf /"]), false);
});

test("analyzeCommand splits a compound command into its simple commands", () => {
  const analysis = analyzeCommand("git add . && git commit -m 'x y' | cat");
  assert.equal(analysis.simple, false);
  assert.deepEqual(analysis.operators, ["&&", "|"]);
  assert.deepEqual(analysis.commands.map((c) => c.argv), [
    ["git", "add", "."],
    ["git", "commit", "-m", "x y"],
    ["cat"],
  ]);
});

test("analyzeCommand reports leading assignments separately from argv", () => {
  const analysis = analyzeCommand("FOO=1 BAR=2 make test");
  assert.deepEqual(analysis.commands[0].assignments, ["FOO=1", "BAR=2"]);
  assert.deepEqual(analysis.commands[0].argv, ["make", "test"]);
  assert.deepEqual(analysis.hazards, ["assignment"]);
});

test("analyzeCommand flags a variable expansion", () => {
  assert.ok(analyzeCommand("cat $FILE").hazards.includes("expansion"));
});

test("analyzeCommand flags a wrapper", () => {
  assert.ok(analyzeCommand("xargs -n1 echo").hazards.includes("wrapper"));
});

test("analyzeCommand never throws on a bad substitution", () => {
  assert.ok(analyzeCommand("echo ${}").hazards.length > 0);
});

test("commandExecutable returns the executable of a simple command", () => {
  assert.equal(commandExecutable("npm test -- --watch"), "npm");
});

test("commandExecutable returns null for a compound command", () => {
  assert.equal(commandExecutable("npm test && rm -rf ."), null);
});

test("commandExecutable returns null for a wrapper", () => {
  assert.equal(commandExecutable("sudo npm test"), null);
});

test("commandExecutable returns null for a leading assignment", () => {
  assert.equal(commandExecutable("NODE_OPTIONS=--require=x npm test"), null);
});
