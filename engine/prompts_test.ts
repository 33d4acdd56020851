import { test } from "node:test";
import assert from "node:assert/strict";
import {
  buildEnvBlock,
  buildExploreInstructions,
  buildInstructions,
  getPrompts,
  PROMPT_LANGS,
  promptSets,
} from "./prompts.ts";
import { OpenAIProvider, PermissionEngine, ToolRegistry, TurnEngine } from "../mod.ts";

/** Per language: a word of its untrusted-data rule, and a script check. */
const EXPECT: Record<string, { untrusted: RegExp; script: RegExp; workspace: string }> = {
  zh: { untrusted: /不可信的数据/, script: /[\u4e00-\u9fff]/, workspace: "工作区" },
  en: { untrusted: /untrusted data/, script: /^[\t\n -~]*$/, workspace: "Workspace" },
  "zh-TW": { untrusted: /不可信任的資料/, script: /[\u4e00-\u9fff]/, workspace: "工作區" },
  ja: { untrusted: /信頼できないデータ/, script: /[\u3040-\u30ff]/, workspace: "ワークスペース" },
  ko: { untrusted: /신뢰할 수 없는 데이터/, script: /[\uac00-\ud7af]/, workspace: "작업 공간" },
  es: { untrusted: /datos no fiables/, script: /[áéíóúñ]/, workspace: "Espacio de trabajo" },
};

test("each of the six languages has its own prompt set", () => {
  assert.deepEqual([...PROMPT_LANGS], ["zh", "en", "zh-TW", "ja", "ko", "es"]);
  for (const lang of PROMPT_LANGS) {
    assert.ok(promptSets[lang], lang);
    assert.equal(getPrompts(lang), promptSets[lang], `${lang} does not fall back`);
  }
  const codes = new Set(PROMPT_LANGS.map((l) => promptSets[l].code));
  assert.equal(codes.size, 6, "no two languages share a text");
});

test("every language's prompt is written in that language", () => {
  for (const lang of PROMPT_LANGS) {
    const p = getPrompts(lang);
    for (const key of ["code", "cowork", "explore", "rules", "sessionName"] as const) {
      assert.match(p[key], EXPECT[lang].script, `${lang}.${key}`);
    }
  }
  // Traditional Chinese is not the Simplified text: no simplified-only forms.
  const tw = JSON.stringify(promptSets["zh-TW"]);
  assert.doesNotMatch(tw, /[们这对规则环时应该户读写]/);
  assert.match(tw, /規則/);
  assert.match(tw, /環境/);
  // Japanese uses kana; Korean no CJK ideographs; Spanish no English rule text.
  assert.doesNotMatch(JSON.stringify(promptSets.ko), /[\u4e00-\u9fff]/);
  assert.doesNotMatch(promptSets.es.rules, /untrusted|workspace/i);
});

test("every language tells the model that tool results and web pages are untrusted data", () => {
  for (const lang of PROMPT_LANGS) {
    const prompt = buildInstructions("code", "/srv/ws", "2026-11-29", lang);
    assert.match(prompt, EXPECT[lang].untrusted, lang);
    assert.match(buildExploreInstructions("/srv/ws", "2026-11-29", lang), EXPECT[lang].untrusted);
  }
});

test("buildInstructions picks the role and ends with the environment block in that language", () => {
  for (const lang of PROMPT_LANGS) {
    const p = getPrompts(lang);
    const code = buildInstructions("code", "/srv/ws", "2026-11-29", lang);
    const cowork = buildInstructions("cowork", "/srv/ws", "2026-11-29", lang);
    assert.ok(code.startsWith(p.code));
    assert.ok(cowork.startsWith(p.cowork));
    assert.ok(code.endsWith(buildEnvBlock("/srv/ws", "2026-11-29", lang)));
    assert.match(code, new RegExp(`- ${EXPECT[lang].workspace}: /srv/ws`));
    assert.match(code, /2026-11-29/);
  }
  assert.equal(getPrompts("xx"), promptSets.en, "unknown languages fall back to English");
});

test("the session-naming prompt follows the engine's language", () => {
  for (const lang of PROMPT_LANGS) {
    const engine = new TurnEngine({
      provider: new OpenAIProvider({ apiKey: "k", baseURL: "http://127.0.0.1:9/v1" }),
      registry: new ToolRegistry(),
      permissions: new PermissionEngine({ workspaceRoot: "/tmp" }),
      model: "m",
      instructions: "x",
      lang,
    });
    assert.equal(engine.genSessionNamePrompt, getPrompts(lang).sessionName, lang);
  }
  const names = new Set(PROMPT_LANGS.map((l) => getPrompts(l).sessionName));
  assert.equal(names.size, 6);
});
