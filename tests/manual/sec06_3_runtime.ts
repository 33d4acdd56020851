// Manual §6.3 "Qué se puede cambiar en tiempo de ejecución", as written; only the import
// specifier changed. The prelude defines the names the manual leaves undefined.
import { ApprovalOutcome, createDefaultEngine, Mode } from "../../mod.ts";

// Prelude (ours).
const engine = createDefaultEngine({ workspace: process.cwd(), model: "first-model" });
const fn = async () => ApprovalOutcome.ONCE;
const text = "顺便把测试也跑一下";
const attachments = undefined;
const refs = undefined;

engine.model = "another-model";          // 模型(下一轮生效)
engine.messages;                         // 完整历史(含 notice 消息)
engine.permissions.mode = Mode.AUTO;     // 运行模式
engine.registry;                         // 工具表(可动态 enable/disable)
engine.compactionState;                  // 压缩状态(只读观察)
engine.approver;                         // 当前审批回调

engine.setApprover(fn);                  // 设置审批
engine.setSystemPrompt(text);            // 运行时替换系统提示词(切 agent 用)
engine.requestInterrupt();               // 中断当前一轮
engine.queueSteering(text, attachments, refs); // 排队补充指令(后两个可选)
engine.removeSteering(text);             // 撤销尚未注入的补充指令

// Epilogue (ours): the changes took effect.
console.log(
  JSON.stringify({
    model: engine.model,
    mode: engine.permissions.mode,
    approverSet: engine.approver === fn,
    system: engine.messages[0].content,
    steeringLeft: engine.removeSteering(text),
  }),
);
