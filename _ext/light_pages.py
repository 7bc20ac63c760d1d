"""Lighter pages: each page loads what it uses, and its figures are smaller files.

Issue 36, point 5: a chapter page weighed 3.99 to 7.34 MB served (Lighthouse mobile
performance 28 to 50), mostly what the theme and its extensions load on every page. Here:

* ``templates/layout.html`` drops pydata-sphinx-theme's ``fontawesome.js`` (1.49 MB: it
  redraws every icon as an SVG; the theme's CSS already draws them from FontAwesome's woff2
  webfonts) and, outside ``search.html``, ``searchindex.js`` (0.23 MB) with Sphinx's search
  tools: the theme's search field only opens the search page, which loads them itself.
* MathJax (served by sphinx-mathjax-offline) is loaded as its components, TeX input, CHTML
  output and the assistive MathML that screen readers read, without the 0.43 MB contextual
  menu of ``tex-chtml.js`` (1.16 MB, now 0.73 MB), and only on pages that have math;
  sphinx-design's style (55 kB) and script only on pages that use it (none, today).
* Every script file of a page runs ``defer`` (after the page is parsed, in its order), but
  ``documentation_options.js`` and those of the search page, so that none holds up the first
  paint.
* Images load lazily, but the first of a page (it may be the largest paint); a figure with
  a size in its style gets it as ``width``/``height`` attributes too, so that the page keeps
  its place for it before it loads.
* After the build, the theme's CSS loses the rules of the FontAwesome icons that no page
  and no script names (1,881 of them, 86 kB of its 397 kB).
* After the build, every PNG of ``_images/`` is written with a palette of 256 colours (each
  channel within 19 of 255 levels of the notebook's figure on the book's figures; an image
  that does not keep within 24 levels on 99.9 % of its pixels is only recompressed): 14.8 MB
  of figures become 4.9 MB. The notebooks are not touched. Results are kept in
  ``_build/.png-cache`` by the hash of the original, so a rebuild takes no time for them.

tests/test_site.py checks the weight of every page (at most 3 MB with all its figures), that
MathJax typesets every equation and that the icons are drawn. Enabled in ``_config.yml``.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx

MATHJAX = {"load": ["input/tex", "output/chtml", "a11y/assistive-mml"]}
IMG = re.compile(r"<img\b([^>]*)>")
SPHINX_DESIGN = re.compile(r'class="([^"]* )?sd-')
STYLE_SIZE = re.compile(r"width:\s*(\d+)px;\s*height:\s*(\d+)px")
MAX_ERROR = 24  # levels of 255, on 99.9 % of the pixels
RULE = re.compile(r"([^{}]+)\{[^{}]*\}")  # a CSS rule: its selectors, its block
ICON = re.compile(r"\.(fa-[a-z0-9-]+):{1,2}before")  # FontAwesome's rule for one icon


def _configure(app: Sphinx, config) -> None:
    config.templates_path.append(str(Path(__file__).parent / "templates"))
    config.mathjax_path = "mathjax/startup.js"  # sphinx-mathjax-offline said tex-chtml.js
    config.mathjax3_config = {**(config.mathjax3_config or {}), "loader": MATHJAX}


def _lazy_image(match: re.Match, first: list) -> str:
    attributes = match.group(1)
    if "loading=" not in attributes and not first.append(1) and len(first) > 1:
        attributes = ' loading="lazy"' + attributes
    size = STYLE_SIZE.search(attributes)
    if size and " width=" not in attributes:
        attributes = f' width="{size[1]}" height="{size[2]}"' + attributes
    return f"<img{attributes}>"


def _light_page(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    body = context.get("body", "")
    if body:
        first: list = []
        context["body"] = IMG.sub(lambda m: _lazy_image(m, first), body)
    scripts = context.get("script_files") or []
    if not SPHINX_DESIGN.search(body):  # no tab, card or grid of sphinx-design on the page
        css = context.get("css_files") or []
        css[:] = [c for c in css if "sphinx-design" not in str(c.filename)]
        scripts[:] = [s for s in scripts if "design-tabs" not in str(s.filename)]
    if 'class="math' not in body:
        scripts[:] = [  # in place: the builder's list for this page
            s
            for s in scripts
            if "mathjax" not in str(s.filename)
            and "window.MathJax" not in s.attributes.get("body", "")
        ]
    else:  # mathjax-chunks.js configures MathJax, so it runs just before it (the builder then
        # sorts the scripts by priority, keeping the order of equals: html_js_files are 800)
        chunks = [s for s in scripts if "mathjax-chunks" in str(s.filename)]
        scripts[:] = [s for s in scripts if s not in chunks]
        at, mathjax = next((i, s) for i, s in enumerate(scripts) if "mathjax/" in str(s.filename))
        scripts[at:at] = [
            type(s)(s.filename, priority=mathjax.priority, **s.attributes) for s in chunks
        ]
    if pagename != "search":  # its search tools run in order, and need doctools.js
        scripts[:] = [_deferred(s) for s in scripts]


def _deferred(script):
    """A script file as ``defer`` (it runs once the page is parsed, in the same order): none
    of them writes into the page as it is parsed. documentation_options.js stays as it is:
    the page's inline scripts set its DOCUMENTATION_OPTIONS."""
    attributes = script.attributes
    if (
        not script.filename
        or {"async", "defer"} & set(attributes)
        or str(script.filename).endswith("documentation_options.js")
    ):
        return script
    return type(script)(script.filename, priority=script.priority, **attributes, defer="defer")


