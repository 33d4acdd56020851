// Manual §18.1, as written; only the import specifier changed. The epilogue (ours) plays the
// front end: it sends two messages to one session at once (they must run in order), answers the
// suspended approval the way the sample's comment says, and prints what each response received.
import {
  ApprovalOutcome,
  Mode,
  createDefaultEngine,
  type PermissionRequest,
} from "../../mod.ts";

interface Runtime {
  engine: ReturnType<typeof createDefaultEngine>;
  queue: Promise<void>;
  pendingApproval?: {
    request: PermissionRequest;
    resolve: (o: ApprovalOutcome) => void;
    reject: (e: Error) => void;
  };
}

const sessions = new Map<string, Runtime>();

function getRuntime(sessionId: string, workspace: string): Runtime {
  let rt = sessions.get(sessionId);
  if (rt) return rt;

  const engine = createDefaultEngine({
    workspace,
    mode: Mode.INTERACTIVE,
    toolResultDir: `${workspace}/.agent/tool-results`,
  });

  const runtime: Runtime = { engine, queue: Promise.resolve() };

  engine.setApprover((request) => {
    return new Promise<ApprovalOutcome>((resolve, reject) => {
      runtime.pendingApproval = { request, resolve, reject };
      // 通过 SSE/WebSocket 把 request 推给前端;前端 POST /approve 时:
      //   runtime.pendingApproval?.resolve(ApprovalOutcome.ONCE)
      // 超时或连接断开时:
      //   runtime.pendingApproval?.resolve(ApprovalOutcome.DENY)
    });
  });

  sessions.set(sessionId, runtime);
  return runtime;
}

// POST /sessions/:id/messages
// res 为 Express/Fastify 等框架的响应对象;这里只要求 write/end 两个方法
async function send(
  sessionId: string,
  workspace: string,
  text: string,
  res: { write(chunk: string): void; end(): void },
) {
  const rt = getRuntime(sessionId, workspace);
  const task = rt.queue.then(async () => {
    for await (const event of rt.engine.run(text)) {
      res.write(`event: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`);
    }
  });
  rt.queue = task.catch(() => {}); // 保证下一条消息不被前一条的异常卡住
  await task;
}

// Epilogue (ours).
const order: string[] = [];
function collector(name: string) {
  const frames: string[] = [];
  return {
    frames,
    write(chunk: string) {
      const type = chunk.slice(7, chunk.indexOf("\n"));
      frames.push(type);
      if (type === "turn_start" || type === "turn_end") order.push(`${name}:${type}`);
      if (type === "permission_required") {
        // The front end approves: POST /approve → resolve(ONCE).
        queueMicrotask(() => sessions.get("s1")!.pendingApproval?.resolve(ApprovalOutcome.ONCE));
      }
    },
    end() {},
  };
}
const a = collector("a");
const b = collector("b");
await Promise.all([
  send("s1", process.cwd(), "write the note", a),
  send("s1", process.cwd(), "thanks", b),
]);
const fs = await import("node:fs");
console.log(JSON.stringify({
  order,
  approvalAsked: a.frames.includes("permission_required"),
  note: fs.readFileSync("note.md", "utf8"),
  sameEngine: sessions.size,
}));
