"""Every image gets a real alt text: its figure's caption (math as plain text).

myst-nb gives a notebook output's image no alt text, so the HTML writer used its file path
("../_images/d5e4...81.png"). An image with no alt text, or its own path as one, gets the
plain text of its figure's caption (``$\\mathbf{u}$`` gives "u"), else "Figure of the section
<title>". Alt texts written by hand (``mystnb: image: alt``, ``![alt](path)``) are kept.
Done on the doctree so that it sees every image, from an output or from Markdown.
tests/test_site.py (test_page_reads_on_a_phone) checks that every image has a real alt text.
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.utils.math import tex2unichar
from sphinx.application import Sphinx

# TeX commands shown as a character (docutils' table, with a reader's ·, ᵀ, √ and …), and
# wrappers that are dropped keeping their argument.
_TEX_SYMBOLS = {
    name: char
    for table in ("mathalpha", "mathbin", "mathop", "mathord", "mathrel")
    for name, char in getattr(tex2unichar, table).items()
} | {"cdot": "·", "top": "ᵀ", "sqrt": "√", "dots": "…"}
_TEX_WRAPPER = re.compile(  # and the braces of a square root: \sqrt{d} (by then √{d}) -> √d
    r"(?:\\(?:mathbf|mathrm|mathit|mathsf|mathtt|boldsymbol|operatorname|text|textrm|textit|"
    r"textbf|mathcal|bm)|(?<=√))\s*\{([^{}]*)\}"
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
    """No alt text, or the image's path as one (as myst-nb or the HTML writer give it)."""
    alt, uri = (image.get("alt") or "").strip(), image.get("uri") or ""
    return not alt or alt.rsplit("/", 1)[-1] == uri.rsplit("/", 1)[-1]


def alt_text(image: nodes.image) -> str | None:
    """The caption of the image's figure, else the title of its section, else None."""
    node = image.parent
    while node is not None and not isinstance(node, nodes.section):
        caption = node.next_node(nodes.caption) if isinstance(node, nodes.figure) else None
        if caption and (text := re.sub(r"\s+", " ", plain_text(caption)).strip()):
            return text
        node = node.parent
    title = node.next_node(nodes.title) if node is not None else None
    return f"Figure of the section {plain_text(title).strip()}" if title else None


def add_alt_texts(app: Sphinx, doctree: nodes.document) -> None:
    for image in doctree.findall(nodes.image):
        if _needs_alt(image) and (text := alt_text(image)):
            image["alt"] = text


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("doctree-read", add_alt_texts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
