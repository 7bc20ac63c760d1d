"""_ext/api_usage.py: the scanner behind the API page's "Used in" lines, the names it
counts, and the links from the chapters' inline code to the API page."""

from __future__ import annotations

import re
from pathlib import Path

import api_usage
import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from sphinx.testing.util import SphinxTestApp

CODE_CELLS = [
    "%matplotlib inline\nimport attnlib\nimport numpy as np",
    "w = attnlib.softmax(np.zeros(3))\nmask = attnlib.causal_mask(3)",
    "from attnlib import display, cosine_matrix as cm\nfrom attnlib import GloVe",
    "display.plot_weights(w, ['a'])\ncm(x)",
    "import attnlib.positions as pos\nbias = pos.alibi_bias(2, 3)",
    "from attnlib.decoding import KVCache\ncache = KVCache()\ncache.update(k, v)",
    "x = attnlib.load_glove().most_similar('ship')",
    "this is not python (",
    "def f(z):\n    return np.softmax(z)",  # another package's softmax
]


def test_scan_notebook_finds_every_import_style(tmp_path):
    cells = [new_markdown_cell("Prose naming `attnlib.efficient.tiled_attention`.")]
    cells += [new_code_cell(source) for source in CODE_CELLS]
    nbformat.write(new_notebook(cells=cells), tmp_path / "07_fake.ipynb")
    names = """softmax causal_mask display display.plot_weights cosine_matrix GloVe positions
    positions.alibi_bias decoding.KVCache load_glove""".split()
    expected = {"attnlib", *(f"attnlib.{name}" for name in names)}  # markdown is not read
    assert api_usage.scan_notebook(tmp_path / "07_fake.ipynb") == expected


def test_imports_carry_over_from_cell_to_cell():
    aliases: dict[str, str] = {}
    assert api_usage.scan_code("import attnlib as al", aliases) == {"attnlib"}
    assert api_usage.scan_code("al.convert.to_torch(m)", aliases) == {"attnlib.convert.to_torch"}
    assert api_usage.scan_code("attnlib.softmax(x)", {}) == set()  # never imported


def test_the_books_toc_numbers_the_chapters():
    numbers = api_usage.chapter_numbers(Path(__file__).parents[1] / "_toc.yml")
    expected = {"03_scaled_dot_product_attention": 3, "language_model": 8, "encoder": 9}
    expected |= {"induction_heads": 10, "11_inference": 11}
    assert {name: numbers[f"chapters/{name}"] for name in expected} == expected
    assert "chapters/api" not in numbers


def test_names_count_for_the_object_and_its_module():
    """attnlib.softmax and attnlib.attention.softmax are one name, defined in attnlib.attention."""
    expected = {"attnlib.attention.softmax", "attnlib.attention", "attnlib"}
    for name in ("attnlib.softmax", "attnlib.attention.softmax"):
        assert set(api_usage.counts_for(name)) == expected, name
    assert api_usage.resolve("attnlib.no_such_name") is None


def test_public_names():
    names = api_usage.public_names()
    assert {"attnlib.softmax", "attnlib.positions", "attnlib.positions.alibi_bias"} <= names
    assert "attnlib.embeddings.load_glove" not in names  # public as attnlib.load_glove
    assert not any(part.startswith("_") for name in names for part in name.split("."))


CHAPTER = """# A chapter

`attnlib.causal_mask(L, S)` and `attnlib.causal_mask`; `attnlib.attention.softmax`, not
`x = attnlib.softmax(y)`, `attnlib`, nor `attnlib.no_such_name`.

## About `attnlib.causal_mask`

Once more per section: `attnlib.causal_mask`. [`attnlib.softmax`](https://example.org)
"""


def test_chapters_link_first_mentions_to_the_api_page(tmp_path):
    (tmp_path / "conf.py").write_text('extensions = ["myst_nb", "api_usage"]\n')
    (tmp_path / "index.rst").write_text(".. toctree::\n\n   api\n   chapters/ch\n\n")
    api = "API\n===\n\n.. py:function:: attnlib.causal_mask\n.. py:function:: attnlib.softmax\n"
    (tmp_path / "api.rst").write_text(api)
    (tmp_path / "chapters").mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell(CHAPTER)]), tmp_path / "chapters/ch.ipynb")
    app = SphinxTestApp("html", srcdir=tmp_path)
    try:
        app.build()
    finally:
        app.cleanup()
    assert "WARNING" not in app._warning.getvalue()
    html = (tmp_path / "_build/html/chapters/ch.html").read_text(encoding="utf-8")
    links = re.findall(r'href="../api.html#([\w.]+)"[^>]*><code[^>]*>(.*?)</code>', html)
    texts = [(target, re.sub(r"<[^>]+>", "", code)) for target, code in links]
    assert texts == [
        ("attnlib.causal_mask", "attnlib.causal_mask(L, S)"),
        ("attnlib.softmax", "attnlib.attention.softmax"),
        ("attnlib.causal_mask", "attnlib.causal_mask"),  # the section's, not its title's
    ]
    assert "api.html" not in re.search(r"<h2>.*?</h2>", html, re.DOTALL)[0]


def test_chapters_name_attnlib_in_plain_backticks():
    """Colab and Jupyter show a {py:...} role as raw text: the build links the names."""
    for path in (Path(__file__).parents[1] / "chapters").glob("*.ipynb"):
        assert "{py:" not in path.read_text(encoding="utf-8"), path
