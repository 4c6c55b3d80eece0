// seqlab serve: the page's frame. Plain JavaScript, no dependencies, no build step.
//
// The frame names no task: /models says, for each model, its route and its panel, an ES module
// (its task's panel.js, or /static/generic.js: a form built from the route's request schema)
// that the frame imports when the model is chosen and mounts with mount(section, model, page)
// (seqlab.serving.service.Service.panel). `page` is what panels share: requests, the status line,
// the output area, the attention explorer and the chart.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const GENERIC_PANEL = "/static/generic.js";
const HEAD_COLORS = ["#2f6fde", "#e0672b", "#2e9d57", "#b23bb5", "#c49a00", "#0f9aa8",
  "#d6336c", "#5c6b80", "#7c4dff", "#8d6e63", "#00897b", "#f4511e"];

const state = {
  models: [],
  model: null,
  mounts: 0,          // counts panel mounts: a late import of an earlier choice is dropped
  apiKey: null,
  att: null,          // {kind: {layers: L×h×Q×K, queries: [...], keys: [...]}}
  kind: null,
  layer: 0,
  heads: new Set(),
  hover: null,        // {side: "q" | "k", index}
};

// ------------------------------------------------------------------ requests
async function api(path, body) {
  const headers = { "Content-Type": "application/json" };
  if (state.apiKey) headers.Authorization = "Bearer " + state.apiKey;
  const response = await fetch(path, body === undefined
    ? { headers } : { method: "POST", headers, body: JSON.stringify(body) });
  if (response.status === 401) $("key-box").hidden = false;
  return response;
}

async function json(response) {
  const data = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) {
    const limit = data.limit ? ` [${data.limit}]` : "";
    throw new Error(`${response.status}: ${data.error || "request failed"}${limit}`);
  }
  return data;
}

// Server-sent events (a streaming route's answer): onEvent(event, data) for each as it comes;
// an `error` event throws its message.
async function events(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const chunk = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const event = /^event: (.*)$/m.exec(chunk)?.[1];
      const data = JSON.parse(/^data: (.*)$/m.exec(chunk)?.[1] || "null");
      if (event === "error") throw new Error(data.error + (data.limit ? ` [${data.limit}]` : ""));
      onEvent(event, data);
    }
  }
}

function status(text, error = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", error);
}

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function readFile(input, how) {
  return new Promise((resolve, reject) => {
    const file = input.files[0];
    if (!file) return reject(new Error("choose a file first"));
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    if (how === "url") reader.readAsDataURL(file); else reader.readAsText(file);
  });
}

// A token's background: the stronger, the likelier.
function shade(logProb) {
  const p = Math.exp(logProb);
  return `rgba(47, 111, 222, ${(0.1 + 0.6 * p).toFixed(3)})`;
}

// --------------------------------------------------------------------- models
async function loadModels() {
  try {
    const data = await json(await api("/models"));
    state.models = data.models;
  } catch (err) {
    status(err.message, true);
    return;
  }
  const select = $("model");
  select.textContent = "";
  if (!state.models.length) return status("this server holds no models", true);
  // the first model's panel is mounted before the select is filled: a filled select means ready
  await chooseModel(state.models[0].name);
  for (const m of state.models) select.append(el("option", { value: m.name }, `${m.name} (${m.task.replace("_", " ")})`));
  select.value = state.model.name;
  select.onchange = () => chooseModel(select.value);
}

function describe(m, extra = "") {
  const metrics = Object.entries(m.metrics).map(([k, v]) => `${k} ${+v.toFixed(4)}`).join(", ");
  $("model-info").textContent = `${m.arch},${extra ? " " + extra + "," : ""} ${m.dataset}, ` +
    `${m.parameters.toLocaleString()} parameters, engine ${m.engine}${metrics ? "; " + metrics : ""}`;
}

