import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { normalizeInputSchema } from "./schema.ts";
import { FIXTURES } from "./_test_util.ts";

function read(rel: string) {
  return JSON.parse(fs.readFileSync(path.join(FIXTURES, rel), "utf8"));
}

// Case schema-defs-ref.
test("case schema-defs-ref: refs are inlined, recursion cut, missing refs become any", () => {
  const tool = read("schema-defs-ref/tool.json");
  const original = structuredClone(tool.inputSchema);
  const { schema, warnings } = normalizeInputSchema(tool.inputSchema);
  const text = JSON.stringify(schema);
  assert.doesNotMatch(text, /\$ref|\$defs|\$schema/);
  assert.equal(schema.type, "object");
  const props = schema.properties as Record<string, Record<string, unknown>>;
  const target = props.target.anyOf as Record<string, unknown>[];
  assert.equal(target[0].type, "string");
  assert.deepEqual((target[1].properties as Record<string, unknown>).kind, {
    type: "string",
    enum: ["alpha", "beta"],
  });
  assert.equal(props.tree.description, "Optional nested structure");
  const children = (props.tree.properties as Record<string, Record<string, unknown>>).children;
  const level2 = (children.items as Record<string, unknown>).properties as Record<
    string,
    Record<string, unknown>
  >;
  assert.deepEqual(level2.children.items, { type: "object" });
  assert.ok(Array.isArray((props.copies.items as Record<string, unknown>).anyOf));
  assert.deepEqual(props.missing, {});
  assert.ok(warnings.some((w) => /DoesNotExist/.test(w)));
  assert.deepEqual(schema.required, ["target"]);
  assert.deepEqual(tool.inputSchema, original, "the original schema is not modified");
});

// Case schema-top-level-shape.
test("case schema-top-level-shape: each schema becomes a top-level object", () => {
  const { tools } = read("schema-top-level-shape/tools.json");
  const byName = Object.fromEntries(
    tools.map((
      t: { name: string; inputSchema: unknown },
    ) => [t.name, normalizeInputSchema(t.inputSchema)]),
  );
  assert.deepEqual(byName.top_level_union.schema, {
    type: "object",
    properties: { query: { type: "string" }, id: { type: "string" } },
  });
  assert.equal(byName.top_level_union.note, "Provide either query or id.");
  assert.deepEqual(byName.missing_type.schema, {
    type: "object",
    properties: { limit: { type: "integer" } },
  });
  assert.deepEqual(byName.empty_schema.schema, { type: "object", properties: {} });
  const rows = byName.nullable_items.schema.properties as Record<string, Record<string, unknown>>;
  assert.equal((rows.rows.items as Record<string, unknown>).type, "object");
  assert.deepEqual(rows.meta, { type: "string" });
});

test("a schema that cannot be an object is replaced, never thrown", () => {
  assert.deepEqual(normalizeInputSchema({ type: "array", items: {} }).schema, {
    type: "object",
    properties: {},
  });
  assert.deepEqual(normalizeInputSchema("nonsense").schema, { type: "object", properties: {} });
  const cyclic: Record<string, unknown> = { type: "object", properties: { self: { $ref: "#" } } };
  assert.equal(normalizeInputSchema(cyclic).schema.type, "object");
});

test("a multi-type union becomes anyOf and required names only existing properties", () => {
  const { schema } = normalizeInputSchema({
    type: "object",
    properties: { v: { type: ["string", "number", "null"] } },
    required: ["v", "ghost"],
  });
  assert.deepEqual((schema.properties as Record<string, unknown>).v, {
    anyOf: [{ type: "string" }, { type: "number" }],
  });
  assert.deepEqual(schema.required, ["v"]);
});
