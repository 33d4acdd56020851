/**
 * Makes MCP input schemas acceptable to model APIs (cases schema-defs-ref and
 * schema-top-level-shape): local `$ref`s inlined, `$defs`/`definitions`/`$schema` dropped,
 * recursion cut, a top-level `type: "object"` with `properties`, no top-level `anyOf`/`oneOf`/
 * `allOf`, `["x", "null"]` unions reduced, object-only keywords removed from non-objects. The
 * server still receives the model's arguments unchanged. Never throws.
 *
 * @module
 */

/** A JSON schema node. */
export type JsonSchema = Record<string, unknown>;

/** What {@link normalizeInputSchema} returns. */
export interface NormalizedSchema {
  /** The schema to send to the model. */
  schema: JsonSchema;
  /** A sentence to add to the tool description (e.g. "Provide either query or id."), if any. */
  note?: string;
  /** Tolerated problems, naming the JSON pointer. */
  warnings: string[];
}

/** How often one `$ref` may be expanded inside itself before it is cut. */
const MAX_REF_DEPTH = 2;

function isRecord(v: unknown): v is JsonSchema {
  return !!v && typeof v === "object" && !Array.isArray(v);
}

function pointer(root: unknown, ref: string): unknown {
  if (ref === "#") return root;
  if (!ref.startsWith("#/")) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(node)) node = node[Number(key)];
    else if (isRecord(node)) node = node[key];
    else return undefined;
    if (node === undefined) return undefined;
  }
  return node;
}

function inline(
  node: unknown,
  root: unknown,
  stack: string[],
  at: string,
  warnings: string[],
): unknown {
  if (Array.isArray(node)) {
    return node.map((v, i) => inline(v, root, stack, `${at}/${i}`, warnings));
  }
  if (!isRecord(node)) return node;
  if (typeof node.$ref === "string") {
    const ref = node.$ref;
    const { $ref: _drop, ...siblings } = node;
    const depth = stack.filter((r) => r === ref).length;
    let target: unknown;
    if (depth >= MAX_REF_DEPTH) {
      target = { type: "object" };
    } else {
      const found = pointer(root, ref);
      if (found === undefined || !isRecord(found)) {
        warnings.push(`unresolvable $ref ${ref} at ${at || "/"}; accepted as any value`);
        target = {};
      } else {
        target = inline(found, root, [...stack, ref], at, warnings);
      }
    }
    const rest = inline(siblings, root, stack, at, warnings) as JsonSchema;
    return { ...(target as JsonSchema), ...rest };
  }
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === "$defs" || k === "definitions" || k === "$schema" || k === "$id") continue;
    out[k] = inline(v, root, stack, `${at}/${k}`, warnings);
  }
  return out;
}

const OBJECT_ONLY = ["properties", "required", "additionalProperties", "patternProperties"];

function tidy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tidy);
  if (!isRecord(node)) return node;
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === "properties" && isRecord(v)) {
      out[k] = Object.fromEntries(Object.entries(v).map(([pk, pv]) => [pk, tidy(pv)]));
    } else {out[k] = k === "enum" || k === "const" || k === "default" || k === "examples"
        ? v
        : tidy(v);}
  }
  if (Array.isArray(out.type)) {
    const types = (out.type as unknown[]).filter((t) => t !== "null");
    if (types.length === 1) out.type = types[0];
    else if (types.length === 0) delete out.type;
    else {
      const { type: _t, ...rest } = out;
      return { ...rest, anyOf: types.map((t) => ({ type: t })) };
    }
  }
  if (typeof out.type === "string" && out.type !== "object") {
    for (const k of OBJECT_ONLY) delete out[k];
  }
  if (out.type === "object" && out.properties !== undefined && !isRecord(out.properties)) {
    out.properties = {};
  }
  if (Array.isArray(out.required) && isRecord(out.properties)) {
    const props = out.properties;
    out.required = (out.required as unknown[]).filter((r) => typeof r === "string" && r in props);
  }
  return out;
}

/**
 * Normalises one tool's input schema for the model.
 *
 * @param input The `inputSchema` the server listed.
 * @returns The schema to send, an optional description note and warnings.
 * @example
 * ```ts
 * import { normalizeInputSchema } from "@zqagent/core/mcp";
 * normalizeInputSchema({ properties: { limit: { type: "integer" } } }).schema;
 * // { type: "object", properties: { limit: { type: "integer" } } }
 * ```
 */
export function normalizeInputSchema(input: unknown): NormalizedSchema {
  const warnings: string[] = [];
  if (!isRecord(input)) {
    if (input !== undefined) warnings.push("the input schema is not an object; replaced");
    return { schema: { type: "object", properties: {} }, warnings };
  }
  let schema: JsonSchema;
  try {
    schema = tidy(inline(structuredClone(input), input, [], "", warnings)) as JsonSchema;
  } catch (err) {
    warnings.push(`the input schema could not be normalised (${(err as Error).message}); replaced`);
    return { schema: { type: "object", properties: {} }, warnings };
  }
  let note: string | undefined;
  for (const key of ["anyOf", "oneOf", "allOf"] as const) {
    const branches = schema[key];
    if (!Array.isArray(branches)) continue;
    delete schema[key];
    const properties: JsonSchema = isRecord(schema.properties) ? { ...schema.properties } : {};
    const requiredSets: string[][] = [];
    const names: string[] = [];
    for (const b of branches) {
      if (!isRecord(b)) continue;
      const props = isRecord(b.properties) ? b.properties : {};
      for (const [k, v] of Object.entries(props)) if (!(k in properties)) properties[k] = v;
      const req = Array.isArray(b.required) ? b.required.filter((r) => typeof r === "string") : [];
      requiredSets.push(req as string[]);
      names.push(...(req.length ? req as string[] : Object.keys(props)));
    }
    schema.type = "object";
    schema.properties = properties;
    const own = Array.isArray(schema.required) ? schema.required as string[] : [];
    const required = key === "allOf" ? [...new Set([...own, ...requiredSets.flat()])] : [
      ...new Set([
        ...own,
        ...requiredSets.reduce<string[]>(
          (acc, r, i) => (i === 0 ? r : acc.filter((x) => r.includes(x))),
          [],
        ),
      ]),
    ];
    if (required.length) schema.required = required;
    else delete schema.required;
    if (key !== "allOf" && names.length > 1) {
      note = `Provide either ${[...new Set(names)].join(" or ")}.`;
    }
  }
  if (schema.type !== undefined && schema.type !== "object") {
    warnings.push(`the top-level type ${JSON.stringify(schema.type)} is not object; replaced`);
    return { schema: { type: "object", properties: {} }, note, warnings };
  }
  schema.type = "object";
  if (!isRecord(schema.properties)) schema.properties = {};
  return { schema: { type: "object", ...schema }, note, warnings };
}

/**
 * Characters a tool definition costs in a request: name + description + normalised schema (the
 * measure of the lazy-mode threshold, manual §15.4).
 */
export function definitionChars(name: string, description: string, schema: JsonSchema): number {
  return name.length + description.length + JSON.stringify(schema).length;
}
