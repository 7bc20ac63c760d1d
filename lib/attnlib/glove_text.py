"""GloVe's text format: :func:`read_glove_text` reads any file of ``word v1 v2 ... vD`` lines.

The format of the original files (Pennington et al., 2014), of word2vec's and fastText's
``.vec`` text files (with their ``count dim`` header line): a plain file, a compressed one, or a
member of a zip archive such as GloVe's own ``glove.6B.zip``. The book's
``data/glove.6B.50d.subset.txt`` is such a file, written by ``scripts/make_glove_subset.py``.

**One reading path.** Every file is parsed by Apache Arrow's CSV reader (``pyarrow.csv``, C++,
on ``pyarrow.cpu_count()`` threads): the first column as UTF-8 words, the ``D``
others as float64 numbers, rounded to float32 afterwards. A file whose fields are not separated
by single spaces (tabs, runs of spaces, spaces at the ends of lines) is first rewritten into
that form, then read the same way. Only when Arrow refuses a file are some of its lines read
one by one in Python (those of the quarter MB where halving finds the first refused line),
and only to name the first malformed line in the error; what counts as a number is always
Arrow's decision (``pyarrow.compute.cast`` to float64 in that search).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
from pathlib import Path

import numpy as np

from attnlib._checks import BEYOND_FLOAT32, as_path, directory_error
from attnlib.embeddings import Embeddings

__all__ = ["read_glove_text"]

# One line per word: the word, then its D numbers. Lines end at "\n", "\r\n" or "\r" (as
# Python's universal newlines end them, and as Arrow's CSV reader does) and at nothing else:
# U+0085, U+2028, U+2029 are characters of a word, so the text is never split with
# str.splitlines(). Fields are separated by runs of spaces and tabs (GloVe's own tokenizer
# splits at these) and by nothing else: U+00A0 is a character of a word, so never str.split()
# without an argument.

_COMPRESSED = {"gzip": "gzip", "bz2": "bz2", "xz": "lzma"}  # kind: the module that opens it
_ZIP_METHODS = {9: "Deflate64", 98: "PPMd", 93: "Zstandard", 95: "XZ", 99: "AES encryption"}
_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")
_BLANK = frozenset(b" \t\r\n")  # what blank lines at the end of a file are made of


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


def _read_member(path: Path, member: str | None, raw: bytes | None) -> tuple[str, bytes]:
    """The name (``archive/member``) and the bytes of one file of the zip archive at
    ``path`` (of ``raw``, its bytes, if it was read already)."""
    import io
    import zipfile
    import zlib

    try:
        with zipfile.ZipFile(io.BytesIO(raw) if raw is not None else path) as z:
            names = [n for n in z.namelist() if not n.endswith("/")]
            listing = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            if member is None and len(names) != 1:
                example = f": read_glove_text({str(path)!r}, member={names[0]!r})" if names else ""
                raise ValueError(
                    f"{path}: a zip archive holding {len(names)} files"
                    f"{f' ({listing})' if names else ''}; name the one to read with member="
                    f"{example}"
                )
            if member is not None and member not in names:
                raise ValueError(
                    f"{path}: the zip archive holds no member {member!r}; it holds "
                    f"{listing or 'no file'}"
                )
            member = member or names[0]
            info = z.getinfo(member)
            if info.flag_bits & 0x1:  # zipfile would raise RuntimeError, naming no archive
                raise ValueError(
                    f"{path}: the member {member!r} is encrypted (password-protected); "
                    "read_glove_text reads no encrypted archive: extract the file with its "
                    f"password first (unzip {path.name} {member}), then read the extracted file"
                )
            try:
                data = z.read(member)
            except NotImplementedError:  # Deflate64, PPMd, ...: zipfile reads 4 methods only
                method = _ZIP_METHODS.get(info.compress_type, f"method {info.compress_type}")
                raise ValueError(
                    f"{path}: the member {member!r} is compressed with {method}, which Python's "
                    "zipfile cannot read (it reads stored, deflate, bzip2 and lzma members): "
                    "extract it with unzip or 7z first, then read the extracted file"
                ) from None
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
        raise ValueError(
            f"{path}: a zip archive that could not be read ({type(e).__name__}: {e}); it may be "
            "truncated or damaged: download it again"
        ) from None
    return f"{path}/{member}", data


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


def _refuse_lone_header(name: str, line1: str, line2: str | None) -> None:
    """A ValueError if the file's only line is a word2vec header ``count dim`` (two whole
    numbers, ``dim >= 2``): a file cut after its header, whose one "word" would be the count.

    (With ``dim`` 0 or 1 the line is read as a word and its number, as :func:`_header` reads a
    first line ``"2 1"``: no header announces one dimension.)"""
    if line2 is not None:
        return
    fields = _fields(line1)
    if len(fields) == 2 and all(f.isascii() and f.isdigit() for f in fields):
        count, dim = int(fields[0]), int(fields[1])
        if dim >= 2:
            raise ValueError(
                f"{name}, line 1: word2vec header '{' '.join(fields)}' ({count} words of {dim} "
                "numbers) and no word after it; the file is cut short (download it again)"
            )


def _split_lines(text: str) -> list[str]:
    """The lines of ``text``, ended by ``\\n``, ``\\r\\n`` or ``\\r`` only."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def read_glove_text(path: str | os.PathLike, *, member: str | None = None) -> Embeddings:
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
      checked against the file, then skipped (a header with no line after it is refused, not
      read as a word: a first and only line ``"400000 50"`` is a file cut short);
    * a member of a zip archive, as GloVe is distributed (``glove.6B.zip`` holds the 50, 100,
      200 and 300 dimensional files): ``read_glove_text("glove.6B.zip",
      member="glove.6B.50d.txt")``, without extracting it (an archive of one file needs no
      ``member``); gzip, bz2 and xz files, recognised by their first bytes whatever their name.

    Each number is read as the nearest float64, then rounded to float32, as seeds 000 and 003
    read them (``float(value)``); numbers are decimals as Arrow's CSV reader reads them
    (``-0.5``, ``.5``, ``+1``, ``1e-05``).

    The whole file is parsed by Apache Arrow's CSV reader (``pyarrow.csv``, C++, on
    ``pyarrow.cpu_count()`` threads, which ``OMP_NUM_THREADS`` limits): GloVe 6B's 400,000 words
    (171 MB) in about 1.0 s on one thread and 0.63 s on two, 2.2x and 3.7x faster than seed
    003's loop over the lines (``benchmarks/bench_glove_load.py``, medians of 7 and 9
    interleaved rounds on a 2-core machine). A plain file is memory-mapped, not copied.
    When Arrow refuses the file, halving finds the part that holds the first refused line,
    and only that part is looked at line by line, to name the line (a bad line among
    400,000 is named in 1-2 s).

    Args:
        path: the file (UTF-8 text, or that text compressed, or a zip archive; a named pipe
            works too); ``~`` is expanded.
        member: the name of the file to read inside the zip archive ``path``; ``None`` for a
            file that is not an archive, or an archive of one file.

    Returns:
        :class:`Embeddings`, words in file order.

    Raises:
        TypeError: if ``path`` is not a ``str`` or ``os.PathLike``, or ``member`` not a ``str``.
        FileNotFoundError: if ``path`` does not exist.
        IsADirectoryError: if ``path`` is a directory.
        ValueError: naming the file, and the line where there is one, if the file at ``path`` is
            empty, not UTF-8, a damaged compressed file or zip archive, a zip archive without
            ``member`` (or without that member), or a line is malformed: blank, another number
            of values than the first line, a value that is not a number, a number that is not
            finite (NaN, inf, or out of the float32 range), a word that repeats an earlier line,
            or a word2vec header that does not match the file or has no line after it (a first
            and only line ``400000 50``); also if ``member`` is given and ``path`` is not a zip
            archive, or the member is encrypted or compressed by a method that Python's
            ``zipfile`` cannot read (naming the archive and the member).

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
    if path.is_file():
        with open(path, "rb") as f:
            head, raw = f.read(16), None
    else:  # a pipe, e.g. <(zcat glove.txt.gz): it can be read only once
        raw = path.read_bytes()
        head = raw[:16]
    kind = _sniff(head)
    if kind == "zip":
        name, data = _read_member(path, member, raw)
        return _parse(name, data)
    if member is not None:
        raise ValueError(
            f"{path}: member={member!r} names a file inside a zip archive, and this file is "
            "not a zip archive; leave member out"
        )
    if kind is not None:
        return _parse(str(path), _decompress(path, kind, raw))
    if raw is not None:
        return _parse(str(path), raw)
    with _mapped(path) as data:
        return _parse(str(path), data)


