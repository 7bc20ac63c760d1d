// The attention explorer of "Attention, by hand and by library", running in the page.
//
// A dependency-free classic script (no ES module, no fetch), so that it works both from a web
// server and opened as a file (file://). Its data are scripts next to it in _static/explorer/,
// written at build time by _ext/explorer_data.py; each stores one base64 string in
// window.ATTN_EXPLORER_DATA[key]. The page loads the GloVe one with an async <script> tag next
// to this script; a model's is loaded the same way when its mode is first chosen:
//   glove      GloVe vectors (attnlib.load_glove()) and the training chapter's two trained heads
//   lm         the Odyssey language model of the chapter "A language model on the Odyssey" (data/odyssey_lm/)
//   induction  the induction model of the chapter "What a head computes" (data/induction/)
//   minilm     the attention weights of all-MiniLM-L6-v2 (6 layers x 12 heads) on the sentences
//              of data/encoder_sentences.txt, computed at build time (attnlib.pretrained) and
//              stored to 3 decimals: this mode only shows them, it runs no model
// For the typed text it computes the same numbers as attnlib (in float64 from the same
// float32 weights; attnlib's float32 differs by about 1e-6):
//   dot        softmax(X X^T / (T sqrt(d_k)))            chapter 3, attnlib.attention_weights
//   cosine     C_ij = cos(x_i, x_j), no softmax, no T     chapter 2, attnlib.cosine_matrix
//   head h     softmax((X W_q,h^T)(X W_k,h^T)^T / (T sqrt(D)))   the training chapter's trained heads
//   lm, induction   attnlib.LanguageModel's forward pass: every head's weights, the logits of
//              the next token; "Generate" continues the text (greedy at T = 0, else sampled
//              with a seeded generator, as LanguageModel.generate)
// With the causal mask, query i sees the keys j <= i; a masked weight is 0.
// Nothing is requested from any other host. window.AttentionExplorer exposes the functions
// (the site's tests compare them with attnlib).

