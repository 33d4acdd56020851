import { after, afterEach, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import {
  ATTACHMENT_DIR,
  AttachmentError,
  MAX_ATTACHMENT_BYTES,
  MAX_ATTACHMENTS,
  type Message,
  normalizeAttachments,
  readStoredAttachment,
  saveAttachments,
  stripAttachments,
} from "../mod.ts";
import { removeDir, tempWorkspace } from "../tests/_util.ts";
import { FIFO_TEST_TIMEOUT_MS, makeFifo, NO_FIFOS, releaseFifos } from "../tests/_fifo.ts";

after(releaseFifos);

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function dir(): string {
  const d = tempWorkspace();
  cleanups.push(() => removeDir(d));
  return d;
}

const png = (bytes: number) => `data:image/png;base64,${Buffer.alloc(bytes, 7).toString("base64")}`;

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AttachmentError, String(err));
    return err.code;
  }
  return undefined;
}

test("the limits are the manual's: 4 attachments, 10 MiB, folder 'attachments'", () => {
  assert.equal(MAX_ATTACHMENTS, 4);
  assert.equal(MAX_ATTACHMENT_BYTES, 10 * 1024 * 1024);
  assert.equal(ATTACHMENT_DIR, "attachments");
});

test("normalizeAttachments returns null for no attachments and cleans names", () => {
  assert.equal(normalizeAttachments(undefined), null);
  assert.equal(normalizeAttachments([]), null);
  const [a] = normalizeAttachments([{ name: "../../etc/shot.png", dataUrl: png(10) }])!;
  assert.equal(a.name, "shot.png");
  assert.equal(a.mimeType, "image/png", "taken from the data URL when missing");
});

test("normalizeAttachments refuses a fifth attachment", () => {
  const five = Array.from(
    { length: 5 },
    (_, i) => ({ name: `${i}.png`, mimeType: "image/png", dataUrl: png(4) }),
  );
  assert.equal(code(() => normalizeAttachments(five)), "too_many");
  assert.equal(normalizeAttachments(five.slice(0, 4))!.length, 4);
});

test("normalizeAttachments refuses a file over 10 MiB and a total over 10 MiB", () => {
  const big = { name: "big.png", mimeType: "image/png", dataUrl: png(MAX_ATTACHMENT_BYTES + 1) };
  assert.equal(code(() => normalizeAttachments([big])), "too_large");
  const exact = { name: "ok.png", mimeType: "image/png", dataUrl: png(MAX_ATTACHMENT_BYTES) };
  assert.equal(normalizeAttachments([exact])!.length, 1);
  const half = { name: "h.png", mimeType: "image/png", dataUrl: png(6 * 1024 * 1024) };
  assert.equal(code(() => normalizeAttachments([half, half])), "too_large");
});

test("a too-large message shows exact bytes when the rounded sizes would read the same", () => {
  const over = { name: "big.png", mimeType: "image/png", dataUrl: png(MAX_ATTACHMENT_BYTES + 1) };
  assert.throws(() => normalizeAttachments([over]), {
    message: "Cannot attach big.png: 10485761 bytes exceeds the 10485760-byte (10 MiB) limit",
  });
  const huge = { name: "huge.png", mimeType: "image/png", dataUrl: png(13_000_000) };
  assert.throws(() => normalizeAttachments([huge]), {
    message: "Cannot attach huge.png: 12.4 MiB exceeds the 10 MiB limit",
  });
  const half = { name: "h.png", mimeType: "image/png", dataUrl: png(6 * 1024 * 1024) };
  assert.throws(() => normalizeAttachments([half, half]), {
    message: "Cannot attach h.png: the attachments add up to 12 MiB, over the 10 MiB limit " +
      "per message",
  });
});

test("normalizeAttachments refuses other types, mismatched types and malformed data URLs", () => {
  assert.equal(
    code(() =>
      normalizeAttachments([{
        name: "a.html",
        mimeType: "text/html",
        dataUrl: "data:text/html;base64,PGI+",
      }])
    ),
    "bad_type",
  );
  assert.equal(
    code(() => normalizeAttachments([{ name: "a.png", mimeType: "image/jpeg", dataUrl: png(4) }])),
    "bad_type",
  );
  assert.equal(
    code(() =>
      normalizeAttachments([{ name: "a.png", mimeType: "image/png", dataUrl: "https://x/a.png" }])
    ),
    "bad_data",
  );
  assert.equal(
    code(() =>
      normalizeAttachments([{
        name: "a.png",
        mimeType: "image/png",
        dataUrl: "data:image/png;base64,",
      }])
    ),
    "bad_data",
  );
  assert.equal(code(() => normalizeAttachments("nope")), "bad_data");
});

