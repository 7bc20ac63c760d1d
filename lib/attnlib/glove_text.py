"""GloVe's text format: :func:`read_glove_text` reads any file of ``word v1 v2 ... vD`` lines.

Apache Arrow's CSV reader (``pyarrow.csv``, C++, on ``pyarrow.cpu_count()`` threads) parses
every file. A file it refuses is rewritten with single spaces between fields and parsed again;
one it still refuses is read line by line in Python, only to name its first malformed line.
"""

from __future__ import annotations

import io
import mmap
import os
import re
import zipfile
import zlib

import numpy as np

from attnlib._checks import BEYOND_FLOAT32
from attnlib._util import as_path, directory_error
from attnlib.embeddings import Embeddings

__all__ = ["read_glove_text"]

# Lines end at "\n", "\r\n" or "\r" only: U+0085 and U+2028 are characters of a word (never
# str.splitlines()). Fields are separated by runs of spaces and tabs only, as GloVe's tools
# split them: U+00A0 is a character of a word (never str.split() without an argument).
_LINE_END = re.compile(rb"\r\n|\r|\n")
_lines = re.compile("\r\n|\r|\n").split  # the lines of a str
# zipfile's errors: damaged, encrypted (RuntimeError), Deflate64 or PPMd (NotImplementedError)
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError)


def read_glove_text(path: str | os.PathLike, *, member: str | None = None) -> Embeddings:
    """Read a file in GloVe's text format: one line per word, ``word v1 v2 ... vD``.

    Accepted, as GloVe's, word2vec's and fastText's tools write them: fields separated by
    runs of spaces or tabs, ignored at the ends of lines; lines ended by ``\\n``, ``\\r\\n``
    or ``\\r`` only (a word may hold U+0085, U+2028 or U+00A0, as GloVe 840B's do); a UTF-8
    byte-order mark; blank lines at the end; a word2vec header ``count dim`` as the first line
    (checked, then skipped; with one dimension, ``"2 1"`` is a word); a named pipe, such as
    ``<(zcat glove.txt.gz)`` in a shell; a member of a zip archive, as GloVe is distributed:
    ``read_glove_text("glove.6B.zip", member="glove.6B.50d.txt")``.

    Each number is read as the nearest float64 (Arrow's syntax: ``-0.5``, ``.5``, ``+1``,
    ``1e-05``), then rounded to float32, as the seeds' ``float(value)`` does. GloVe 6B (400,000
    words, 171 MB, mapped) takes about 1 s on two cores, 4-5x less than seed 003's loop.

    Args:
        path: the file (UTF-8 text, or a zip archive); ``~`` is expanded.
        member: the file to read inside the zip archive ``path``; ``None`` for a file that is
            not an archive, or an archive of one file.

    Returns:
        :class:`Embeddings`, words in file order.

    Raises:
        TypeError: if ``path`` is not a ``str`` or ``os.PathLike``, or ``member`` not a ``str``.
        FileNotFoundError: if ``path`` does not exist.
        IsADirectoryError: if ``path`` is a directory.
        ValueError: naming the file, and the line where there is one: an empty, compressed
            (gzip, bz2, xz) or not UTF-8 file, a damaged or encrypted zip archive, one without
            ``member`` or that member (or ``member`` for another file); a blank line, another
            number of values than the first line, a value that is not a number or not finite
            in float32, a repeated word, a word2vec header that the file does not match.

    Example:
        >>> glove = read_glove_text("data/glove.6B.50d.subset.txt")
        >>> glove["ship"][:2]
        tensor([1.5213, 0.1052])
    """
    path = as_path(path)
    if member is not None and not isinstance(member, str):
        raise TypeError(f"member must be a str (a file inside the zip archive); got {member!r}")
    if path.is_dir():
        raise directory_error(path, "a GloVe text file")
    if not path.exists():
        raise FileNotFoundError(f"GloVe file not found: {str(path)!r} (no such file)")
    with open(path, "rb") as f:
        try:  # an empty file, a pipe and some file systems cannot be mapped: read them
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            data = f.read()
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return _parse(*_read_member(path, member, data))
    if member is not None:
        raise ValueError(
            f"{path}: member={member!r} names a file inside a zip archive, and this file is "
            "not a zip archive; leave member out"
        )
    return _parse(str(path), data)


