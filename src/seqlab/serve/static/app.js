// seqlab serve: the page. Plain JavaScript, no dependencies, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const HEAD_COLORS = ["#2f6fde", "#e0672b", "#2e9d57", "#b23bb5", "#c49a00", "#0f9aa8",
  "#d6336c", "#5c6b80", "#7c4dff", "#8d6e63", "#00897b", "#f4511e"];

const state = {
  models: [],
  model: null,
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
  for (const m of state.models) select.append(el("option", { value: m.name }, `${m.name} (${m.task.replace("_", " ")})`));
  select.onchange = () => chooseModel(select.value);
  if (state.models.length) chooseModel(state.models[0].name);
  else status("this server holds no models", true);
}

function chooseModel(name) {
  const m = state.models.find((x) => x.name === name);
  state.model = m;
  for (const panel of document.querySelectorAll(".panel")) panel.hidden = panel.id !== "panel-" + m.task;
  if (m.task === "classification") {
    $("cls-text-box").hidden = m.input !== "text";
    $("cls-image-box").hidden = m.input !== "image";
  }
  const metrics = Object.entries(m.metrics).map(([k, v]) => `${k} ${+v.toFixed(4)}`).join(", ");
  const languages = m.languages ? ` ${m.languages.source}→${m.languages.target},` : "";
  $("model-info").textContent = `${m.arch},${languages} ${m.dataset}, ${m.parameters.toLocaleString()} parameters, ` +
    `engine ${m.engine}${metrics ? "; " + metrics : ""}`;
  clearOutput();
  status("ready");
}

function clearOutput() {
  $("output").textContent = "";
  $("explorer").hidden = true;
  $("rollout-box").hidden = true;
  $("chart-box").hidden = true;
  state.att = null;
}

// ---------------------------------------------------------------- translation
function shade(logProb) {
  const p = Math.exp(logProb);
  return `rgba(47, 111, 222, ${(0.1 + 0.6 * p).toFixed(3)})`;
}

async function translate() {
  const text = $("source").value.split("\n").filter((t) => t.trim());
  if (!text.length) return status("type a sentence first", true);
  const body = { model: state.model.name, text, attention: state.model.attention.length > 0 };
  if ($("beam").value) body.beam = +$("beam").value;
  if ($("nbest").value) body.nbest = +$("nbest").value;
  if ($("length-penalty").value) body.length_penalty = +$("length-penalty").value;
  if (!body.attention) delete body.attention;
  status("translating…");
  let data;
  try {
    data = await json(await api("/translate", body));
  } catch (err) {
    return status(err.message, true);
  }
  clearOutput();
  data.translations.forEach((t, i) => {
    const box = el("div", { class: "result", "data-index": i });
    box.append(el("div", { class: "muted" }, text[i]));
    const tokens = el("div", { class: "tokens output" });
    if (t.detail) {
      t.detail.target_tokens.forEach((tok, j) => {
        const lp = t.detail.log_probs[j];
        const span = el("span", { class: "tok", title: `p = ${Math.exp(lp).toFixed(3)}` }, tok);
        span.style.background = shade(lp);
        tokens.append(span);
      });
    } else {
      tokens.append(el("span", { class: "tok" }, t.text));
    }
    box.append(tokens);
    if (t.hypotheses.length > 1) {
      const list = el("ol", { class: "nbest" });
      for (const h of t.hypotheses) {
        const item = el("li", {}, h.text);
        item.append(el("span", { class: "score" }, `score ${h.score.toFixed(3)}`));
        list.append(item);
      }
      box.append(list);
    }
    if (t.detail) box.onclick = () => showTranslationAttention(t.detail, box);
    $("output").append(box);
  });
  for (const n of [...data.notes, ...data.warnings]) $("output").append(el("p", { class: "note" }, n));
  const first = data.translations.findIndex((t) => t.detail);
  if (first >= 0) showTranslationAttention(data.translations[first].detail, $("output").children[first]);
  status(`translated with ${data.engine}`);
}

function showTranslationAttention(d, box) {
  const kinds = {};
  if (d.cross) kinds.cross = { layers: d.cross, queries: d.target_tokens, keys: d.source_tokens };
  if (d.encoder) kinds.encoder = { layers: d.encoder, queries: d.source_tokens, keys: d.source_tokens };
  if (d.decoder) kinds.decoder = { layers: d.decoder, queries: d.target_tokens, keys: d.target_inputs };
  if (d.alignment) kinds.alignment = { layers: [[d.alignment]], queries: d.target_tokens, keys: d.source_tokens };
  selectResult(box);
  showAttention(kinds);
}

function selectResult(box) {
  for (const r of document.querySelectorAll(".result")) r.classList.toggle("selected", r === box);
}

// ------------------------------------------------------------- classification
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