@contextlib.contextmanager
def _mapped(path: Path):
    """The bytes of the plain file at ``path``, memory-mapped where the system allows it.

    Mapped with its pages populated at once (``MAP_POPULATE``, Linux): GloVe 6B's 171 MB in
    about 0.015 s where copying it into a ``bytes`` takes 0.08 s. Elsewhere, for an empty file
    (which cannot be mapped) or where mapping fails, the bytes are read."""
    populate = getattr(mmap, "MAP_POPULATE", 0)
    mapped = None
    if populate and path.stat().st_size:
        try:
            with open(path, "rb") as f:
                flags = mmap.MAP_PRIVATE | populate
                mapped = mmap.mmap(f.fileno(), 0, flags=flags, prot=mmap.PROT_READ)
        except (OSError, ValueError):  # a file system that cannot map files: read it
            mapped = None
    if mapped is None:
        yield path.read_bytes()
        return
    try:
        yield mapped
    finally:
        try:
            mapped.close()
        except BufferError:  # a view of it is still alive (an error's traceback): the GC closes it
            pass


def _parse(name: str, data: bytes | mmap.mmap) -> Embeddings:
    """The embeddings of the file's bytes ``data``, or a ValueError naming the file ``name``
    and the line of a malformed file."""
    start = len(_BOM) if data[: len(_BOM)] == _BOM else 0
    end = len(data)
    while end > start and data[end - 1] in _BLANK:  # blank lines at the end
        end -= 1
    if end == start:
        raise ValueError(f"{name}: empty GloVe file, expected lines 'word v1 v2 ... vD'")
    try:
        first_lines = _first_lines(data, start, end)
    except UnicodeDecodeError:
        _raise_malformed(name, data, 0, 1)
    _refuse_lone_header(name, *first_lines)
    header = _header(*first_lines)
    first = 2 if header else 1  # the line number of the first word
    dim = len(_fields(first_lines[first - 1] or "")) - 1
    if header is not None and header[1] != dim:
        raise ValueError(
            f"{name}, line 1: word2vec header '{first_lines[0].strip()}' announces {header[1]} "
            f"numbers per word; line 2 has {dim}"
        )
    if dim < 1:
        _raise_malformed(name, data, 0, first)
    body = memoryview(data)[start:end]
    # Tabs can make a line that Arrow splits at spaces only read differently: rewrite first.
    block = max(1 << 22, 8 * len(first_lines[first - 1]))  # Arrow's blocks hold whole lines
    tabs = data.find(b"\t", start, end) >= 0
    parsed = None if tabs else _read_table(body, dim, first, block)
    canonical = None
    if parsed is None:
        canonical = _canonical(body, tabs)
        if canonical is not None:
            parsed = _read_table(canonical, dim, first, block)
    if parsed is None:
        refused = body if canonical is None else canonical  # what Arrow refused
        _raise_malformed(name, data, dim, first, _accepted_up_to(refused, dim, first, block))
    words, vectors = parsed
    finite = np.isfinite(vectors)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        line = _split_lines(data[start:].decode("utf-8"))[row + first - 1]
        value = _fields(line)[col + 1]
        spelled = any(s in value.lower() for s in ("nan", "inf"))
        why = "is not a finite number" if spelled else BEYOND_FLOAT32
        raise ValueError(f"{name}, line {row + first}: value {value!r} after {words[row]!r} {why}")
    index = dict(zip(words, range(len(words))))
    if len(index) != len(words):
        seen: dict[str, int] = {}
        for row, word in enumerate(words):
            if word in seen:
                raise ValueError(
                    f"{name}, line {row + first}: word {word!r} repeats line "
                    f"{seen[word] + first}; each word must appear once"
                )
            seen[word] = row
    if header is not None and header[0] != len(words):
        raise ValueError(
            f"{name}, line 1: word2vec header '{first_lines[0].strip()}' announces {header[0]} "
            f"words; the file has {len(words)} (truncated?)"
        )
    return Embeddings._from_checked(words, vectors, index)


