/**
 * Source audits behind npm/guard_test.ts: which files are project sources, and what their code
 * (not their comments or strings) names. Used for DESIGN §1's rules: no inline `npm:`/`jsr:`
 * specifiers, no `Deno` namespace outside `_internal/`, no global augmentation.
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** Folders that hold no project source (dependencies, build output, test data, sample apps). */
const NOT_SOURCE = new Set([
  "node_modules",
  "dist",
  "fixtures",
  "demo_project",
  ".git",
  ".agent",
]);

/** Every TypeScript/JavaScript file of the project under `root`, relative with `/`, sorted. */
export function sourceFiles(root: string, prefix = ""): string[] {
  const out: string[] = [];
  for (
    const entry of readdirSync(path.join(root, prefix), { withFileTypes: true })
  ) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      if (NOT_SOURCE.has(entry.name) || entry.name.startsWith(".")) continue;
      out.push(...sourceFiles(root, rel));
    } else if (/\.(ts|tsx|mts|cts|js|mjs|cjs)$/.test(entry.name)) {
      out.push(rel);
    }
  }
  return out.sort();
}

/** Reads a project file. */
export function readSource(root: string, rel: string): string {
  return readFileSync(path.join(root, rel), "utf8");
}

/**
 * The code of a file with comments, string and template literals blanked out (kept as `""`),
 * so a word in a doc or a message is not taken for code. A small scanner, not a parser:
 * regular-expression literals are not recognised (a quote inside one can hide a little code).
 */
export function codeOnly(text: string): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === "/" && next === "/") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "/" && next === "*") {
      const end = text.indexOf("*/", i + 2);
      i = end < 0 ? text.length : end + 2;
      out += " ";
    } else if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      while (j < text.length && text[j] !== c) {
        if (text[j] === "\\") j++;
        else if (c !== "`" && text[j] === "\n") break;
        j++;
      }
      out += '""';
      i = j + 1;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/**
 * Uses of the `Deno` namespace in code (`Deno.x`, `globalThis.Deno`, a `Deno` cast), as
 * 1-based line numbers of `code` (the output of {@link codeOnly} keeps line breaks except
 * inside literals).
 */
export function denoUses(code: string): number[] {
  const lines: number[] = [];
  code.split("\n").forEach((line, i) => {
    if (/\bDeno\b/.test(line)) lines.push(i + 1);
  });
  return lines;
}

/** Global augmentation in code: `declare global`, or assigning a property of `globalThis`. */
export function globalAugmentations(code: string): string[] {
  const found: string[] = [];
  for (const m of code.matchAll(/\bdeclare\s+global\b/g)) found.push(m[0]);
  for (
    const m of code.matchAll(
      /\bglobalThis\s*(?:\.\s*[\w$]+|\[[^\]]*\])\s*=(?!=)/g,
    )
  ) {
    found.push(m[0]);
  }
  for (
    const m of code.matchAll(
      /\bObject\.(?:defineProperty|assign)\(\s*globalThis\b/g,
    )
  ) {
    found.push(m[0]);
  }
  return found;
}
