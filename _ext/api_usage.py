"""The API reference's generated parts (chapters/api.md documents attnlib with autodoc).

1. "Used in" lines: each documented module, class, function and constant links to the
   chapters whose code cells use it (found with :mod:`ast`, whatever the import style).
   Names count by object: ``attnlib.attention.softmax`` is ``attnlib.softmax``. Methods get
   none (their instance is not known without running the code).
2. A py reference by another name of a documented object (``:func:`read_glove_text``` in
   attnlib/embeddings.py) resolves to the documented name (``attnlib.read_glove_text``).
3. A public name (``attnlib.__all__``, its modules' ``__all__``) missing from the page is a
   warning, so ``-W`` fails the build.
4. In the chapter notebooks, the first inline code per section that is a documented name or
   a call of one (`attnlib.causal_mask(L, S)`, any name of the object) links to its entry;
   not in titles or link texts. The notebooks keep plain backticks (Colab shows no roles).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "attnlib"
CHAPTERS = "chapters/*.ipynb"  # the notebooks scanned, relative to the book's root
WITH_USED_IN = {"module", "class", "exception", "function", "data"}  # autodoc's `what`
NOT_LINKED = (nodes.title, nodes.reference, pending_xref)  # nor what is under them
MENTION = re.compile(r"(attnlib(?:\.[A-Za-z_]\w*)+)(\([^`]*\))?")  # attnlib.x.y or a call


def scan_code(source: str, aliases: dict[str, str]) -> set[str]:
    """The dotted attnlib names one code cell uses. ``aliases`` (local name -> what it
    stands for) gets the cell's imports: pass one dict for a notebook's cells, in order."""
    lines = source.split("\n")  # IPython's %magic and !shell lines blanked for ast
    try:
        tree = ast.parse("\n".join("" if s.lstrip()[:1] in "%!" else s for s in lines))
    except SyntaxError:
        return set()
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in (a for a in node.names if a.name.split(".")[0] == PACKAGE):
                # import attnlib.positions as pos; import attnlib.positions binds `attnlib`
                aliases[alias.asname or PACKAGE] = alias.name if alias.asname else PACKAGE
                used.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] != PACKAGE:
                continue
            for alias in (a for a in node.names if a.name != "*"):
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                used.add(f"{node.module}.{alias.name}")
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):  # the longest chains only: a.b.c, not also a.b and a
        if not isinstance(node, ast.Attribute | ast.Name) or id(node) in inner:
            continue
        parts = ast.unparse(node).split(".")  # a.b.c, not a.f().c
        if parts[0] in aliases and all(part.isidentifier() for part in parts):
            used.add(".".join([aliases[parts[0]], *parts[1:]]))
    return used


def scan_notebook(path: Path) -> set[str]:
    """The dotted attnlib names the code cells of a notebook use (markdown is not read)."""
    aliases: dict[str, str] = {}
    used: set[str] = set()
    for cell in json.loads(Path(path).read_text(encoding="utf-8")).get("cells", []):
        if cell.get("cell_type") == "code":
            used |= scan_code("".join(cell.get("source", "")), aliases)
    return used


def chapter_numbers(toc_path: Path) -> dict[str, int]:
    """docname -> chapter number: the chapters of the ``numbered: true`` parts of _toc.yml,
    counted across parts (as sphinx-multitoc-numbering does)."""
    parts = yaml.safe_load(Path(toc_path).read_text(encoding="utf-8")).get("parts", [])
    files = [c["file"] for p in parts if p.get("numbered") for c in p.get("chapters", [])]
    return {file: number for number, file in enumerate(files, 1)}


def resolve(dotted: str) -> Any:
    """The object a dotted name denotes (importing modules on the way); None if none."""
    try:
        return pkgutil.resolve_name(dotted)
    except (ImportError, AttributeError, ValueError):
        return None


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
        names.add(f"{package}.{name}")
        module = getattr(root, name)
        for member in getattr(module, "__all__", []) if inspect.ismodule(module) else []:
            if not (member in top and getattr(root, member) is getattr(module, member)):
                names.add(f"{package}.{name}.{member}")  # not already public at the top
    return names


def counts_for(dotted: str) -> Iterable[str]:
    """The identities a used name counts for: itself, every prefix, and the module that
    defines it (``attnlib.multihead`` is used where ``attnlib.MultiHeadAttention`` is)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if (obj := resolve(prefix)) is not None:
            yield identity(prefix, obj)
            if inspect.isclass(obj) or inspect.isroutine(obj):
                yield getattr(obj, "__module__", None) or prefix


def _usage(app: Sphinx) -> dict[str, dict[str, None]]:
    """identity -> docnames of the chapters that use it, in the book's order (scanned once)."""
    if app._api_usage is not None:
        return app._api_usage
    usage: dict[str, dict[str, None]] = {}
    numbers = chapter_numbers(Path(app.srcdir) / "_toc.yml")
    for path in sorted(Path(app.srcdir).glob(CHAPTERS)):
        docname = app.env.path2doc(str(path))
        if docname is None or docname not in app.env.found_docs:
            continue  # not in the book (only_build_toc_files)
        number = numbers.get(docname)
        link = f":doc:`chapter {number} </{docname}>`" if number else f":doc:`/{docname}`"
        app._api_chapters[docname] = path, link
        for dotted in scan_notebook(path):
            for key in counts_for(dotted):
                usage.setdefault(key, {})[docname] = None  # an ordered set
    app._api_usage = usage
    return usage


