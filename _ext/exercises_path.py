"""``lib/`` on ``sys.path`` for the book's build: ``chapters/exercises.md`` documents
``exercises.stubs`` with autodoc, and the wheel installs ``attnlib`` only (not ``exercises``)."""

from __future__ import annotations

import sys
from pathlib import Path

LIB = str(Path(__file__).resolve().parents[1] / "lib")


def setup(app):
    if LIB not in sys.path:
        sys.path.insert(0, LIB)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
