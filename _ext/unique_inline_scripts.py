"""Write each inline <script> once per page (a workaround for a bug of Sphinx 7).

Sphinx 7 writes an inline script (``app.add_js_file(None, body=...)``) twice when an
extension adds it after the HTML builder has started: once as given (file name
``None``), once more re-read from the registry (file name ``""``), and the two do not
compare equal. sphinx-thebe adds ``const THEBE_JS_URL = ...`` that way, so every page
threw ``SyntaxError: Identifier 'THEBE_JS_URL' has already been declared`` in the
browser. This extension drops the second copy.

Upstream fix: sphinx-doc/sphinx pull request #13402, "Sphinx.add_js_file(): replace
``None`` filename with ``''`` before passing to HTML builder" (commit 13d2899, changelog
"#13402: Ensure inline <script> tags are written exactly once"), first released in
**Sphinx 8.2.2** (March 2025). Remove this extension (and its line in ``_config.yml``)
once the book builds with Sphinx >= 8.2.2; Jupyter Book 1.0.4.post1 requires
``sphinx~=7.0`` (the book pins 7.4.7), so that means leaving Jupyter Book 1.

Enabled in ``_config.yml`` under ``sphinx: local_extensions``.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def _key(script: Any) -> tuple:
    """What makes two script entries the same script, whatever the spelling of 'no file'."""
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {})
    return (str(filename), getattr(script, "priority", None), tuple(sorted(attributes.items())))


def _drop_duplicate_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique  # in place: it is the builder's list for this page


def setup(app: Sphinx) -> dict[str, object]:
    # late (priority 900), after every extension has added its scripts for the page
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