def _add_used_in(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]):
    if what not in WITH_USED_IN or not name.startswith(f"{PACKAGE}."):
        return
    app._api_read = True
    usage = _usage(app)
    for path, _ in app._api_chapters.values():  # re-read the API page when a chapter changes
        app.env.note_dependency(str(path))
    links = [app._api_chapters[doc][1] for doc in usage.get(identity(name, obj), {})]
    text = ", ".join(links) if links else "no chapter."
    lines.extend(["", ".. container:: api-used-in", "", f"   **Used in:** {text}", ""])


def _reset(app: Sphinx, env: Any, docnames: list[str]) -> None:
    app._api_usage = None
    app._api_chapters = {}  # docname -> notebook path, its link ("chapter N" or its title)
    app._api_documented = None
    app._api_read = False


def _documented_name(app: Sphinx, env: Any, dotted: str) -> str | None:
    """The name the page documents the object of ``dotted`` under, if it does."""
    if app._api_documented is None:  # identity -> documented name, for each attnlib object
        app._api_documented = {}
        for fullname in env.get_domain("py").objects:
            obj = resolve(fullname) if fullname.startswith(f"{PACKAGE}.") else None
            if obj is not None:
                app._api_documented.setdefault(identity(fullname, obj), fullname)
    if dotted in env.get_domain("py").objects:
        return dotted
    obj = resolve(dotted) if dotted.startswith(f"{PACKAGE}.") else None
    return app._api_documented.get(identity(dotted, obj)) if obj is not None else None


def _resolve_by_identity(app: Sphinx, env: Any, node: Any, contnode: Any) -> Any:
    """A py reference to another name of a documented attnlib object: link to that object."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    module, cls = node.get("py:module"), node.get("py:class")
    for candidate in (target, f"{module}.{cls}.{target}", f"{module}.{target}"):  # "None." fails
        if name := _documented_name(app, env, candidate):
            args = (env, node["refdoc"], app.builder, node["reftype"], name, node, contnode)
            return env.get_domain("py").resolve_xref(*args)
    return None


class LinkMentions(SphinxPostTransform):
    """4. in the module docstring: the mention goes into a py:obj pending_xref, as the role
    {py:obj}`attnlib.x(a) <attnlib.x>` would put it, before ReferencesResolver (priority 10)."""

    default_priority = 5

    def run(self, **kwargs: Any) -> None:
        if Path(self.env.doc2path(self.env.docname)).match(CHAPTERS):
            self._link(self.document, set())

    def _link(self, node: nodes.Element, seen: set[str]) -> None:
        """Links the mentions under ``node``; ``seen``: the names its section has linked."""
        for child in list(node.children):
            if isinstance(child, nodes.section) and isinstance(child.next_node(), nodes.title):
                self._link(child, set())  # a titled section (sphinx-exercise's content is not)
            elif isinstance(child, nodes.literal):
                mention = MENTION.fullmatch(child.astext().strip())
                target = mention and _documented_name(self.app, self.env, mention[1])
                if target and target not in seen:
                    seen.add(target)
                    xref = pending_xref("", refdomain="py", reftype="obj", reftarget=target)
                    node.replace(child, xref)  # not replace_self, which copies the classes
                    xref += child
                    child["classes"] += ["xref", "py", "py-obj"]  # as the role's
            elif isinstance(child, nodes.Element) and not isinstance(child, NOT_LINKED):
                self._link(child, seen)


def _check_complete(app: Sphinx, env: Any) -> None:
    if not app._api_read:  # the page was not re-read, and attnlib did not change (autodoc
        return  # re-reads it when a module does): skip importing torch, keep rebuilds fast
    documented = set(env.get_domain("py").objects)
    for name in sorted(public_names() - documented):
        msg = "api_usage: public name %s is missing from the API page (chapters/api.md)"
        logger.warning(msg, name, type="api_usage")


def setup(app: Sphinx) -> dict[str, object]:
    app.setup_extension("sphinx.ext.autodoc")
    static = str(Path(__file__).parent / "static")  # api_usage.css
    app.connect("builder-inited", lambda app: app.config.html_static_path.append(static))
    app.add_css_file("api_usage.css")  # long lines of the docstrings' examples wrap
    _reset(app, None, [])
    app.connect("env-before-read-docs", _reset)
    # after napoleon (priority 500) has turned the docstring into reST
    app.connect("autodoc-process-docstring", _add_used_in, priority=600)
    app.connect("missing-reference", _resolve_by_identity)
    app.add_post_transform(LinkMentions)
    app.connect("env-check-consistency", _check_complete)
    return {"version": "1.0", "parallel_read_safe": False, "parallel_write_safe": True}
