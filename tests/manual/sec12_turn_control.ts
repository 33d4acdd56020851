// Manual §12.1 and §12.2, as written; only the import specifier changed. The prelude builds the
// engine; the epilogue shows the interrupt ending the turn.
import { createDefaultEngine, EventType, Mode } from "../../mod.ts";

// Prelude (ours).
const engine = createDefaultEngine({ workspace: process.cwd(), mode: Mode.AUTO });

// §12.1
import type { WsEvent } from "../../mod.ts";

async function drain(stream: AsyncIterable<WsEvent>): Promise<void> {
  for await (const event of stream) {
    // 渲染或忽略
  }
}

await drain(engine.run("先看一下项目结构"));
await drain(engine.run("把 README 里的示例改成 TypeScript")); // 自动带上一轮上下文

// Epilogue (ours) for §12.2: a long shell command is interrupted from "another place".
const statuses: string[] = [];
for await (const event of engine.run("run a long command")) {
  if (event.type === EventType.TOOL_STARTED) {
    setTimeout(() => {
      // 在另一个地方(例如 HTTP DELETE / 用户点「停止」)
      engine.requestInterrupt();
    }, 200);
  }
  if (event.type === EventType.INTERRUPTED) statuses.push("interrupted");
  if (event.type === EventType.TURN_END) statuses.push(`turn_end:${event.data.status}`);
}
const users = engine.messages.filter((m) => m.role === "user").map((m) => m.content);
console.log(JSON.stringify({ users, statuses }));
