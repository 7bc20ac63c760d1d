"""Reading time of every chapter: the whole text, and the core path a first reading takes.

The figures are those of the team's readability tool (``../shared/tools/readability.py``),
whose measure is copied here (:func:`measure`) so that the book measures itself: prose words /
180 + visible code lines / 12 minutes, sentence lengths, colons per 1,000 words. Prose is the
markdown with code, math, inline code, links and HTML reduced to placeholders, headings and
table rows dropped; list items and paragraphs end a sentence. The *core* leaves out what a
first reading can skip:

- markdown inside a collapsible block, i.e. a colon fence or backtick fence whose options include
  ``:class: dropdown`` (``:::{admonition} Deep dive: ...``), or a ``{dropdown}`` / ``{toggle}``
  directive, and the solutions of exercises (``{solution-start}`` ... ``{solution-end}``);
- code cells tagged ``hide-cell``, ``hide-input``, ``remove-cell`` or ``remove-input``.

Usage (from the project root)::

    python scripts/reading_time.py [chapters/X.ipynb ...]

prints one row per chapter and the totals. ``core_minutes`` and ``stats`` are imported by
``tests/test_reading_path.py``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_TAGS = {"hide-cell", "hide-input", "remove-cell", "remove-input"}
_OPEN = re.compile(r"^(?P<fence>:{3,}|`{3,})\{(?P<name>[a-z-]+)\}")
_PLACEHOLDERS = [  # (pattern, replacement, flags), in readability.py's order
    (r"```.*?```", " ", re.S),
    (r"\$\$.*?\$\$", " MATH ", re.S),
    (r"\$[^$\n]+\$", "X", 0),
    (r"<[^>]+>", " ", 0),
    (r"\{[a-z:-]+\}`[^`]*`", "REF", 0),
    (r"`[^`]*`", "CODE", 0),
    (r"\[([^\]]*)\]\([^)]*\)", r"\1", 0),
    (r"^\s*(#|\||:::|```|\(.*\)=).*$", "", re.M),
    (r"^\s*([-*>]|\d+\.) ", " § ", re.M),
    (r"\n\s*\n", " § ", 0),
]


KEYS = ("words", "minutes", "mean", "over30", "colons")


def measure(text: str, code_lines: int) -> dict:
    """readability.py's figures of some prose and a count of visible code lines."""
    for pattern, replacement, flags in _PLACEHOLDERS:
        text = re.sub(pattern, replacement, text, flags=flags)
    text = text.replace("*", "")
    words = len(text.split()) or 1
    flat = re.sub(r"\s+", " ", text)
    parts = [q for chunk in flat.split("§") for q in re.split(r"(?<=[.!?])\s+(?=[A-Z(*\"])", chunk)]
    lengths = [len(p.split()) for p in parts if len(p.split()) >= 3] or [0]
    return {
        "words": words,
        "minutes": words / 180 + code_lines / 12,
        "mean": sum(lengths) / len(lengths),
        "over30": sum(n > 30 for n in lengths) / len(lengths),
        "colons": 1000 * len(re.findall(r":\s", text)) / words,
    }


def _core_markdown(text: str, in_solution: bool) -> tuple[str, bool]:
    """``text`` without its collapsible blocks; ``in_solution`` carries across cells."""
    kept, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if "{solution-start}" in line:
            in_solution = True
        if in_solution:
            if "{solution-end}" in line:
                in_solution = False
                # skip the closing fence line of the solution-end directive
                while i + 1 < len(lines) and not lines[i + 1].strip().strip("`:"):
                    i += 1
            i += 1
            continue
        match = _OPEN.match(line.strip())
        if match:
            fence, name = match["fence"], match["name"]
            j = i + 1
            options = []
            while (
                j < len(lines)
                and lines[j].strip().startswith(":")
                and not lines[j].strip().startswith(fence)
            ):
                options.append(lines[j])
                j += 1
            collapsible = name in {"dropdown", "toggle"} or any("dropdown" in o for o in options)
            if collapsible:
                # a nested block inside uses a longer fence, so the first line that is exactly
                # this fence closes the block
                while j < len(lines) and lines[j].strip() != fence:
                    j += 1
                j += 1
                i = j
                continue
        kept.append(line)
        i += 1
    return "\n".join(kept), in_solution


def load(path: Path, core: bool) -> tuple[str, int]:
    """The prose of a chapter and its number of visible code lines (all of it, or the core)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    prose, code_lines, in_solution = [], 0, False
    hidden = SKIPPED_TAGS if core else {"remove-cell", "remove-input", "hide-input"}
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "markdown":
            if core:
                src, in_solution = _core_markdown(src, in_solution)
            prose.append(src)
        elif cell["cell_type"] == "code" and not hidden & tags and not (core and in_solution):
            code_lines += sum(1 for line in src.splitlines() if line.strip())
    return "\n\n".join(prose), code_lines


def stats(path: Path, core: bool = False) -> dict:
    """readability.py's figures for one chapter, of the whole text or of its core path."""
    return measure(*load(Path(path), core))


def main(paths: list[str]) -> None:
    paths = [Path(p) for p in paths] or sorted((ROOT / "chapters").glob("*.ipynb"))
    head = f"{'chapter':38s} {'all min':>7s} {'core min':>8s} {'>30w':>5s} {'colons':>6s}"
    print(head)
    total = core_total = 0.0
    for path in paths:
        whole, core = stats(path), stats(path, core=True)
        total += whole["minutes"]
        core_total += core["minutes"]
        print(
            f"{path.name[:38]:38s} {whole['minutes']:7.0f} {core['minutes']:8.0f} "
            f"{whole['over30']:5.0%} {whole['colons']:6.1f}"
        )
    print(
        f"{'total':38s} {total:7.0f} {core_total:8.0f}  "
        f"({total / 60:.1f} h, core {core_total / 60:.1f} h)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
