"""The GloVe text format, at its edges: read_glove_text and write_glove_text.

Every reading test runs twice, through the pyarrow fast path (``arrow``) and through the
NumPy reader (``numpy``, the fallback without pyarrow): both must give the same words and
the same float32 vectors, or the same error naming the file and the line.
"""

import bz2
import gzip
import lzma
import os
import sys
import threading
import zipfile
from pathlib import Path

import attnlib.embeddings as embeddings_module
import numpy as np
import pytest
import torch
from attnlib.embeddings import read_glove_text, write_glove_text
from conftest import GLOVE_SUBSET
from hypothesis import given
from hypothesis import strategies as st

CAT_DOG = (["cat", "dog"], [[1.0, 2.0], [3.0, 4.0]])


@pytest.fixture(params=["arrow", "numpy"])
def read(request, monkeypatch):
    """read_glove_text through the pyarrow fast path, or with the fast path switched off."""
    if request.param == "numpy":
        monkeypatch.setattr(embeddings_module, "_read_glove_text_arrow", lambda *a, **k: None)
    return read_glove_text


def write(tmp_path, name, content) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def assert_embeddings(e, words, vectors):
    assert e.words == words
    assert e.vectors.dtype == torch.float32
    assert np.array_equal(e.vectors.numpy(), np.asarray(vectors, dtype=np.float32))


# ---------------------------------------------------------------- accepted layouts


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("cat\t1 2\ndog\t3 4\n", id="tab-after-word"),
        pytest.param("cat\t1\t2\ndog\t3\t4\n", id="tabs-only"),
        pytest.param("cat \t1\t\t2 \ndog  3   4\t\n", id="mixed-runs"),
        pytest.param(" cat 1 2\ndog 3 4\n", id="leading-space-line-1"),
        pytest.param("cat 1 2\n dog 3 4\n", id="leading-space-line-2"),
        pytest.param("\tcat 1 2\n\t dog 3 4\n", id="leading-tab"),
        pytest.param("cat 1 2 \ndog 3 4 \n", id="trailing-space-fasttext"),
        pytest.param("cat 1 2\r\ndog 3 4\r\n", id="crlf"),
        pytest.param("cat 1 2\rdog 3 4\r", id="cr-only"),
        pytest.param("\ufeffcat 1 2\ndog 3 4\n", id="bom"),
        pytest.param("cat 1 2\ndog 3 4", id="no-final-newline"),
        pytest.param("cat 1 2\ndog 3 4\n\n \n\t\n", id="trailing-blank-lines"),
        pytest.param("2 2\ncat 1 2\ndog 3 4\n", id="word2vec-header"),
        pytest.param("2 2 \ncat 1 2 \ndog 3 4 \n", id="word2vec-header-fasttext"),
        pytest.param("\ufeff2\t2\r\ncat\t1\t2\r\ndog\t3\t4\r\n", id="bom-header-tabs-crlf"),
        pytest.param("cat +1 2.\ndog 3e0 .4E+1\n", id="number-syntax"),
    ],
)
def test_read_glove_layouts(tmp_path, read, content):
    assert_embeddings(read(write(tmp_path, "g.txt", content)), *CAT_DOG)


@pytest.mark.parametrize(
    "word",
    [
        pytest.param("a\u2028b", id="U+2028"),
        pytest.param("a\u2029b", id="U+2029"),
        pytest.param("a\x85b", id="U+0085"),
        pytest.param("\x85", id="U+0085-alone"),
        pytest.param("a\xa0b", id="nbsp"),
        pytest.param(". . .".replace(" ", "\xa0"), id="nbsp-dots-840B"),
        pytest.param("a\x0bb", id="vertical-tab"),
        pytest.param("a\x0cb", id="form-feed"),
        pytest.param("a\x1cb\x1d\x1e\x1f", id="file-separators"),
        pytest.param("a\x00b", id="nul"),
        pytest.param('"quoted', id="quote"),
        pytest.param("NA", id="NA"),
        pytest.param("nan", id="nan-word"),
        pytest.param("1", id="number-word"),
        pytest.param("#", id="hash"),
        pytest.param("\ufeffmid", id="bom-in-a-later-word"),
    ],
)
def test_read_glove_words_with_unusual_characters(tmp_path, read, word):
    """GloVe splits lines at '\\n' only and fields at ' ': str.splitlines() and str.split()
    would cut these words (GloVe 840B has words with U+0085, U+2028 and U+00A0)."""
    path = write(tmp_path, "g.txt", f"cat 1 2\n{word} 5 6\ndog 3 4\n")
    assert_embeddings(read(path), ["cat", word, "dog"], [[1, 2], [5, 6], [3, 4]])


