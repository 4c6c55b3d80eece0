// The page's panel for audio classifiers (seqlab.tasks.audio.service: POST /classify-audio): a WAV
// file uploaded, or a recording from the microphone made in the page (Web Audio: an AudioWorklet
// collects the samples, leading and trailing silence is cut by an energy threshold, and the page
// writes the rest as a mono 16-bit PCM WAV file at the capture rate itself); then the recording's
// waveform, the log-mel spectrogram the model read with the attention each frame received (models
// with self-attention), and the class probabilities as bars; or, for a recording the server heard
// no speech in (silence, or shorter than one analysis window), "no speech detected" and why. A
// warning the server gives with the answer (a rate below the model's) is shown beside it.
// The frame (seqlab serve's static/app.js) calls mount(section, model, page).

const MAX_SECONDS = 3;        // a recording stops by itself after this long
const WINDOW_SECONDS = 0.01;  // silence is cut in windows this long,
const SILENCE = 0.05;         // those under this share of the loudest window's RMS (-26 dB),
const MARGIN_SECONDS = 0.05;  // keeping this much either side of what was heard
const SHOWN_LABELS = 10;      // bars drawn: the likeliest labels
const WIDTH = 720;            // the canvases' width: one time axis for all three
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

const FORM = `
  <div class="row">
    <label>a WAV file <input id="audio-file" type="file" accept=".wav,audio/wav"></label>
    <span class="muted">or</span>
    <button id="record" type="button">Record</button>
    <audio id="audio-player" controls hidden></audio>
  </div>
  <p class="note">Record reads the microphone in this page for at most ${MAX_SECONDS} s (click
    again to stop sooner); the quiet start and end (${1000 * WINDOW_SECONDS} ms stretches under
    1/${Math.round(1 / SILENCE)} of the loudest one's level) are cut, and the rest is written as a
    WAV file here and sent to this server only.</p>`;

// The recorder: each 128-sample block of the microphone, averaged over its channels, posted to
// the page (runs on the audio thread; loaded from a blob: URL, no file of its own).
const WORKLET = `
registerProcessor("seqlab-recorder", class extends AudioWorkletProcessor {
  process(inputs) {
    const channels = inputs[0];
    if (channels.length) {
      const mono = new Float32Array(channels[0].length);
      for (const c of channels) for (let i = 0; i < mono.length; i++) mono[i] += c[i] / channels.length;
      this.port.postMessage(mono, [mono.buffer]);
    }
    return true;
  }
});`;

// ------------------------------------------------------------------ recording
// Starts recording the microphone; resolves to stop(), which resolves to {samples, rate}.
async function startRecording() {
  if (!navigator.mediaDevices?.getUserMedia) {
    throw new Error("the browser gives the microphone only to https pages and localhost");
  }
  const stream = await navigator.mediaDevices.getUserMedia({
    audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false },
  });
  const ctx = new AudioContext();
  const release = () => { for (const t of stream.getTracks()) t.stop(); ctx.close(); };
  try {
    const url = URL.createObjectURL(new Blob([WORKLET], { type: "text/javascript" }));
    await ctx.audioWorklet.addModule(url).finally(() => URL.revokeObjectURL(url));
    const source = ctx.createMediaStreamSource(stream);
    const node = new AudioWorkletNode(ctx, "seqlab-recorder");
    const blocks = [];
    node.port.onmessage = (e) => blocks.push(e.data);
    source.connect(node);
    node.connect(ctx.destination);  // pulled by the graph; its output is silence
    await ctx.resume();
    return async () => {
      source.disconnect();
      node.disconnect();
      const rate = ctx.sampleRate;
      release();
      const samples = new Float32Array(blocks.reduce((n, b) => n + b.length, 0));
      let at = 0;
      for (const b of blocks) { samples.set(b, at); at += b.length; }
      return { samples, rate };
    };
  } catch (err) {
    release();
    throw err;
  }
}

// The samples without their quiet start and end (null if nothing was heard at all).
function trimSilence(samples, rate) {
  const size = Math.max(1, Math.round(WINDOW_SECONDS * rate));
  const rms = [];
  for (let s = 0; s < samples.length; s += size) {
    const end = Math.min(samples.length, s + size);
    let sum = 0;
    for (let i = s; i < end; i++) sum += samples[i] * samples[i];
    rms.push(Math.sqrt(sum / (end - s)));
  }
  const loudest = rms.reduce((a, b) => Math.max(a, b), 0);
  if (loudest < 1e-4) return null;
  const heard = (r) => r >= SILENCE * loudest;
  const first = rms.findIndex(heard), last = rms.findLastIndex(heard);
  const margin = Math.round(MARGIN_SECONDS * rate);
  return samples.slice(Math.max(0, first * size - margin), Math.min(samples.length, (last + 1) * size + margin));
}

