// The page's panel for classifiers (seqlab.tasks.classification.service: POST /classify): texts
// (one per line) or an image file in; each one's label, its five likeliest labels as bars, the
// API's notes and warnings, its self-attention in the explorer and, for a ViT, the attention
// rollout over the image (Abnar & Zuidema 2020).
// The frame (seqlab serve's static/app.js) calls mount(section, model, page).

const FORM = `
  <div id="cls-text-box">
    <textarea id="cls-text" rows="3" placeholder="One text per line">a wonderful story</textarea>
  </div>
  <div id="cls-image-box">
    <input id="cls-image" type="file" accept="image/*">
  </div>
  <div class="row"><button id="classify" type="button">Classify</button></div>`;

const ROLLOUT_NOTE = `How much each image patch flows into the class token through all layers
  (Abnar &amp; Zuidema 2020): where the model looked, not why it decided.`;

export function mount(section, model, page) {
  section.id = "panel-classification";
  section.innerHTML = FORM;
  const $ = (id) => section.querySelector("#" + id);
  const { el, output } = page;
  const images = model.input === "image";
  $("cls-text-box").hidden = images;
  $("cls-image-box").hidden = !images;

  const showAttention = (a, box) => {
    page.selectResult(box);
    page.showAttention({ self: { layers: a.layers, queries: a.tokens, keys: a.tokens } });
  };

  // the image under its patch grid, each patch shaded by its rollout weight
  function drawRollout(dataUrl, grid) {
    const box = el("div", { id: "rollout-box" });
    box.append(el("h2", {}, "Attention rollout"));
    const note = el("p", { class: "note" });
    note.innerHTML = ROLLOUT_NOTE;
    const canvas = el("canvas", { id: "rollout", width: 224, height: 224 });
    box.append(note, canvas);
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
      output.append(box);
    };
    image.src = dataUrl;
  }

  async function classify() {
    const body = { model: model.name, attention: model.attention.length > 0 };
    let texts = [];
    try {
      if (images) body.image = await page.readFile($("cls-image"), "url");
      else {
        texts = $("cls-text").value.split("\n").filter((t) => t.trim());
        if (!texts.length) throw new Error("type a text first");
        body.text = texts;
      }
    } catch (err) {
      return page.status(err.message, true);
    }
    if (!body.attention) delete body.attention;
    page.status("classifying…");
    let data;
    try {
      data = await page.json(await page.api(model.route, body));
    } catch (err) {
      return page.status(err.message, true);
    }
    page.clearOutput();
    data.results.forEach((r, i) => {
      const box = el("div", { class: "result" });
      box.append(el("div", { class: "muted" }, images ? "image" : texts[i]));
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
      if (r.attention) box.onclick = () => showAttention(r.attention, box);
      output.append(box);
    });
    for (const n of data.warnings) output.append(el("p", { class: "note" }, n));
    const first = data.results[0];
    if (first && first.attention) {
      showAttention(first.attention, output.children[0]);
      if (first.attention.rollout) drawRollout(body.image, first.attention.rollout);
    }
    page.status("classified");
  }

  $("classify").onclick = classify;
}