def test_read_glove_one_dimension_and_one_word(tmp_path, read):
    assert_embeddings(
        read(write(tmp_path, "d1.txt", "cat 1\ndog -2\n")), ["cat", "dog"], [[1], [-2]]
    )
    assert_embeddings(read(write(tmp_path, "w1.txt", "cat 1 2")), ["cat"], [[1, 2]])
    # one dimension: a first line of two integers is a word and its number, not a header
    assert_embeddings(read(write(tmp_path, "h1.txt", "2 1\n3 4\n")), ["2", "3"], [[1], [4]])


def test_read_glove_very_long_line(tmp_path, read):
    dim = 300_000  # a 600 kB line, longer than pyarrow's default block
    values = np.arange(dim, dtype=np.float32) % 7 - 3
    line = " ".join(str(int(v)) for v in values)
    path = write(tmp_path, "long.txt", f"cat {line}\ndog {line}\n")
    e = read(path)
    assert e.words == ["cat", "dog"] and e.dim == dim
    assert np.array_equal(e.vectors.numpy(), np.stack([values, values]))


def test_read_glove_rounds_as_the_seeds_do(tmp_path, read):
    """float32 of the nearest double, as ``np.array(values, dtype="float32")`` in seed 003:
    both readers agree even on digits just above a float32 tie."""
    tokens = ["1.000000059604644775390625000000000001", "0.1", "3.4028234663852886e38", "1e-45"]
    path = write(tmp_path, "r.txt", "w " + " ".join(tokens) + "\n")
    expected = np.array([float(t) for t in tokens]).astype(np.float32)
    assert np.array_equal(read(path).vectors.numpy()[0], expected)


@pytest.mark.parametrize("kind", ["gz-name", "gz-content", "bz2", "xz"])
def test_read_glove_compressed(tmp_path, read, kind):
    """Compressed files are recognised by their first bytes, whatever their name."""
    raw = b"2 2\ncat\t1 2\ndog 3 4\n"
    name, data = {
        "gz-name": ("g.txt.gz", gzip.compress(raw)),
        "gz-content": ("glove.txt", gzip.compress(raw)),
        "bz2": ("g.txt", bz2.compress(raw)),
        "xz": ("g.txt", lzma.compress(raw)),
    }[kind]
    assert_embeddings(read(write(tmp_path, name, data)), *CAT_DOG)


def test_read_glove_gz_name_but_plain_text(tmp_path, read):
    assert_embeddings(read(write(tmp_path, "plain.txt.gz", "cat 1 2\ndog 3 4\n")), *CAT_DOG)


