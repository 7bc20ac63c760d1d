"""The scanner behind the API reference's "Used in" lines (`_ext/api_usage.py`).

It reads the code cells of a notebook and returns the dotted attnlib names they use, however
they were imported; markdown cells, other packages and cells that are not Python are ignored.
"""

from __future__ import annotations

from pathlib import Path

import api_usage
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell}
    notebook = nbformat.v4.new_notebook(cells=[make[kind](source) for kind, source in cells])
    nbformat.write(notebook, path)
    return path


@pytest.fixture
def fake_notebook(tmp_path):
    return write_notebook(
        tmp_path / "07_fake.ipynb",
        [
            (
                "markdown",
                "# 7. A fake chapter\n\nProse naming `attnlib.efficient.tiled_attention`.",
            ),
            ("code", "%matplotlib inline\nimport attnlib\nimport numpy as np"),
            ("code", "w = attnlib.softmax(np.zeros(3))\nmask = attnlib.causal_mask(3)"),
            ("code", "from attnlib import display, cosine_matrix as cm\nfrom attnlib import GloVe"),
            ("code", "display.plot_weights(w, ['a'])\ncm(x)"),
            ("code", "import attnlib.positions as pos\nbias = pos.alibi_bias(2, 3)"),
            ("code", "from attnlib.decoding import KVCache\ncache = KVCache()\ncache.update(k, v)"),
            ("code", "x = attnlib.load_glove().most_similar('ship')"),
            ("code", "this is not python ("),
            ("code", "def f(z):\n    return np.softmax(z)"),  # another package's softmax
        ],
    )


def test_scan_notebook_finds_every_import_style(fake_notebook):
    assert api_usage.scan_notebook(fake_notebook) == {
        "attnlib",
        "attnlib.softmax",
        "attnlib.causal_mask",
        "attnlib.display",
        "attnlib.display.plot_weights",
        "attnlib.cosine_matrix",
        "attnlib.GloVe",
        "attnlib.positions",
        "attnlib.positions.alibi_bias",
        "attnlib.decoding.KVCache",
        "attnlib.load_glove",
    }


def test_markdown_is_not_scanned(fake_notebook):
    assert "attnlib.efficient.tiled_attention" not in api_usage.scan_notebook(fake_notebook)


def test_imports_carry_over_from_cell_to_cell():
    aliases: dict[str, str] = {}
    assert api_usage.scan_code("import attnlib as al", aliases) == {"attnlib"}
    assert api_usage.scan_code("al.convert.to_torch(m)", aliases) == {"attnlib.convert.to_torch"}
    assert api_usage.scan_code("attnlib.softmax(x)", {}) == set()  # never imported


def test_chapter_numbers_follow_the_numbered_parts_of_the_toc(tmp_path):
    toc = tmp_path / "_toc.yml"
    toc.write_text(
        "format: jb-book\nroot: intro\nparts:\n"
        "  - caption: A\n    numbered: true\n    chapters:\n"
        "      - file: chapters/01_a\n      - file: chapters/02_b\n"
        "  - caption: B\n    numbered: true\n    chapters:\n      - file: chapters/03_c\n"
        "  - caption: Look up\n    chapters:\n      - file: chapters/notation\n"
    )
    assert api_usage.chapter_numbers(toc) == {
        "chapters/01_a": 1,
        "chapters/02_b": 2,
        "chapters/03_c": 3,
    }


def test_the_books_toc_numbers_the_chapters():
    numbers = api_usage.chapter_numbers(Path(__file__).parents[1] / "_toc.yml")
    assert numbers["chapters/03_scaled_dot_product_attention"] == 3
    assert numbers["chapters/language_model"] == 8
    assert numbers["chapters/encoder"] == 9
    assert numbers["chapters/induction_heads"] == 10
    assert numbers["chapters/11_inference"] == 11
    assert "chapters/api" not in numbers


def test_names_count_for_the_object_and_its_module():
    """attnlib.softmax and attnlib.attention.softmax are one name, defined in attnlib.attention."""
    assert (
        set(api_usage.counts_for("attnlib.softmax"))
        == set(api_usage.counts_for("attnlib.attention.softmax"))
        == {"attnlib.attention.softmax", "attnlib.attention", "attnlib"}
    )
    assert api_usage.resolve("attnlib.no_such_name") is None


def test_public_names():
    names = api_usage.public_names()
    assert {"attnlib.softmax", "attnlib.positions", "attnlib.positions.alibi_bias"} <= names
    assert "attnlib.embeddings.load_glove" not in names  # public as attnlib.load_glove
    assert not any(part.startswith("_") for name in names for part in name.split("."))
