"""Write each inline <script> once per page: Sphinx 7 wrote sphinx-thebe's twice (file name
``None`` and ``""``), a SyntaxError on every page. Fixed in Sphinx 8.2.2 (sphinx-doc/sphinx
#13402): remove this extension and its _config.yml line once the book builds with it
(Jupyter Book 1 pins sphinx~=7.0)."""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def _drop_duplicate_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    scripts = context.get("script_files") or []
    unique: dict[tuple, Any] = {}
    for s in scripts:  # the same script, whatever its spelling of "no file"
        unique.setdefault((str(s.filename or ""), s.priority, *sorted(s.attributes.items())), s)
    scripts[:] = unique.values()  # in place: it is the builder's list for this page


def setup(app: Sphinx) -> dict[str, object]:
    # late (priority 900), after every extension has added its scripts for the page
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
