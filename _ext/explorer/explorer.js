// The attention explorer of "Attention, by hand and by library", running in the page.
//
// A dependency-free ES module: it fetches the GloVe vectors shipped with the site
// (_static/explorer/glove-explorer.bin.gz, written at build time by _ext/explorer_data.py
// from attnlib.load_glove()), and computes, for the sentence typed by the reader, the same
// weights as attnlib (to float32 rounding):
//   dot     softmax(X X^T / (T sqrt(d_k)))            chapter 3, attnlib.attention_weights
//   cosine  C_ij = cos(x_i, x_j), no softmax, no T     chapter 2, attnlib.cosine_matrix
//   head h  softmax((X W_q,h^T)(X W_k,h^T)^T / (T sqrt(D)))   chapter 10's trained heads
// With the causal mask, query i sees the keys j <= i; a masked weight is 0.
// Nothing is requested from any other host.

const DATA_URL = new URL("glove-explorer.bin.gz", import.meta.url);
const MAGIC = "ATTNEXP1";
const MAX_WORDS = 40;

// attnlib.tokenize is Python's sentence.lower().split(): split at the characters for which
// str.isspace() is true (JavaScript's \s differs: it has U+FEFF, lacks U+001C-U+001F, U+0085).
const SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

export function tokenize(sentence) {
  return sentence.toLowerCase().split(SPACE).filter((word) => word !== "");
}

// ---- the data ----------------------------------------------------------------------------

// Read the data file: 8 magic bytes, a uint32 header length, a JSON header, then the
// count x dim integers v as three byte planes (24-bit two's complement); x = fround(v / 1e5).
export async function loadData(url = DATA_URL) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`could not load ${url.pathname}: HTTP ${response.status}`);
  let bytes = new Uint8Array(await response.arrayBuffer());
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
    // gzip (unless the server already decoded it, sending Content-Encoding: gzip)
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    bytes = new Uint8Array(await new Response(stream).arrayBuffer());
  }
  const view = new DataView(bytes.buffer);
  if (new TextDecoder().decode(bytes.subarray(0, 8)) !== MAGIC) {
    throw new Error(`${url.pathname} is not the explorer's data file`);
  }
  const length = view.getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + length)));
  const n = header.count * header.dim;
  const planes = 12 + length;
  const divisor = Math.round(1 / header.step);
  const vectors = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const v = bytes[planes + i] | (bytes[planes + n + i] << 8) | (bytes[planes + 2 * n + i] << 16);
    vectors[i] = Math.fround(((v << 8) >> 8) / divisor); // sign-extend the 24 bits
  }
  const index = new Map(header.words.map((word, i) => [word, i]));
  return { ...header, vectors, index };
}

// ---- the computation (float64; attnlib's float32 differs by about 1e-6) --------------------

const dot = (a, b) => a.reduce((sum, value, k) => sum + value * b[k], 0);

// Rows times the transpose of a (out, in) weight block: X W^T, as nn.Linear without bias.
const project = (rows, weight) => rows.map((x) => weight.map((w) => dot(x, w)));

// Row-wise softmax of scores * scale; masked entries (j > i when causal) get weight 0.
function softmax(scores, scale, causal) {
  return scores.map((row, i) => {
    const seen = row.map((s, j) => (causal && j > i ? -Infinity : s * scale));
    const top = Math.max(...seen);
    const exp = seen.map((s) => (s === -Infinity ? 0 : Math.exp(s - top)));
    const total = exp.reduce((a, b) => a + b, 0);
    return exp.map((e) => e / total);
  });
}

// The cosine of every pair of rows, as attnlib.cosine_matrix: unit rows (a zero row stays
// zero), dot products clamped to [-1, 1]. Masked entries are 0 (there is no softmax).
function cosines(rows, causal) {
  const unit = rows.map((x) => {
    const norm = Math.hypot(...x);
    return norm > 0 ? x.map((v) => v / norm) : x;
  });
  return unit.map((u, i) =>
    unit.map((v, j) => (causal && j > i ? 0 : Math.min(1, Math.max(-1, dot(u, v))))),
  );
}

