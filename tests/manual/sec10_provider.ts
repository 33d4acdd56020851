// Manual §10.1–10.3, as written; only the import specifier changed. The prelude defines the
// types the §10.2 declarations use; the epilogue implements that contract and runs a turn.
import {
  createDefaultEngine,
  type Message,
  type RequestOptions,
  type StreamOpts,
  type TokenUsage,
  type ToolCall,
  type ToolSchema,
} from "../../mod.ts";

// Prelude (ours).
const workspace = process.cwd();

// §10.1
import { OpenAIProvider } from "../../mod.ts";

const provider = new OpenAIProvider({
  apiKey: process.env.OPENAI_API_KEY,   // 缺省读同名环境变量
  baseURL: process.env.OPENAI_BASE_URL, // 任意 OpenAI 兼容端点
  logDir: "/var/log/zqagent/llm",       // 可选:请求审计日志
});

// §10.2
// 注意:StreamOpts 目前未从包根导出;实现自定义 provider 时,
// 按下面用到的字段自行声明即可(reqId / logTime 必填,其余可选)。
interface ProviderClient {
  stream(
    model: string,
    messages: Message[],
    tools: ToolSchema[],
    opts: StreamOpts,
  ): Promise<AsyncIterable<StreamChunk>>;

  chat(
    model: string,
    messages: any[],
    options: RequestOptions,
    opts: StreamOpts,
    params?: { maxTokens?: number },
  ): Promise<string | null>;
}

interface StreamChunk {
  content: string | null;
  reasoning: string | null;
  toolCalls: ToolCall[] | null; // 仅流结束 chunk 给完整列表
  usage: TokenUsage | null;
  finishReason: string | null;
}

// §10.3
createDefaultEngine({
  workspace,
  reasoningEffort: "high", // low / medium / high
});

// Epilogue (ours): a host provider written against the §10.2 contract, as an async generator.
const custom: ProviderClient = {
  stream(_model, _messages, _tools, opts) {
    async function* gen(): AsyncGenerator<StreamChunk> {
      for (const word of ["custom ", "provider ", "works"]) {
        if (opts.signal?.aborted) return;
        yield { content: word, reasoning: null, toolCalls: null, usage: null, finishReason: null };
      }
      yield { content: null, reasoning: null, toolCalls: null, usage: null, finishReason: "stop" };
    }
    return Promise.resolve(gen());
  },
  chat: () => Promise.resolve(null),
};
const engine = createDefaultEngine({ workspace, model: "custom-model", provider: custom });
let text = "";
let status = "";
for await (const event of engine.run("hi")) {
  if (event.type === "assistant_delta") text += String(event.data.text);
  if (event.type === "turn_end") status = String(event.data.status);
}
const real = createDefaultEngine({ workspace, provider, reasoningEffort: "high" });
let realText = "";
for await (const event of real.run("hi")) {
  if (event.type === "assistant_delta") realText += String(event.data.text);
}
console.log(JSON.stringify({ text, status, realText }));