// A mono 16-bit PCM WAV file: the RIFF header (44 bytes) and the samples, little-endian.
function wavFile(samples, rate) {
  const bytes = 2 * samples.length;
  const view = new DataView(new ArrayBuffer(44 + bytes));
  const text = (at, s) => { for (let i = 0; i < s.length; i++) view.setUint8(at + i, s.charCodeAt(i)); };
  text(0, "RIFF"); view.setUint32(4, 36 + bytes, true); text(8, "WAVE");
  text(12, "fmt "); view.setUint32(16, 16, true);
  view.setUint16(20, 1, true);             // PCM
  view.setUint16(22, 1, true);             // one channel
  view.setUint32(24, rate, true);          // samples per second
  view.setUint32(28, 2 * rate, true);      // bytes per second
  view.setUint16(32, 2, true);             // bytes per frame
  view.setUint16(34, 16, true);            // bits per sample
  text(36, "data"); view.setUint32(40, bytes, true);
  for (let i = 0; i < samples.length; i++) {
    const x = Math.max(-1, Math.min(1, samples[i]));
    view.setInt16(44 + 2 * i, Math.round(x * 32767), true);
  }
  return new Blob([view.buffer], { type: "audio/wav" });
}

function dataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

// An uploaded file's samples (its channels averaged), or null where the browser cannot decode it
// (the server then says what is wrong with it).
async function decode(file) {
  try {
    const buffer = await new OfflineAudioContext(1, 1, 44100).decodeAudioData(await file.arrayBuffer());
    const samples = new Float32Array(buffer.length);
    for (let c = 0; c < buffer.numberOfChannels; c++) {
      const channel = buffer.getChannelData(c);
      for (let i = 0; i < samples.length; i++) samples[i] += channel[i] / buffer.numberOfChannels;
    }
    return { samples, rate: buffer.sampleRate };
  } catch {
    return null;
  }
}

// -------------------------------------------------------------------- drawing
function viridis(v) {
  const x = Math.max(0, Math.min(1, v)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x)), f = x - i;
  const [a, b] = [VIRIDIS[i], VIRIDIS[i + 1]];
  return `rgb(${a.map((c, k) => Math.round(c + f * (b[k] - c))).join(",")})`;
}

// The samples' smallest and largest value in each pixel column, over `seconds` across.
function drawWave(canvas, samples, rate, seconds) {
  const ctx = canvas.getContext("2d");
  const H = canvas.height, mid = H / 2;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, H);
  ctx.fillStyle = "#d8dde6"; ctx.fillRect(0, mid, canvas.width, 1);
  ctx.fillStyle = "#2f6fde";
  const perPixel = (seconds * rate) / canvas.width;
  for (let x = 0; x < canvas.width; x++) {
    const start = Math.floor(x * perPixel), end = Math.min(samples.length, Math.floor((x + 1) * perPixel) + 1);
    if (start >= samples.length) break;
    let lo = 1, hi = -1;
    for (let i = start; i < end; i++) { lo = Math.min(lo, samples[i]); hi = Math.max(hi, samples[i]); }
    const top = mid - hi * mid, bottom = mid - lo * mid;
    ctx.fillRect(x, top, 1, Math.max(1, bottom - top));
  }
  canvas.dataset.drawn = samples.length;
}

// frames × mels, time across and low mel channels at the bottom, coloured by value.
function drawSpectrogram(canvas, features, hop, seconds) {
  const ctx = canvas.getContext("2d");
  const mels = features[0].length, cell = canvas.height / mels, step = (hop / seconds) * canvas.width;
  const values = features.flat();
  const lo = Math.min(...values), span = Math.max(...values) - lo || 1;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
  const x = (t) => Math.round(t * step), y = (m) => canvas.height - Math.round(m * cell);
  features.forEach((frame, t) => frame.forEach((v, m) => {
    ctx.fillStyle = viridis((v - lo) / span);
    ctx.fillRect(x(t), y(m + 1), Math.max(1, x(t + 1) - x(t)), y(m) - y(m + 1));
  }));
  canvas.dataset.drawn = features.length;
}

// Each frame's share of the attention as a bar, the largest at full height.
function drawAttention(canvas, attention, hop, seconds) {
  const ctx = canvas.getContext("2d");
  const step = (hop / seconds) * canvas.width, top = Math.max(...attention) || 1;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = "#e0672b";
  const x = (t) => Math.round(t * step);
  attention.forEach((a, t) => {
    const h = Math.round((a / top) * canvas.height);
    ctx.fillRect(x(t), canvas.height - h, Math.max(1, x(t + 1) - x(t) - (step > 3 ? 1 : 0)), h);
  });
  canvas.dataset.drawn = attention.length;
}

