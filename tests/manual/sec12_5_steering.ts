// Manual §12.5, as written; only the import specifier changed. The prelude defines
// `attachments` and `refs`; the epilogue shows where the queued messages were injected.
import { createDefaultEngine, EventType, Mode, saveAttachments } from "../../mod.ts";

// Prelude (ours).
const engine = createDefaultEngine({ workspace: process.cwd(), mode: Mode.AUTO });
const attachments = [{
  name: "dot.png",
  mimeType: "image/png",
  dataUrl: "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
}];
const refs = saveAttachments(process.cwd(), attachments);
const injected: string[] = [];
let removed: boolean | undefined;
let removedLate: boolean | undefined;

for await (const event of engine.run("look at the project")) {
  if (event.type === EventType.TOOL_STARTED) {
    // §12.5
    engine.queueSteering("顺便把测试也跑一下");
    engine.queueSteering("忽略 dist 目录", attachments, refs);
    engine.queueSteering("先不用提交");
    removed = engine.removeSteering("先不用提交");
  }
  if (event.type === EventType.QUEUE_STEERING) injected.push(String(event.data.text));
}
removedLate = engine.removeSteering("顺便把测试也跑一下"); // 已注入返回 false
console.log(JSON.stringify({ injected, removed, removedLate }));
