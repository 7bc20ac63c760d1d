"""Link the chapters' mentions of attnlib names to the API reference (chapters/api.md).

In the markdown cells of chapters/*.ipynb, the first backticked mention of a documented
attnlib name in each section (a section starts at a markdown heading) becomes a Sphinx
cross-reference, which the book renders as the same code text, linked:

    `attnlib.scaled_dot_product_attention`  ->  {py:obj}`attnlib.scaled_dot_product_attention`
    `attnlib.causal_mask(L, S)`  ->  {py:obj}`attnlib.causal_mask(L, S) <attnlib.causal_mask>`
    `attnlib.attention.softmax`  ->  {py:obj}`attnlib.attention.softmax <attnlib.softmax>`

Later mentions in the same section stay plain code (one link per name and section reads
better than a page of links). Only markdown cell sources change: code cells, outputs and
metadata are untouched, so nothing needs re-executing. Not rewritten: code fences
(```python ...), headings, link texts, backticked code that is more than a name or a call
(`glove = attnlib.load_glove()`), the bare package name `attnlib`, and names the API page
does not document (they are listed, so that a typo is seen).

Idempotent: a mention already linked ({py:...}`...`) counts as the section's first, so a
second run changes nothing.

Which names are documented is read from the built book's Sphinx inventory,
_build/html/objects.inv, so build first:

    make book
    .venv/bin/python scripts/link_api.py          # rewrite the notebooks
    .venv/bin/python scripts/link_api.py --check  # exit 1 if it would change one
    make book

tests/test_site.py runs the --check after the build, so a new mention left unlinked fails
`make test`.

REPO defaults to the current directory (or pass --repo PATH); the script imports REPO/lib's
attnlib itself (to match other names of a documented object), and needs Sphinx and nbformat:
run it with the book's venv.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
from sphinx.util.inventory import InventoryFile

# What a dotted name denotes, and when two names are the same object: as the API page's
# own extension decides it (_ext/api_usage.py), so the links and the page agree.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))
from api_usage import identity, resolve  # noqa: E402

ROLE = "py:obj"  # any Python object; unlike py:func it adds no "()" to the text

# A code span, possibly preceded by a role: {role}`text`, `text`, ``text``.
SPAN = re.compile(r"(?P<role>\{[\w:.-]+\})?(?P<ticks>`+)(?P<text>.+?)(?P=ticks)(?!`)")
# A mention: a dotted attnlib name, optionally called: attnlib.x.y or attnlib.x(a, b).
MENTION = re.compile(r"(?P<name>attnlib(?:\.[A-Za-z_]\w*)+)(?P<call>\([^`]*\))?")
FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*(?P<info>.*)$")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
# MyST directives whose body is not markdown: leave them alone, like code fences.
LITERAL_DIRECTIVES = {"code-block", "code", "code-cell", "sourcecode", "eval-rst", "raw", "math"}


def documented_names(repo: Path) -> set[str]:
    """The attnlib names the built API page documents (from the Sphinx inventory)."""
    path = repo / "_build" / "html" / "objects.inv"
    if not path.is_file():
        sys.exit(f"link_api: {path} not found: build the book first (see --help)")
    with path.open("rb") as stream:
        inventory = InventoryFile.load(stream, "", lambda base, uri: uri)
    return {
        name
        for kind, entries in inventory.items()
        if kind.startswith("py:")
        for name in entries
        if name.startswith("attnlib.")
    }


class Linker:
    """Maps a mentioned name to the name the API page documents it under (or None)."""

    def __init__(self, documented: set[str]):
        self.documented = documented
        self.by_identity: dict[str, str] = {}
        for name in sorted(documented, key=len):  # public names are the shortest
            obj = resolve(name)
            if obj is not None:
                self.by_identity.setdefault(identity(name, obj), name)
        self.unknown: set[str] = set()

    def target(self, name: str) -> str | None:
        if name in self.documented:
            return name
        obj = resolve(name)
        found = self.by_identity.get(identity(name, obj)) if obj is not None else None
        if found is None:
            self.unknown.add(name)
        return found


def link_markdown(source: str, linker: Linker, seen: set[str]) -> tuple[str, int]:
    """The cell with first mentions linked, and how many; ``seen`` (the section's linked
    names) is updated and emptied at each heading."""
    out, added, fences = [], 0, []  # fences: the open fences, (marker, literal)
    for line in source.split("\n"):
        fence = FENCE.match(line)
        if fence:
            marker, info = fence["fence"], fence["info"].strip()
            top = fences[-1][0] if fences else None
            if top and marker[0] == top[0] and len(marker) >= len(top) and not info:
                fences.pop()  # closes the innermost fence
            elif not (fences and fences[-1][1]):  # opens one (nothing opens inside code)
                directive = re.match(r"\{([\w:-]+)\}", info)
                fences.append((marker, not directive or directive[1] in LITERAL_DIRECTIVES))
            out.append(line)
            continue
        if fences and fences[-1][1]:  # inside code
            out.append(line)
            continue
        if HEADING.match(line):
            seen.clear()
            out.append(line)
            continue

        def replace(span: re.Match) -> str:
            nonlocal added
            text, role = span["text"], span["role"]
            if role:  # already a reference: note it, keep it
                target = re.search(r"<([^<>]+)>\s*$", text)
                seen.add(target[1] if target else text.strip())
                return span[0]
            mention = MENTION.fullmatch(text.strip())
            before, after = span.string[: span.start()], span.string[span.end() :]
            in_link_text = before.endswith("[") and after.startswith("](")
            if len(span["ticks"]) != 1 or not mention or in_link_text:
                return span[0]
            target = linker.target(mention["name"])
            if target is None or target in seen:
                return span[0]
            seen.add(target)
            added += 1
            shown = text.strip()
            return f"{{{ROLE}}}`{shown}`" if shown == target else f"{{{ROLE}}}`{shown} <{target}>`"

        out.append(SPAN.sub(replace, line))
    return "\n".join(out), added


def link_notebook(path: Path, linker: Linker, write: bool) -> int:
    notebook = nbformat.read(path, as_version=4)
    seen: set[str] = set()
    total = 0
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        cell.source, added = link_markdown(cell.source, linker, seen)
        total += added
    if total and write:
        nbformat.write(notebook, path)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the book (default: .)")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a file would change"
    )
    args = parser.parse_args()
    repo = args.repo.resolve()
    sys.path.insert(0, str(repo / "lib"))  # the repository's attnlib, as the book documents it
    linker = Linker(documented_names(repo))
    changed = 0
    for path in sorted((repo / "chapters").glob("*.ipynb")):
        added = link_notebook(path, linker, write=not args.check)
        if added:
            changed += 1
            verb = "would link" if args.check else "linked"
            print(f"{path.relative_to(repo)}: {verb} {added} mention(s)")
    for name in sorted(linker.unknown):
        print(f"not documented on the API page, left as code: {name}", file=sys.stderr)
    if not changed:
        print("link_api: nothing to change")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