def _first_lines(data: bytes, start: int, end: int) -> tuple[str, str | None]:
    """The first line of ``data[start:end]`` and the second (``None`` if there is none)."""
    ends = _LINE_END.finditer(data, start, end)
    first = next(ends, None)
    if first is None:
        return data[start:end].decode("utf-8"), None
    second = next(ends, None)
    line2 = data[first.end() : second.start() if second else end]
    return data[start : first.start()].decode("utf-8"), line2.decode("utf-8")


def _canonical(body: memoryview, tabs: bool) -> bytes | None:
    """The text with fields separated by one space and no space at the ends of lines (the
    same number of lines); ``None`` if it is that already. ``tabs``: whether it holds a tab.
    (``bytes.replace``, not a regular expression: a few passes in C instead of 20 million
    matches for GloVe 6B.)"""
    if not tabs and not _spaced(body):
        return None
    text = bytes(body).replace(b"\t", b" ")
    while True:  # runs of spaces, halved at each pass
        shorter = text.replace(b"  ", b" ")
        if len(shorter) == len(text):
            break
        text = shorter
    for spaced, end in ((b" \n", b"\n"), (b"\n ", b"\n"), (b" \r", b"\r"), (b"\r ", b"\r")):
        text = text.replace(spaced, end)
    text = text.lstrip(b" ")
    return None if text == body else text