test("saveAttachments stores files under attachments/ and readStoredAttachment reads them back", () => {
  const sessionDir = dir();
  const refs = saveAttachments(sessionDir, [
    { name: "shot.png", mimeType: "image/png", dataUrl: png(100) },
    { name: "voice", mimeType: "audio/mpeg", dataUrl: "data:audio/mpeg;base64,SUQz" },
  ]);
  assert.equal(refs.length, 2);
  assert.match(refs[0].path, /^attachments\/[a-z0-9]+-0-shot\.png$/);
  assert.equal(refs[0].size, 100);
  assert.match(refs[1].path, /-1-voice\.mp3$/);
  const files = fs.readdirSync(path.join(sessionDir, "attachments"));
  assert.equal(files.length, 2, "no temporary files left");
  const back = readStoredAttachment(sessionDir, refs[0].path);
  assert.equal(back.name, "shot.png");
  assert.equal(back.mimeType, "image/png");
  assert.equal(back.size, 100);
  assert.equal(back.base64, Buffer.alloc(100, 7).toString("base64"));
});

test("readStoredAttachment accepts only attachments/<file>: no traversal, no sub-folders", () => {
  const sessionDir = dir();
  const [ref] = saveAttachments(sessionDir, [{
    name: "a.png",
    mimeType: "image/png",
    dataUrl: png(3),
  }]);
  fs.writeFileSync(path.join(sessionDir, "secret.txt"), "s");
  fs.mkdirSync(path.join(sessionDir, "attachments", "sub"));
  fs.writeFileSync(path.join(sessionDir, "attachments", "sub", "x.png"), "x");
  for (
    const bad of [
      "attachments/../secret.txt",
      "../secret.txt",
      "secret.txt",
      "/etc/passwd",
      "attachments/sub/x.png",
      "attachments/",
      "attachments/..",
      "attachments\\..\\secret.txt",
    ]
  ) {
    assert.equal(code(() => readStoredAttachment(sessionDir, bad)), "bad_path", bad);
  }
  fs.symlinkSync(
    path.join(sessionDir, "secret.txt"),
    path.join(sessionDir, "attachments", "link.png"),
  );
  assert.equal(code(() => readStoredAttachment(sessionDir, "attachments/link.png")), "bad_path");
  assert.equal(code(() => readStoredAttachment(sessionDir, "attachments/none.png")), "not_found");
  assert.equal(readStoredAttachment(sessionDir, ref.path).size, 3);
});

test("stripAttachments replaces inline bytes by a reference and leaves other messages alone", () => {
  const plain: Message = { role: "user", content: "hi" };
  const withImage: Message = {
    role: "user",
    content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: png(5) } }],
    attachments: [{
      name: "dot.png",
      mimeType: "image/png",
      size: 5,
      path: "attachments/k-0-dot.png",
    }],
  };
  const out = stripAttachments([plain, withImage]);
  assert.equal(out[0], plain);
  assert.doesNotMatch(JSON.stringify(out[1].content), /base64/);
  assert.match(JSON.stringify(out[1].content), /attachments\/k-0-dot\.png/);
  assert.match(JSON.stringify(withImage.content), /base64/, "the input is not modified");
});

test("stored attachments and the folders made for them are private to their owner", {
  skip: process.platform === "win32" ? "no POSIX modes on Windows" : false,
}, () => {
  const session = path.join(dir(), "session-1");
  const [ref] = saveAttachments(session, [{
    name: "a.png",
    mimeType: "image/png",
    dataUrl: png(10),
  }]);
  const modeOf = (p: string) => (fs.statSync(p).mode & 0o777).toString(8);
  assert.equal(modeOf(path.join(session, ref.path)), "600");
  assert.equal(modeOf(path.join(session, ATTACHMENT_DIR)), "700");
  assert.equal(modeOf(session), "700");
});

test(
  "readStoredAttachment refuses a named pipe instead of waiting for a writer",
  { skip: NO_FIFOS, timeout: FIFO_TEST_TIMEOUT_MS },
  (t) => {
    const session = dir();
    fs.mkdirSync(path.join(session, ATTACHMENT_DIR));
    const why = makeFifo(path.join(session, ATTACHMENT_DIR, "x.png"), t.signal);
    if (why) return t.skip(why);
    assert.throws(
      () => readStoredAttachment(session, `${ATTACHMENT_DIR}/x.png`),
      (e) =>
        e instanceof AttachmentError && e.code === "bad_path" &&
        e.message === `Cannot read attachment ${ATTACHMENT_DIR}/x.png: it is not a regular file ` +
            "(a named pipe)",
    );
  },
);
