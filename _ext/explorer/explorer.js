// The attention explorer of "Attention, by hand and by library", running in the page.
//
// A dependency-free classic script (no ES module, no fetch), so that it works from a web server
// and opened as a file (file://). Its data (glove, lm, induction, minilm, gemma: what and in which
// format is in _ext/explorer_data.py) are scripts next to it, KEY-explorer.js, each storing one
// base64 string in window.ATTN_EXPLORER_DATA[KEY]; the page loads glove's, a mode its own when
// first chosen. The weights of MiniLM (an encoder) and Gemma 3 270M (a decoder) on the stored
// sentences (minilm, gemma) are only shown; for the typed text, the other modes compute
// attnlib's numbers (in float64 from the same float32 weights; masked weights are 0):
//   dot        softmax(X X^T / (T sqrt(d_k)))            attnlib.attention_weights
//   cosine     C_ij = cos(x_i, x_j), no softmax, no T     attnlib.cosine_matrix
//   head h     softmax((X W_q,h^T)(X W_k,h^T)^T / (T sqrt(D)))   the trained heads
//   lm, induction   attnlib.LanguageModel's forward pass and generate (seeded sampling)
// Nothing is requested from another host. window.AttentionExplorer is for the site's tests.

(function () {
  "use strict";

  const SCRIPT_URL = document.currentScript ? document.currentScript.src : document.baseURI;
  const GLOBAL = "ATTN_EXPLORER_DATA";
  const MAX_WORDS = 40; // GloVe modes
  const MAX_TOKENS = 64; // model modes
  const familyOf = (mode) => (["dot", "cosine", "head0", "head1"].includes(mode) ? "glove" : mode);
  const isModelFamily = (family) => family === "lm" || family === "induction";
  const isStoredFamily = (family) => family === "minilm" || family === "gemma"; // weights built with the book
  const LOADING = {
    lm: "the Odyssey language model",
    induction: "the induction model",
    minilm: "MiniLM's attention weights",
    gemma: "Gemma 3 270M's attention weights",
  };
  const DEFAULT_TEXT = {
    glove: "I must go back to my ship and to my crew",
    lm: "I must go back to my ship and to my",
    induction: "37 43 12 8 63 9 11 5 37 43 12 8",
    minilm: "", // MiniLM shows stored sentences, picked in #explorer-encoder-sentence
    gemma: "", // and so does Gemma
  };
  const range = (n, from = 0) => Array.from({ length: n }, (_, i) => i + from);

  // attnlib.tokenize is Python's sentence.lower().split(): split at the characters for which
  // str.isspace() is true (JavaScript's \s differs: it has U+FEFF, lacks U+001C-U+001F, U+0085).
  const SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;
  const tokenize = (sentence) => sentence.toLowerCase().split(SPACE).filter((word) => word !== "");

  // attnlib.corpus.word_tokens, the Odyssey model's tokenizer: lower case, curly quotes
  // straightened, words and numbers whole, "n't" and "'s" split off, every other character a
  // token. "<unk>" (what the model writes for a word it does not know) stays one token.
  const QUOTES = { "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"' };
  const WORD_TOKEN = /<unk>|[a-z]+(?=n't\b)|n't\b|'s\b|[a-z0-9]+|[^\sa-z0-9]/gu; // u: an emoji is one token

  const wordTokens = (text) => text.toLowerCase().replace(/[\u2018\u2019\u201c\u201d]/g, (q) => QUOTES[q]).match(WORD_TOKEN) || [];

  // attnlib.corpus.CorpusVocabulary.decode: words joined by spaces, none before punctuation.
  const joinWords = (words) => words.join(" ").replace(/ ([,.;:!?)]|n't|'s)/g, "$1");

  // "Unknown words: 'a', 'b'" ("word" for one)
  const unknownText = (items, noun) => `Unknown ${noun}${items.length > 1 ? "s" : ""}: ${items.map((w) => `'${w}'`).join(", ")}`;

  // ---- the data ----------------------------------------------------------------------------

  const loading = {};

  // Load a data script once (a <script> tag: allowed on file://, unlike fetch), then decode it.
  function load(key) {
    const file = `${key}-explorer.js`;
    if (!loading[key]) {
      loading[key] = new Promise((resolve, reject) => {
        if (typeof (window[GLOBAL] || {})[key] === "string") return resolve();
        // The page may already load it (an async script tag): wait for that one.
        const tag = [...document.scripts].find((s) => s.src && new URL(s.src).pathname.endsWith(`/${file}`));
        const script = tag || document.createElement("script");
        script.addEventListener("load", () => resolve());
        script.addEventListener("error", () => reject(new Error(`could not load ${file}`)));
        if (!tag) document.head.append(Object.assign(script, { src: new URL(file, SCRIPT_URL).href }));
      })
        .then(() => gunzip(window[GLOBAL][key]))
        .then((bytes) => {
          delete window[GLOBAL][key]; // the decoded data replaces the string
          return (key === "glove" ? readGlove : isStoredFamily(key) ? readWeights : readModel)(bytes, key);
        });
      loading[key].catch(() => delete loading[key]); // a later try loads again
    }
    return loading[key];
  }

  // base64 text -> gzipped bytes -> the file's bytes
  async function gunzip(text) {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const stream = new Response(bytes).body.pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  // Every file: 8 magic bytes, a uint32 header length, a JSON header; returns it, and where next.
  function header(bytes, magic) {
    if (new TextDecoder().decode(bytes.subarray(0, 8)) !== magic) throw new Error("not the explorer's data");
    const length = new DataView(bytes.buffer, bytes.byteOffset).getUint32(8, true);
    return [JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + length))), 12 + length];
  }

  // The unsigned integers v from `start` on, nbytes byte planes (low bytes first), read as f(v).
  function fromPlanes(bytes, start, nbytes, f) {
    const n = (bytes.length - start) / nbytes;
    const values = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      let v = 0;
      for (let k = 0; k < nbytes; k++) v |= bytes[start + k * n + i] << (8 * k);
      values[i] = f(v);
    }
    return values;
  }

  // GloVe: the count x dim integers v, 24-bit two's complement; x = fround(v / 1e5).
  function readGlove(bytes) {
    const [head, start] = header(bytes, "ATTNEXP1");
    const divisor = Math.round(1 / head.step);
    const vectors = fromPlanes(bytes, start, 3, (v) => Math.fround(((v << 8) >> 8) / divisor)); // sign-extend 24 bits
    return { ...head, kind: "glove", vectors, index: new Map(head.words.map((word, i) => [word, i])) };
  }

  // A model: every tensor as little-endian float32 (the header is padded to 4 bytes).
  function readModel(bytes, key) {
    const [head, start] = header(bytes, "ATTNMOD1");
    const values = new Float32Array(bytes.buffer.slice(bytes.byteOffset + start, bytes.byteOffset + bytes.length));
    const tensors = {};
    for (const [name, shape, offset] of head.tensors) {
      tensors[name] = values.subarray(offset, offset + shape.reduce((a, b) => a * b, 1));
    }
    if (head.config.tie_weights) tensors["lm_head.weight"] = tensors["token_embedding.weight"];
    return { kind: key, config: head.config, words: head.words, index: new Map(head.words.map((w, i) => [w, i])), tensors };
  }

  // MiniLM's or Gemma's weights: v = round(w / step), 0 ... 1000, two byte planes; w = v / 1000.
  function readWeights(bytes, key) {
    const [head, start] = header(bytes, "ATTNATT1");
    const divisor = Math.round(1 / head.step);
    const values = fromPlanes(bytes, start, 2, (v) => v / divisor);
    const { layers, heads } = head;
    // weights[layer][head] is the (L, L) map, an array of L rows (Float64Array views)
    const sentences = head.sentences.map((s) => {
      const L = s.tokens.length;
      const at = (l, h, i) => s.offset + ((l * heads + h) * L + i) * L;
      const rows = (l, h) => range(L).map((i) => values.subarray(at(l, h, i), at(l, h, i) + L));
      return { ...s, weights: range(layers).map((l) => range(heads).map((h) => rows(l, h))) };
    });
    return { kind: key, model: head.model, layers, heads, step: head.step, sentences };
  }

  // The mean of a layer's heads, (L, L): row i of every head averaged.
  function meanOfHeads(maps) {
    return maps[0].map((row, i) => row.map((_, j) => maps.reduce((sum, A) => sum + A[i][j], 0) / maps.length));
  }

  // ---- the GloVe modes (float64; attnlib's float32 differs by about 1e-6) ---------------------

  const dot = (a, b) => {
    let sum = 0;
    for (let k = 0; k < a.length; k++) sum += a[k] * b[k];
    return sum;
  };

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
    return unit.map((u, i) => unit.map((v, j) => (causal && j > i ? 0 : Math.min(1, Math.max(-1, dot(u, v))))));
  }

  // The (L, L) weights of the rows X (one Float64Array per word) in a GloVe mode.
  function attentionWeights(data, X, mode, temperature, causal) {
    if (mode === "cosine") return cosines(X, causal);
    let [Q, K, d] = [X, X, data.dim];
    if (mode !== "dot") {
      const head = /^head\d+$/.test(mode) ? Number(mode.slice(4)) : NaN;
      const { embed_dim: E, num_heads: H } = data.heads;
      if (!(head >= 0 && head < H)) throw new Error(`unknown mode ${mode}`);
      d = E / H; // rows head*d ... (head+1)*d - 1 of q_proj.weight (out, in) are the head's
      const project = (weight) => X.map((x) => weight.map((w) => dot(x, w)));
      [Q, K] = [data.heads.q_proj_weight, data.heads.k_proj_weight].map((W) => project(W.slice(head * d, (head + 1) * d)));
    }
    return softmax(Q.map((q) => K.map((k) => dot(q, k))), 1 / (temperature * Math.sqrt(d)), causal);
  }

  // ---- the models: attnlib.LanguageModel's forward pass, in float64 ---------------------------

  // erf to double precision: its Taylor series below 2.5, else erfc's continued fraction.
  function erf(x) {
    const a = Math.abs(x);
    if (a >= 2.5) {
      let f = a;
      for (let n = 60; n >= 1; n--) f = a + n / 2 / f;
      return Math.sign(x) * (1 - Math.exp(-a * a) / (Math.sqrt(Math.PI) * f));
    }
    let term = a, sum = a;
    for (let n = 1; n < 80; n++) {
      term *= (-a * a) / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }

  const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2)); // nn.GELU(), exact

  // y = W x + b for an (out, in) row-major W (nn.Linear).
  function linear(x, weight, bias) {
    const n = x.length;
    const y = new Float64Array(weight.length / n);
    for (let o = 0; o < y.length; o++) {
      let sum = bias ? bias[o] : 0;
      for (let i = 0; i < n; i++) sum += weight[o * n + i] * x[i];
      y[o] = sum;
    }
    return y;
  }

  function layerNorm(x, weight, bias, eps) {
    const n = x.length;
    const mean = x.reduce((a, b) => a + b, 0) / n;
    const variance = x.reduce((a, b) => a + (b - mean) ** 2, 0) / n;
    const inv = 1 / Math.sqrt(variance + eps);
    return x.map((v, i) => (v - mean) * inv * weight[i] + (bias ? bias[i] : 0));
  }

  // RoPE (attnlib.positions.rotary_embedding): pairs (2i, 2i+1) of the row at position p turn
  // by p * base^(-2i/D).
  function rotate(x, p, base) {
    const D = x.length;
    const y = new Float64Array(D);
    for (let i = 0; i < D / 2; i++) {
      const angle = p * Math.pow(base, (-2 * i) / D);
      const c = Math.cos(angle), s = Math.sin(angle);
      y[2 * i] = x[2 * i] * c - x[2 * i + 1] * s;
      y[2 * i + 1] = x[2 * i] * s + x[2 * i + 1] * c;
    }
    return y;
  }

  // attnlib.LanguageModel(ids, need_weights=True) in eval mode: weights[layer][head] (L rows of
  // L, 0 above the diagonal), the next token's logits (every position's with allLogits).
  function forward(model, ids, allLogits = false) {
    const c = model.config, t = model.tensors;
    const E = c.embed_dim, H = c.num_heads, D = E / H, L = ids.length, eps = c.norm_eps;
    let x = ids.map((id, p) => {
      const row = Float64Array.from(t["token_embedding.weight"].subarray(id * E, (id + 1) * E));
      if (c.positions === "learned") {
        for (let i = 0; i < E; i++) row[i] += t["position_embedding.weight"][p * E + i];
      }
      return row;
    });
    const residual = (rows, f) => rows.map((row, i) => f(row, i).map((value, d) => row[d] + value));
    const weights = [];
    for (let layer = 0; layer < c.num_layers; layer++) {
      const w = (name) => t[`blocks.${layer}.${name}`];
      const h = x.map((row) => layerNorm(row, w("ln1.weight"), w("ln1.bias"), eps));
      const project = (n) => h.map((row) => linear(row, w(`attn.${n}_proj.weight`), w(`attn.${n}_proj.bias`)));
      const [q, k, v] = ["q", "k", "v"].map(project);
      const heads = x.map(() => new Float64Array(E)); // the heads' outputs, concatenated
      const layerWeights = range(H).map((head) => {
        const part = (rows) => rows.map((row) => row.subarray(head * D, (head + 1) * D));
        const turn = (rows) => (c.positions === "rope" ? rows.map((row, p) => rotate(row, p, c.rope_base)) : rows);
        const [qh, kh, vh] = [turn(part(q)), turn(part(k)), part(v)];
        const scores = qh.map((query, i) => kh.map((key, j) => (j <= i ? dot(query, key) / Math.sqrt(D) : 0)));
        const rows = softmax(scores, 1, true); // causal: 0 above the diagonal
        rows.forEach((row, i) => {
          for (let j = 0; j <= i; j++) for (let d = 0; d < D; d++) heads[i][head * D + d] += row[j] * vh[j][d];
        });
        return rows;
      });
      weights.push(layerWeights);
      x = residual(x, (_, i) => linear(heads[i], w("attn.out_proj.weight"), w("attn.out_proj.bias")));
      if (w("mlp.0.weight")) {
        x = residual(x, (row) => {
          const a = linear(layerNorm(row, w("ln2.weight"), w("ln2.bias"), eps), w("mlp.0.weight"), w("mlp.0.bias"));
          return linear(a.map(gelu), w("mlp.2.weight"), w("mlp.2.bias"));
        });
      }
    }
    const read = (row) => linear(layerNorm(row, t["ln_f.weight"], t["ln_f.bias"], eps), t["lm_head.weight"], null);
    return { weights, logits: allLogits ? x.map(read) : [read(x[L - 1])] };
  }

  const probabilities = (logits) => softmax([Array.from(logits)], 1, false)[0];

  // A small seeded generator (mulberry32): the same seed, the same numbers in [0, 1).
  function mulberry32(seed) {
    let a = seed >>> 0;
    return function () {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  // The next token from the last logits, as LanguageModel.generate: the largest logit at
  // temperature 0 (the first one on a tie), else a draw from softmax(logits / T), among the
  // top_k largest logits only when topK > 0.
  function nextToken(logits, temperature, topK, random) {
    if (temperature === 0) return logits.indexOf(Math.max(...logits));
    let scaled = Array.from(logits, (l) => l / temperature);
    if (topK > 0 && topK < scaled.length) {
      const kth = [...scaled].sort((a, b) => b - a)[topK - 1];
      scaled = scaled.map((l) => (l < kth ? -Infinity : l));
    }
    const p = probabilities(scaled);
    let u = random(), i = 0;
    while (i < p.length - 1 && (u -= p[i]) >= 0) i++; // the first i where u < p[0] + ... + p[i]
    while (p[i] === 0) i--; // rounding left u past the last kept token
    return i;
  }

  // The ids after each new token, one step at a time (at most MAX_TOKENS ids in all).
  function* generateSteps(model, ids, n, temperature, topK, seed) {
    const random = mulberry32(seed);
    const out = ids.slice();
    for (let step = 0; step < n && out.length < MAX_TOKENS; step++) {
      out.push(nextToken(forward(model, out).logits[0], temperature, topK, random));
      yield out;
    }
  }

  // ---- the page ----------------------------------------------------------------------------

  // A new element with these properties (dataset and style too) and children.
  function el(tag, { dataset = {}, style = {}, ...props } = {}, ...children) {
    const node = Object.assign(document.createElement(tag), props);
    Object.assign(node.dataset, dataset);
    Object.assign(node.style, style);
    node.append(...children);
    return node;
  }

  // Heatmap colour: blue for positive values, red for negative (cosines only), as transparent
  // as the value is small; lighter colours in the theme's dark mode (a near-black background).
  function colourOf(value) {
    const alpha = Math.min(1, Math.abs(value));
    const dark = document.documentElement.dataset.theme === "dark";
    const [blue, red] = dark ? [[60, 125, 220], [225, 85, 60]] : [[31, 90, 170], [200, 60, 40]];
    const rgb = value >= 0 ? blue : red;
    return { rgb, alpha, dark, css: `rgba(${rgb.join(", ")}, ${alpha})` };
  }

  // WCAG's relative luminance of an sRGB colour (0-255 channels)
  function luminance(rgb) {
    const [r, g, b] = rgb.map((c) => {
      const v = c / 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  }

  // The cell's text: white or black, whichever contrasts more with the cell's colour as
  // drawn over the page (white on a mid-blue cell was 2.56:1).
  function cellStyle(value) {
    const { rgb, alpha, dark, css } = colourOf(value);
    const page = dark ? [18, 18, 18] : [255, 255, 255];
    const L = luminance(rgb.map((c, i) => page[i] * (1 - alpha) + c * alpha));
    const onWhite = 1.05 / (L + 0.05), onBlack = (L + 0.05) / 0.05; // at worst 4.58:1
    return { backgroundColor: css, color: onWhite > onBlack ? "#fff" : "#000" };
  }

  // The table: one row per query (a th, then one td per key: data-value at full precision,
  // data-key shown above the first row by the CSS), digits decimals in the tooltip.
  function show(table, words, weights, digits = 4) {
    const rows = words.map((query, i) => {
      const cells = words.map((key, j) => {
        const value = weights[i][j];
        const title = `${query} \u2192 ${key}: ${value.toFixed(digits)}`;
        return el("td", { dataset: { value: String(value), key }, textContent: value.toFixed(2), title, style: cellStyle(value) });
      });
      return el("tr", {}, el("th", { scope: "row", textContent: query }), ...cells);
    });
    table.replaceChildren(el("tbody", {}, ...rows));
  }

  // Every head of a layer as a small heatmap (a canvas in a button: a click picks that head).
  function showThumbs(box, maps, selected, pick) {
    const L = maps[0].length;
    const cell = Math.max(2, Math.floor(72 / L));
    const size = cell * L;
    const ratio = window.devicePixelRatio || 1;
    const thumbs = maps.map((A, h) => {
      const side = Math.round(size * ratio);
      const canvas = el("canvas", { width: side, height: side, style: { width: `${size}px`, height: `${size}px` } });
      canvas.setAttribute("aria-hidden", "true");
      const context = canvas.getContext("2d");
      context.scale(ratio, ratio);
      A.forEach((row, i) =>
        row.forEach((value, j) => {
          context.fillStyle = colourOf(value).css;
          context.fillRect(j * cell, i * cell, cell, cell);
        }),
      );
      const props = { type: "button", className: "explorer-thumb", title: `Show head ${h + 1}`, dataset: { head: String(h + 1) } };
      const button = el("button", props, canvas, el("span", { textContent: `head ${h + 1}` }));
      button.setAttribute("aria-pressed", String(h + 1 === selected));
      button.addEventListener("click", () => pick(h + 1));
      return button;
    });
    box.replaceChildren(...thumbs);
  }

  // The ten most likely next tokens as a bar list: one li per word, data-word, data-prob.
  function showNext(list, words, probs) {
    const order = probs.map((p, i) => i).sort((a, b) => probs[b] - probs[a] || a - b).slice(0, 10);
    const items = order.map((i) => {
      const percent = `${(100 * probs[i]).toFixed(1)}%`;
      const word = el("span", { className: "explorer-next-word", textContent: words[i] });
      const bar = el("span", { className: "explorer-next-bar", style: { width: percent } });
      const prob = el("span", { className: "explorer-next-prob", textContent: percent });
      const data = { word: words[i], prob: String(probs[i]) };
      return el("li", { dataset: data }, word, el("span", { className: "explorer-next-track" }, bar), prob);
    });
    list.replaceChildren(...items);
  }

  // The model's tokens for a text: {ids, labels, unknown, problem}.
  function modelTokens(model, text) {
    if (model.kind === "induction") {
      const parts = text.split(/[\s,]+/).filter((s) => s !== "");
      const bos = model.config.bos;
      const bad = parts.filter((s) => !(/^\d+$/.test(s) && Number(s) < bos) && s.toLowerCase() !== "bos");
      const help = `Type numbers from 0 to ${bos - 1}, separated by spaces.`;
      if (bad.length) return { problem: `${unknownText([...new Set(bad)], "token")}. ${help}` };
      const ids = parts.map((s) => (s.toLowerCase() === "bos" ? bos : Number(s)));
      if (ids[0] !== bos) ids.unshift(bos); // every sequence starts with BOS, as in training
      return { ids, labels: ids.map((id) => model.words[id]), unknown: [] };
    }
    const words = wordTokens(text);
    if (words.length === 0) return { problem: "Type a text: it has no word yet." };
    const ids = words.map((w) => (model.index.has(w) ? model.index.get(w) : 0));
    const unknown = [...new Set(words.filter((w) => !model.index.has(w) && w !== model.config.unknown))];
    return { ids, labels: words, unknown };
  }

  function start(root, glove) {
    const $ = (name) => root.querySelector(`#explorer-${name}`);
    const [sentence, mode, temperature, causal, readout] = ["sentence", "mode", "temperature", "causal", "temperature-value"].map($);
    const [table, message, caption, next] = ["weights", "message", "caption", "next"].map($);
    const [layer, head, topK, seed, count, generateButton, randomButton] = ["layer", "head", "topk", "seed", "count", "generate", "random"].map($);
    const [encoderSentence, thumbs] = ["encoder-sentence", "heads"].map($);
    const models = { glove };
    const texts = { ...DEFAULT_TEXT };
    // each family's temperature and causal mask: its defaults when it is first shown (the
    // address's for the family the page opens in), then what the reader left it with
    const settings = {};
    const lastPass = { key: null, out: null }; // the model's last forward pass and its input
    const full = `The text has reached the model's context of ${MAX_TOKENS} tokens.`;

    const params = new URLSearchParams(window.location.search);
    if ([...mode.options].some((o) => o.value === params.get("mode"))) mode.value = params.get("mode");
    let family = familyOf(mode.value);
    if (params.has("sentence")) texts[family] = params.get("sentence");
    if (params.has("T") && Number(params.get("T")) > 0) temperature.value = params.get("T");
    if (params.has("causal")) causal.checked = params.get("causal") !== "0";
    // ?layer=&head= pick the heatmap of a model mode once, when the page opens
    const initial = { layer: params.get("layer"), head: params.get("head") };
    // ?mode=minilm&sentence=... (or gemma) picks that stored sentence (its text, or its number from 1)
    let initialSentence = isStoredFamily(family) ? params.get("sentence") : null;

    const setMessage = (text) => Object.assign(message, { textContent: text, hidden: text === "" });

    // A select's options (values, label(value)); it keeps its value if it is still one.
    function options(select, values, label) {
      const keep = select.value;
      select.replaceChildren(...values.map((value) => el("option", { value: String(value), textContent: label(value) })));
      if (values.map(String).includes(keep)) select.value = keep;
    }

    function pickInitial() {
      for (const [select, key] of [[layer, "layer"], [head, "head"]]) {
        if ([...select.options].some((o) => o.value === initial[key])) select.value = initial[key];
        initial[key] = null;
      }
    }

    function updateGlove() {
      const T = Number(temperature.value);
      readout.textContent = mode.value === "cosine" ? `${T.toFixed(2)} (not used by cosines)` : T.toFixed(2);
      const words = tokenize(sentence.value);
      const unknown = [...new Set(words.filter((word) => !glove.index.has(word)))];
      let problem = "";
      if (words.length === 0) problem = "Type a sentence: it has no word yet.";
      else if (words.length > MAX_WORDS) problem = `At most ${MAX_WORDS} words; got ${words.length}.`;
      else if (unknown.length) {
        problem =
          `${unknownText(unknown, "word")}, not among the ${glove.count.toLocaleString("en")} words of this page (GloVe ` +
          `is lower case; punctuation is a word of its own: write "ship ." not "ship.").`;
      }
      setMessage(problem);
      caption.textContent = "";
      if (problem) {
        // keep the last map, faded, while the reader is between two words ("shi" on the
        // way to "ship"): blanking it flickered on a quarter of the keystrokes
        if (table.rows.length) table.dataset.stale = "true";
        return;
      }
      delete table.dataset.stale;
      const X = words.map((word) => {
        const row = glove.index.get(word) * glove.dim;
        return glove.vectors.subarray(row, row + glove.dim);
      });
      show(table, words, attentionWeights(glove, X, mode.value, T, causal.checked));
    }

    // MiniLM, Gemma: the stored weights of the chosen sentence, layer (MiniLM 1-6, Gemma 1-18)
    // and head (1-12, 1-4, or the mean of the layer's heads), and every head of the layer as a
    // small map. Gemma's layers are local (a window of 512 tokens) or global (model.windows).
    function updateEncoder(data) {
      options(encoderSentence, range(data.sentences.length), (i) => data.sentences[i].text);
      if (initialSentence !== null) {
        const wanted = initialSentence.trim().toLowerCase();
        const found = data.sentences.findIndex((s, i) => s.text.toLowerCase() === wanted || String(i + 1) === wanted);
        if (found >= 0) encoderSentence.value = String(found);
        initialSentence = null;
      }
      const windows = data.model.windows; // Gemma: a window (local) or null (global) per layer
      const kind = (l) => (!windows ? "" : windows[l - 1] === null ? "global" : "local");
      options(layer, range(data.layers, 1), (l) => (windows ? `layer ${l} (${kind(l)})` : `layer ${l}`));
      options(head, [...range(data.heads, 1), "mean"], (h) => (h === "mean" ? `mean of the ${data.heads} heads` : `head ${h}`));
      pickInitial();
      setMessage("");
      const s = data.sentences[Number(encoderSentence.value)];
      const l = Number(layer.value);
      const maps = s.weights[l - 1];
      const h = head.value === "mean" ? "mean" : Number(head.value);
      const which = h === "mean" ? `the mean of its ${data.heads} heads` : `head ${h}`;
      const scope = !windows
        ? ""
        : windows[l - 1] === null
          ? ", a global layer: every token sees all the tokens before it"
          : `, a local layer: every token sees at most the ${windows[l - 1]} tokens up to it`;
      const causal = data.model.causal ? "; causal: 0 above the diagonal" : "";
      caption.textContent =
        `${data.model.name}: layer ${l}, ${which}${scope} (rows: each token; columns: the tokens ` +
        `it attends to${causal}; computed when the book was built, rounded to 3 decimals).`;
      show(table, s.tokens, h === "mean" ? meanOfHeads(maps) : maps[h - 1], 3);
      showThumbs(thumbs, maps, h, (picked) => {
        head.value = String(picked);
        update();
      });
      root.dataset.tokens = JSON.stringify(s.ids);
    }

    function updateModel(model) {
      const T = Number(temperature.value);
      readout.textContent = T === 0 ? "0.00 (greedy)" : T.toFixed(2);
      const c = model.config;
      options(layer, range(c.num_layers), (l) => `layer ${l}`);
      options(head, range(c.num_heads), (h) => `head ${h}`);
      pickInitial();
      const tokens = modelTokens(model, sentence.value);
      const long = !tokens.problem && tokens.ids.length > MAX_TOKENS;
      const problem = tokens.problem || (long ? `At most ${MAX_TOKENS} tokens (the model's context); got ${tokens.ids.length}.` : "");
      if (problem) {
        [table, next, caption].forEach((e) => e.replaceChildren());
        return setMessage(problem);
      }
      const among = `, not among the ${c.vocab_size.toLocaleString("en")} words of the model: read as ${c.unknown}.`;
      setMessage(tokens.unknown.length ? unknownText(tokens.unknown, "word") + among : "");
      const key = `${family} ${tokens.ids.join(",")}`; // a new head or layer: no new pass
      if (lastPass.key !== key) Object.assign(lastPass, { key, out: forward(model, tokens.ids) });
      const { weights, logits } = lastPass.out;
      const l = Number(layer.value), h = Number(head.value);
      caption.textContent = `${c.name}: layer ${l}, head ${h} (rows: each token; columns: the tokens it attends to).`;
      show(table, tokens.labels, weights[l][h]);
      showNext(next, model.words, probabilities(logits[0]));
      root.dataset.tokens = JSON.stringify(tokens.ids);
    }

    function update() {
      const wanted = familyOf(mode.value);
      if (wanted !== family) {
        texts[family] = sentence.value;
        settings[family] = { T: temperature.value, causal: causal.checked };
        sentence.value = texts[wanted];
        family = wanted;
        const own = settings[family] || { T: "1", causal: isModelFamily(family) };
        temperature.min = isModelFamily(family) ? "0" : "0.1"; // before the value: a range clamps
        temperature.value = own.T;
        causal.checked = own.causal;
      }
      const isModel = isModelFamily(family);
      root.querySelectorAll("[data-for]").forEach((e) => (e.hidden = !e.dataset.for.split(" ").includes(family)));
      temperature.min = isModel ? "0" : "0.1";
      causal.disabled = isModel; // (hidden outside the GloVe modes)
      if (isModel) causal.checked = true;
      const draws = { glove: updateGlove, lm: updateModel, induction: updateModel };
      const draw = isStoredFamily(family) ? updateEncoder : draws[family];
      if (models[family]) return draw(models[family]);
      [table, next, thumbs, caption].forEach((e) => e.replaceChildren());
      root.dataset.busy = "true";
      setMessage(`Loading ${LOADING[family]}\u2026`);
      const loaded = family;
      load(loaded)
        .then((model) => {
          models[loaded] = model;
          if (family === loaded) update();
        })
        .catch((error) => setMessage(`The model could not be loaded: ${error.message}`))
        .finally(() => delete root.dataset.busy);
    }

    // One token at a time, the page drawn between two (a busy state, the button disabled):
    // 64 words took 1.3 s in one block, 3.4 s on a slow phone, with the page frozen.
    async function generateMore() {
      const model = models[family];
      if (!model || root.dataset.busy) return;
      const tokens = modelTokens(model, sentence.value);
      if (tokens.problem) return update();
      const n = Math.max(1, Math.min(64, Number(count.value) || 1));
      const [T, k] = [Number(temperature.value), Math.max(0, Math.floor(Number(topK.value) || 0))];
      const steps = generateSteps(model, tokens.ids, n, T, k, Math.floor(Number(seed.value) || 0));
      root.dataset.busy = "true";
      generateButton.disabled = true;
      let out = tokens.ids;
      try {
        for (const step of steps) {
          out = step;
          setMessage(`Generating\u2026 ${out.length - tokens.ids.length} of ${n}`);
          await new Promise((resolve) => setTimeout(resolve, 0)); // let the page draw
        }
      } finally {
        delete root.dataset.busy;
        generateButton.disabled = false;
        setMessage("");
      }
      const added = out.slice(tokens.ids.length).map((id) => model.words[id]);
      if (added.length === 0) return setMessage(full);
      const text = sentence.value.replace(/\s+$/, "");
      sentence.value = model.kind === "induction" ? `${text} ${added.join(" ")}` : joinWords([text, ...added]);
      update();
      if (out.length >= MAX_TOKENS) setMessage(full);
    }

    function randomSequence() {
      const bos = ((models.induction || {}).config || { bos: 64 }).bos;
      const random = mulberry32((Math.random() * 4294967296) >>> 0);
      const tokens = Array.from({ length: 8 }, () => Math.floor(random() * bos));
      sentence.value = [...tokens, ...tokens].join(" ");
      update();
    }

    sentence.value = texts[family];
    sentence.addEventListener("input", update);
    sentence.addEventListener("keydown", (event) => event.key === "Enter" && update());
    for (const control of [mode, temperature, causal, layer, head, encoderSentence]) {
      control.addEventListener("input", update);
      control.addEventListener("change", update);
    }
    generateButton.addEventListener("click", generateMore);
    // the theme's light/dark switch: repaint the heatmap in the other theme's colours
    new MutationObserver(update).observe(document.documentElement, { attributeFilter: ["data-theme"] });
    randomButton.addEventListener("click", randomSequence);
    for (const control of root.querySelectorAll("input, select, button")) control.disabled = false;
    update();
    root.dataset.readyMs = String(Math.round(performance.now()));
    root.dataset.ready = "true";
    // a link with settings (a heatmap's "open in the explorer") lands on the explorer, not on
    // the page's introduction above it
    if ([...params.keys()].length) root.scrollIntoView({ block: "start" });
  }

  window.AttentionExplorer = { wordTokens, load, forward };

  // Both scripts load async: the explorer starts once the GloVe data and the page's HTML are
  // there (not waiting for the page's other scripts, as DOMContentLoaded would).
  const parsed = new Promise((resolve) => {
    if (document.readyState !== "loading") return resolve();
    document.addEventListener("readystatechange", () => resolve(), { once: true });
  });

  if (document.getElementById("explorer-app") || document.readyState === "loading") {
    Promise.all([load("glove"), parsed])
      .then(([data]) => {
        const root = document.getElementById("explorer-app");
        if (root) start(root, data);
      })
      .catch((error) => {
        const root = document.getElementById("explorer-app");
        if (!root) throw error;
        const text = `The explorer could not start: ${error.message}`;
        Object.assign(root.querySelector("#explorer-message"), { textContent: text, hidden: false });
        root.dataset.ready = "error";
        throw error;
      });
  }
})();
