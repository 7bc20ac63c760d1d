"""Write data/odyssey.txt and data/iliad.txt: the 24 books of Butler's Homer, as plain text.

The inputs are Samuel Butler's prose translations of the Odyssey (1900, Project Gutenberg
#1727) and the Iliad (1898, Project Gutenberg #2199), kept byte for byte in ``data/raw/``
(see ``data/README.md`` for where they come from). Their sha256 digests are checked first:
the outputs are only as good as the exact inputs they were made from.

A word-level language model should see the poems and nothing else, so the script keeps
only the text of the 24 books and removes

- the Project Gutenberg header, footer and licence (the Iliad's copy has them; the
  Odyssey's copy had them removed upstream): the licence is not Homer, and Project
  Gutenberg's trademark licence applies only to files that carry it;
- the title pages, the dedication, Butler's and Jones's prefaces and the contents lists:
  front matter in another voice, about another subject;
- the argument of each book (the summary paragraph under its heading, in capitals in the
  Odyssey): a summary, not part of the poem;
- the footnotes (the Odyssey's ``FOOTNOTES:`` section, 187 notes in Butler's own voice,
  with Greek words; note 29 is numbered ``29[]`` there, a typo) and the footnote
  references in the text. In the Odyssey's copy a
  reference is a bare number glued to the word or punctuation before it
  (``Menelaus36``, ``Naiads;122``, ``“Nurse,147``), sometimes after a space
  (``them. 44 Early``). Every run of digits in the books is such a reference: the script
  checks that they read 1, 2, 3, ... in order, one per note, before it deletes them with
  the space before them;
- an index, an appendix and ``[Illustration ...]`` markers, if a copy has them (these
  two have none).

Butler's own square brackets (``[do not]``), around lines the Greek text brackets as
doubtful, are his translation and stay. Everything else stays exactly as it is: the
words, the spelling (``AEneas``), the punctuation, the curly quotes and the em dashes. The
text is not normalised here; the tokenizer does that.

Each output is UTF-8 with ``\\n`` line ends, ending with one newline. Each book starts with a
line ``BOOK I`` ... ``BOOK XXIV`` and a blank line; then come its paragraphs, one a line
(the hard-wrapped lines joined with single spaces, runs of whitespace collapsed to one
space), separated by one blank line. The outputs are deterministic (the same bytes on
every run) and written atomically (a temporary file in the same folder, then a rename).

Usage::

    python scripts/prepare_texts.py            # writes data/odyssey.txt and data/iliad.txt
    python scripts/prepare_texts.py --check    # exit 1 if a committed output is out of date
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from _atomic import write_atomic

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"

ODYSSEY_RAW = "raw/odyssey_butler_1900.txt"
ILIAD_RAW = "raw/iliad_butler_1898.txt"
ODYSSEY_SHA256 = "a510ef0937aaf0dd8c25658acf42e8f5e61e0e1e56c1bffe0a3dd94b425cccfb"
ILIAD_SHA256 = "87ca749916027e45f9804614001b2162e953340679ddb6e28cb62be74ace6aa5"

BOOKS = 24
ROMAN = (
    "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII",
    "XIII", "XIV", "XV", "XVI", "XVII", "XVIII", "XIX", "XX", "XXI", "XXII", "XXIII", "XXIV",
)  # fmt: skip
MAX_ARGUMENT = 600  # characters: the Iliad's longest argument has 520, its shortest paragraph 60

# A book's heading in the raw texts: "BOOK I" (Odyssey) or "BOOK I." (Iliad), alone on its
# line. The contents lists repeat the headings (indented by a space), so the books start at
# the last "BOOK I".
_HEADING = re.compile(r"^[ \t]*BOOK ([IVXL]+)\.?[ \t]*$", re.M)
# Where the books end: the footnotes, an index or appendix, or Project Gutenberg's footer.
_END = re.compile(
    r"^[ \t]*(?:FOOTNOTES:?|INDEX|APPENDIX|\*\*\* ?END OF TH(?:E|IS) PROJECT GUTENBERG.*)[ \t]*$",
    re.M | re.I,
)
# A footnote in the FOOTNOTES section: "[12] [ ...", and once (note 29) "29[] [ ...".
_NOTE = re.compile(r"^\[?(\d+)\[?\] ", re.M)
_REFERENCE = re.compile(r"[ \t]?(\d+)")  # a footnote reference in the books, and its space
_ILLUSTRATION = re.compile(r"\[Illustration[^\]]*\]", re.I)
_BLANK = re.compile(r"\n[ \t]*\n")  # a blank line (or several) between paragraphs


class ChecksumError(ValueError):
    """A raw file is not the byte-identical copy the script was written for."""


# ---------------------------------------------------------------- cleaning


def _paragraphs(block: str) -> list[str]:
    """The paragraphs of hard-wrapped text, each on one line, whitespace runs collapsed."""
    return [" ".join(p.split()) for p in _BLANK.split(block) if p.strip()]


def _remove_references(body: str, notes: int) -> str:
    """Delete the footnote references from ``body``: every run of digits, which must be
    1, 2, ..., ``notes`` in order (so that no number of the text is taken for one)."""
    found = [int(m[1]) for m in _REFERENCE.finditer(body)]
    if found != list(range(1, notes + 1)):
        first = next(
            (i for i, (a, b) in enumerate(zip(found, range(1, notes + 1))) if a != b),
            min(len(found), notes),
        )
        raise ValueError(
            f"the footnote references in the books must read 1 to {notes} in order (one per "
            f"footnote); found {len(found)}, the first one out of place at position {first + 1}: "
            f"{found[first : first + 3]}"
        )
    return _REFERENCE.sub("", body)


def clean(
    raw: str,
    *,
    books: int = BOOKS,
    argument: Callable[[str], bool] = lambda p: True,
) -> str:
    """The books of a raw Project Gutenberg text of Butler's Homer, cleaned (module docstring).

    Args:
        raw: the whole raw text (a leading byte-order mark and ``\\r\\n`` line ends are fine).
        books: how many books the text must have, numbered I, II, ... in order.
        argument: checks that a book's first paragraph is its argument (which is dropped).

    Returns:
        The books, as described in the module docstring.

    Raises:
        ValueError: if the books, the arguments or the footnote references are not where and
        what they should be.
    """
    text = raw.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    starts = [m.start() for m in _HEADING.finditer(text) if m[1] == "I"]
    if not starts:
        raise ValueError("no line 'BOOK I' in the text")
    end = _END.search(text, starts[-1])
    if end is None:
        raise ValueError("no end of the books (a line 'FOOTNOTES:' or Project Gutenberg's end)")
    body = text[starts[-1] : end.start()]
    numerals = _HEADING.findall(body)
    if numerals != list(ROMAN[:books]):
        raise ValueError(f"the books must be {list(ROMAN[:books])}; found {numerals}")
    notes = [int(n) for n in _NOTE.findall(text, end.start())]
    if notes != list(range(1, len(notes) + 1)):
        raise ValueError(f"the footnotes must be numbered 1, 2, 3, ...; found {notes[:10]} ...")
    body = _ILLUSTRATION.sub(" ", body)
    body = _remove_references(body, len(notes))

    out = []
    for roman, block in zip(ROMAN, _HEADING.split(body)[2::2]):
        paragraphs = _paragraphs(block)
        if len(paragraphs) < 2 or not argument(paragraphs[0]):
            raise ValueError(
                f"BOOK {roman} must start with its argument and then its text; got "
                f"{paragraphs[:1]!r}"
            )
        out += [f"BOOK {roman}", *paragraphs[1:]]
    result = "\n\n".join(out) + "\n"
    for word in ("Gutenberg", "FOOTNOTES", "PREFACE"):
        if word in result:
            raise ValueError(f"{word!r} is still in the cleaned text")
    return result


def _odyssey_argument(paragraph: str) -> bool:
    return paragraph == paragraph.upper()  # "THE GODS IN COUNCIL—MINERVA’S VISIT TO ITHACA—..."


def _iliad_argument(paragraph: str) -> bool:
    # "The quarrel between Agamemnon and Achilles—...": short, and no one speaks in it
    return len(paragraph) <= MAX_ARGUMENT and "“" not in paragraph


def clean_odyssey(raw: str, books: int = BOOKS) -> str:
    """The books of Butler's Odyssey (PG #1727, as in ``data/raw/``), cleaned."""
    return clean(raw, books=books, argument=_odyssey_argument)


