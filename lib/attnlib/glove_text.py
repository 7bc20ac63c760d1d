"""GloVe's text format: :func:`read_glove_text` reads any file of ``word v1 v2 ... vD`` lines.

The format of the original files (Pennington et al., 2014), of word2vec's and fastText's
``.vec`` text files (with their ``count dim`` header line), plain or compressed. The book's
``data/glove.6B.50d.subset.txt`` is such a file, written by ``scripts/make_glove_subset.py``.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from attnlib._checks import BEYOND_FLOAT32, as_path, directory_error

if TYPE_CHECKING:
    from attnlib.embeddings import Embeddings

__all__ = ["read_glove_text"]

# One line per word: the word, then its D numbers. Lines end at "\n", "\r\n" or "\r" (as
# Python's universal newlines end them) and at nothing else: U+0085,
# U+2028, U+2029 are characters of a word, so the text is never split with str.splitlines().
# Fields are separated by runs of spaces and tabs (GloVe's own tokenizer splits at these)
# and by nothing else: U+00A0 is a character of a word, so never str.split() without an
# argument.

_COMPRESSED = {"gzip": "gzip", "bz2": "bz2", "xz": "lzma"}  # kind: the module that opens it


def _sniff(head: bytes) -> str | None:
    """The compression of a file from its first bytes (not its name): ``"gzip"``, ``"bz2"``,
    ``"xz"``, ``"zip"``, or ``None`` for plain text."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bz2"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    return None


def _zip_error(path: Path) -> ValueError:
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if not n.endswith("/")]
    except (zipfile.BadZipFile, OSError):
        names = []
    holds = f"; it holds {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
    example = f" (e.g. `unzip {path.name} {names[0]}`)" if names else ""
    return ValueError(
        f"{path}: a zip archive, not a GloVe text file{holds if names else ''}. Extract one"
        f"{example} and read that file"
    )


def _decompress(path: Path, kind: str, raw: bytes | None) -> bytes:
    """The decompressed bytes of the file (of ``raw``, its bytes, if it was read already)."""
    import importlib
    import zlib

    module = importlib.import_module(_COMPRESSED[kind])
    errors = (OSError, EOFError, zlib.error, getattr(module, "LZMAError", OSError))
    try:
        if raw is not None:
            return module.decompress(raw)
        with module.open(path, "rb") as f:
            return f.read()
    except errors as e:  # e.g. EOFError: a download cut short
        raise ValueError(
            f"{path}: a {kind} file that could not be decompressed ({type(e).__name__}: {e}); "
            "it may be truncated or damaged: download it again"
        ) from None


def _fields(line: str) -> list[str]:
    """The fields of a line: split at runs of spaces and tabs, and only at these."""
    return [f for f in line.replace("\t", " ").split(" ") if f]


def _header(line1: str, line2: str | None) -> tuple[int, int] | None:
    """``(count, dim)`` if the first line is word2vec's text header, else ``None``.

    A header is two whole numbers, ``count dim``, followed by lines of a word and at least two
    numbers. (A data line of a word and one number also has two fields: with one dimension,
    no header is recognised, and a first line ``"2 1"`` is the word ``"2"``.)
    """
    if line2 is None:
        return None
    first = _fields(line1)
    if len(first) != 2 or not all(f.isascii() and f.isdigit() for f in first):
        return None
    if len(_fields(line2)) < 3:
        return None
    return int(first[0]), int(first[1])


