// The page's panel for a model whose task ships no panel script (seqlab.serving.service.Service:
// panel=None): a form built from its route's request schema in /openapi.json, and the JSON answer.
//
// Each field of the request but `model` becomes an input #field-NAME, labelled with its title
// and described by its description: a string, a textarea; one string or a list of strings, a
// textarea read as the string, or as the list of its lines when it holds several; a list of
// numbers, a text of numbers; an integer or a number, a number input within the schema's bounds;
// a boolean, a checkbox; an enum, a select; anything else, JSON. The required fields (the
// inputs) come first, then the others in the schema's order (a request inherits its options
// model, whose fields the schema lists first). Defaults are filled in, and fields left empty are
// not sent. A streamed answer (stream: true) shows its tokens as they come.

import { bounds, NUMBERS, requestSchema, resolve } from "/static/schema.js";

// What input a property becomes: {kind, ...} (kinds: text, lines, numbers, number, boolean, enum, json).
function fieldOf(root, property) {
  const p = resolve(root, property);
  const options = (p.anyOf || p.oneOf || [p]).map((x) => resolve(root, x)).filter((x) => x && x.type !== "null");
  const [only] = options;
  const types = options.map((o) => (o.type === "array" ? `${resolve(root, o.items)?.type}[]` : o.type));
  if (options.length === 1 && only.enum) return { kind: "enum", values: only.enum };
  if (options.length === 1 && only.type === "boolean") return { kind: "boolean" };
  if (options.length === 1 && NUMBERS.has(only.type)) return { kind: "number", schema: only };
  if (options.length === 1 && only.type === "string") return { kind: "text", schema: only };
  if (types.every((t) => t === "string" || t === "string[]")) return { kind: "lines" };
  if (types.length === 1 && NUMBERS.has(types[0].slice(0, -2)) && types[0].endsWith("[]")) {
    return { kind: "numbers", integer: types[0] === "integer[]" };
  }
  return { kind: "json" };
}

function input(el, name, field, property) {
  const id = "field-" + name;
  const initial = property.default;
  if (field.kind === "enum") {
    const select = el("select", { id });
    if (initial === undefined) select.append(el("option", { value: "" }, ""));
    field.values.forEach((v, i) => select.append(el("option", { value: String(i) }, String(v))));
    const at = field.values.indexOf(initial);
    select.value = at >= 0 ? String(at) : "";
    return select;
  }
  if (field.kind === "boolean") {
    const box = el("input", { id, type: "checkbox" });
    box.checked = initial === true;
    return box;
  }
  if (field.kind === "number") {
    const box = el("input", { id, ...bounds(field.schema) });
    if (initial !== undefined && initial !== null) box.value = String(initial);
    return box;
  }
  const area = el("textarea", { id, rows: field.kind === "numbers" ? 2 : 3 });
  if (field.kind === "text" && field.schema.maxLength !== undefined) area.setAttribute("maxlength", field.schema.maxLength);
  if (initial !== undefined && initial !== null) {
    area.value = field.kind === "json" ? JSON.stringify(initial)
      : Array.isArray(initial) ? initial.join("\n") : String(initial);
  }
  return area;
}

// The field's value for the request, or undefined when it is left empty; throws on a bad value.
function read(name, field, box, property, required) {
  if (field.kind === "boolean") {
    return box.checked !== (property.default === true) || required ? box.checked : undefined;
  }
  if (field.kind === "enum") return box.value === "" ? undefined : field.values[+box.value];
  const text = box.value;
  if (field.kind === "text") return text === "" ? undefined : text;
  if (!text.trim()) return undefined;
  if (field.kind === "lines") {
    const lines = text.split("\n").filter((line) => line.trim());
    return lines.length === 1 ? lines[0] : lines;
  }
  if (field.kind === "number") {
    const value = Number(text);
    if (!Number.isFinite(value)) throw new Error(`${name}: ${JSON.stringify(text)} is not a number`);
    if (field.schema.type === "integer" && !Number.isInteger(value)) throw new Error(`${name}: ${text} is not a whole number`);
    return value;
  }
  if (field.kind === "numbers") {
    return text.split(/[\s,;]+/).filter((x) => x !== "").map((x, i) => {
      const value = Number(x);
      if (!Number.isFinite(value) || (field.integer && !Number.isInteger(value))) {
        throw new Error(`${name}: value ${i + 1}, ${JSON.stringify(x)}, is not a${field.integer ? " whole" : ""} number`);
      }
      return value;
    });
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${name}: not JSON (${text.slice(0, 40)})`);
  }
}

export async function mount(section, model, page) {
  section.id = "panel-generic";
  const { el } = page;
  const { openapi, schema } = await requestSchema(page, model.route);
  const required = new Set(schema.required || []);
  const fields = [];
  const entries = Object.entries(schema.properties);
  const ordered = [...entries.filter(([n]) => required.has(n)), ...entries.filter(([n]) => !required.has(n))];
  for (const [name, raw] of ordered) {
    if (name === "model") continue;
    const property = resolve(openapi, raw);
    const field = fieldOf(openapi, property);
    const box = input(el, name, field, property);
    const label = el("label", { for: box.id, class: "field-name" }, (property.title || name) + (required.has(name) ? " *" : ""));
    const help = el("span", { class: "field-help muted" }, property.description || "");
    if (property.description) label.title = property.description;
    const row = el("div", { class: `field field-${field.kind}` });
    row.append(label, box, help);
    section.append(row);
    fields.push({ name, field, box, property });
  }
  const send = el("button", { id: "send", type: "button" }, "Send");
  const buttons = el("div", { class: "row" });
  buttons.append(send, el("span", { class: "muted" }, `POST ${model.route}`));
  section.append(buttons);

  send.onclick = async () => {
    const body = { model: model.name };
    try {
      for (const { name, field, box, property } of fields) {
        const value = read(name, field, box, property, required.has(name));
        if (value !== undefined) body[name] = value;
        else if (required.has(name)) throw new Error(`${name} is required: fill it in`);
      }
    } catch (err) {
      return page.status(err.message, true);
    }
    page.status(`POST ${model.route}…`);
    page.clearOutput();
    const answer = el("pre", { id: "answer" });
    page.output.append(answer);
    try {
      const response = await page.api(model.route, body);
      if (response.ok && (response.headers.get("content-type") || "").startsWith("text/event-stream")) {
        let count = 0;
        await page.events(response, (event, data) => {
          if (event === "token") { answer.textContent += data.text ?? ""; count += 1; }
          else if (event === "done") answer.textContent = JSON.stringify(data, null, 2);
        });
        return page.status(`answered (streamed, ${count} tokens)`);
      }
      answer.textContent = JSON.stringify(await page.json(response), null, 2);
      page.status("answered");
    } catch (err) {
      answer.remove();
      page.status(err.message, true);
    }
  };
}
