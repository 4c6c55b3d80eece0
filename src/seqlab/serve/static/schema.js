// This server's OpenAPI schema (/openapi.json, read once): the request schema of a model's route,
// and the bounds of its number fields, which the server writes with its own limits (seqlab.serve.
// http.bound_by_limits). The panels' forms take their bounds from here, so the page asks for what
// the server accepts: one place for each bound, the options model or the server's limit.

let openapi = null;

export const NUMBERS = new Set(["integer", "number"]);

// A schema with its $ref (and single allOf) followed into the document's components.
export function resolve(root, node) {
  for (let depth = 0; node && depth < 32; depth++) {
    if (node.$ref) {
      node = node.$ref.split("/").slice(1).reduce((at, key) => at?.[key], root);
    } else if (node.allOf && node.allOf.length === 1) {
      node = { ...node.allOf[0], ...Object.fromEntries(Object.entries(node).filter(([k]) => k !== "allOf")) };
    } else return node;
  }
  return node;
}

// The resolved request schema of POST route (and the whole document, for its $refs).
export async function requestSchema(page, route) {
  if (!openapi) openapi = await page.json(await page.api("/openapi.json"));
  const ref = openapi.paths?.[route]?.post?.requestBody?.content?.["application/json"]?.schema;
  const schema = resolve(openapi, ref);
  if (!schema || !schema.properties) throw new Error(`/openapi.json has no request schema for POST ${route}`);
  return { openapi, schema };
}

// The bounds of a number input (exclusive ones are left to the server to enforce exactly).
export function bounds(schema) {
  const integer = schema.type === "integer";
  const attrs = { type: "number", step: integer ? "1" : "any" };
  if (schema.minimum !== undefined) attrs.min = schema.minimum;
  else if (schema.exclusiveMinimum !== undefined) {
    attrs.min = integer ? Math.floor(schema.exclusiveMinimum) + 1 : schema.exclusiveMinimum;
  }
  if (schema.maximum !== undefined) attrs.max = schema.maximum;
  else if (schema.exclusiveMaximum !== undefined) {
    attrs.max = integer ? Math.ceil(schema.exclusiveMaximum) - 1 : schema.exclusiveMaximum;
  }
  return attrs;
}

// Each number input of a panel ({inputId: field}) given its field's bounds from the schema.
export async function boundInputs(page, route, section, inputs) {
  const { openapi: root, schema } = await requestSchema(page, route);
  for (const [id, name] of Object.entries(inputs)) {
    const property = resolve(root, schema.properties[name]);
    const number = (property?.anyOf || [property]).map((x) => resolve(root, x)).find((x) => x && NUMBERS.has(x.type));
    if (!number) throw new Error(`POST ${route} has no number field ${name}`);
    const box = section.querySelector("#" + id);
    for (const [attr, value] of Object.entries(bounds(number))) {
      if (attr !== "type") box.setAttribute(attr, value);
    }
  }
}
