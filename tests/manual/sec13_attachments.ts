// Manual §13.2, as written; only the import specifier changed. The prelude defines the host's
// raw input, the session folder, the engine, `text` and `taskId`.
import { createDefaultEngine, Mode, readStoredAttachment } from "../../mod.ts";

// Prelude (ours).
const engine = createDefaultEngine({ workspace: process.cwd(), mode: Mode.AUTO });
const sessionDir = `${process.cwd()}/session`;
const rawInput = [{
  name: "screenshot.png",
  mimeType: "image/png",
  dataUrl: "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
}];
const text = "这张截图里是什么?";
const taskId = "task-13";
const starts: unknown[] = [];

// §13.2
import {
  normalizeAttachments,
  saveAttachments,
  type MessageAttachment,
  type StoredAttachment,
} from "../../mod.ts";

// 1) 校验并归一化(非法会抛 AttachmentError)
const attachments: MessageAttachment[] = normalizeAttachments(rawInput) ?? [];

// 2) 存到会话目录
const refs: StoredAttachment[] = saveAttachments(sessionDir, attachments);

// 3) 跑一轮:base64 只在本轮发给模型,历史轮次会自动剥离
for await (const e of engine.run(text, taskId, attachments, refs)) {
  // turn_start.data.attachmentCount / attachments(refs)
  if (e.type === "turn_start") starts.push(e.data);
}

// Interlude (ours): the ref the host keeps.
const ref = refs[0];
const { name, mimeType, size, base64 } = readStoredAttachment(sessionDir, ref.path);

// Epilogue (ours): a second turn, and an attempt to read outside attachments/.
for await (const _ of engine.run("再看一次")) { /* drain */ }
let traversal = "";
try {
  readStoredAttachment(sessionDir, "attachments/../../etc/passwd");
} catch (err) {
  traversal = `${(err as Error).name}:${(err as { code?: string }).code}`;
}
console.log(JSON.stringify({ starts, name, mimeType, size, base64Length: base64.length, ref, traversal }));
