"""The API reference's generated parts: "Used in" lines, public-name references, completeness.

``chapters/api.md`` documents attnlib with ``autodoc`` (and ``napoleon`` for the Google-style
docstrings). This extension adds three things to it:

1. **"Used in" lines.** When the book is built, the code cells of every chapter notebook are
   read with Python's :mod:`ast` (not regular expressions), and the attnlib names they use are
   collected::

       import attnlib; attnlib.softmax(x)              ->  attnlib.softmax
       import attnlib as al; al.positions.alibi_bias    ->  attnlib.positions.alibi_bias
       from attnlib import softmax                      ->  attnlib.softmax
       from attnlib import display; display.plot_heads  ->  attnlib.display.plot_heads
       from attnlib.decoding import KVCache             ->  attnlib.decoding.KVCache

   Every module, class, function and constant autodoc documents then ends with
   "Used in: chapter 3, chapter 8" (links to the chapters; a page without a number in its
   title is named by its title). Names are matched by the object they denote, so
   ``attnlib.softmax`` and ``attnlib.attention.softmax`` are the same name. Methods get no
   line: which instance a chapter calls them on is not known without running it.
2. **References by any name of an object.** A docstring's ``:func:`read_glove_text``` written
   inside ``attnlib/embeddings.py`` looks for ``attnlib.embeddings.read_glove_text``, but the
   page documents the function under its public name ``attnlib.read_glove_text``. Such a
   reference is resolved to the documented name *of the same object*; anything else stays a
   broken reference (a warning under ``-n``).
3. **Completeness.** Every public name (each name of ``attnlib.__all__``, each public module,
   and each name of a public module's ``__all__`` not already public at the top level) must
   be documented on the page: a missing one is a warning, so ``-W`` fails the build.

Enabled in ``_config.yml`` under ``sphinx: local_extensions``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "attnlib"
CHAPTERS = "chapters/*.ipynb"  # the notebooks scanned, relative to the book's root
STATIC = Path(__file__).parent / "static"  # api_usage.css
WITH_USED_IN = {"module", "class", "exception", "function", "data"}  # autodoc's `what`

# ---- the scanner (no Sphinx here: tests/test_api_usage.py runs it on a fake notebook) --


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None if the chain does not start at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _without_magics(source: str) -> str:
    """The cell with IPython lines (``%magic``, ``!shell``) blanked, so that ast can parse it."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )


def scan_code(source: str, aliases: dict[str, str]) -> set[str]:
    """The dotted attnlib names one code cell uses.

    ``aliases`` maps local names to what they stand for (``"al": "attnlib"``,
    ``"display": "attnlib.display"``); the cell's imports are added to it, so pass the same
    dict for the cells of a notebook in order. A cell that is not valid Python is skipped.
    """
    try:
        tree = ast.parse(_without_magics(source))
    except SyntaxError:
        return set()
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != PACKAGE:
                    continue
                if alias.asname:  # import attnlib.positions as pos
                    aliases[alias.asname] = alias.name
                else:  # import attnlib.positions binds `attnlib`
                    aliases[PACKAGE] = PACKAGE
                used.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    used.add(f"{node.module}.{alias.name}")
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):  # the longest chains only: a.b.c, not also a.b and a
        if not isinstance(node, ast.Attribute | ast.Name) or id(node) in inner:
            continue
        parts = _dotted(node)
        if parts and parts[0] in aliases:
            used.add(".".join([aliases[parts[0]], *parts[1:]]))
    return used


def code_cells(notebook: dict) -> Iterator[str]:
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            yield source if isinstance(source, str) else "".join(source)


def scan_notebook(path: Path) -> set[str]:
    """The dotted attnlib names the code cells of a notebook use (markdown is not read)."""
    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    aliases: dict[str, str] = {}
    used: set[str] = set()
    for source in code_cells(notebook):
        used |= scan_code(source, aliases)
    return used


def chapter_numbers(toc_path: Path) -> dict[str, int]:
    """docname -> chapter number, as the book numbers them: the chapters of the parts of
    ``_toc.yml`` marked ``numbered: true``, counted 1, 2, ... across those parts (as
    sphinx-multitoc-numbering does). Pages of unnumbered parts are absent."""
    toc = yaml.safe_load(Path(toc_path).read_text(encoding="utf-8"))
    numbers: dict[str, int] = {}
    for part in toc.get("parts", []):
        if part.get("numbered"):
            for chapter in part.get("chapters", []):
                numbers[chapter["file"]] = len(numbers) + 1
    return numbers


# ---- names and objects ------------------------------------------------------------------


def resolve(dotted: str) -> Any:
    """The object a dotted name denotes (importing modules on the way); None if none."""
    parts = dotted.split(".")
    try:
        obj = importlib.import_module(parts[0])
    except ImportError:
        return None
    for i, part in enumerate(parts[1:], start=1):
        if not hasattr(obj, part) and inspect.ismodule(obj):
            try:  # a submodule not imported by its package
                importlib.import_module(".".join(parts[: i + 1]))
            except ImportError:
                return None
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def identity(dotted: str, obj: Any) -> str:
    """What makes two names the same name: where the object is defined (for modules, classes
    and functions), else the name itself (``BOS = 0`` is not every 0)."""
    if inspect.ismodule(obj):
        return obj.__name__
    if inspect.isclass(obj) or inspect.isroutine(obj):
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if isinstance(module, str) and isinstance(qualname, str):
            return f"{module}.{qualname}"
    return dotted


