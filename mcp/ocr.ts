/**
 * The built-in OCR preset (manual §15.6): an in-process MCP server (the SDK's low-level `Server`
 * over its in-memory transport) with one tool, `recognize`, registered as `mcp__ocr__recognize`.
 * Images and PDFs; engines tried in order: macOS Vision (through `swift`, macOS only), tesseract
 * (`tesseract-ocr`), then the session's multimodal model (`builtin.llm`). PDFs use their text layer
 * (`pdftotext`) when it has text, else their pages are rendered with `pdftoppm` (poppler-utils)
 * and recognised one by one. External programs are run without a shell.
 *
 * @module
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import type { McpBuiltinContext, McpInProcessServer } from "./client.ts";
import { findProgram } from "./_launch.ts";

/** Name of the OCR tool on its server (registered as `mcp__ocr__recognize`). */
export const OCR_TOOL = "recognize";

const IMAGE_TYPES: Record<string, string> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".bmp": "image/bmp",
  ".tif": "image/tiff",
  ".tiff": "image/tiff",
};

/** Largest file accepted, in bytes (50 MiB). */
const MAX_FILE_BYTES = 50 * 1024 * 1024;
/** Most PDF pages recognised in one call. */
const MAX_PDF_PAGES = 50;

const VISION_SWIFT = `
import Foundation
import Vision
let url = URL(fileURLWithPath: CommandLine.arguments[1])
let handler = VNImageRequestHandler(url: url)
let request = VNRecognizeTextRequest()
request.recognitionLevel = .accurate
try handler.perform([request])
for obs in request.results ?? [] { if let c = obs.topCandidates(1).first { print(c.string) } }
`;

function run(
  program: string,
  args: string[],
  env: Record<string, string | undefined>,
  signal?: AbortSignal,
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      program,
      args,
      {
        env: env as NodeJS.ProcessEnv,
        maxBuffer: 64 * 1024 * 1024,
        timeout: 120_000,
        ...(signal ? { signal } : {}),
      },
      (err, stdout, stderr) => {
        if (err) {
          reject(
            new Error(`${path.basename(program)} failed: ${String(stderr).trim() || err.message}`),
          );
        } else resolve(String(stdout));
      },
    );
  });
}

type Engine = "vision" | "tesseract" | "llm";

interface OcrArgs {
  file: string;
  lang: string;
  signal?: AbortSignal;
}

/** Recognises one image file; throws when no engine could. */
async function recognizeImage(
  ctx: McpBuiltinContext,
  args: OcrArgs,
): Promise<{ text: string; engine: Engine }> {
  const env = ctx.env ?? process.env;
  const engines = ctx.ocrEngines ?? ["vision", "tesseract", "llm"];
  const problems: string[] = [];
  for (const engine of engines) {
    try {
      if (engine === "vision") {
        const swift = process.platform === "darwin"
          ? findProgram("swift", env, "darwin")
          : undefined;
        if (!swift) {
          problems.push("vision: macOS Vision is only available on macOS with swift");
          continue;
        }
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-ocr-"));
        try {
          const script = path.join(dir, "ocr.swift");
          fs.writeFileSync(script, VISION_SWIFT);
          return { text: await run(swift, [script, args.file], env, args.signal), engine };
        } finally {
          fs.rmSync(dir, { recursive: true, force: true });
        }
      }
      if (engine === "tesseract") {
        const tesseract = findProgram("tesseract", env, process.platform);
        if (!tesseract) {
          problems.push("tesseract: not found on PATH (install tesseract-ocr)");
          continue;
        }
        return {
          text: await run(tesseract, [args.file, "stdout", "-l", args.lang], env, args.signal),
          engine,
        };
      }
      if (engine === "llm") {
        const llm = ctx.llm;
        if (!llm?.model) {
          problems.push("llm: no multimodal model was given (builtin.llm)");
          continue;
        }
        const type = IMAGE_TYPES[path.extname(args.file).toLowerCase()] ?? "image/png";
        const data = fs.readFileSync(args.file).toString("base64");
        const { OpenAIProvider } = await import("../providers/mod.ts");
        const provider = new OpenAIProvider({
          ...(llm.apiKey ? { apiKey: llm.apiKey } : {}),
          ...(llm.baseURL ? { baseURL: llm.baseURL } : {}),
        });
        const text = await provider.chat(
          llm.model,
          [{
            role: "user",
            content: [
              {
                type: "text",
                text: "Transcribe all text in this image exactly, keeping line breaks. " +
                  "Answer with the text only.",
              },
              { type: "image_url", image_url: { url: `data:${type};base64,${data}` } },
            ],
          }],
          {},
          { reqId: `ocr_${Date.now()}`, logTime: new Date().toISOString(), signal: args.signal },
        );
        return { text: text ?? "", engine };
      }
    } catch (err) {
      if (args.signal?.aborted) throw err;
      problems.push(`${engine}: ${(err as Error).message}`);
    }
  }
  throw new Error(`Cannot recognise ${args.file}: no OCR engine worked (${problems.join("; ")})`);
}