def _read_member(path: os.PathLike, member: str | None, data) -> tuple[str, bytes]:
    """The name (``archive/member``) and the bytes of a file of the zip archive at ``path``
    (``data``: its bytes if they were read, not mapped)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else path) as z:
            names = [n for n in z.namelist() if not n.endswith("/")]
            member = names[0] if member is None and len(names) == 1 else member
            if member not in names:
                listing = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "") or "none"
                what = f"no member {member!r}; it holds" if member else f"{len(names)} files:"
                raise ValueError(
                    f"{path}: the zip archive holds {what} {listing}; name the one to read: "
                    f"read_glove_text({str(path)!r}, member={(names or [''])[0]!r})"
                )
            return f"{path}/{member}", z.read(member)
    except _ZIP_ERRORS as e:
        raise ValueError(
            f"{path}: a zip archive that could not be read ({type(e).__name__}: {e}); download "
            "it again if it is damaged, or extract the file with unzip or 7z (which read "
            "encrypted members and Deflate64, unlike Python's zipfile) and read that file"
        ) from None


def _fields(line: str) -> list[str]:
    """The fields of a line: split at runs of spaces and tabs, and only at these."""
    return [f for f in line.replace("\t", " ").split(" ") if f]


def _parse(name: str, data: bytes | mmap.mmap) -> Embeddings:
    """The embeddings of the file's bytes, or a ValueError naming the file and the line."""
    start, end = (3 if data[:3] == b"\xef\xbb\xbf" else 0), len(data)
    while end > start and data[end - 1] in b" \t\r\n":  # blank lines at the end
        end -= 1
    if end == start:
        raise ValueError(f"{name}: empty GloVe file, expected lines 'word v1 v2 ... vD'")
    ends = [m.start() for _, m in zip(range(2), _LINE_END.finditer(data, start, end))]
    head = data[start : (ends + [end, end])[1]].decode(errors="replace")  # Arrow checks UTF-8
    line1, line2 = (_lines(head) + [None])[:2]  # the first two lines; line2 None if none
    top = _fields(line1)  # a word2vec header: "count dim", then lines of a word and >= 2 numbers
    header = len(top) == 2 and all(f.isascii() and f.isdigit() for f in top)
    header = header and (int(top[1]) >= 2 if line2 is None else len(_fields(line2)) >= 3)
    first, dim = (2, len(_fields(line2 or "")) - 1) if header else (1, len(top) - 1)
    announced = f"{name}, line 1: word2vec header '{' '.join(top)}' announces {top[0]} words"
    if header and int(top[1]) != dim:
        has = "no line 2 (cut short?)" if line2 is None else f"line 2 has {dim}"
        raise ValueError(f"{announced} of {top[1]} numbers; {has}")
    if dim < 1:
        raise _malformed(name, data, 0, first)
    body = memoryview(data)[start:end]
    block = max(1 << 22, 8 * len(line2 if header else line1))  # blocks hold whole lines
    # A tab can make a line that Arrow splits at spaces only read as another: rewrite first.
    fast = data.find(b"\t", start, end) < 0 and _read_table(body, dim, first, block)
    text = None if fast else _canonical(body)  # None: already so, and refused
    if not (parsed := fast or (text is not None and _read_table(text, dim, first, block))):
        raise _malformed(name, data, dim, first)
    words, vectors = parsed
    if not (finite := np.isfinite(vectors)).all():
        row, col = np.argwhere(~finite)[0]
        value = _fields(_lines(data[start:end].decode())[row + first - 1])[col + 1]
        why = "is not a finite number" if re.search("nan|inf", value, re.I) else BEYOND_FLOAT32
        raise ValueError(f"{name}, line {row + first}: value {value!r} after {words[row]!r} {why}")
    index = dict(zip(words, range(len(words))))
    if len(index) != len(words):
        seen: dict[str, int] = {}
        row = next(row for row, word in enumerate(words) if seen.setdefault(word, row) != row)
        raise ValueError(
            f"{name}, line {row + first}: word {words[row]!r} repeats line "
            f"{seen[words[row]] + first}; each word must appear once"
        )
    if header and int(top[0]) != len(words):
        raise ValueError(f"{announced}; the file has {len(words)} (truncated?)")
    return Embeddings._from_checked(words, vectors, index)


