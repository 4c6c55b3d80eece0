// The page's panel for forecasters (seqlab.tasks.forecasting.service: POST /forecast): past values
// typed in or a CSV file; the forecast's values and a chart of the last values and the forecast.
// The frame (seqlab serve's static/app.js) calls mount(section, model, page). The inputs' bounds
// are this server's, from its schema (static/schema.js).

import { boundInputs } from "/static/schema.js";

const FORM = `
  <textarea id="history" rows="3" placeholder="Past values, oldest first (commas or new lines)"></textarea>
  <div class="row">
    <label>or a CSV <input id="csv" type="file" accept=".csv,text/csv"></label>
    <label>steps <input id="steps" type="number" value="24"></label>
    <button id="forecast" type="button">Forecast</button>
  </div>`;

export async function mount(section, model, page) {
  section.id = "panel-forecasting";
  section.innerHTML = FORM;
  await boundInputs(page, model.route, section, { steps: "steps" });
  const $ = (id) => section.querySelector("#" + id);
  const { el, output } = page;
  if (model.window) $("history").placeholder += `; at least ${model.window}`;

  async function forecast() {
    const body = { model: model.name, steps: +$("steps").value };
    try {
      if ($("csv").files.length) body.csv = await page.readFile($("csv"), "text");
      else {
        const values = $("history").value.split(/[\s,;]+/).filter((x) => x !== "").map(Number);
        if (!values.length) throw new Error("give past values or a CSV file");
        body.history = values;
      }
    } catch (err) {
      return page.status(err.message, true);
    }
    page.status("forecasting…");
    let data;
    try {
      data = await page.json(await page.api(model.route, body));
    } catch (err) {
      return page.status(err.message, true);
    }
    page.clearOutput();
    page.chart(data.history, data.forecast, "grey: observed · orange: forecast");
    const box = el("div", { class: "result" });
    box.append(el("div", {}, "forecast: " + data.forecast.map((v) => +v.toPrecision(4)).join(", ")));
    output.append(box);
    page.status(`forecast ${data.forecast.length} steps from ${data.history.length} values (window ${data.window})`);
  }

  $("forecast").onclick = forecast;
}
