import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { ToolRegistry } from "./registry.ts";
import { registerDiffTools } from "./diff.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";

// The "too large" messages of the patch tools (the file and media tools have theirs in their own
// test files): exact where rounding would make the size and the limit read the same.

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

const MIB = 1024 * 1024;

async function applyTo(size: number): Promise<unknown> {
  const dir = tempWorkspace();
  cleanups.push(() => removeDir(dir));
  fs.writeFileSync(path.join(dir, "big.txt"), "x".repeat(size));
  const registry = new ToolRegistry();
  registerDiffTools(registry, dir, { maxFileBytes: 10 * MIB });
  const patch = ["*** Begin Patch", "*** Update File: big.txt", "@@", "-x", "+y", "*** End Patch"];
  return await registry.get("apply_patch")!.func({ patch: patch.join("\n") });
}

test("apply_patch reports a file one byte over its size limit in exact bytes", async () => {
  await assert.rejects(
    applyTo(10 * MIB + 1),
    /big\.txt is 10485761 bytes, over the 10485760-byte \(10 MiB\) limit/,
  );
});

test("apply_patch reports a file well over its size limit in MiB", async () => {
  await assert.rejects(applyTo(13_000_000), /big\.txt is 12\.4 MiB, over the 10 MiB limit/);
});