(function () {
  "use strict";

  const SCRIPT_URL = document.currentScript ? document.currentScript.src : document.baseURI;
  const FILES = {
    glove: "glove-explorer.js",
    lm: "lm-explorer.js",
    induction: "induction-explorer.js",
    minilm: "minilm-explorer.js",
  };
  const GLOBAL = "ATTN_EXPLORER_DATA";
  const MAGIC = "ATTNEXP1";
  const MODEL_MAGIC = "ATTNMOD1";
  const WEIGHTS_MAGIC = "ATTNATT1";
  const MAX_WORDS = 40; // GloVe modes
  const MAX_TOKENS = 64; // model modes
  const FAMILY = {
    dot: "glove",
    cosine: "glove",
    head0: "glove",
    head1: "glove",
    lm: "lm",
    induction: "induction",
    minilm: "minilm",
  };
  const LOADING = { lm: "the Odyssey language model", induction: "the induction model", minilm: "MiniLM's attention weights" };
  const DEFAULT_TEXT = {
    glove: "I must go back to my ship and to my crew",
    lm: "I must go back to my ship and to my",
    induction: "37 43 12 8 63 9 11 5 37 43 12 8",
    minilm: "", // MiniLM shows stored sentences, picked in #explorer-encoder-sentence
  };

  // attnlib.tokenize is Python's sentence.lower().split(): split at the characters for which
  // str.isspace() is true (JavaScript's \s differs: it has U+FEFF, lacks U+001C-U+001F, U+0085).
  const SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

  function tokenize(sentence) {
    return sentence.toLowerCase().split(SPACE).filter((word) => word !== "");
  }

  // attnlib.corpus.word_tokens, the tokenizer of the Odyssey model: lower case, curly quotes
  // straightened, words and numbers whole, "n't" and "'s" split off, every other character a
  // token. "<unk>" (what the model writes for a word it does not know) stays one token.
  const QUOTES = { "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"' };
  const WORD_TOKEN = /<unk>|[a-z]+(?=n't\b)|n't\b|'s\b|[a-z0-9]+|[^\sa-z0-9]/gu; // u: an emoji is one token

  function wordTokens(text) {
    const clean = text.toLowerCase().replace(/[\u2018\u2019\u201c\u201d]/g, (q) => QUOTES[q]);
    return clean.match(WORD_TOKEN) || [];
  }

  // attnlib.corpus.CorpusVocabulary.decode: words joined by spaces, none before punctuation.
  function joinWords(words) {
    return words.join(" ").replace(/ ([,.;:!?)]|n't|'s)/g, "$1");
  }

  // ---- the data ----------------------------------------------------------------------------

  const loading = {};

  // Load a data script once (a <script> tag: allowed on file://, unlike fetch), then decode it.
  function load(key) {
    if (!loading[key]) {
      loading[key] = new Promise((resolve, reject) => {
        const store = window[GLOBAL];
        if (store && typeof store[key] === "string") return resolve();
        // The page may already load it (an async script tag): wait for that one.
        const tags = [...document.scripts].filter((s) => s.src && new URL(s.src).pathname.endsWith(`/${FILES[key]}`));
        const script = tags[0] || document.createElement("script");
        script.addEventListener("load", () => resolve());
        script.addEventListener("error", () => reject(new Error(`could not load ${FILES[key]}`)));
        if (!tags.length) {
          script.src = new URL(FILES[key], SCRIPT_URL).href;
          document.head.append(script);
        }
      })
        .then(() => gunzip(fromBase64(window[GLOBAL][key])))
        .then((bytes) => {
          delete window[GLOBAL][key]; // the decoded data replaces the string
          if (key === "glove") return readGlove(bytes);
          return key === "minilm" ? readWeights(bytes) : readModel(key, bytes);
        });
      loading[key].catch(() => delete loading[key]); // a later try loads again
    }
    return loading[key];
  }

  function fromBase64(text) {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  async function gunzip(bytes) {
    const stream = new Response(bytes).body.pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  function header(bytes, magic) {
    if (new TextDecoder().decode(bytes.subarray(0, 8)) !== magic) {
      throw new Error("not the explorer's data");
    }
    const length = new DataView(bytes.buffer, bytes.byteOffset).getUint32(8, true);
    return [JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + length))), 12 + length];
  }

  // GloVe: 8 magic bytes, a uint32 header length, a JSON header, then the count x dim
  // integers v as three byte planes (24-bit two's complement); x = fround(v / 1e5).
  function readGlove(bytes) {
    const [head, planes] = header(bytes, MAGIC);
    const n = head.count * head.dim;
    const divisor = Math.round(1 / head.step);
    const vectors = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const v = bytes[planes + i] | (bytes[planes + n + i] << 8) | (bytes[planes + 2 * n + i] << 16);
      vectors[i] = Math.fround(((v << 8) >> 8) / divisor); // sign-extend the 24 bits
    }
    const index = new Map(head.words.map((word, i) => [word, i]));
    return { ...head, kind: "glove", vectors, index };
  }

  // A model: magic, uint32 header length, JSON header (config, words, tensors [name, shape,
  // offset]), then every tensor as little-endian float32 (the header is padded to 4 bytes).
  function readModel(key, bytes) {
    const [head, start] = header(bytes, MODEL_MAGIC);
    const values = new Float32Array(bytes.buffer.slice(bytes.byteOffset + start, bytes.byteOffset + bytes.length));
    const tensors = {};
    for (const [name, shape, offset] of head.tensors) {
      const size = shape.reduce((a, b) => a * b, 1);
      tensors[name] = values.subarray(offset, offset + size);
    }
    const config = head.config;
    if (config.tie_weights) tensors["lm_head.weight"] = tensors["token_embedding.weight"];
    return { kind: key, config, words: head.words, index: new Map(head.words.map((w, i) => [w, i])), tensors };
  }

  // MiniLM's stored weights: magic, uint32 header length, JSON header (model, layers, heads,
  // step, sentences: text, tokens, ids, offset), then every weight as v = round(w / step),
  // 0 ... 1000, in two byte planes (all the low bytes, then all the high bytes); w = v / 1000.
  function readWeights(bytes) {
    const [head, start] = header(bytes, WEIGHTS_MAGIC);
    const n = (bytes.length - start) / 2;
    const divisor = Math.round(1 / head.step);
    const values = new Float64Array(n);
    for (let i = 0; i < n; i++) values[i] = (bytes[start + i] | (bytes[start + n + i] << 8)) / divisor;
    const { layers, heads } = head;
    const sentences = head.sentences.map((s) => {
      const L = s.tokens.length;
      // weights[layer][head] is the (L, L) map, an array of L rows (Float64Array views)
      const weights = [...Array(layers).keys()].map((l) =>
        [...Array(heads).keys()].map((h) =>
          [...Array(L).keys()].map((i) => {
            const at = s.offset + ((l * heads + h) * L + i) * L;
            return values.subarray(at, at + L);
          }),
        ),
      );
      return { ...s, weights };
    });
    return { kind: "minilm", model: head.model, layers, heads, step: head.step, sentences };
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

  // The (L, L) weights of the rows X (one Float64Array per word) in a GloVe mode.
  function attentionWeights(data, X, mode, temperature, causal) {
    if (mode === "cosine") return cosines(X, causal);
    if (mode === "dot") {
      const scores = X.map((x) => X.map((y) => dot(x, y)));
      return softmax(scores, 1 / (temperature * Math.sqrt(data.dim)), causal);
    }
    const match = /^head(\d+)$/.exec(mode);
    const head = match ? Number(match[1]) : NaN;
    const { embed_dim: E, num_heads: H } = data.heads;
    if (!(head >= 0 && head < H)) throw new Error(`unknown mode ${mode}`);
    const D = E / H; // rows head*D ... (head+1)*D - 1 of q_proj.weight are head's W_q^T
    const Q = project(X, data.heads.q_proj_weight.slice(head * D, (head + 1) * D));
    const K = project(X, data.heads.k_proj_weight.slice(head * D, (head + 1) * D));
    const scores = Q.map((q) => K.map((k) => dot(q, k)));
    return softmax(scores, 1 / (temperature * Math.sqrt(D)), causal);
  }

  // ---- the models: attnlib.LanguageModel's forward pass, in float64 ---------------------------

  // erf to double precision: its Taylor series below 2.5, else erfc's continued fraction.
  function erf(x) {
    const a = Math.abs(x);
    let value;
    if (a < 2.5) {
      let term = a, sum = a;
      for (let n = 1; n < 80; n++) {
        term *= (-a * a) / n;
        const add = term / (2 * n + 1);
        sum += add;
        if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
      }
      value = (2 / Math.sqrt(Math.PI)) * sum;
    } else {
      let f = a;
      for (let n = 60; n >= 1; n--) f = a + n / 2 / f;
      value = 1 - Math.exp(-a * a) / (Math.sqrt(Math.PI) * f);
    }
    return x < 0 ? -value : value;
  }

  const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2)); // nn.GELU(), exact

  // y = W x + b for an (out, in) row-major W (nn.Linear).
  function linear(x, weight, bias, out) {
    const n = x.length;
    const y = new Float64Array(out);
    for (let o = 0; o < out; o++) {
      let sum = bias ? bias[o] : 0;
      const row = o * n;
      for (let i = 0; i < n; i++) sum += weight[row + i] * x[i];
      y[o] = sum;
    }
    return y;
  }

  function layerNorm(x, weight, bias, eps) {
    const n = x.length;
    let mean = 0;
    for (let i = 0; i < n; i++) mean += x[i];
    mean /= n;
    let variance = 0;
    for (let i = 0; i < n; i++) variance += (x[i] - mean) ** 2;
    const inv = 1 / Math.sqrt(variance / n + eps);
    const y = new Float64Array(n);
    for (let i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * weight[i] + (bias ? bias[i] : 0);
    return y;
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

  // The model on the token ids: weights[layer][head] (L rows of L weights, 0 above the
  // diagonal) and the logits of the next token at the last position (all positions with
  // allLogits), as attnlib.LanguageModel(ids, need_weights=True) in eval mode.
  function forward(model, ids, allLogits = false) {
    const c = model.config, t = model.tensors;
    const E = c.embed_dim, H = c.num_heads, D = E / H, L = ids.length, V = c.vocab_size;
    const eps = c.norm_eps;
    const get = (name) => t[name] || null;
    let x = ids.map((id, p) => {
      const row = new Float64Array(E);
      for (let i = 0; i < E; i++) row[i] = t["token_embedding.weight"][id * E + i];
      if (c.positions === "learned") {
        for (let i = 0; i < E; i++) row[i] += t["position_embedding.weight"][p * E + i];
      }
      return row;
    });
    const weights = [];
    for (let layer = 0; layer < c.num_layers; layer++) {
      const pre = `blocks.${layer}.`;
      const w = (name) => get(pre + name);
      const h = x.map((row) => layerNorm(row, w("ln1.weight"), w("ln1.bias"), eps));
      const q = h.map((row) => linear(row, w("attn.q_proj.weight"), w("attn.q_proj.bias"), E));
      const k = h.map((row) => linear(row, w("attn.k_proj.weight"), w("attn.k_proj.bias"), E));
      const v = h.map((row) => linear(row, w("attn.v_proj.weight"), w("attn.v_proj.bias"), E));
      const heads = x.map(() => new Float64Array(E)); // the heads' outputs, concatenated
      const layerWeights = [];
      for (let head = 0; head < H; head++) {
        const part = (rows) => rows.map((row) => row.subarray(head * D, (head + 1) * D));
        let qh = part(q), kh = part(k);
        if (c.positions === "rope") {
          qh = qh.map((row, p) => rotate(row, p, c.rope_base));
          kh = kh.map((row, p) => rotate(row, p, c.rope_base));
        }
        const vh = part(v);
        const A = [];
        for (let i = 0; i < L; i++) {
          const row = new Float64Array(L);
          let top = -Infinity;
          for (let j = 0; j <= i; j++) {
            row[j] = dot(qh[i], kh[j]) / Math.sqrt(D);
            top = Math.max(top, row[j]);
          }
          let total = 0;
          for (let j = 0; j <= i; j++) {
            row[j] = Math.exp(row[j] - top);
            total += row[j];
          }
          for (let j = 0; j <= i; j++) row[j] /= total;
          for (let j = 0; j <= i; j++) {
            for (let d = 0; d < D; d++) heads[i][head * D + d] += row[j] * vh[j][d];
          }
          A.push(row);
        }
        layerWeights.push(A);
      }
      weights.push(layerWeights);
      x = x.map((row, i) => {
        const out = linear(heads[i], w("attn.out_proj.weight"), w("attn.out_proj.bias"), E);
        return row.map((value, d) => value + out[d]);
      });
      if (w("mlp.0.weight")) {
        const hidden = w("mlp.0.weight").length / E;
        x = x.map((row) => {
          const y = layerNorm(row, w("ln2.weight"), w("ln2.bias"), eps);
          const a = linear(y, w("mlp.0.weight"), w("mlp.0.bias"), hidden).map(gelu);
          const out = linear(a, w("mlp.2.weight"), w("mlp.2.bias"), E);
          return row.map((value, d) => value + out[d]);
        });
      }
    }
    const read = (row) =>
      linear(layerNorm(row, get("ln_f.weight"), get("ln_f.bias"), eps), t["lm_head.weight"], null, V);
    const logits = allLogits ? x.map(read) : [read(x[L - 1])];
    return { weights, logits };
  }

  function probabilities(logits) {
    const top = Math.max(...logits);
    const exp = Array.from(logits, (l) => Math.exp(l - top));
    const total = exp.reduce((a, b) => a + b, 0);
    return exp.map((e) => e / total);
  }

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
    if (temperature === 0) {
      let best = 0;
      for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
      return best;
    }
    let scaled = Array.from(logits, (l) => l / temperature);
    if (topK > 0 && topK < scaled.length) {
      const kth = [...scaled].sort((a, b) => b - a)[topK - 1];
      scaled = scaled.map((l) => (l < kth ? -Infinity : l));
    }
    const p = probabilities(scaled);
    let u = random(), i = 0;
    for (; i < p.length - 1; i++) {
      u -= p[i];
      if (u < 0) break;
    }
    while (p[i] === 0) i--; // rounding left u past the last kept token
    return i;
  }

  // The ids after each new token, one step at a time (at most maxLength ids in all): the page
  // draws between two steps, so a long generation never freezes it.
  function* generateSteps(model, ids, n, { temperature = 0, topK = 0, seed = 0, maxLength = MAX_TOKENS } = {}) {
    const random = mulberry32(seed);
    const out = ids.slice();
    for (let step = 0; step < n && out.length < maxLength; step++) {
      const { logits } = forward(model, out);
      out.push(nextToken(logits[0], temperature, topK, random));
      yield out;
    }
  }

  // Append n tokens to ids (at most maxLength in all); returns the new ids.
  function generate(model, ids, n, options = {}) {
    let out = ids.slice();
    for (const step of generateSteps(model, ids, n, options)) out = step;
    return out;
  }

  // ---- the page ----------------------------------------------------------------------------

  // Heatmap colour of a cell: blue for positive values, red for negative (cosines only), as
  // transparent as the value is small, so it reads on light and dark backgrounds (lighter
  // colours in the theme's dark mode, where the background is near black).
  function colourOf(value) {
    const alpha = Math.min(1, Math.abs(value));
    const dark = document.documentElement.dataset.theme === "dark";
    const [blue, red] = dark ? [[60, 125, 220], [225, 85, 60]] : [[31, 90, 170], [200, 60, 40]];
    return { rgb: value >= 0 ? blue : red, alpha, dark };
  }

  function colour(value) {
    const { rgb, alpha } = colourOf(value);
    return `rgba(${rgb.join(", ")}, ${alpha})`;
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
  function paint(cell, value) {
    const { rgb, alpha, dark } = colourOf(value);
    const page = dark ? [18, 18, 18] : [255, 255, 255];
    const L = luminance(rgb.map((c, i) => page[i] * (1 - alpha) + c * alpha));
    const onWhite = 1.05 / (L + 0.05), onBlack = (L + 0.05) / 0.05; // at worst 4.58:1
    cell.style.backgroundColor = colour(value);
    cell.style.color = onWhite > onBlack ? "#fff" : "#000";
  }

  // The table: one row per query (a th, then one td per key), digits decimals in the tooltip.
  function show(table, words, weights, digits = 4) {
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
        cell.title = `${query} \u2192 ${key}: ${value.toFixed(digits)}`;
        paint(cell, value);
      });
    });
    table.replaceChildren(body);
  }

  // Every head of a layer as a small heatmap (a canvas in a button: a click picks that head).
  function showThumbs(box, maps, selected, pick) {
    const L = maps[0].length;
    const cell = Math.max(2, Math.floor(72 / L));
    const size = cell * L;
    const ratio = window.devicePixelRatio || 1;
    box.replaceChildren(
      ...maps.map((A, h) => {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "explorer-thumb";
        button.dataset.head = String(h + 1);
        button.setAttribute("aria-pressed", String(h + 1 === selected));
        button.title = `Show head ${h + 1}`;
        const canvas = document.createElement("canvas");
        canvas.width = canvas.height = Math.round(size * ratio);
        canvas.style.width = canvas.style.height = `${size}px`;
        canvas.setAttribute("aria-hidden", "true");
        const context = canvas.getContext("2d");
        context.scale(ratio, ratio);
        A.forEach((row, i) =>
          row.forEach((value, j) => {
            context.fillStyle = colour(value);
            context.fillRect(j * cell, i * cell, cell, cell);
          }),
        );
        const label = document.createElement("span");
        label.textContent = `head ${h + 1}`;
        button.append(canvas, label);
        button.addEventListener("click", () => pick(h + 1));
        return button;
      }),
    );
  }

  // The ten most likely next tokens as a bar list: one li per word, data-word, data-prob.
  function showNext(list, words, probs) {
    const order = probs.map((p, i) => i).sort((a, b) => probs[b] - probs[a] || a - b).slice(0, 10);
    list.replaceChildren(
      ...order.map((i) => {
        const item = document.createElement("li");
        item.dataset.word = words[i];
        item.dataset.prob = String(probs[i]);
        const word = document.createElement("span");
        word.className = "explorer-next-word";
        word.textContent = words[i];
        const bar = document.createElement("span");
        bar.className = "explorer-next-bar";
        bar.style.width = `${(100 * probs[i]).toFixed(1)}%`;
        const value = document.createElement("span");
        value.className = "explorer-next-prob";
        value.textContent = `${(100 * probs[i]).toFixed(1)}%`;
        const track = document.createElement("span");
        track.className = "explorer-next-track";
        track.append(bar);
        item.append(word, track, value);
        return item;
      }),
    );
  }

  // The model's tokens for a text: {ids, labels, unknown, problem}.
  function modelTokens(model, text) {
    if (model.kind === "induction") {
      const parts = text.split(/[\s,]+/).filter((s) => s !== "");
      const bos = model.config.bos;
      const bad = parts.filter((s) => !(/^\d+$/.test(s) && Number(s) < bos) && s.toLowerCase() !== "bos");
      if (bad.length) {
        const names = [...new Set(bad)].map((s) => `'${s}'`).join(", ");
        return { problem: `Unknown ${bad.length > 1 ? "tokens" : "token"}: ${names}. Type numbers from 0 to ${bos - 1}, separated by spaces.` };
      }
      const ids = parts.map((s) => (s.toLowerCase() === "bos" ? bos : Number(s)));
      if (ids[0] !== bos) ids.unshift(bos); // every sequence starts with BOS, as in training
      return { ids, labels: ids.map((id) => model.words[id]), unknown: [] };
    }
    const words = wordTokens(text);
    const unk = model.config.unknown;
    const ids = words.map((w) => (model.index.has(w) ? model.index.get(w) : 0));
    const unknown = [...new Set(words.filter((w) => !model.index.has(w) && w !== unk))];
    if (words.length === 0) return { problem: "Type a text: it has no word yet." };
    return { ids, labels: words, unknown };
  }

  function start(root, glove) {
    const $ = (name) => root.querySelector(`#explorer-${name}`);
    const [sentence, mode, temperature, causal, readout] = ["sentence", "mode", "temperature", "causal", "temperature-value"].map($);
    const [table, message, caption, next, nextBox] = ["weights", "message", "caption", "next", "next-box"].map($);
    const [layer, head, topK, seed, count, generateButton, randomButton] = ["layer", "head", "topk", "seed", "count", "generate", "random"].map($);
    const [encoderSentence, thumbs] = ["encoder-sentence", "heads"].map($);
    const models = { glove };
    const texts = { ...DEFAULT_TEXT };
    // each family's temperature and causal mask: its defaults when it is first shown (the
    // address's for the family the page opens in), then what the reader left it with
    const isModelFamily = (f) => f === "lm" || f === "induction";
    const settings = {};
    const settingsOf = (f) => settings[f] || { T: "1", causal: isModelFamily(f) };
    const lastPass = { key: null, out: null }; // the model's last forward pass and its input
    let family = "glove";

    const params = new URLSearchParams(window.location.search);
    if (params.has("mode") && FAMILY[params.get("mode")]) mode.value = params.get("mode");
    if (params.has("sentence")) texts[FAMILY[mode.value]] = params.get("sentence");
    if (params.has("T") && Number(params.get("T")) > 0) temperature.value = params.get("T");
    if (params.has("causal")) causal.checked = params.get("causal") !== "0";
    // ?layer=&head= pick the heatmap of a model mode once, when the page opens
    const initial = { layer: params.get("layer"), head: params.get("head") };
    // ?mode=minilm&sentence=... picks that stored sentence (its text, or its number from 1)
    let initialSentence = FAMILY[mode.value] === "minilm" ? params.get("sentence") : null;

    const setMessage = (text) => {
      message.textContent = text;
      message.hidden = text === "";
    };
    const showFor = (kind) => {
      root.dataset.kind = kind;
      root.querySelectorAll("[data-for]").forEach((el) => {
        el.hidden = !el.dataset.for.split(" ").includes(kind);
      });
    };

    function options(select, values, labels) {
      const keep = select.value;
      select.replaceChildren(
        ...values.map((value, i) => {
          const option = document.createElement("option");
          option.value = String(value);
          option.textContent = labels[i];
          return option;
        }),
      );
      if (values.map(String).includes(keep)) select.value = keep;
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
          `Unknown ${unknown.length > 1 ? "words" : "word"}: ` +
          unknown.map((word) => `'${word}'`).join(", ") +
          `, not among the ${glove.count.toLocaleString("en")} words of this page (GloVe is ` +
          `lower case; punctuation is a word of its own: write "ship ." not "ship.").`;
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

    function pickInitial() {
      for (const [select, key] of [[layer, "layer"], [head, "head"]]) {
        if (initial[key] !== null && [...select.options].some((o) => o.value === initial[key])) {
          select.value = initial[key];
        }
        initial[key] = null;
      }
    }

    // MiniLM: the stored weights of the chosen sentence, layer (1-6) and head (1-12, or the
    // mean of the layer's heads), and every head of the layer as a small map.
    function updateEncoder(data) {
      const count = (n) => [...Array(n).keys()].map((i) => i + 1);
      options(encoderSentence, data.sentences.map((_, i) => i), data.sentences.map((s) => s.text));
      if (initialSentence !== null) {
        const wanted = initialSentence.trim().toLowerCase();
        const found = data.sentences.findIndex((s, i) => s.text.toLowerCase() === wanted || String(i + 1) === wanted);
        if (found >= 0) encoderSentence.value = String(found);
        initialSentence = null;
      }
      options(layer, count(data.layers), count(data.layers).map((l) => `layer ${l}`));
      options(head, [...count(data.heads), "mean"], [...count(data.heads).map((h) => `head ${h}`), `mean of the ${data.heads} heads`]);
      pickInitial();
      setMessage("");
      const s = data.sentences[Number(encoderSentence.value)];
      const l = Number(layer.value);
      const maps = s.weights[l - 1];
      const h = head.value === "mean" ? "mean" : Number(head.value);
      const A = h === "mean" ? meanOfHeads(maps) : maps[h - 1];
      const which = h === "mean" ? `the mean of its ${data.heads} heads` : `head ${h}`;
      caption.textContent =
        `${data.model.name}: layer ${l}, ${which} (rows: each token; columns: the tokens it ` +
        `attends to; computed when the book was built, rounded to 3 decimals).`;
      show(table, s.tokens, A, 3);
      showThumbs(thumbs, maps, h, (picked) => {
        head.value = String(picked);
        update();
      });
      Object.assign(table.dataset, { sentence: s.text });
      root.dataset.tokens = JSON.stringify(s.ids);
    }

    function updateModel(model) {
      const T = Number(temperature.value);
      readout.textContent = T === 0 ? "0.00 (greedy)" : T.toFixed(2);
      const c = model.config;
      options(layer, [...Array(c.num_layers).keys()], [...Array(c.num_layers).keys()].map((l) => `layer ${l}`));
      options(head, [...Array(c.num_heads).keys()], [...Array(c.num_heads).keys()].map((h) => `head ${h}`));
      pickInitial();
      const tokens = modelTokens(model, sentence.value);
      let problem = tokens.problem || "";
      if (!problem && tokens.ids.length > MAX_TOKENS) {
        problem = `At most ${MAX_TOKENS} tokens (the model's context); got ${tokens.ids.length}.`;
      }
      if (problem) {
        setMessage(problem);
        table.replaceChildren();
        next.replaceChildren();
        caption.textContent = "";
        return;
      }
      setMessage(
        tokens.unknown.length
          ? `Unknown ${tokens.unknown.length > 1 ? "words" : "word"}: ` +
              tokens.unknown.map((w) => `'${w}'`).join(", ") +
              `, not among the ${c.vocab_size.toLocaleString("en")} words of the model: read as ${c.unknown}.`
          : "",
      );
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
      const wanted = FAMILY[mode.value];
      if (wanted !== family) {
        texts[family] = sentence.value;
        settings[family] = { T: temperature.value, causal: causal.checked };
        sentence.value = texts[wanted];
        family = wanted;
        const own = settingsOf(family);
        temperature.min = isModelFamily(family) ? "0" : "0.1"; // before the value: a range clamps
        temperature.value = own.T;
        causal.checked = own.causal;
      }
      const isModel = isModelFamily(family);
      showFor(family);
      if (family !== "minilm") {
        temperature.min = isModel ? "0" : "0.1";
        causal.disabled = isModel;
        if (isModel) causal.checked = true;
      }
      Object.assign(table.dataset, { sentence: sentence.value, mode: mode.value });
      if (family === "glove") return updateGlove();
      if (models[family]) return family === "minilm" ? updateEncoder(models[family]) : updateModel(models[family]);
      table.replaceChildren();
      next.replaceChildren();
      thumbs.replaceChildren();
      caption.textContent = "";
      root.dataset.busy = "true";
      setMessage(`Loading ${LOADING[family]}\u2026`);
      const wantedFamily = family;
      load(wantedFamily)
        .then((model) => {
          models[wantedFamily] = model;
          delete root.dataset.busy;
          if (family === wantedFamily) update();
        })
        .catch((error) => {
          delete root.dataset.busy;
          setMessage(`The model could not be loaded: ${error.message}`);
        });
    }

    // One token at a time, the page drawn between two (a busy state, the button disabled):
    // 64 words took 1.3 s in one block, 3.4 s on a slow phone, with the page frozen.
    async function generateMore() {
      const model = models[family];
      if (!model || root.dataset.busy) return;
      const tokens = modelTokens(model, sentence.value);
      if (tokens.problem) return update();
      const T = Number(temperature.value);
      const n = Math.max(1, Math.min(64, Number(count.value) || 1));
      const steps = generateSteps(model, tokens.ids, n, {
        temperature: T,
        topK: Math.max(0, Math.floor(Number(topK.value) || 0)),
        seed: Math.floor(Number(seed.value) || 0),
      });
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
      if (added.length === 0) {
        setMessage(`The text has reached the model's context of ${MAX_TOKENS} tokens.`);
        return;
      }
      const text = sentence.value.replace(/\s+$/, "");
      sentence.value = model.kind === "induction" ? `${text} ${added.join(" ")}` : joinWords([text, ...added]);
      update();
      if (out.length >= MAX_TOKENS) setMessage(`The text has reached the model's context of ${MAX_TOKENS} tokens.`);
    }

    function randomSequence() {
      const c = (models.induction || {}).config || { T_min: 6, T_max: 16, bos: 64 };
      const random = mulberry32((Math.random() * 4294967296) >>> 0);
      const T = 8;
      const tokens = Array.from({ length: T }, () => Math.floor(random() * c.bos));
      sentence.value = [...tokens, ...tokens].join(" ");
      update();
    }

    sentence.value = texts[FAMILY[mode.value]];
    family = FAMILY[mode.value];
    sentence.addEventListener("input", update);
    sentence.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        update();
      }
    });
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

  window.AttentionExplorer = {
    tokenize,
    wordTokens,
    joinWords,
    load,
    meanOfHeads,
    attentionWeights,
    forward,
    probabilities,
    erf,
    mulberry32,
    nextToken,
    generate,
    generateSteps,
  };

  // Both scripts load async: the GloVe data is decoded while the page is still parsed, and
  // the explorer starts as soon as both the data and the whole page's HTML are there (it does
  // not wait for the page's other scripts, as DOMContentLoaded would).
  const parsed = new Promise((resolve) => {
    if (document.readyState !== "loading") return resolve();
    document.addEventListener("readystatechange", () => resolve(), { once: true });
  });

  function boot(data) {
    const root = document.getElementById("explorer-app");
    if (root) start(root, data);
  }

  if (document.getElementById("explorer-app") || document.readyState === "loading") {
    Promise.all([load("glove"), parsed])
      .then(([data]) => boot(data))
      .catch((error) => {
        const root = document.getElementById("explorer-app");
        if (!root) throw error;
        const message = root.querySelector("#explorer-message");
        message.textContent = `The explorer could not start: ${error.message}`;
        message.hidden = false;
        root.dataset.ready = "error";
        throw error;
      });
  }
})();
