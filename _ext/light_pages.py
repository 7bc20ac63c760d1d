"""Lighter pages (issue 36.5): each page loads what it uses, and its figures are smaller.

templates/layout.html drops fontawesome.js (1.49 MB: the theme's CSS draws the icons) and,
outside search.html, the search index and tools. MathJax loads without its menu (0.73 MB,
not 1.16), and with sphinx-design's files only on pages that use it. Scripts run ``defer``;
images load lazily but the first. After the build, the theme's CSS loses the rules of
unused icons, FontAwesome's fonts keep only the glyphs the CSS names (300 kB become 6 kB),
and each PNG gets a 256-colour palette if it stays within MAX_ERROR (14.8 MB of figures
become 4.9 MB; cached in _build/.png-cache). tests/test_site.py checks each page's weight
(3 MB at most), that MathJax typesets every equation and that icons show.
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
    """The script file as ``defer`` (none writes into the page as it is parsed), but
    documentation_options.js: the page's inline scripts set its DOCUMENTATION_OPTIONS."""
    if not script.filename or {"async", "defer"} & set(script.attributes):
        return script
    if str(script.filename).endswith("documentation_options.js"):
        return script
    return type(script)(
        script.filename, priority=script.priority, **script.attributes, defer="defer"
    )


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

    def rule(match: re.Match) -> str:  # dropped if it only draws icons that are not used
        icons = [ICON.fullmatch(s.strip()) for s in match.group(1).split(",")]
        return "" if all(icons) and not {m[1] for m in icons} & used else match.group(0)

    css.write_text(RULE.sub(rule, css.read_text(encoding="utf-8")), encoding="utf-8")


def _subset_icon_fonts(static: Path) -> None:
    """FontAwesome's fonts with only the glyphs some CSS of the site names (as ``\\f002``, or
    as the character itself in the theme's variables)."""
    from fontTools import subset

    css = "\n".join(p.read_text(encoding="utf-8") for p in static.rglob("*.css"))
    glyphs = {int(code, 16) for code in re.findall(r"\\([0-9a-fA-F]{4,5})", css)}
    glyphs |= {ord(c) for c in css if "\ue000" <= c <= "\uf8ff"}  # the private use area
    options = subset.Options(flavor="woff2", layout_features=[], notdef_outline=True)
    for path in static.glob("vendor/fontawesome/webfonts/*.woff2"):
        font = subset.load_font(str(path), options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=glyphs & set(font.getBestCmap()))
        subsetter.subset(font)
        subset.save_font(font, str(path), options)


def _after_build(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    _drop_unused_icons(Path(app.outdir))
    _subset_icon_fonts(Path(app.outdir) / "_static")
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