async function recognizePdf(
  ctx: McpBuiltinContext,
  args: OcrArgs,
): Promise<{ text: string; engine: string }> {
  const env = ctx.env ?? process.env;
  const pdftotext = findProgram("pdftotext", env, process.platform);
  if (pdftotext) {
    const text = await run(pdftotext, ["-layout", args.file, "-"], env, args.signal);
    if (text.replace(/\s/g, "").length >= 16) return { text, engine: "pdf-text" };
  }
  const pdftoppm = findProgram("pdftoppm", env, process.platform);
  if (!pdftoppm) {
    throw new Error(
      `Cannot recognise ${args.file}: rendering PDF pages needs pdftoppm (install poppler-utils)`,
    );
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "zqagent-ocr-"));
  try {
    await run(
      pdftoppm,
      ["-r", "200", "-png", "-l", String(MAX_PDF_PAGES), args.file, path.join(dir, "page")],
      env,
      args.signal,
    );
    const pages = fs.readdirSync(dir).filter((f) => f.endsWith(".png")).sort();
    const texts: string[] = [];
    const engines = new Set<string>();
    for (const page of pages) {
      const r = await recognizeImage(ctx, { ...args, file: path.join(dir, page) });
      texts.push(r.text.trim());
      engines.add(r.engine);
    }
    return { text: texts.join("\n\f\n"), engine: [...engines].join(",") };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Recognises the text of an image or PDF with the preset's engine chain (no MCP involved).
 *
 * @param file Path; relative paths resolve against `ctx.workspace`.
 * @param ctx Workspace, environment, engines and the fallback model.
 * @param options `lang` (tesseract language, default `"eng"`), `signal`.
 * @returns The text and the engine that produced it.
 * @throws {Error} When the file is missing, too large, of an unknown type, or no engine worked.
 */
export async function recognizeText(
  file: string,
  ctx: McpBuiltinContext,
  options: { lang?: string; signal?: AbortSignal } = {},
): Promise<{ text: string; engine: string }> {
  const full = path.resolve(ctx.workspace, file);
  let stat: fs.Stats;
  try {
    stat = fs.statSync(full);
  } catch {
    throw new Error(`Cannot recognise ${file}: no such file`);
  }
  if (!stat.isFile()) throw new Error(`Cannot recognise ${file}: not a file`);
  if (stat.size > MAX_FILE_BYTES) {
    throw new Error(`Cannot recognise ${file}: ${stat.size} bytes exceeds the 50 MiB limit`);
  }
  const ext = path.extname(full).toLowerCase();
  const args: OcrArgs = {
    file: full,
    lang: options.lang && /^[A-Za-z_+]+$/.test(options.lang) ? options.lang : "eng",
    signal: options.signal,
  };
  if (ext === ".pdf") return await recognizePdf(ctx, args);
  if (!(ext in IMAGE_TYPES)) {
    throw new Error(
      `Cannot recognise ${file}: ${ext || "no extension"} is not an image (png, jpg, gif, webp, ` +
        "bmp, tiff) or a PDF",
    );
  }
  return await recognizeImage(ctx, args);
}

/**
 * Creates the OCR preset's in-process MCP server.
 *
 * @param ctx The built-in context (workspace, env, `llm`, `ocrEngines`).
 * @returns A server ready to be connected to a transport.
 */
export async function createOcrServer(ctx: McpBuiltinContext): Promise<McpInProcessServer> {
  const [{ Server }, types] = await Promise.all([
    import("@modelcontextprotocol/sdk/server/index.js"),
    import("@modelcontextprotocol/sdk/types.js"),
  ]);
  const server = new Server(
    { name: "zqagent-ocr", version: "0.1.0" },
    { capabilities: { tools: {} } },
  );
  server.setRequestHandler(types.ListToolsRequestSchema, () => ({
    tools: [{
      name: OCR_TOOL,
      description: "Extracts the text of an image (png, jpg, gif, webp, bmp, tiff) or a PDF " +
        "with OCR (macOS Vision, tesseract, or the session's multimodal model).",
      inputSchema: {
        type: "object",
        properties: {
          path: { type: "string", description: "File path, relative to the workspace or absolute" },
          lang: { type: "string", description: 'Tesseract language code (default "eng")' },
        },
        required: ["path"],
      },
      annotations: { readOnlyHint: true },
    }],
  }));
  server.setRequestHandler(types.CallToolRequestSchema, async (
    request: { params: { name: string; arguments?: Record<string, unknown> } },
    extra: { signal: AbortSignal },
  ) => {
    if (request.params.name !== OCR_TOOL) {
      return {
        isError: true,
        content: [{ type: "text", text: `Unknown tool ${request.params.name}` }],
      };
    }
    const a = request.params.arguments ?? {};
    if (typeof a.path !== "string" || a.path === "") {
      return {
        isError: true,
        content: [{ type: "text", text: "Cannot recognise: path is required" }],
      };
    }
    try {
      const r = await recognizeText(a.path, ctx, {
        lang: typeof a.lang === "string" ? a.lang : undefined,
        signal: extra.signal,
      });
      return {
        content: [{ type: "text", text: r.text.trim() }],
        structuredContent: { engine: r.engine },
      };
    } catch (err) {
      return { isError: true, content: [{ type: "text", text: (err as Error).message }] };
    }
  });
  return server;
}