def clean_iliad(raw: str, books: int = BOOKS) -> str:
    """The books of Butler's Iliad (PG #2199, as in ``data/raw/``), cleaned."""
    return clean(raw, books=books, argument=_iliad_argument)


def split_books(text: str) -> dict[str, list[str]]:
    """A cleaned text's books: ``{"I": [paragraph, ...], "II": [...], ...}``, in order.

    Raises:
        ValueError: if ``text`` is not in the format the script writes.
    """
    if not text.endswith("\n") or text.endswith("\n\n") or "\r" in text:
        raise ValueError("the text must end with exactly one '\\n' and hold no '\\r'")
    books: dict[str, list[str]] = {}
    for line in text[:-1].split("\n\n"):
        if not line or "\n" in line or line != " ".join(line.split()):
            raise ValueError(f"malformed paragraph (blank lines, spaces): {line[:60]!r}")
        if line.startswith("BOOK "):
            roman = line[5:]
            expected = ROMAN[len(books)] if len(books) < len(ROMAN) else "(no more books)"
            if roman != expected:
                raise ValueError(f"expected BOOK {expected}; got {line!r}")
            books[roman] = []
        elif not books:
            raise ValueError(f"text before BOOK I: {line[:60]!r}")
        else:
            books[next(reversed(books))].append(line)
    return books