def test_read_glove_path_kinds(tmp_path, read, monkeypatch):
    path = write(tmp_path, "g.txt", "cat 1 2\ndog 3 4\n")
    assert_embeddings(read(str(path)), *CAT_DOG)
    assert_embeddings(read(path), *CAT_DOG)

    class Named:  # any os.PathLike
        def __fspath__(self):
            return str(path)

    assert_embeddings(read(Named()), *CAT_DOG)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert_embeddings(read("~/g.txt"), *CAT_DOG)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_read_glove_from_a_pipe(tmp_path, read):
    """A pipe (e.g. ``<(zcat glove.txt.gz)``) can be read only once: it is, and gzip inside
    it is recognised too."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as f:
            f.write(gzip.compress(b"cat 1 2\ndog 3 4\n"))

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    try:
        assert_embeddings(read(fifo), *CAT_DOG)
    finally:
        thread.join(timeout=10)


def test_read_glove_uses_the_fast_path_for_plain_files(monkeypatch, tmp_path):
    """The real files never need the slower NumPy reader (it is switched off here)."""

    def fail(*args, **kwargs):
        raise AssertionError("the NumPy reader was used")

    monkeypatch.setattr(embeddings_module, "_read_glove_text_numpy", fail)
    assert len(read_glove_text(GLOVE_SUBSET)) > 500
    path = write(tmp_path, "crlf.txt", "\ufeffcat 1 2\r\ndog 3 4\r\n")
    assert_embeddings(read_glove_text(path), *CAT_DOG)
    gz = write(tmp_path, "g.gz", gzip.compress(b"2 2\ncat 1 2\ndog 3 4\n"))
    assert_embeddings(read_glove_text(gz), *CAT_DOG)


def test_read_glove_without_pyarrow(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.csv", None)
    monkeypatch.setitem(sys.modules, "pyarrow.compute", None)
    assert_embeddings(read_glove_text(write(tmp_path, "g.txt", "cat 1 2\ndog 3 4\n")), *CAT_DOG)


# ---------------------------------------------------------------- refused files

BAD_FILES = {
    # name: (content, expected message, as a regex)
    "empty": ("", r"empty\.txt: empty GloVe file"),
    "blank": (" \n\t\r\n\n", r"blank\.txt: empty GloVe file"),
    "bom-only": ("\ufeff\n", r"bom-only\.txt: empty GloVe file"),
    "blank-line-inside": (
        "cat 1 2\n\t \ndog 3 4\n",
        r"blank-line-inside\.txt, line 2: empty line; expected a word and 2 numbers",
    ),
    "short": (
        "cat 1 2\ndog 3\n",
        r"short\.txt, line 2: expected a word and 2 numbers; got 1 value after 'dog'",
    ),
    "long": (
        "cat 1 2\ndog 3 4 5\n",
        r"long\.txt, line 2: expected a word and 2 numbers; got 3 values after 'dog'",
    ),
    "tab-in-a-later-line": (
        "cat 1 2\ndog\t3\t4\t5\n",
        r"tab-in-a-later-line\.txt, line 2: expected a word and 2 numbers; got 3 values",
    ),
    "cr-splits-a-line": (
        "cat 1 2\ndog 3 4\rbird 5\n",
        r"cr-splits-a-line\.txt, line 3: expected a word and 2 numbers; got 1 value after 'bird'",
    ),
    "word-only": (
        "cat\ndog\n",
        r"word-only\.txt, line 1: expected a word and some numbers; got 0 values after 'cat'",
    ),
    "underscore": (
        "cat 1 2\ndog 1_0 4\n",
        r"underscore\.txt, line 2: value '1_0' after 'dog' is not a number",
    ),
    "fullwidth-digit": (
        "cat 1 2\ndog \uff11 4\n",
        r"fullwidth-digit\.txt, line 2: value '\uff11' after 'dog' is not a number",
    ),
    "comma-decimal": (
        "cat 1 2\ndog 3,5 4\n",
        r"comma-decimal\.txt, line 2: value '3,5' after 'dog' is not a number",
    ),
    "vertical-tab-in-number": (
        "cat 1 2\ndog 3\x0b5 \x0b\n",
        r"vertical-tab-in-number\.txt, line 2: value '3\\x0b5' after 'dog' is not a number",
    ),
    "nan": (
        "cat 1 2\ndog nan 4\n",
        r"nan\.txt, line 2: value 'nan' after 'dog' is not a finite number",
    ),
    "inf": (
        "cat 1 2\ndog 3 -inf\n",
        r"inf\.txt, line 2: value '-inf' after 'dog' is not a finite number",
    ),
    "overflow": (
        "cat 1 2\ndog 1e39 4\n",
        r"overflow\.txt, line 2: value '1e39' after 'dog' is out of the float32 range",
    ),
    "duplicate": (
        "cat 1 2\ndog 3 4\ncat 5 6\n",
        r"duplicate\.txt, line 3: word 'cat' repeats line 1; each word must appear once",
    ),
    "header-count": (
        "3 2\ncat 1 2\ndog 3 4\n",
        r"header-count\.txt, line 1: word2vec header '3 2' announces 3 words; the file has 2 "
        r"\(truncated\?\)",
    ),
    "header-dim": (
        "2 5\ncat 1 2\ndog 3 4\n",
        r"header-dim\.txt, line 1: word2vec header '2 5' announces 5 numbers per word; "
        r"line 2 has 2",
    ),
    "latin-1": (
        "cat 1 2\ncaf\xe9 3 4\n".encode("latin-1"),
        r"latin-1\.txt, line 2: not UTF-8 \(byte 0xe9 at offset 11\); GloVe files are UTF-8",
    ),
    "surrogate-bytes": (
        b"cat 1 2\n\xed\xa0\x80 3 4\n",
        r"surrogate-bytes\.txt, line 2: not UTF-8 \(byte 0xed",
    ),
    "latin-1-after-cr": (
        "cat 1 2\rdog 3 4\r\ncaf\xe9 3 4\n".encode("latin-1"),
        r"latin-1-after-cr\.txt, line 3: not UTF-8",
    ),
    "truncated-gzip": (
        gzip.compress(b"cat 1 2\ndog 3 4\n" * 100)[:40],
        r"truncated-gzip\.txt: a gzip file that could not be decompressed",
    ),
}


@pytest.mark.parametrize(("name", "content", "message"), [(n, *v) for n, v in BAD_FILES.items()])
def test_bad_glove_file(tmp_path, read, name, content, message):
    path = write(tmp_path, f"{name}.txt", content)
    with pytest.raises(ValueError, match=message) as info:
        read(path)
    assert str(path) in str(info.value)  # the whole path, not only the name


def test_bad_glove_zip_archive(tmp_path, read):
    path = tmp_path / "glove.6B.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("glove.6B.50d.txt", "cat 1 2\n")
        z.writestr("glove.6B.100d.txt", "cat 1 2\n")
    with pytest.raises(
        ValueError,
        match=r"glove\.6B\.zip: a zip archive, not a GloVe text file; it holds "
        r"glove\.6B\.50d\.txt, glove\.6B\.100d\.txt\. Extract one",
    ):
        read(path)


def test_bad_glove_directory(tmp_path, read):
    (tmp_path / "glove.6B.50d.txt").write_text("cat 1 2\n", encoding="utf-8")
    with pytest.raises(
        IsADirectoryError,
        match=r"path must be a GloVe text file; got the directory '.*', which holds "
        r"glove\.6B\.50d\.txt",
    ):
        read(tmp_path)


@pytest.mark.parametrize(
    ("path", "got"), [(b"g.txt", "bytes"), (3, "int"), (None, "NoneType"), (["g.txt"], "list")]
)
def test_bad_glove_path_type(read, path, got):
    with pytest.raises(TypeError, match=rf"path must be a str or os\.PathLike; got {got}"):
        read(path)


def test_bad_glove_open_file_object(read, tmp_path):
    path = write(tmp_path, "g.txt", "cat 1 2\n")
    with (
        open(path, encoding="utf-8") as f,
        pytest.raises(TypeError, match=r"path must be a str or os\.PathLike; got TextIOWrapper"),
    ):
        read(f)


# ---------------------------------------------------------------- both readers agree

SEPARATORS = st.sampled_from([" ", " ", " ", "\t", "  ", " \t"])
LINE_ENDS = st.sampled_from(["\n", "\n", "\r\n", "\r"])
WORD_CHARS = st.characters(
    blacklist_categories=("Cs",), blacklist_characters=" \t\r\n"
)  # anything a GloVe word may hold, including U+0085, U+2028, U+00A0, NUL


@given(
    words=st.lists(
        st.text(WORD_CHARS, min_size=1, max_size=6), min_size=1, max_size=6, unique=True
    ),
    dim=st.integers(1, 4),
    data=st.data(),
)
def test_readers_agree_on_generated_files(tmp_path_factory, words, dim, data):
    """Random separators, line ends, words, number spellings, header, BOM, trailing blank
    lines: the fast path and the NumPy reader give the same result, which is the intended
    one, or both refuse the file."""
    if words[0].startswith("\ufeff"):
        words[0] = "w" + words[0]  # a BOM at the start of the file is dropped
    values = data.draw(
        st.lists(
            st.lists(st.floats(-1e6, 1e6, width=32), min_size=dim, max_size=dim),
            min_size=len(words),
            max_size=len(words),
        )
    )
    spell = data.draw(st.sampled_from(["{:g}", "{!r}", "{:.3e}", "{:+.9f}"]))
    header = dim >= 2 and data.draw(st.booleans())
    lines = [f"{len(words)} {dim}"] if header else []
    for word, row in zip(words, values):
        sep = data.draw(SEPARATORS)
        lead = data.draw(st.sampled_from(["", "", " ", "\t"]))
        trail = data.draw(st.sampled_from(["", "", " ", "\t"]))
        lines.append(lead + word + sep + sep.join(spell.format(float(v)) for v in row) + trail)
    end = data.draw(LINE_ENDS)
    text = end.join(lines) + data.draw(st.sampled_from(["", end, end + end]))
    if data.draw(st.booleans()):
        text = "\ufeff" + text
    path = tmp_path_factory.mktemp("gen") / "g.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = np.array([[float(spell.format(float(v))) for v in row] for row in values]).astype(
        np.float32
    )

    fast = read_glove_text(path)
    original = embeddings_module._read_glove_text_arrow
    embeddings_module._read_glove_text_arrow = lambda *a, **k: None
    try:
        slow = read_glove_text(path)
    finally:
        embeddings_module._read_glove_text_arrow = original
    assert fast.words == slow.words == words
    assert np.array_equal(fast.vectors.numpy(), expected)
    assert np.array_equal(slow.vectors.numpy(), expected)


# ---------------------------------------------------------------- write_glove_text


def test_write_glove_round_trips_unusual_words(tmp_path, read):
    words = ["a\u2028b", "a\x85b", ". . .".replace(" ", "\xa0"), "a\x0bb", "\ufeffmid", "1", "NA"]
    vectors = np.arange(2 * len(words), dtype=np.float32).reshape(-1, 2) - 3.5
    path = write_glove_text(tmp_path / "odd.txt", words, vectors)
    assert_embeddings(read(path), words, vectors)
    assert path.read_bytes().count(b"\n") == len(words)


def test_write_glove_expands_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    path = write_glove_text("~/sub/g.txt", *CAT_DOG)
    assert path == home / "sub" / "g.txt" and path.is_file()
    assert not (tmp_path / "~").exists()  # not a folder named '~' in the working directory
    assert_embeddings(read_glove_text(path), *CAT_DOG)


BAD_WRITES = [
    # (words, vectors, exception, message)
    pytest.param(
        [1, 2], [[1.0], [2.0]], TypeError,
        r"words must all be str; got int 1 at position 0", id="int-words",
    ),
    pytest.param(
        ["a", None], [[1.0], [2.0]], TypeError,
        r"words must all be str; got NoneType None at position 1", id="none-word",
    ),
    pytest.param(
        "ab", [[1.0], [2.0]], TypeError,
        r"words must be a sequence of str, not one str; got 'ab'", id="str-words",
    ),
    pytest.param(
        ["a", "b c"], [[1.0], [2.0]], ValueError,
        r"words must be non-empty and contain no space, tab, '\\r' or '\\n' \(the file's "
        r"separators\); got 'b c' at position 1", id="space",
    ),
    pytest.param(
        ["a\tb"], [[1.0]], ValueError, r"got 'a\\tb' at position 0", id="tab",
    ),
    pytest.param(
        ["a", "b\nc"], [[1.0], [2.0]], ValueError, r"got 'b\\nc' at position 1", id="newline",
    ),
    pytest.param(
        ["a\r"], [[1.0]], ValueError, r"got 'a\\r' at position 0", id="carriage-return",
    ),
    pytest.param(["a", ""], [[1.0], [2.0]], ValueError, r"got '' at position 1", id="empty-word"),
    pytest.param(
        ["a", "b", "a"], [[1.0], [2.0], [3.0]], ValueError,
        r"words must not repeat; got 'a' at positions 0 and 2", id="duplicate",
    ),
    pytest.param(
        ["a", "\ud800"], [[1.0], [2.0]], ValueError,
        r"words must be encodable as UTF-8; got '\\ud800' at position 1", id="surrogate",
    ),
    pytest.param(
        ["\ufeffa"], [[1.0]], ValueError,
        r"words\[0\] must not start with U\+FEFF \(a byte-order mark", id="bom-first-word",
    ),
    pytest.param(
        [], np.zeros((0, 2)), ValueError,
        r"words must contain at least one word; got an empty sequence", id="no-words",
    ),
    pytest.param(
        ["a"], np.zeros((1, 0)), ValueError,
        r"vectors must have at least one column, \(V, D\) with D >= 1; got \(1, 0\)", id="dim-0",
    ),
    pytest.param(
        ["a", "b"], np.zeros((3, 2)), ValueError,
        r"vectors must have shape \(2, D\); got \(3, 2\)", id="rows",
    ),
    pytest.param(
        ["a"], np.zeros((1, 2, 1)), ValueError,
        r"vectors must have shape \(1, D\); got \(1, 2, 1\)", id="3-d",
    ),
    pytest.param(
        ["a"], [["x", "y"]], TypeError,
        r"vectors must hold real numbers; got dtype <U1", id="strings",
    ),
    pytest.param(
        ["a", "b"], [[1.0, 2.0], [np.nan, 0.0]], ValueError,
        r"vectors must be finite; row 1 \('b'\) holds nan", id="nan",
    ),
    pytest.param(
        ["a"], [[1.0, -np.inf]], ValueError, r"row 0 \('a'\) holds -inf", id="inf",
    ),
    pytest.param(
        ["a"], [[1e39, 0.0]], ValueError,
        r"vectors must be finite; row 0 \('a'\) holds 1e\+39, which is out of the float32 range",
        id="float32-overflow",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("words", "vectors", "exc", "message"), BAD_WRITES)
def test_bad_write_glove_leaves_nothing_behind(tmp_path, words, vectors, exc, message):
    path = tmp_path / "keep.txt"
    path.write_text("old 1.0\n", encoding="utf-8")
    with pytest.raises(exc, match=message):
        write_glove_text(path, words, vectors)
    assert path.read_text(encoding="utf-8") == "old 1.0\n"  # untouched
    assert sorted(os.listdir(tmp_path)) == ["keep.txt"]  # no temporary file


def test_bad_write_glove_failure_while_writing(tmp_path, monkeypatch):
    """An error in the middle of writing (here: the disk fills) leaves the old file whole."""
    path = tmp_path / "keep.txt"
    path.write_text("old 1.0\n", encoding="utf-8")
    calls = []

    def failing_format(block):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("No space left on device")
        return original(block)

    original = embeddings_module._format_values
    monkeypatch.setattr(embeddings_module, "_format_values", failing_format)
    monkeypatch.setattr(embeddings_module, "_WRITE_ROWS", 2)
    with pytest.raises(OSError, match="No space left on device"):
        write_glove_text(path, ["a", "b", "c", "d"], np.ones((4, 2)))
    assert len(calls) == 2  # the first block was written to the temporary file
    assert path.read_text(encoding="utf-8") == "old 1.0\n"
    assert sorted(os.listdir(tmp_path)) == ["keep.txt"]


def test_bad_write_glove_path(tmp_path):
    with pytest.raises(
        IsADirectoryError, match=r"path must be a file name; got the directory '.*'"
    ):
        write_glove_text(tmp_path, ["a"], [[1.0]])
    assert os.listdir(tmp_path) == []
    with pytest.raises(TypeError, match=r"path must be a str or os\.PathLike; got bytes"):
        write_glove_text(b"g.txt", ["a"], [[1.0]])