async function classify() {
  const m = state.model;
  const body = { model: m.name, attention: m.attention.length > 0 };
  let texts = [];
  try {
    if (m.input === "image") body.image = await readFile($("cls-image"), "url");
    else {
      texts = $("cls-text").value.split("\n").filter((t) => t.trim());
      if (!texts.length) throw new Error("type a text first");
      body.text = texts;
    }
  } catch (err) {
    return status(err.message, true);
  }
  if (!body.attention) delete body.attention;
  status("classifying…");
  let data;
  try {
    data = await json(await api("/classify", body));
  } catch (err) {
    return status(err.message, true);
  }
  clearOutput();
  data.results.forEach((r, i) => {
    const box = el("div", { class: "result" });
    box.append(el("div", { class: "muted" }, m.input === "image" ? "image" : texts[i]));
    box.append(el("strong", {}, `${r.label}  ${(100 * r.probability).toFixed(1)}%`));
    const probs = el("div", { class: "probs" });
    for (const [label, p] of Object.entries(r.probabilities).sort((a, b) => b[1] - a[1]).slice(0, 5)) {
      const line = el("div");
      const bar = el("span", { class: "bar" });
      bar.style.width = `${Math.max(1, 120 * p)}px`;
      line.append(bar, `${label} ${(100 * p).toFixed(1)}%`);
      probs.append(line);
    }
    box.append(probs);
    for (const n of r.notes) box.append(el("div", { class: "note" }, n));
    if (r.attention) box.onclick = () => { selectResult(box); showClassAttention(r.attention); };
    $("output").append(box);
  });
  for (const n of data.warnings) $("output").append(el("p", { class: "note" }, n));
  const first = data.results[0];
  if (first && first.attention) {
    selectResult($("output").children[0]);
    showClassAttention(first.attention);
    if (first.attention.rollout) drawRollout(body.image, first.attention.rollout);
  }
  status("classified");
}

function showClassAttention(a) {
  showAttention({ self: { layers: a.layers, queries: a.tokens, keys: a.tokens } });
}

function drawRollout(dataUrl, grid) {
  const canvas = $("rollout");
  const ctx = canvas.getContext("2d");
  const image = new Image();
  image.onload = () => {
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(image, 0, 0, canvas.width, canvas.height);
    const rows = grid.length, cols = grid[0].length;
    const top = Math.max(...grid.flat()) || 1;
    const w = canvas.width / cols, h = canvas.height / rows;
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        ctx.fillStyle = `rgba(255, 80, 0, ${(0.75 * grid[r][c] / top).toFixed(3)})`;
        ctx.fillRect(c * w, r * h, w, h);
      }
    }
    $("rollout-box").hidden = false;
  };
  image.src = dataUrl;
}

// ------------------------------------------------------------ language models
async function generate() {
  const m = state.model;
  const body = { model: m.name, prefix: $("prefix").value, tokens: +$("tokens").value, seed: +$("seed").value };
  if ($("temperature").value !== "") body.temperature = +$("temperature").value;
  body.stream = $("stream").checked;
  clearOutput();
  const box = el("div", { class: "result generated" });
  box.append(el("span", { class: "prefix" }, body.prefix));
  const text = el("span", { class: "continuation" });
  box.append(text);
  $("output").append(box);
  status("generating…");
  try {
    const response = await api("/generate", body);
    if (!body.stream || !response.ok) {
      const data = await json(response);
      box.firstChild.textContent = "";
      text.textContent = data.text;
      for (const n of data.warnings) $("output").append(el("p", { class: "note" }, n));
      return status(`generated ${data.tokens.length} tokens`);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "", count = 0;
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
        if (event === "token") { text.textContent += data.text; count += 1; }
        else if (event === "done") for (const n of data.warnings) $("output").append(el("p", { class: "note" }, n));
        else if (event === "error") throw new Error(data.error + (data.limit ? ` [${data.limit}]` : ""));
      }
    }
    status(`generated ${count} tokens (streamed)`);
  } catch (err) {
    status(err.message, true);
  }
}

// ---------------------------------------------------------------- forecasting
async function forecast() {
  const m = state.model;
  const body = { model: m.name, steps: +$("steps").value };
  try {
    if ($("csv").files.length) body.csv = await readFile($("csv"), "text");
    else {
      const values = $("history").value.split(/[\s,;]+/).filter((x) => x !== "").map(Number);
      if (!values.length) throw new Error("give past values or a CSV file");
      body.history = values;
    }
  } catch (err) {
    return status(err.message, true);
  }
  status("forecasting…");
  let data;
  try {
    data = await json(await api("/forecast", body));
  } catch (err) {
    return status(err.message, true);
  }
  clearOutput();
  drawChart(data.history, data.forecast);
  const box = el("div", { class: "result" });
  box.append(el("div", {}, "forecast: " + data.forecast.map((v) => +v.toPrecision(4)).join(", ")));
  $("output").append(box);
  status(`forecast ${data.forecast.length} steps from ${data.history.length} values (window ${data.window})`);
}

function drawChart(history, future) {
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
  line(shown.map((v, i) => [i, v]), "#687385", "history");
  const start = shown.length - 1;
  line([[start, shown[start]], ...future.map((v, i) => [start + 1 + i, v])], "#e0672b", "forecast");
  for (const [v, label] of [[hi, hi], [lo, lo]]) {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", 2); t.setAttribute("y", y(v) + 4); t.setAttribute("font-size", "11");
    t.textContent = (+label.toPrecision(4)).toString();
    svg.append(t);
  }
  const legend = document.createElementNS(SVG, "text");
  legend.setAttribute("x", W - 230); legend.setAttribute("y", 16); legend.setAttribute("font-size", "12");
  legend.textContent = "grey: observed · orange: forecast";
  svg.append(legend);
  $("chart-box").hidden = false;
}

// ------------------------------------------------------- the attention explorer
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
$("translate").onclick = translate;
$("classify").onclick = classify;
$("generate").onclick = generate;
$("forecast").onclick = forecast;
$("key-save").onclick = () => { state.apiKey = $("api-key").value; $("key-box").hidden = true; loadModels(); };
$("source").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate(); });
loadModels();