# ---------------------------------------------------------------- files


class Text(NamedTuple):
    raw: str  # relative to the data folder
    sha256: str
    out: str
    clean: Callable[[str], str]


TEXTS = (
    Text(ODYSSEY_RAW, ODYSSEY_SHA256, "odyssey.txt", clean_odyssey),
    Text(ILIAD_RAW, ILIAD_SHA256, "iliad.txt", clean_iliad),
)


def read_raw(path: str | os.PathLike, sha256: str) -> str:
    """The text of a raw file, after checking its sha256 digest.

    Raises:
        ChecksumError: if the file's digest is not ``sha256``.
    """
    data = Path(path).read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise ChecksumError(
            f"{path}: sha256 mismatch: expected {sha256}, got {actual} (the raw files must be "
            "byte-identical to the copies named in data/README.md)"
        )
    return data.decode("utf-8")


def build(data: str | os.PathLike = DATA) -> dict[Path, str]:
    """What the script writes: ``{output path: text}``, from the raw files in ``data``."""
    data = Path(data)
    return {data / t.out: t.clean(read_raw(data / t.raw, t.sha256)) for t in TEXTS}


def check(data: str | os.PathLike = DATA) -> list[str]:
    """One message for each output in ``data`` that differs from what the script writes."""
    problems = []
    for path, text in build(data).items():
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif path.read_bytes() != text.encode("utf-8"):
            problems.append(f"{path} differs from what scripts/prepare_texts.py writes")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="only check that the outputs are up to date"
    )
    parser.add_argument("--data", type=Path, default=DATA, help=f"default: {DATA}")
    args = parser.parse_args(argv)

    if args.check:
        problems = check(args.data)
        for problem in problems:
            print(f"error: {problem}; rerun python scripts/prepare_texts.py", file=sys.stderr)
        return 1 if problems else 0
    for path, text in build(args.data).items():
        write_atomic(path, text)
        books = split_books(text)
        words = sum(len(p.split()) for paragraphs in books.values() for p in paragraphs)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        print(f"wrote {path}: {len(books)} books, {words:,} words, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