def _canonical(body: memoryview) -> bytes | None:
    """The text with "\\n" line ends, single spaces between fields and none at the ends of
    lines, ``None`` if it is so already (``bytes.replace``: a few passes in C)."""
    text = original = bytes(body)
    text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n").replace(b"\t", b" ")
    while len(shorter := text.replace(b"  ", b" ")) < len(text):  # runs halve at each pass
        text = shorter
    text = text.replace(b" \n", b"\n").replace(b"\n ", b"\n").strip(b" ")
    return None if text == original else text


def _read_table(body, dim: int, first: int, block: int) -> tuple[list[str], np.ndarray] | None:
    """Words and ``(V, dim)`` float32 vectors of ``body`` (fields separated by single spaces;
    the words start on line ``first``) by Arrow's CSV reader; ``None`` if Arrow refuses it."""
    import pyarrow as pa
    import pyarrow.csv as csv

    types = {"word": pa.string(), **{f"v{j}": pa.float64() for j in range(1, dim + 1)}}
    try:  # a blank line inside is an error; "NA", "null" are words, not missing values
        table = csv.read_csv(
            pa.py_buffer(body),
            csv.ReadOptions(column_names=list(types), skip_rows=first - 1, block_size=block),
            csv.ParseOptions(delimiter=" ", quote_char=False, ignore_empty_lines=False),
            csv.ConvertOptions(column_types=types, null_values=[], strings_can_be_null=False),
            # malloc, not Arrow's mimalloc: a cold call took 0.80 s, not 1.02 s (7 rounds)
            memory_pool=pa.system_memory_pool(),
        )
    except pa.ArrowInvalid:
        return None
    words = table.column(0).to_pylist()
    if "" in words:  # only from a line starting with a space
        return None
    vectors, row = np.empty((len(words), dim), dtype=np.float32), 0  # (V, D)
    with np.errstate(over="ignore"):  # beyond float32: inf, refused by the caller
        for chunks in zip(*(column.chunks for column in table.columns[1:])):  # Arrow's blocks
            vectors[row : row + len(chunks[0])] = np.column_stack([c.to_numpy() for c in chunks])
            row += len(chunks[0])
    return words, vectors


def _malformed(name: str, data, dim: int, first: int) -> ValueError:
    """The error naming the first malformed line (once Arrow has refused the file): the first
    part of 1,000 lines that Arrow refuses is looked at line by line, value by value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def refused(values: list[str]) -> bool:
        try:
            pc.cast(pa.array(values, type=pa.string()), pa.float64())
        except pa.ArrowInvalid:
            return True
        return False

    data = bytes(data)
    try:
        lines = _lines(data.decode().removeprefix("\ufeff").rstrip(" \t\r\n"))
    except UnicodeDecodeError as e:
        if data.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")):
            why = "gzip, bz2 or xz compressed: decompress it first (gunzip, bunzip2 or unxz)"
            return ValueError(f"{name}: {why}, or read it through a pipe")
        line = len(_lines(data[: e.start].decode(errors="replace")))
        return ValueError(
            f"{name}, line {line}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "GloVe files are UTF-8: convert it first, e.g. `iconv -f latin1 -t utf-8 in out`"
        )
    for lo in range(first - 1, len(lines), 1000):  # Arrow reads 1,000 lines at a time, and
        part = "\n".join(lines[lo : lo + 1000]).encode()
        part = _canonical(memoryview(part)) or part
        if dim and _read_table(part, dim, 1, len(part) + 1):  # those it refuses, one by one
            continue
        for number, line in enumerate(lines[lo : lo + 1000], lo + 1):
            fields, expected = _fields(line), f"expected a word and {dim or 'some'} numbers"
            if not fields:
                return ValueError(f"{name}, line {number}: empty line; {expected}")
            if dim == 0 or len(fields) != dim + 1:
                n = f"{len(fields) - 1} value{'s' * (len(fields) != 2)}"
                return ValueError(f"{name}, line {number}: {expected}; got {n} after {fields[0]!r}")
            if refused(fields[1:]):
                v = next(v for v in fields[1:] if refused([v]))
                return ValueError(
                    f"{name}, line {number}: value {v!r} after {fields[0]!r} is not a number"
                )
    return ValueError(f"{name}: could not parse the file as GloVe text")  # pragma: no cover