def _split_lines(text: str) -> list[str]:
    """The lines of ``text``, ended by ``\\n``, ``\\r\\n`` or ``\\r`` only."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def read_glove_text(path: str | os.PathLike) -> Embeddings:
    """Read a file in GloVe's text format: one line per word, ``word v1 v2 ... vD``.

    What is accepted, as GloVe's and word2vec's tools write files:

    * fields separated by one or more spaces or tabs; spaces and tabs at the start or end of
      a line are ignored (fastText's ``.vec`` files end lines with a space);
    * lines ended by ``\\n``, ``\\r\\n`` or ``\\r``; nothing else ends a line or separates
      fields, so a word may hold any other character: U+0085, U+2028 (which
      ``str.splitlines`` would split at) or a no-break space U+00A0 (which ``str.split()``
      would split at), as GloVe 840B's words do;
    * a UTF-8 byte-order mark at the start; blank lines at the end;
    * a word2vec header ``count dim`` as the first line (fastText's ``.vec`` files): it is
      checked against the file, then skipped;
    * gzip, bz2 and xz files, recognised by their first bytes whatever their name.

    Each number is read as the nearest float64, then rounded to float32, as seeds 000 and 003
    read them (``float(value)``); numbers are plain decimals (``-0.5``, ``.5``, ``1e-05``).

    All the numbers of the file are parsed in one call to NumPy's C parser; only when that
    fails is the file looked at line by line, to name the first malformed line.

    Args:
        path: the file (UTF-8 text, or that text compressed; a named pipe works too);
            ``~`` is expanded.

    Returns:
        :class:`Embeddings`, words in file order.

    Raises:
        TypeError: if ``path`` is not a ``str`` or ``os.PathLike``.
        FileNotFoundError: if ``path`` does not exist.
        IsADirectoryError: if ``path`` is a directory.
        ValueError: naming the file, and the line where there is one, if the file at ``path`` is
            empty, not UTF-8, a zip archive or a damaged compressed file, or a line is malformed:
            blank, another number of values than the first line, a value that is not a number, a
            number that is not finite (NaN, inf, or out of the float32 range), a word that repeats
            an earlier line, or a word2vec header that does not match the file.

    Example:
        >>> glove = read_glove_text("data/glove.6B.50d.subset.txt")
        >>> glove["ship"][:2]
        tensor([1.5213, 0.1052])
    """
    path = as_path(path)
    if path.is_dir():
        raise directory_error(path, "a GloVe text file")
    if not path.exists():
        raise FileNotFoundError(f"GloVe file not found: {str(path)!r} (no such file)")
    if path.is_file():
        with open(path, "rb") as f:
            head, raw = f.read(16), None
    else:  # a pipe, e.g. <(zcat glove.txt.gz): it can be read only once
        raw = path.read_bytes()
        head = raw[:16]
    kind = _sniff(head)
    if kind == "zip":
        raise _zip_error(path)
    if kind is not None:
        data = _decompress(path, kind, raw)
    else:
        data = path.read_bytes() if raw is None else raw
    return _parse(path, data)


def _parse_numbers(text: str) -> np.ndarray | None:
    """All numbers of ``text`` (separated by spaces) as float32, each the nearest float64
    rounded; ``None`` if something is not a number."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # NumPy's "unmatched data"
        try:
            return np.fromstring(text, dtype=np.float32, sep=" ")
        except (DeprecationWarning, ValueError):
            return None


def _parse(path: Path, data: bytes) -> Embeddings:
    """The embeddings of the file's bytes ``data``, or a ValueError naming ``path`` and the
    line of a malformed file."""
    from attnlib.embeddings import Embeddings  # imported here: attnlib.embeddings imports us

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = len(_split_lines(data[: e.start].decode("utf-8", errors="replace")))
        raise ValueError(
            f"{path}, line {line}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "GloVe files are UTF-8. Convert the file first, e.g. "
            "`iconv -f latin1 -t utf-8 in.txt > out.txt` for Latin-1"
        ) from None
    text = text.removeprefix("\ufeff")
    if "\t" in text:
        text = text.replace("\t", " ")
    lines = _split_lines(text)
    while lines and not lines[-1].strip(" "):
        lines.pop()
    if not lines:
        raise ValueError(f"{path}: empty GloVe file, expected lines 'word v1 v2 ... vD'")
    header = _header(lines[0], lines[1] if len(lines) > 1 else None)
    first = 2 if header else 1  # the line number of the first word
    body = lines[first - 1 :]
    words, rests = [], []
    for line in body:
        word, _, rest = line.strip(" ").partition(" ")
        words.append(word)
        rests.append(rest)
    dim = len(_fields(rests[0])) if words[0] else 0
    if header is not None and header[1] != dim:
        raise ValueError(
            f"{path}, line 1: word2vec header '{lines[0].strip()}' announces {header[1]} numbers "
            f"per word; line 2 has {dim}"
        )
    numbers = " ".join(rests)
    flat = _parse_numbers(numbers) if dim else None
    # The total alone can hide a short line followed by a long one: count each line too
    # (str.count is cheap; split only the lines that are not single-spaced). NumPy's parser
    # also takes "\v" and "\f" as separators: those lines are checked one by one.
    if (
        flat is None
        or flat.size != dim * len(body)
        or "\x0b" in numbers
        or "\x0c" in numbers
        or any(r.count(" ") != dim - 1 and len(_fields(r)) != dim for r in rests)
    ):
        _raise_malformed(path, words, rests, dim, first)
    vectors = flat.reshape(len(body), dim)  # (V, D)
    finite = np.isfinite(vectors)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        value = _fields(rests[row])[col]
        spelled = any(s in value.lower() for s in ("nan", "inf"))
        why = "is not a finite number" if spelled else BEYOND_FLOAT32
        raise ValueError(f"{path}, line {row + first}: value {value!r} after {words[row]!r} {why}")
    index = dict(zip(words, range(len(words))))
    if len(index) != len(words):
        seen: dict[str, int] = {}
        for row, word in enumerate(words):
            if word in seen:
                raise ValueError(
                    f"{path}, line {row + first}: word {word!r} repeats line "
                    f"{seen[word] + first}; each word must appear once"
                )
            seen[word] = row
    if header is not None and header[0] != len(words):
        raise ValueError(
            f"{path}, line 1: word2vec header '{lines[0].strip()}' announces {header[0]} words; "
            f"the file has {len(words)} (truncated?)"
        )
    return Embeddings._from_checked(words, vectors, index)


def _raise_malformed(path: Path, words: list[str], rests: list[str], dim: int, first: int):
    """Find the first malformed line (slowly, only once something is known to be wrong)."""
    for row, (word, rest) in enumerate(zip(words, rests)):
        number = row + first
        if not word:
            raise ValueError(
                f"{path}, line {number}: empty line; expected a word and {dim or 'some'} numbers"
            )
        values = _fields(rest)
        if dim == 0 or len(values) != dim:
            noun = "value" if len(values) == 1 else "values"
            raise ValueError(
                f"{path}, line {number}: expected a word and {dim or 'some'} numbers; got "
                f"{len(values)} {noun} after {word!r}"
            )
        parsed = _parse_numbers(" ".join(values))
        if parsed is None or parsed.size != dim or "\x0b" in rest or "\x0c" in rest:
            for v in values:
                one = _parse_numbers(v)  # NumPy would skip a "\v" or "\f" around it
                if one is None or one.size != 1 or "\x0b" in v or "\x0c" in v:
                    raise ValueError(
                        f"{path}, line {number}: value {v!r} after {word!r} is not a number"
                    )
    raise ValueError(f"{path}: could not parse the file as GloVe text")  # pragma: no cover