// -------------------------------------------------------------------------- panel
export function mount(section, model, page) {
  section.id = "panel-audio";
  section.innerHTML = FORM;
  const $ = (id) => section.querySelector("#" + id);
  const { el, output } = page;
  const calibrated = model.temperature && model.temperature !== 1;
  page.describe(`reads ${model.sample_rate} Hz` + (calibrated
    ? `; probabilities calibrated on its validation split (temperature ${model.temperature.toFixed(2)})`
    : ""));
  let playing = null;   // the player's object URL
  let stop = null;      // while recording: stops it
  let starting = false;

  function play(blob) {
    if (playing) URL.revokeObjectURL(playing);
    playing = URL.createObjectURL(blob);
    $("audio-player").src = playing;
    $("audio-player").hidden = false;
  }

  function figure(id, height, caption) {
    const fig = el("figure", { class: "audio-figure" });
    const canvas = el("canvas", { id, width: WIDTH, height });
    fig.append(canvas, el("figcaption", {}, caption));
    output.append(fig);
    return canvas;
  }

  // The answer: the label and the likeliest labels' bars, or "no speech detected" and why (the
  // model was not asked); beside it, what it should be read with (a rate below the model's).
  function show(r, sound) {
    const box = el("div", { class: "result" });
    const best = el("div", { class: "audio-best" });
    if (r.speech) {
      best.append(el("strong", { id: "audio-label" }, r.label), ` ${(100 * r.probability).toFixed(1)}%`);
    } else {
      best.append(el("strong", { id: "audio-label" }, "no speech detected"), " ",
        el("span", { id: "audio-reason", class: "muted" }, r.reason));
    }
    box.append(el("div", { class: "muted" }, `${sound.what}: ${r.seconds.toFixed(2)} s at ${r.sample_rate} Hz`), best);
    for (const w of r.warnings) box.append(el("p", { class: "note audio-warning" }, `warning: ${w}`));
    if (r.speech) {
      const probs = el("div", { class: "probs" });
      const ranked = Object.entries(r.probabilities).sort((a, b) => b[1] - a[1]);
      for (const [label, p] of ranked.slice(0, SHOWN_LABELS)) {
        const line = el("div");
        const bar = el("span", { class: "bar" });
        bar.style.width = `${Math.max(1, 120 * p)}px`;
        line.append(bar, `${label} ${(100 * p).toFixed(1)}%`);
        probs.append(line);
      }
      box.append(probs);
    }
    output.append(box);

    const frames = r.features ? r.features.length : 0;
    const seconds = Math.max(r.seconds, frames * r.hop_seconds) || 1;  // one time axis for all
    if (sound.samples) {
      const wave = figure("audio-wave", 90, `waveform (${sound.samples.length.toLocaleString()} samples)`);
      drawWave(wave, sound.samples, sound.rate, seconds);
    }
    if (r.features) {
      const mels = r.features[0].length;
      const spec = figure("audio-spectrogram", 4 * Math.max(mels, 16),
        `the log-mel spectrogram the model read: ${frames} frames ${1000 * r.hop_seconds} ms apart ` +
        `× ${mels} mel channels, low pitches at the bottom`);
      drawSpectrogram(spec, r.features, r.hop_seconds, seconds);
    }
    if (r.attention) {
      const strip = figure("audio-attention", 48,
        "the attention each frame received in the last layer (it sums to 1): where the model " +
        "looked, not why it decided");
      drawAttention(strip, r.attention, r.hop_seconds, seconds);
    }
    const axis = el("div", { class: "audio-axis muted" });
    for (const t of [0, seconds / 2, seconds]) axis.append(el("span", {}, `${t.toFixed(2)} s`));
    output.append(axis);
  }

  // sound: {data: a data: URL, samples and rate (null where undecoded), what: its name}
  async function classify(sound) {
    const body = {
      model: model.name,
      audio: sound.data,
      attention: model.attention.length > 0,
      features: true,
    };
    page.status(`classifying ${sound.what}…`);
    let data;
    try {
      data = await page.json(await page.api(model.route, body));
    } catch (err) {
      return page.status(err.message, true);
    }
    page.clearOutput();
    show(data.results[0], sound);
    page.status(`classified ${sound.what}`);
  }

  $("audio-file").onchange = async () => {
    const file = $("audio-file").files[0];
    if (!file) return;
    play(file);
    const decoded = await decode(file);
    classify({ data: await page.readFile($("audio-file"), "url"), what: file.name, ...decoded });
  };

  async function finish() {
    const button = $("record");
    const stopping = stop;
    stop = null;
    button.textContent = "Record";
    button.classList.remove("recording");
    let recorded;
    try {
      recorded = await stopping();
    } catch (err) {
      return page.status(`the recording failed: ${err.message}`, true);
    }
    if (!section.isConnected) return;  // another model was chosen meanwhile
    const samples = trimSilence(recorded.samples, recorded.rate);
    if (!samples) return page.status("nothing was heard: the recording is silent", true);
    const blob = wavFile(samples, recorded.rate);
    play(blob);
    const sound = { data: await dataUrl(blob), samples, rate: recorded.rate, what: "the recording" };
    section.dataset.recorded = `${samples.length} ${recorded.rate}`;
    classify(sound);
  }

  $("record").onclick = async () => {
    if (stop) return finish();
    if (starting) return;
    starting = true;
    page.status("asking for the microphone…");
    try {
      stop = await startRecording();
    } catch (err) {
      return page.status(`the microphone: ${err.message}`, true);
    } finally {
      starting = false;
    }
    const mine = stop;
    $("record").textContent = "Stop";
    $("record").classList.add("recording");
    page.status(`recording… (click Stop, or it stops after ${MAX_SECONDS} s)`);
    setTimeout(() => { if (stop === mine) finish(); }, 1000 * MAX_SECONDS);
  };
}
