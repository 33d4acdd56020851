// Manual §7.2 "Herramientas personalizadas", as written; only the import specifier changed.
// The prelude defines the host's order service and the engine; the epilogue runs a turn.
import { ApprovalOutcome, createDefaultEngine, type ToolSchema } from "../../mod.ts";

// Prelude (ours).
const engine = createDefaultEngine({ workspace: process.cwd() });
const registry = engine.registry;
const myOrderService = {
  query: async (id: string) => ({ id, status: "shipped", amount: 42.5 }),
};

// The manual's type of ToolRegistry.register, declared as written.
type Register = (
  func: (args: Record<string, unknown>, ctx?: { signal?: AbortSignal }) => unknown,
  metadata: {
    category: string;
    riskLevel: "low" | "medium" | "high";
    capabilities: string[];
    requiresApproval: boolean;
  },
  schema?: ToolSchema,   // 强烈建议显式给出
  source?: string,       // 展示用:"internal" / "mcp:xxx" / "myapp"
) => ToolSpec;
type ToolSpec = ReturnType<typeof registry.register>;
const register: Register = registry.register.bind(registry);
void register;

registry.register(
  async (args) => {
    const orderId = String(args.order_id);
    return await myOrderService.query(orderId);
  },
  {
    category: "business",
    riskLevel: "high",
    capabilities: ["query_order"],
    requiresApproval: true,
  },
  {
    type: "function",
    function: {
      name: "query_order",
      description: "按订单号查询内部订单系统,返回订单状态与金额",
      parameters: {
        type: "object",
        properties: {
          order_id: { type: "string", description: "订单号" },
        },
        required: ["order_id"],
      },
    },
  },
  "myapp",
);

// Epilogue (ours).
const asked: string[] = [];
engine.setApprover(async (request) => {
  asked.push(request.toolName);
  return ApprovalOutcome.ONCE;
});
let status = "";
for await (const event of engine.run("订单 A-7 到哪了?")) {
  if (event.type === "tool_finished") status = String(event.data.status);
}
console.log(JSON.stringify({ source: registry.get("query_order")?.source, asked, status }));
