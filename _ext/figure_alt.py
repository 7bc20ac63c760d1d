"""Give every image of the book a real alt text: its figure's caption.

A plot in a chapter is a notebook output that myst-nb turns into a numbered figure from the
cell's metadata (``mystnb: figure: caption``, which tests/test_site.py requires of every
plot). myst-nb gives the image itself no alt text, so the HTML writer used the image's file
path ("../_images/d5e4...81.png") as its alt: 81 of the book's 85 figures said nothing to a
screen reader, or when the image does not load.

Here each image without an alt text (or whose alt text is its own path) gets the plain text
of its figure's caption, math written as its TeX without the markup (``$\\mathbf{u}$`` gives
"u"). An image outside a figure (no caption to use) gets the title of its section,
"Figure of the section <title>". Alt texts written by hand, such as myst-nb's
``mystnb: image: alt`` cell metadata or Markdown's ``![alt](path)``, are kept. Chosen over
reading the cell metadata because it sees every image, from a notebook output or from
Markdown, after myst-nb has built the figure, and it needs no change to the notebooks.

tests/test_site_phone.py checks that every image of every page has a real alt text.
Enabled in ``_config.yml`` under ``sphinx: local_extensions``.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.application import Sphinx

# TeX commands shown as a character, and wrappers that are dropped keeping their argument.
_TEX_SYMBOLS = {
    "cdot": "·",
    "times": "×",
    "top": "ᵀ",
    "sqrt": "√",
    "to": "→",
    "rightarrow": "→",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "approx": "≈",
    "infty": "∞",
    "sum": "∑",
    "alpha": "α",
    "beta": "β",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "sigma": "σ",
    "pi": "π",
    "ldots": "…",
    "dots": "…",
}
_TEX_WRAPPER = re.compile(
    r"\\(?:mathbf|mathrm|mathit|mathsf|mathtt|boldsymbol|operatorname|text|textrm|textit|"
    r"textbf|mathcal|bm)\s*\{([^{}]*)\}"
)
_TEX_FRAC = re.compile(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_TEX_COMMAND = re.compile(r"\\([A-Za-z]+)")
_TEX_SPACING = re.compile(r"\\[,;:! ]|\\left|\\right|\\[lr]Vert|\\[lr]vert")


def plain_tex(tex: str) -> str:
    """TeX as plain text: ``\\mathbf{u} = (2, 1)`` -> ``u = (2, 1)``."""
    text = _TEX_SPACING.sub(lambda m: "‖" if "Vert" in m.group(0) else " ", tex)
    # symbols first, while each command still ends where its name does (\cdot\mathbf{v})
    text = _TEX_COMMAND.sub(lambda m: _TEX_SYMBOLS.get(m.group(1), m.group(0)), text)
    previous = None
    while previous != text:  # nested wrappers and fractions, innermost first
        previous = text
        text = _TEX_WRAPPER.sub(r"\1", text)
        text = _TEX_FRAC.sub(r"(\1)/(\2)", text)
    text = _TEX_COMMAND.sub(r"\1", text)  # any other command: its name
    text = text.replace("{", "").replace("}", "").replace("\\", "")
    return re.sub(r"\s+", " ", text).strip()


def plain_text(node: nodes.Node) -> str:
    """The text of a node as a reader would read it, math included."""
    if isinstance(node, (nodes.math, nodes.math_block)):
        return plain_tex(node.astext())
    if isinstance(node, nodes.Text):
        return str(node)
    return "".join(plain_text(child) for child in node.children)


def _needs_alt(image: nodes.image) -> bool:
    alt = (image.get("alt") or "").strip()
    if not alt:
        return True
    uri = image.get("uri") or ""
    # a path, as myst-nb or the writer would give it: the image's own name
    return alt == uri or alt.rsplit("/", 1)[-1] == uri.rsplit("/", 1)[-1]


def alt_text(image: nodes.image) -> str | None:
    """The caption of the image's figure, else the title of its section, else None."""
    parent = image.parent
    while parent is not None and not isinstance(parent, (nodes.figure, nodes.section)):
        parent = parent.parent
    if isinstance(parent, nodes.figure):
        for caption in parent.findall(nodes.caption):
            text = re.sub(r"\s+", " ", plain_text(caption)).strip()
            if text:
                return text
        parent = parent.parent
        while parent is not None and not isinstance(parent, nodes.section):
            parent = parent.parent
    if isinstance(parent, nodes.section):
        title = next(iter(parent.findall(nodes.title)), None)
        if title is not None:
            return f"Figure of the section {plain_text(title).strip()}"
    return None


def add_alt_texts(app: Sphinx, doctree: nodes.document) -> None:
    for image in doctree.findall(nodes.image):
        if _needs_alt(image):
            text = alt_text(image)
            if text:
                image["alt"] = text


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("doctree-read", add_alt_texts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