async function chooseModel(name) {
  const m = state.models.find((x) => x.name === name);
  const mount = ++state.mounts;
  state.model = m;
  describe(m);
  clearOutput();
  const section = el("section", { class: "panel", "data-model": m.name });
  $("panels").replaceChildren(section);
  const url = m.panel || GENERIC_PANEL;
  status("loading the page's panel…");
  try {
    const module = await import(url);
    if (mount !== state.mounts) return;
    if (typeof module.mount !== "function") throw new Error("it exports no mount(section, model, page)");
    await module.mount(section, m, page);
  } catch (err) {
    if (mount === state.mounts) status(`the panel ${url} of model ${m.name} failed: ${err.message}`, true);
    return;
  }
  if (mount === state.mounts) status("ready");
}

function clearOutput() {
  $("output").textContent = "";
  $("explorer").hidden = true;
  $("chart-box").hidden = true;
  state.att = null;
}

function selectResult(box) {
  for (const r of document.querySelectorAll(".result")) r.classList.toggle("selected", r === box);
}

// ---------------------------------------------------------------------- chart
// A series and its continuation (the last 60 values, at least 4 per continued one).
function drawChart(history, future, legendText) {
  const svg = $("chart");
  svg.textContent = "";
  const W = 720, H = 260, pad = 36;
  svg.setAttribute("width", W); svg.setAttribute("height", H);
  const shown = history.slice(-Math.max(4 * future.length, 60));
  const all = shown.concat(future);
  const lo = Math.min(...all), hi = Math.max(...all), span = hi - lo || 1;
  const x = (i) => pad + (W - 2 * pad) * i / Math.max(all.length - 1, 1);
  const y = (v) => H - pad - (H - 2 * pad) * (v - lo) / span;
  const line = (points, color, cls) => {
    const p = document.createElementNS(SVG, "polyline");
    p.setAttribute("points", points.map(([i, v]) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" "));
    p.setAttribute("fill", "none"); p.setAttribute("stroke", color); p.setAttribute("stroke-width", "1.8");
    p.setAttribute("class", cls);
    svg.append(p);
  };
  line(shown.map((v, i) => [i, v]), "#687385", "given");
  const start = shown.length - 1;
  line([[start, shown[start]], ...future.map((v, i) => [start + 1 + i, v])], "#e0672b", "continued");
  for (const [v, label] of [[hi, hi], [lo, lo]]) {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", 2); t.setAttribute("y", y(v) + 4); t.setAttribute("font-size", "11");
    t.textContent = (+label.toPrecision(4)).toString();
    svg.append(t);
  }
  const legend = document.createElementNS(SVG, "text");
  legend.setAttribute("x", W - pad); legend.setAttribute("y", 16); legend.setAttribute("font-size", "12");
  legend.setAttribute("text-anchor", "end");
  legend.textContent = legendText || "grey: given · orange: continued";
  svg.append(legend);
  $("chart-box").hidden = false;
}

// ------------------------------------------------------- the attention explorer
// kinds: {name: {layers: layers × heads × queries × keys, queries: tokens, keys: tokens}}.
function showAttention(kinds) {
  state.att = kinds;
  const names = Object.keys(kinds);
  const kindSelect = $("att-kind");
  kindSelect.textContent = "";
  for (const k of names) kindSelect.append(el("option", { value: k }, k));
  const keep = names.includes(state.kind) ? state.kind : names[0];
  kindSelect.value = keep;
  kindSelect.onchange = () => chooseKind(kindSelect.value);
  $("explorer").hidden = false;
  chooseKind(keep);
}