def _palette_png(data: bytes) -> bytes:
    """The PNG with a 256-colour palette if it stays close to the original, else recompressed."""
    import numpy as np
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    rgba = image.convert("RGBA")
    pixels = np.asarray(rgba, dtype=np.int16)
    if pixels[..., 3].min() == 255:  # opaque: the better method, on RGB
        small = rgba.convert("RGB").quantize(256, Image.Quantize.MAXCOVERAGE, dither=0)
    else:
        small = rgba.quantize(256, Image.Quantize.FASTOCTREE, dither=0)
    error = np.abs(np.asarray(small.convert("RGBA"), dtype=np.int16) - pixels).max(axis=-1)
    if np.percentile(error, 99.9) > MAX_ERROR:
        small = image
    out = io.BytesIO()
    small.save(out, "PNG", optimize=True)
    return min(out.getvalue(), data, key=len)


def _drop_unused_icons(outdir: Path) -> None:
    """Remove from the theme's CSS the rules that draw FontAwesome icons no page names."""
    css = outdir / "_static" / "styles" / "pydata-sphinx-theme.css"
    if not css.exists():
        return
    texts = [p.read_text(encoding="utf-8") for p in outdir.rglob("*.html")]
    texts += [p.read_text(encoding="utf-8") for p in outdir.glob("_static/**/*.js")]
    used = set(re.findall(r"\bfa-[a-z0-9-]+", "\n".join(texts)))

    def rule(match: re.Match) -> str:
        selectors = [s.strip() for s in match.group(1).split(",")]
        icons = [ICON.fullmatch(s) for s in selectors]
        if all(icons) and not {m[1] for m in icons} & used:
            return ""
        return match.group(0)

    css.write_text(RULE.sub(rule, css.read_text(encoding="utf-8")), encoding="utf-8")


def _after_build(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    _drop_unused_icons(Path(app.outdir))
    cache = Path(app.outdir).parent / ".png-cache"
    cache.mkdir(exist_ok=True)
    for path in sorted((Path(app.outdir) / "_images").glob("*.png")):
        data = path.read_bytes()
        cached = cache / f"{hashlib.sha256(data).hexdigest()}.png"
        if not cached.exists():
            small = _palette_png(data)
            cached.write_bytes(small)  # the original's result, and the result's own (itself)
            (cache / f"{hashlib.sha256(small).hexdigest()}.png").write_bytes(small)
        if cached.stat().st_size != len(data) or cached.read_bytes() != data:
            shutil.copyfile(cached, path)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("config-inited", _configure)
    app.connect("html-page-context", _light_page, priority=800)  # after MathJax adds itself
    app.connect("build-finished", _after_build)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
