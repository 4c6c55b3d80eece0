// The page's panel for language models (seqlab.tasks.language_modeling.service: POST /generate):
// a prefix continued, token by token as the server streams them (server-sent events) or at once,
// with the API's warnings.
// The frame (seqlab serve's static/app.js) calls mount(section, model, page). The inputs' bounds
// are this server's, from its schema (static/schema.js).

import { boundInputs } from "/static/schema.js";

const FORM = `
  <input id="prefix" type="text" value="the time traveller" size="40" aria-label="prefix">
  <div class="row">
    <label>tokens <input id="tokens" type="number" value="100"></label>
    <label>temperature <input id="temperature" type="number" placeholder="run's"></label>
    <label>seed <input id="seed" type="number" value="0"></label>
    <label><input id="stream" type="checkbox" checked> stream</label>
    <button id="generate" type="button">Generate</button>
  </div>`;

export async function mount(section, model, page) {
  section.id = "panel-language_modeling";
  section.innerHTML = FORM;
  await boundInputs(page, model.route, section, { tokens: "tokens", temperature: "temperature", seed: "seed" });
  const $ = (id) => section.querySelector("#" + id);
  const { el, output } = page;

  async function generate() {
    const body = { model: model.name, prefix: $("prefix").value, tokens: +$("tokens").value, seed: +$("seed").value };
    if ($("temperature").value !== "") body.temperature = +$("temperature").value;
    body.stream = $("stream").checked;
    page.clearOutput();
    const box = el("div", { class: "result generated" });
    box.append(el("span", { class: "prefix" }, body.prefix));
    const text = el("span", { class: "continuation" });
    box.append(text);
    output.append(box);
    page.status("generating…");
    const warn = (warnings) => { for (const n of warnings) output.append(el("p", { class: "note" }, n)); };
    try {
      const response = await page.api(model.route, body);
      if (!body.stream || !response.ok) {
        const data = await page.json(response);
        box.firstChild.textContent = "";
        text.textContent = data.text;
        warn(data.warnings);
        return page.status(`generated ${data.tokens.length} tokens`);
      }
      let count = 0;
      await page.events(response, (event, data) => {
        if (event === "token") { text.textContent += data.text; count += 1; }
        else if (event === "done") warn(data.warnings);
      });
      page.status(`generated ${count} tokens (streamed)`);
    } catch (err) {
      page.status(err.message, true);
    }
  }

  $("generate").onclick = generate;
}