function chooseKind(kind) {
  state.kind = kind;
  const layers = state.att[kind].layers;
  const layerSelect = $("att-layer");
  layerSelect.textContent = "";
  layers.forEach((_, i) => layerSelect.append(el("option", { value: i }, String(i))));
  state.layer = Math.min(state.layer, layers.length - 1);
  if (state.layer < 0) state.layer = layers.length - 1;
  layerSelect.value = state.layer;
  layerSelect.onchange = () => { state.layer = +layerSelect.value; draw(); };
  const heads = layers[0].length;
  state.heads = new Set([...Array(heads).keys()]);
  const box = $("heads");
  box.textContent = "";
  for (let h = 0; h < heads; h++) {
    const b = el("button", { type: "button", class: "head", "data-head": h, "aria-pressed": "true" }, String(h));
    b.style.setProperty("--head-color", HEAD_COLORS[h % HEAD_COLORS.length]);
    b.onclick = () => {
      if (state.heads.has(h)) state.heads.delete(h); else state.heads.add(h);
      draw();
    };
    box.append(b);
  }
  $("heads-all").onclick = () => { state.heads = new Set([...Array(heads).keys()]); draw(); };
  draw();
}

function draw() {
  for (const b of document.querySelectorAll("#heads button")) {
    b.setAttribute("aria-pressed", String(state.heads.has(+b.dataset.head)));
  }
  $("att-layer").value = state.layer;
  drawLines();
  drawHeatmaps();
  drawGrid();
}

// Lines between the queries (left) and the keys (right), one colour per head, opacity = weight.
function drawLines() {
  const { layers, queries, keys } = state.att[state.kind];
  const weights = layers[state.layer];
  const svg = $("att-lines");
  svg.textContent = "";
  const row = 18, left = 120, right = 300, width = 420;
  const height = 36 + row * Math.max(queries.length, keys.length);
  svg.setAttribute("width", width); svg.setAttribute("height", height);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const qy = (i) => 32 + i * row, ky = (j) => 32 + j * row;
  const group = document.createElementNS(SVG, "g");
  svg.append(group);
  let drawn = 0, total = 0;
  for (const h of [...state.heads].sort()) {
    const color = HEAD_COLORS[h % HEAD_COLORS.length];
    weights[h].forEach((rowWeights, i) => rowWeights.forEach((w, j) => {
      if (w < 0.02) return;
      const line = document.createElementNS(SVG, "line");
      line.setAttribute("x1", left + 4); line.setAttribute("y1", qy(i) - 4);
      line.setAttribute("x2", right - 4); line.setAttribute("y2", ky(j) - 4);
      line.setAttribute("stroke", color); line.setAttribute("stroke-width", "2");
      line.setAttribute("stroke-opacity", Math.min(1, w).toFixed(3));
      line.dataset.q = i; line.dataset.k = j; line.dataset.head = h;
      group.append(line);
      drawn += 1; total += w;
    }));
  }
  // what is drawn, for tests and the curious: lines and their summed weight
  svg.dataset.lines = drawn;
  svg.dataset.weight = total.toFixed(4);
  const label = (text, x, y, anchor, side, index) => {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", x); t.setAttribute("y", y); t.setAttribute("text-anchor", anchor);
    t.setAttribute("class", side === "q" ? "query" : "key");
    t.dataset.side = side; t.dataset.index = index;
    t.textContent = text;
    t.onmouseenter = () => hover(side, index);
    t.onmouseleave = () => hover(null, null);
    svg.append(t);
  };
  queries.forEach((tok, i) => label(tok, left, qy(i), "end", "q", i));
  keys.forEach((tok, j) => label(tok, right, ky(j), "start", "k", j));
  const head = (text, x, anchor) => {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", x); t.setAttribute("y", 14); t.setAttribute("text-anchor", anchor);
    t.setAttribute("fill", "#687385"); t.textContent = text; svg.append(t);
  };
  head("attends from", left, "end"); head("to", right, "start");
}

