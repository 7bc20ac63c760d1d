"""Serve MathJax from the book itself, so every equation renders without network access.

Sphinx loads MathJax 3 from a CDN by default (``mathjax_path`` is a jsDelivr URL): a
reader offline, or behind a firewall, sees raw ``\\(...\\)`` TeX instead of equations.
This extension points ``mathjax_path`` at ``_static/mathjax/tex-mml-chtml.js`` (the
same MathJax component Sphinx would load from the CDN) and, after each HTML build,
copies MathJax there from an installed Python package:

* ``django-static-mathjax`` (pinned in ``requirements.txt``) ships MathJax 3's ``es5``
  distribution as package data of its ``mathjax`` import package; Django itself is not
  needed nor imported. Nothing of MathJax is committed to this repository.
* The entry component plus the folders it loads files from on demand (TeX extensions,
  CHTML fonts, the contextual menu, accessibility and speech) are copied; the other
  combined components (``tex-svg.js``, ...) are not. MathJax's licence goes along.

The MathJax configuration is untouched: MyST's ``mathjax3_config`` (MathJax processes
only the ``math`` elements MyST and Sphinx produce) still applies.

Enabled in ``_config.yml`` under ``sphinx: local_extensions``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

DISTRIBUTION = "django-static-mathjax"  # the PyPI package that ships MathJax
IMPORT_NAME = "mathjax"  # its import package; MathJax is in static/mathjax/es5/
ENTRY = "tex-mml-chtml.js"  # the component Sphinx loads from the CDN by default
TARGET = "mathjax"  # folder inside the built site's _static/


def mathjax_source() -> Path:
    """Return the folder of MathJax 3's ``es5`` distribution in the installed package.

    Raises:
        ExtensionError: the package is not installed, or holds no MathJax 3 ``es5`` tree.
    """
    spec = importlib.util.find_spec(IMPORT_NAME)
    if spec is None or spec.origin is None:
        raise ExtensionError(
            f"offline_mathjax: the Python package {DISTRIBUTION!r} (import name "
            f"{IMPORT_NAME!r}) must be installed; got none. Run `make env` or "
            f"`pip install -r requirements.txt`."
        )
    source = Path(spec.origin).parent / "static" / "mathjax" / "es5"
    if not (source / ENTRY).is_file():
        raise ExtensionError(
            f"offline_mathjax: expected MathJax 3's {ENTRY} in {source}; got no such file "
            f"(is {IMPORT_NAME!r} really {DISTRIBUTION!r}?)"
        )
    return source


def _wanted(relative: Path) -> bool:
    """Whether a file of the ``es5`` tree is needed by the site (see the module docstring)."""
    if len(relative.parts) > 1:  # a folder the entry component loads from on demand
        return True
    name = relative.name
    is_other_bundle = name.startswith(("tex-", "mml-")) or name == "node-main.js"
    return name == ENTRY or not is_other_bundle


def copy_mathjax(source: Path, target: Path) -> int:
    """Copy the needed part of ``source`` into ``target``; return how many files were copied.

    Files already there with the same size and modification time are skipped, so an
    incremental build costs almost nothing.
    """
    copied = 0
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if not path.is_file() or not _wanted(relative):
            continue
        destination = target / relative
        stat = path.stat()
        if destination.is_file():
            existing = destination.stat()
            if (existing.st_size, existing.st_mtime_ns) == (stat.st_size, stat.st_mtime_ns):
                continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
        copied += 1
    licence = importlib.metadata.distribution(DISTRIBUTION).read_text("LICENSE")
    if licence is not None:
        (target / "LICENSE").write_text(licence, encoding="utf-8")
    return copied


def _use_local_mathjax(app: Sphinx, config: Config) -> None:
    mathjax_source()  # fail early, before any notebook is executed, if it is missing
    config.mathjax_path = f"{TARGET}/{ENTRY}"  # relative: Sphinx prefixes _static/


def _copy_after_build(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / TARGET
    copied = copy_mathjax(mathjax_source(), target)
    version = importlib.metadata.version(DISTRIBUTION)
    logger.info(f"offline_mathjax: {copied} files of MathJax ({DISTRIBUTION} {version}) copied")


def setup(app: Sphinx) -> dict[str, object]:
    app.setup_extension("sphinx.ext.mathjax")  # defines mathjax_path
    app.connect("config-inited", _use_local_mathjax)
    app.connect("build-finished", _copy_after_build)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
