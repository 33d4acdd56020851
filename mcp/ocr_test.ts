import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ToolRegistry } from "../tools/mod.ts";
import { normalizeMcpConfigs, withBuiltinMcpConfigs } from "./config.ts";
import { McpManager } from "./manager.ts";
import type { McpBuiltinContext } from "./client.ts";
import { needReal } from "./_test_util.ts";
import { MockOpenAIServer } from "../testing/mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";

const skip = needReal({ programs: ["tesseract", "pdftoppm", "pdftotext"] });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A one-page PDF (written by hand) with `text` in large Helvetica. */
function textPdf(text: string): Buffer {
  const content = `BT /F1 48 Tf 40 100 Td (${text}) Tj ET`;
  return pdf([
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 600 200] /Contents 4 0 R " +
    "/Resources << /Font << /F1 5 0 R >> >> >>",
    { dict: "", stream: Buffer.from(content) },
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ]);
}

/** A one-page PDF holding only a gray image (no text layer), from a binary PGM. */
function imagePdf(pgm: Buffer): Buffer {
  const header = pgm.toString("latin1", 0, 64).split(/\s+/);
  const [w, h] = [Number(header[1]), Number(header[2])];
  let offset = 0;
  for (let fields = 0; fields < 4; offset++) {
    if (
      /\s/.test(String.fromCharCode(pgm[offset])) &&
      !/\s/.test(String.fromCharCode(pgm[offset - 1]))
    ) fields++;
  }
  const pixels = pgm.subarray(offset);
  return pdf([
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ${w} ${h}] /Contents 4 0 R ` +
    "/Resources << /XObject << /Im1 5 0 R >> >> >>",
    { dict: "", stream: Buffer.from(`q ${w} 0 0 ${h} 0 0 cm /Im1 Do Q`) },
    {
      dict:
        `/Type /XObject /Subtype /Image /Width ${w} /Height ${h} /ColorSpace /DeviceGray /BitsPerComponent 8`,
      stream: pixels,
    },
  ]);
}

function pdf(objects: (string | { dict: string; stream: Buffer })[]): Buffer {
  const parts: Buffer[] = [Buffer.from("%PDF-1.4\n")];
  const offsets: number[] = [];
  let size = parts[0].length;
  objects.forEach((o, i) => {
    offsets.push(size);
    const body = typeof o === "string"
      ? Buffer.from(`${i + 1} 0 obj\n${o}\nendobj\n`)
      : Buffer.concat([
        Buffer.from(`${i + 1} 0 obj\n<< ${o.dict} /Length ${o.stream.length} >>\nstream\n`),
        o.stream,
        Buffer.from("\nendstream\nendobj\n"),
      ]);
    parts.push(body);
    size += body.length;
  });
  const xref = `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n` +
    offsets.map((o) => `${String(o).padStart(10, "0")} 00000 n \n`).join("") +
    `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${size}\n%%EOF\n`;
  parts.push(Buffer.from(xref));
  return Buffer.concat(parts);
}

function fixtures(): string {
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  fs.writeFileSync(path.join(ws, "text.pdf"), textPdf("HELLO OCR 42"));
  execFileSync("pdftoppm", [
    "-r",
    "100",
    "-png",
    "-singlefile",
    path.join(ws, "text.pdf"),
    path.join(ws, "scan"),
  ]);
  execFileSync("pdftoppm", [
    "-r",
    "100",
    "-gray",
    "-singlefile",
    path.join(ws, "text.pdf"),
    path.join(ws, "scan"),
  ]);
  fs.writeFileSync(path.join(ws, "scan.pdf"), imagePdf(fs.readFileSync(path.join(ws, "scan.pgm"))));
  return ws;
}

async function ocrManager(ws: string, builtin: Partial<McpBuiltinContext> = {}, raw: unknown = []) {
  const registry = new ToolRegistry();
  const manager = new McpManager(
    registry,
    withBuiltinMcpConfigs(normalizeMcpConfigs(raw).configs),
    {
      builtin: { workspace: ws, ...builtin },
    },
  );
  cleanups.push(() => manager.closeAll());
  const result = await manager.connectAll();
  return { registry, manager, result };
}

test("the OCR preset reads an image with tesseract as mcp__ocr__recognize", { skip }, async () => {
  const ws = fixtures();
  const { registry, result } = await ocrManager(ws);
  assert.deepEqual(result, { connected: ["ocr"], failed: [] });
  const tool = registry.get("mcp__ocr__recognize")!;
  assert.equal(tool.metadata.category, "mcp");
  assert.equal(tool.metadata.requiresApproval, true);
  const text = String(await tool.func({ path: "scan.png" }));
  assert.match(text, /HELLO OCR 42/);
});

test(
  "the OCR preset reads a PDF's text layer, and renders a scanned PDF for tesseract",
  { skip },
  async () => {
    const ws = fixtures();
    const { registry } = await ocrManager(ws);
    const tool = registry.get("mcp__ocr__recognize")!;
    assert.match(String(await tool.func({ path: "text.pdf" })), /HELLO OCR 42/);
    assert.equal(execFileSync("pdftotext", [path.join(ws, "scan.pdf"), "-"]).toString().trim(), "");
    assert.match(String(await tool.func({ path: path.join(ws, "scan.pdf") })), /HELLO OCR 42/);
  },
);

test("without tesseract the OCR preset falls back to the session's multimodal model", async () => {
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  fs.writeFileSync(path.join(ws, "photo.png"), Buffer.from("89504e470d0a1a0a", "hex"));
  const server = new MockOpenAIServer({ turns: [{ text: "TEXT FROM THE MODEL" }] });
  await server.start();
  cleanups.push(() => server.close());
  const { registry } = await ocrManager(ws, {
    env: { PATH: path.join(ws, "no-programs-here") },
    llm: { apiKey: "k", baseURL: server.baseURL, model: "vision-model" },
  });
  const text = await registry.get("mcp__ocr__recognize")!.func({ path: "photo.png" });
  assert.equal(text, "TEXT FROM THE MODEL");
  const body = JSON.stringify(server.requests[0].body);
  assert.match(body, /vision-model/);
  assert.match(body, /data:image\/png;base64,iVBORw0KGgo/);
});

test("when no OCR engine works the tool error names each engine's problem", async () => {
  const ws = tempWorkspace({ "a.png": "x" });
  cleanups.push(() => removeDir(ws));
  const { registry } = await ocrManager(ws, { env: { PATH: path.join(ws, "none") } });
  const r = await registry.get("mcp__ocr__recognize")!.func({ path: "a.png" }) as Record<
    string,
    string
  >;
  assert.equal(r.error_type, "mcp_tool_error");
  assert.match(r.error, /tesseract: not found on PATH/);
  assert.match(r.error, /llm: no multimodal model/);
  const missing = await registry.get("mcp__ocr__recognize")!.func({ path: "nope.png" }) as Record<
    string,
    string
  >;
  assert.match(missing.error, /no such file/);
});

test('{"name": "ocr", "enabled": false} disables the OCR preset', async () => {
  const ws = tempWorkspace();
  cleanups.push(() => removeDir(ws));
  const { registry, manager, result } = await ocrManager(ws, {}, [{ name: "ocr", enabled: false }]);
  assert.deepEqual(result, { connected: [], failed: [] });
  assert.ok(!registry.has("mcp__ocr__recognize"));
  assert.equal(manager.status("ocr")!.state, "disabled");
});
