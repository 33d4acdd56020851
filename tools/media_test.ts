import { after, afterEach, before, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { Buffer } from "node:buffer";
import { pathToFileURL } from "node:url";
import {
  EventType,
  Mode,
  OpenAIProvider,
  PermissionEngine,
  ToolRegistry,
  TurnEngine,
} from "../mod.ts";
import { MockOpenAIServer, type ScriptedTurn } from "../testing/mod.ts";
import { collect, ofType, removeDir, tempWorkspace } from "../tests/_util.ts";
import { MEDIA_MAX_BYTES, registerMediaTool } from "./media.ts";
import type { ToolAttachment } from "./registry.ts";
import { FIFO_TEST_TIMEOUT_MS, makeFifo, NO_FIFOS, releaseFifos } from "../tests/_fifo.ts";

after(releaseFifos);

// A real 1×1 PNG, a WAV header with a few samples, and an MP4 `ftyp` box.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);
function wav(): Buffer {
  const data = Buffer.alloc(16);
  const h = Buffer.alloc(44);
  h.write("RIFF", 0);
  h.writeUInt32LE(36 + data.length, 4);
  h.write("WAVE", 8);
  h.write("fmt ", 12);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(8000, 24);
  h.writeUInt32LE(16000, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write("data", 36);
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}
const MP4 = Buffer.concat([
  Buffer.from([0, 0, 0, 0x18]),
  Buffer.from("ftypisom"),
  Buffer.from([0, 0, 2, 0]),
  Buffer.from("isomiso2"),
  Buffer.alloc(32),
]);

let http: Server;
let base = "";
const sockets = new Set<Socket>();
before(async () => {
  http = createServer((req, res) => {
    if (req.url === "/voice.wav") {
      res.writeHead(200, { "content-type": "audio/wav" });
      return void res.end(wav());
    }
    if (req.url === "/page.png") {
      res.writeHead(200, { "content-type": "image/png" }); // a lie: it is HTML
      return void res.end("<html><body>not an image</body></html>");
    }
    if (req.url === "/big.png") {
      res.writeHead(200, { "content-type": "image/png" });
      res.on("error", () => {});
      return void res.end(Buffer.concat([PNG, Buffer.alloc(MEDIA_MAX_BYTES + 10)]));
    }
    res.writeHead(404);
    res.end();
  });
  http.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", () => r()));
  base = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
});
after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => http.close(() => r()));
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function workspace(): string {
  const ws = tempWorkspace({ "notes.txt": "hello" });
  fs.writeFileSync(path.join(ws, "dot.png"), PNG);
  fs.writeFileSync(path.join(ws, "clip.mp4"), MP4);
  fs.writeFileSync(path.join(ws, "logo.svg"), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  cleanups.push(() => removeDir(ws));
  return ws;
}

async function engineWith(turns: ScriptedTurn[], apiMode: "chat" | "responses" = "chat") {
  const ws = workspace();
  const server = await new MockOpenAIServer({ turns }).start();
  cleanups.push(() => server.close());
  const registry = new ToolRegistry();
  registerMediaTool(registry, ws, { env: {} });
  const engine = new TurnEngine({
    provider: new OpenAIProvider({ apiKey: "k", baseURL: server.baseURL, apiMode }),
    registry,
    permissions: new PermissionEngine({ workspaceRoot: ws, mode: Mode.AUTO }),
    model: "m",
    instructions: "test",
  });
  return { engine, server, ws };
}

/** Calls the tool directly with a queue, as the engine does. */
async function direct(args: Record<string, unknown>, queue: ToolAttachment[] = []) {
  const ws = workspace();
  const registry = new ToolRegistry();
  registerMediaTool(registry, ws, { env: {} });
  const out = await registry.get("media")!.func(args, { attachments: queue });
  return { out: String(out), queue, ws };
}

test("an image from the workspace reaches the next request after the tool result", async () => {
  const { engine, server } = await engineWith([
    { toolCalls: [{ id: "m1", name: "media", arguments: { path: "dot.png" } }] },
    { text: "a single pixel" },
  ]);
  const { events } = await collect(engine.run("what is in dot.png?"));
  assert.equal(ofType(events, EventType.TOOL_FINISHED)[0].data.status, "ok");
  const messages = (server.requests[1].body as { messages: Record<string, unknown>[] }).messages;
  const toolAt = messages.findIndex((m) => m.role === "tool");
  const next = messages[toolAt + 1] as { role: string; content: Record<string, unknown>[] };
  assert.equal(next.role, "user");
  assert.match(String(next.content[0].text), /dot\.png \(image\/png, 70 bytes, from dot\.png\)/);
  assert.deepEqual(next.content[1], {
    type: "image_url",
    image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` },
  });
  const stored = engine.messages.find((m) => m.attachments);
  assert.deepEqual(stored?.attachments, [
    { name: "dot.png", mimeType: "image/png", size: PNG.length, path: "dot.png" },
  ]);
  assert.equal(server.requests.length, 2);
});

test("on the Responses API the image goes as an input_image", async () => {
  const { engine, server } = await engineWith([
    { toolCalls: [{ id: "m1", name: "media", arguments: { path: "dot.png" } }] },
    { text: "ok" },
  ], "responses");
  await collect(engine.run("look"));
  const input = (server.requests[1].body as { input: Record<string, unknown>[] }).input;
  const user = input.filter((i) => i.role === "user").at(-1) as { content: { type: string }[] };
  assert.deepEqual(user.content.map((c) => c.type), ["input_text", "input_image"]);
});

test("audio from a URL becomes an input_audio part; video a video_url part", async () => {
  const audio = await direct({ url: `${base}/voice.wav` });
  assert.match(audio.out, /^Attached voice\.wav \(audio\/(wav|vnd\.wave|x-wav)/);
  const part = audio.queue[0].part as {
    type: string;
    input_audio: { format: string; data: string };
  };
  assert.equal(part.type, "input_audio");
  assert.equal(part.input_audio.format, "wav");
  assert.equal(Buffer.from(part.input_audio.data, "base64").subarray(0, 4).toString(), "RIFF");
  assert.equal(audio.queue[0].path, `${base}/voice.wav`);
  const video = await direct({ path: "clip.mp4" });
  assert.equal(video.queue[0].mimeType, "video/mp4");
  assert.equal(video.queue[0].part.type, "video_url");
});

test("an SVG is taken from its text; a text file is refused", async () => {
  const svg = await direct({ path: "logo.svg" });
  assert.equal(svg.queue[0].mimeType, "image/svg+xml");
  await assert.rejects(direct({ path: "notes.txt" }), /only image, audio and video files/);
});

test("a URL whose bytes are not media is refused whatever its Content-Type says", async () => {
  await assert.rejects(direct({ url: `${base}/page.png` }), /only image, audio and video files/);
});

test("a file over 10 MiB is refused, on disk or by URL", async () => {
  const ws = workspace();
  fs.writeFileSync(path.join(ws, "huge.png"), Buffer.concat([PNG, Buffer.alloc(MEDIA_MAX_BYTES)]));
  const registry = new ToolRegistry();
  registerMediaTool(registry, ws, { env: {} });
  await assert.rejects(
    Promise.resolve(registry.get("media")!.func({ path: "huge.png" }, { attachments: [] })),
    {
      message: `Cannot attach huge.png: ${
        MEDIA_MAX_BYTES + PNG.byteLength
      } bytes exceeds the 10485760-byte (10 MiB) limit`,
    },
  );
  await assert.rejects(direct({ url: `${base}/big.png` }), /exceeds the 10 MiB limit/);
});

test("a fifth file, or more than 10 MiB in total, is refused for one request", async () => {
  const fake = (size: number): ToolAttachment => ({
    name: "x.png",
    mimeType: "image/png",
    size,
    path: "x.png",
    part: {},
  });
  await assert.rejects(
    direct({ path: "dot.png" }, [fake(1), fake(1), fake(1), fake(1)]),
    /4 files are already attached to the next request/,
  );
  await assert.rejects(
    direct({ path: "dot.png" }, [fake(MEDIA_MAX_BYTES - 10)]),
    {
      message: `Cannot attach dot.png: it would take this request's media to ${
        MEDIA_MAX_BYTES - 10 + PNG.byteLength
      } bytes, over the 10485760-byte (10 MiB) limit`,
    },
  );
});

test("bad arguments, missing files, other schemes and outside paths are refused clearly", async () => {
  await assert.rejects(direct({}), /give path \(a workspace file\) or url/);
  await assert.rejects(direct({ path: "a.png", url: `${base}/x` }), /either path or url/);
  await assert.rejects(direct({ path: "nope.png" }), /nope\.png: no such file/);
  await assert.rejects(direct({ url: "ftp://example.com/a.png" }), /only http and https URLs/);
  await assert.rejects(
    direct({ path: "https://example.com/a.png" }),
    /Cannot attach https:\/\/example\.com\/a\.png: path must be a file path, not a URL/,
  );
  await assert.rejects(direct({ url: `${base}/missing.png` }), /HTTP 404/);
  const other = tempWorkspace();
  cleanups.push(() => removeDir(other));
  fs.writeFileSync(path.join(other, "o.png"), PNG);
  await assert.rejects(direct({ path: path.join(other, "o.png") }), /outside the workspace/);
  await assert.rejects(
    direct({ url: pathToFileURL(path.join(other, "o.png")).href }),
    /outside the workspace/,
  );
});

test("a file:// URL, as path or as url, attaches the workspace file it names", async () => {
  const ws = workspace();
  const registry = new ToolRegistry();
  registerMediaTool(registry, ws, { env: {} });
  const href = pathToFileURL(path.join(ws, "dot.png")).href;
  const queue: ToolAttachment[] = [];
  await registry.get("media")!.func({ path: href }, { attachments: queue });
  await registry.get("media")!.func({ url: href }, { attachments: queue });
  assert.deepEqual(queue.map((a) => [a.name, a.mimeType, a.size]), [
    ["dot.png", "image/png", PNG.byteLength],
    ["dot.png", "image/png", PNG.byteLength],
  ]);
});

test("without an engine queue the tool says it cannot attach", async () => {
  const registry = new ToolRegistry();
  registerMediaTool(registry, workspace(), { env: {} });
  await assert.rejects(
    Promise.resolve(registry.get("media")!.func({ path: "dot.png" }, {})),
    /this engine cannot add media/,
  );
});

test(
  "a named pipe is refused before it is opened",
  { skip: NO_FIFOS, timeout: FIFO_TEST_TIMEOUT_MS },
  async (t) => {
    const ws = workspace();
    const why = makeFifo(path.join(ws, "cam.png"), t.signal);
    if (why) return t.skip(why);
    const registry = new ToolRegistry();
    registerMediaTool(registry, ws, { env: {} });
    await assert.rejects(
      Promise.resolve(registry.get("media")!.func({ path: "cam.png" }, { attachments: [] })),
      { message: "Cannot attach cam.png: it is not a regular file (a named pipe)" },
    );
  },
);

test("a symlink loop and a folder are named as what they are", async () => {
  const ws = workspace();
  fs.symlinkSync("b.png", path.join(ws, "a.png"));
  fs.symlinkSync("a.png", path.join(ws, "b.png"));
  fs.mkdirSync(path.join(ws, "pics"));
  const registry = new ToolRegistry();
  registerMediaTool(registry, ws, { env: {} });
  const call = (p: string) =>
    Promise.resolve(registry.get("media")!.func({ path: p }, { attachments: [] }));
  await assert.rejects(call("a.png"), {
    message: "Cannot attach a.png: too many levels of symbolic links (a symlink loop)",
  });
  await assert.rejects(call("pics"), { message: "Cannot attach pics: it is a directory" });
});