def public_names(package: str = PACKAGE) -> set[str]:
    """Every name the API page must document (see 3. in the module docstring)."""
    root = importlib.import_module(package)
    top = set(root.__all__)
    names = set()
    for name in top:
        obj = getattr(root, name)
        names.add(f"{package}.{name}")
        if inspect.ismodule(obj):
            for member in getattr(obj, "__all__", []):
                public_at_top = member in top and getattr(root, member) is getattr(obj, member)
                if not public_at_top:
                    names.add(f"{package}.{name}.{member}")
    return names


def counts_for(dotted: str) -> Iterable[str]:
    """The identities a used name counts for: itself, every prefix, and the module that
    defines it (a module is used where anything of it is: ``attnlib.multihead`` where
    ``attnlib.MultiHeadAttention`` is)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        obj = resolve(prefix)
        if obj is not None:
            yield identity(prefix, obj)
            if inspect.isclass(obj) or inspect.isroutine(obj):
                yield getattr(obj, "__module__", None) or prefix


# ---- Sphinx -------------------------------------------------------------------------------


def _usage(app: Sphinx) -> dict[str, list[str]]:
    """identity -> docnames of the chapters that use it (in file-name order, which is the
    book's); the notebooks are scanned once a build."""
    cached = getattr(app, "_api_usage", None)
    if cached is not None:
        return cached
    env = app.env
    usage: dict[str, list[str]] = {}
    numbers = chapter_numbers(Path(app.srcdir) / "_toc.yml")
    for path in sorted(Path(app.srcdir).glob(CHAPTERS)):
        docname = env.path2doc(str(path))
        if docname is None or docname not in env.found_docs:
            continue  # not in the book (only_build_toc_files)
        app._api_notebooks[docname] = path
        number = numbers.get(docname)
        app._api_labels[docname] = f"chapter {number}" if number else None
        for dotted in scan_notebook(path):
            for key in counts_for(dotted):
                usage.setdefault(key, [])
                if docname not in usage[key]:
                    usage[key].append(docname)
    app._api_usage = usage
    return usage


def _add_used_in(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]):
    if what not in WITH_USED_IN or not name.startswith(f"{PACKAGE}."):
        return
    app._api_read = True
    usage = _usage(app)
    for path in app._api_notebooks.values():  # re-read the API page when a chapter changes
        app.env.note_dependency(str(path))
    docnames = usage.get(identity(name, obj), [])
    links = []
    for docname in docnames:
        label = app._api_labels[docname]
        links.append(f":doc:`{label} </{docname}>`" if label else f":doc:`/{docname}`")
    text = ", ".join(links) if links else "no chapter."
    lines.extend(["", ".. container:: api-used-in", "", f"   **Used in:** {text}", ""])


def _reset(app: Sphinx, env: Any, docnames: list[str]) -> None:
    app._api_usage = None
    app._api_notebooks = {}  # docname -> notebook path, and its "chapter N" label
    app._api_labels = {}
    app._api_documented = None
    app._api_read = False


def _documented(app: Sphinx, env: Any) -> dict[str, str]:
    """identity -> the name the page documents it under, for every attnlib object."""
    if app._api_documented is not None:
        return app._api_documented
    documented = app._api_documented = {}
    for fullname in env.get_domain("py").objects:
        if fullname.startswith(f"{PACKAGE}."):
            obj = resolve(fullname)
            if obj is not None:
                documented.setdefault(identity(fullname, obj), fullname)
    return documented


def _resolve_by_identity(app: Sphinx, env: Any, node: Any, contnode: Any) -> Any:
    """A py reference to another name of a documented attnlib object: link to that object."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    module, cls = node.get("py:module"), node.get("py:class")
    candidates = [target]
    if module:
        candidates += [f"{module}.{cls}.{target}"] if cls else []
        candidates.append(f"{module}.{target}")
    documented = _documented(app, env)
    for candidate in candidates:
        if not candidate.startswith(f"{PACKAGE}."):
            continue
        obj = resolve(candidate)
        name = documented.get(identity(candidate, obj)) if obj is not None else None
        if name:
            domain = env.get_domain("py")
            return domain.resolve_xref(
                env, node["refdoc"], app.builder, node["reftype"], name, node, contnode
            )
    return None


def _check_complete(app: Sphinx, env: Any) -> None:
    if not app._api_read:  # the page was not re-read, and attnlib did not change (autodoc
        return  # re-reads it when a module does): skip importing torch, keep rebuilds fast
    documented = set(env.get_domain("py").objects)
    for name in sorted(public_names() - documented):
        logger.warning(
            "api_usage: public name %s is not documented in the API reference; add it "
            "to chapters/api.md",
            name,
            type="api_usage",
        )


def _add_static(app: Sphinx) -> None:
    app.config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict[str, object]:
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("builder-inited", _add_static)
    app.add_css_file("api_usage.css")  # long lines of the docstrings' examples wrap
    _reset(app, None, [])
    app.connect("env-before-read-docs", _reset)
    # after napoleon (priority 500) has turned the docstring into reST
    app.connect("autodoc-process-docstring", _add_used_in, priority=600)
    app.connect("missing-reference", _resolve_by_identity)
    app.connect("env-check-consistency", _check_complete)
    return {"version": "1.0", "parallel_read_safe": False, "parallel_write_safe": True}