def _spaced(body: memoryview) -> bool:
    """Whether a line of ``body`` starts or ends with a space, or holds two spaces in a row.

    A test in NumPy, 16 MB at a time: about 0.1 s for GloVe 6B, where searching the bytes
    for ``"  "``, ``" \\n"``, ... takes 0.9 s (spaces are too frequent for a fast search)."""
    codes = np.frombuffer(body, dtype=np.uint8)
    if len(codes) and codes[0] == 32:
        return True
    step = 1 << 24
    for lo in range(0, max(len(codes) - 1, 0), step):
        part = codes[lo : lo + step + 1]  # one byte more: the pair across the boundary
        space = part == 32
        edge = space | (part == 10) | (part == 13)  # a space or a line end
        if (space[1:] & edge[:-1]).any() or (space[:-1] & edge[1:]).any():
            return True
    return False


def _read_table(body, dim: int, first: int, block: int) -> tuple[list[str], np.ndarray] | None:
    """Words and ``(V, dim)`` float32 vectors of ``body`` (a file whose fields are separated
    by single spaces, from its first line; the words start on line ``first``), read by Arrow's
    CSV reader; ``None`` if Arrow refuses it (then a line is malformed)."""
    try:
        import pyarrow as pa
        import pyarrow.csv as csv
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "read_glove_text reads with pyarrow, a dependency of attnlib: pip install pyarrow"
        ) from e

    types = {"word": pa.string(), **{f"v{j}": pa.float64() for j in range(1, dim + 1)}}
    try:
        table = csv.read_csv(
            pa.py_buffer(body),
            read_options=csv.ReadOptions(
                column_names=list(types), skip_rows=first - 1, block_size=block
            ),
            parse_options=csv.ParseOptions(
                delimiter=" ",
                quote_char=False,
                double_quote=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=False,  # a blank line inside is an error, not skipped
            ),
            convert_options=csv.ConvertOptions(
                column_types=types,
                null_values=[],  # "NA", "null", "" are not numbers, and are words
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
            # The C library's malloc, not Arrow's default mimalloc: a cold call in a fresh
            # process measured 0.80 s instead of 1.02 s (median of 7 interleaved rounds).
            memory_pool=pa.system_memory_pool(),
        )
    except pa.ArrowInvalid:
        return None
    words = table.column(0).to_pylist()
    if not words or "" in words:  # "" only from a line starting with a space
        return None
    vectors = np.empty((len(words), dim), dtype=np.float32)  # (V, D), in row order
    with np.errstate(over="ignore"):  # beyond float32: inf, refused by the caller
        for j in range(dim):
            row = 0
            for chunk in table.column(j + 1).chunks:  # Arrow's blocks, read without a copy
                vectors[row : row + len(chunk), j] = chunk.to_numpy()
                row += len(chunk)
    return words, vectors


def _numbers_refused(values: list[str]) -> bool:
    """Whether Arrow refuses one of ``values`` as a float64 (its CSV reader's own parser)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        pc.cast(pa.array(values, type=pa.string()), pa.float64())
    except pa.ArrowInvalid:
        return True
    return False


def _accepted_up_to(text, dim: int, first: int, block: int) -> int:
    """A line number such that Arrow reads every line of ``text`` before it (``text`` is a
    file Arrow refused, its words starting on line ``first``).

    Found by halving: of two halves of a part that Arrow refuses, the first that Arrow also
    refuses holds the first refused line. About one more reading of the file, instead of a
    loop in Python over every line before the bad one (the error for a bad last line of
    GloVe 6B's 400,000 comes in 1.8 s instead of 4.4 s)."""
    text = bytes(text)
    view = memoryview(text)
    lo, hi, line = 0, len(text), 1  # the part [lo, hi) is refused and starts on line `line`
    while hi - lo > 1 << 18:  # a quarter MB: about 600 lines of GloVe 6B 50d
        cut = _LINE_END.search(text, lo + (hi - lo) // 2, hi)
        if cut is None or cut.end() >= hi:
            break
        mid = cut.end()
        if _read_table(view[lo:mid], dim, first if lo == 0 else 1, block) is None:
            hi = mid
        else:
            ends = text.count(b"\n", lo, mid) + text.count(b"\r", lo, mid)
            line += ends - text.count(b"\r\n", lo, mid)
            lo = mid
    return max(line, first)


def _raise_malformed(name: str, data: bytes | mmap.mmap, dim: int, first: int, since: int = 1):
    """Find the first malformed line and raise a ValueError naming it (slowly, only once
    Arrow has refused the file). ``dim`` is 0 when the first line gives no dimension; the
    lines before line ``since`` are known to be well formed (by :func:`_accepted_up_to`)."""
    data = bytes(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = len(_split_lines(data[: e.start].decode("utf-8", errors="replace")))
        raise ValueError(
            f"{name}, line {line}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "GloVe files are UTF-8. Convert the file first, e.g. "
            "`iconv -f latin1 -t utf-8 in.txt > out.txt` for Latin-1"
        ) from None
    lines = _split_lines(text.removeprefix("\ufeff"))
    while lines and not lines[-1].strip(" \t"):
        lines.pop()
    chunk: list[tuple[int, str, list[str]]] = []  # lines whose numbers are checked together
    for number in range(max(first, since), len(lines) + 1):
        fields = _fields(lines[number - 1])
        if not fields:
            raise ValueError(
                f"{name}, line {number}: empty line; expected a word and {dim or 'some'} numbers"
            )
        word, values = fields[0], fields[1:]
        if dim == 0 or len(values) != dim:
            noun = "value" if len(values) == 1 else "values"
            raise ValueError(
                f"{name}, line {number}: expected a word and {dim or 'some'} numbers; got "
                f"{len(values)} {noun} after {word!r}"
            )
        chunk.append((number, word, values))
        if len(chunk) == 1000 or number == len(lines):
            flat = [v for _, _, values in chunk for v in values]
            if _numbers_refused(flat):
                for number, word, values in chunk:
                    for v in values:
                        if _numbers_refused([v]):
                            raise ValueError(
                                f"{name}, line {number}: value {v!r} after {word!r} is not a number"
                            )
            chunk = []
    raise ValueError(f"{name}: could not parse the file as GloVe text")  # pragma: no cover