// The (L, L) weights of the rows X (one Float64Array per word) in a mode.
export function attentionWeights(data, X, mode, temperature, causal) {
  if (mode === "cosine") return cosines(X, causal);
  if (mode === "dot") {
    const scores = X.map((x) => X.map((y) => dot(x, y)));
    return softmax(scores, 1 / (temperature * Math.sqrt(data.dim)), causal);
  }
  const head = Number(/^head(\d+)$/.exec(mode)?.[1]);
  const { embed_dim: E, num_heads: H } = data.heads;
  if (!(head >= 0 && head < H)) throw new Error(`unknown mode ${mode}`);
  const D = E / H; // rows head*D ... (head+1)*D - 1 of q_proj.weight are head's W_q^T
  const Q = project(X, data.heads.q_proj_weight.slice(head * D, (head + 1) * D));
  const K = project(X, data.heads.k_proj_weight.slice(head * D, (head + 1) * D));
  const scores = Q.map((q) => K.map((k) => dot(q, k)));
  return softmax(scores, 1 / (temperature * Math.sqrt(D)), causal);
}

// ---- the page ----------------------------------------------------------------------------

// Heatmap colour of a cell: blue for positive values, red for negative (cosines only), as
// transparent as the value is small, so it reads on light and dark backgrounds.
function paint(cell, value) {
  const alpha = Math.min(1, Math.abs(value));
  cell.style.backgroundColor =
    value >= 0 ? `rgba(31, 90, 170, ${alpha})` : `rgba(200, 60, 40, ${alpha})`;
  cell.style.color = alpha > 0.5 ? "#fff" : "";
}

function show(table, words, weights) {
  const body = document.createElement("tbody");
  words.forEach((query, i) => {
    const row = body.insertRow(); // one tr per query word: th, then one td per key
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = query;
    row.append(th);
    words.forEach((key, j) => {
      const cell = row.insertCell();
      const value = weights[i][j];
      cell.dataset.value = String(value); // full precision
      cell.dataset.key = key; // the first row shows the keys above the table (CSS)
      cell.textContent = value.toFixed(2);
      cell.title = `${query} \u2192 ${key}: ${value.toFixed(4)}`;
      paint(cell, value);
    });
  });
  table.replaceChildren(body);
}

function start(root, data) {
  const $ = (name) => root.querySelector(`#explorer-${name}`);
  const [sentence, mode, temperature, causal] = ["sentence", "mode", "temperature", "causal"].map($);
  const [table, message, readout] = ["weights", "message", "temperature-value"].map($);

  function update() {
    const T = Number(temperature.value);
    readout.textContent = mode.value === "cosine" ? `${T.toFixed(2)} (not used by cosines)` : T.toFixed(2);
    const words = tokenize(sentence.value);
    const unknown = [...new Set(words.filter((word) => !data.index.has(word)))];
    let problem = "";
    if (words.length === 0) problem = "Type a sentence: it has no word yet.";
    else if (words.length > MAX_WORDS) problem = `At most ${MAX_WORDS} words; got ${words.length}.`;
    else if (unknown.length) {
      problem =
        `Unknown ${unknown.length > 1 ? "words" : "word"}: ` +
        unknown.map((word) => `'${word}'`).join(", ") +
        `, not among the ${data.count.toLocaleString("en")} words of this page (GloVe is ` +
        `lower case; punctuation is a word of its own: write "ship ." not "ship.").`;
    }
    message.textContent = problem;
    message.hidden = problem === "";
    if (problem) {
      table.replaceChildren();
      return;
    }
    const X = words.map((word) => {
      const row = data.index.get(word) * data.dim;
      return data.vectors.subarray(row, row + data.dim);
    });
    show(table, words, attentionWeights(data, X, mode.value, T, causal.checked));
    Object.assign(table.dataset, { sentence: sentence.value, mode: mode.value });
  }

  sentence.addEventListener("input", update);
  sentence.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      update();
    }
  });
  for (const control of [mode, temperature, causal]) {
    control.addEventListener("input", update);
    control.addEventListener("change", update);
  }
  for (const control of [sentence, mode, temperature, causal]) control.disabled = false;
  update();
  root.dataset.ready = "true";
}

const root = document.getElementById("explorer-app");
if (root) {
  const message = root.querySelector("#explorer-message");
  loadData()
    .then((data) => start(root, data))
    .catch((error) => {
      message.textContent = `The explorer could not start: ${error.message}`;
      message.hidden = false;
      root.dataset.ready = "error";
      throw error;
    });
}