// Hovering a token keeps its lines and highlights the tokens they reach.
function hover(side, index) {
  const svg = $("att-lines");
  const lines = svg.querySelectorAll("line");
  const texts = svg.querySelectorAll("text[data-side]");
  for (const t of texts) t.classList.remove("hl");
  if (side === null) {
    for (const l of lines) l.classList.remove("faded", "hl");
    svg.dataset.highlighted = 0;
    return;
  }
  const other = side === "q" ? "k" : "q";
  let count = 0;
  const reached = new Set();
  for (const l of lines) {
    const mine = +l.dataset[side] === index;
    l.classList.toggle("faded", !mine);
    l.classList.toggle("hl", mine);
    if (mine) { count += 1; reached.add(+l.dataset[other]); }
  }
  for (const t of texts) {
    if ((t.dataset.side === side && +t.dataset.index === index) ||
        (t.dataset.side === other && reached.has(+t.dataset.index))) t.classList.add("hl");
  }
  svg.dataset.highlighted = count;
}

// One cell per (query, key); the colour's strength is the weight over the matrix's largest.
function heatmap(matrix, size, color) {
  const rows = matrix.length, cols = matrix[0].length;
  const cell = Math.max(1, Math.floor(size / Math.max(rows, cols)));
  const canvas = el("canvas", { width: cols * cell, height: rows * cell });
  const ctx = canvas.getContext("2d");
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(color.slice(i, i + 2), 16));
  const top = Math.max(...matrix.flat()) || 1;
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      ctx.fillStyle = `rgba(${r}, ${g}, ${b}, ${(matrix[i][j] / top).toFixed(3)})`;
      ctx.fillRect(j * cell, i * cell, cell, cell);
    }
  }
  return canvas;
}

function drawHeatmaps() {
  const { layers, queries, keys } = state.att[state.kind];
  const box = $("heatmaps");
  box.textContent = "";
  for (const h of [...state.heads].sort()) {
    const fig = el("figure");
    fig.append(heatmap(layers[state.layer][h], 180, HEAD_COLORS[h % HEAD_COLORS.length]));
    const top = Math.max(...layers[state.layer][h].flat());
    fig.append(el("figcaption", {}, `layer ${state.layer}, head ${h}: ${queries.length} × ${keys.length}, darkest ${top.toFixed(2)}`));
    box.append(fig);
  }
}

function drawGrid() {
  const { layers } = state.att[state.kind];
  const grid = $("grid");
  grid.textContent = "";
  const heads = layers[0].length;
  grid.style.gridTemplateColumns = `auto repeat(${heads}, auto)`;
  grid.append(el("span", { class: "label" }, ""));
  for (let h = 0; h < heads; h++) grid.append(el("span", { class: "label" }, `head ${h}`));
  layers.forEach((layer, l) => {
    grid.append(el("span", { class: "label" }, `layer ${l}`));
    layer.forEach((matrix, h) => {
      const c = heatmap(matrix, 56, HEAD_COLORS[h % HEAD_COLORS.length]);
      c.title = `layer ${l}, head ${h}: show this head alone`;
      if (l === state.layer && state.heads.has(h)) c.classList.add("current");
      c.onclick = () => { state.layer = l; state.heads = new Set([h]); draw(); };
      grid.append(c);
    });
  });
}

// ---------------------------------------------------------------------- start
// What a panel's mount(section, model, page) is given besides its section and model.
const page = {
  api,                    // api(path, body): fetch with the API key; GET without a body
  json,                   // json(response): its JSON, or throws "STATUS: error [limit]"
  events,                 // events(response, onEvent): a streamed answer's server-sent events
  status,                 // status(text, error): the status line
  el,                     // el(tag, attrs, text): a new element
  output: $("output"),    // where results go
  clearOutput,            // empties the output and hides the explorer and the chart
  readFile,               // readFile(input, "url" | "text"): a file input's first file
  shade,                  // shade(logProb): a token's background colour
  selectResult,           // selectResult(box): marks one .result of the output as shown
  showAttention,          // showAttention({kind: {layers, queries, keys}}): the explorer
  chart: drawChart,       // chart(history, future, legend): a series and its continuation
  describe: (extra) => describe(state.model, extra),  // adds to the model's line in the header
};

$("key-save").onclick = () => { state.apiKey = $("api-key").value; $("key-box").hidden = true; loadModels(); };
loadModels();
