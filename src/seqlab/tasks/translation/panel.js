// The page's panel for translation models (seqlab.tasks.translation.service: POST /translate):
// texts in; each translation out with its tokens shaded by their probability, the n-best list
// with scores, the API's notes and warnings, and the best output's attention in the explorer.
// The frame (seqlab serve's static/app.js) calls mount(section, model, page). The inputs' bounds
// are this server's, from its schema (static/schema.js).

import { boundInputs } from "/static/schema.js";

const FORM = `
  <textarea id="source" rows="3" placeholder="Type a sentence (one per line)">saturday 9 may 1998</textarea>
  <div class="row">
    <label>beam <input id="beam" type="number" placeholder="run's"></label>
    <label>n-best <input id="nbest" type="number" placeholder="1"></label>
    <label title="beam search ranks by log p / length^α">length penalty <input id="length-penalty" type="number" placeholder="run's"></label>
    <button id="translate" type="button">Translate</button>
  </div>`;

export async function mount(section, model, page) {
  section.id = "panel-translation";
  section.innerHTML = FORM;
  await boundInputs(page, model.route, section, { beam: "beam", nbest: "nbest", "length-penalty": "length_penalty" });
  const $ = (id) => section.querySelector("#" + id);
  const { el, output } = page;
  if (model.languages) page.describe(`${model.languages.source}→${model.languages.target}`);

  // every layer's and head's attention of one output, by kind (cross, encoder, decoder, alignment)
  const showAttention = (d, box) => {
    const kinds = {};
    if (d.cross) kinds.cross = { layers: d.cross, queries: d.target_tokens, keys: d.source_tokens };
    if (d.encoder) kinds.encoder = { layers: d.encoder, queries: d.source_tokens, keys: d.source_tokens };
    if (d.decoder) kinds.decoder = { layers: d.decoder, queries: d.target_tokens, keys: d.target_inputs };
    if (d.alignment) kinds.alignment = { layers: [[d.alignment]], queries: d.target_tokens, keys: d.source_tokens };
    page.selectResult(box);
    page.showAttention(kinds);
  };

  async function translate() {
    const text = $("source").value.split("\n").filter((t) => t.trim());
    if (!text.length) return page.status("type a sentence first", true);
    const body = { model: model.name, text, attention: model.attention.length > 0 };
    if ($("beam").value) body.beam = +$("beam").value;
    if ($("nbest").value) body.nbest = +$("nbest").value;
    if ($("length-penalty").value) body.length_penalty = +$("length-penalty").value;
    if (!body.attention) delete body.attention;
    page.status("translating…");
    let data;
    try {
      data = await page.json(await page.api(model.route, body));
    } catch (err) {
      return page.status(err.message, true);
    }
    page.clearOutput();
    data.translations.forEach((t, i) => {
      const box = el("div", { class: "result", "data-index": i });
      box.append(el("div", { class: "muted" }, text[i]));
      const tokens = el("div", { class: "tokens output" });
      if (t.detail) {
        t.detail.target_tokens.forEach((tok, j) => {
          const lp = t.detail.log_probs[j];
          const span = el("span", { class: "tok", title: `p = ${Math.exp(lp).toFixed(3)}` }, tok);
          span.style.background = page.shade(lp);
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
      if (t.detail) box.onclick = () => showAttention(t.detail, box);
      output.append(box);
    });
    for (const n of [...data.notes, ...data.warnings]) output.append(el("p", { class: "note" }, n));
    const first = data.translations.findIndex((t) => t.detail);
    if (first >= 0) showAttention(data.translations[first].detail, output.children[first]);
    page.status(`translated with ${data.engine}`);
  }

  $("translate").onclick = translate;
  $("source").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate(); });
}
