"""attnlib.glove_text: GloVe's text format, at its edges.

read_glove_text has one reading path: every layout below gives the intended words and float32
vectors, and every malformed file an error naming the file and the line.
"""

import bz2
import gzip
import lzma
import os
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from attnlib import glove_text
from attnlib.glove_text import read_glove_text
from conftest import CAT_DOG, assert_embeddings
from hypothesis import assume, given
from hypothesis import strategies as st


def write(tmp_path, name, content) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


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
def test_read_glove_layouts(tmp_path, monkeypatch, content):
    """Every layout is read by Arrow's CSV reader (the one reading path), none line by line."""
    read_table, results = glove_text._read_table, []
    monkeypatch.setattr(
        glove_text, "_read_table", lambda *a: results.append(read_table(*a)) or results[-1]
    )
    monkeypatch.setattr(glove_text, "_malformed", None)  # never called
    e = read_glove_text(write(tmp_path, "g.txt", content))
    assert_embeddings(e, *CAT_DOG)
    assert results[-1] is not None and results[-1][0] == ["cat", "dog"]
    assert e.vectors.is_contiguous() and e.matrix(["dog", "cat"]).is_contiguous()


NUMBER_SPELLINGS = ["+1", "2.", ".5", "1e5", "1E+05", "-0", "+.5e-3", "007", "1e-50"]
NOT_NUMBERS = ["1_0", "0x10", "1,5", "--1", "1e", "e1", ".", "+", "1.2.3", "\u0661", "1d5", "5%"]


@pytest.mark.parametrize("token", NUMBER_SPELLINGS + NOT_NUMBERS)
def test_read_glove_numbers_are_what_arrow_reads(tmp_path, token):
    """A value is a number when Arrow's float64 parser reads it: the fast path and the search
    for the malformed line agree on every spelling."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        expected = pc.cast(pa.array([token]), pa.float64()).to_pylist()[0]
    except pa.ArrowInvalid:
        expected = None
    assert (expected is not None) == (token in NUMBER_SPELLINGS)
    path = write(tmp_path, "n.txt", f"cat 1 2\ndog {token} 4\n")
    if expected is None:
        with pytest.raises(ValueError, match=r"n\.txt, line 2: value '.*' after 'dog' is not a"):
            read_glove_text(path)
    else:
        assert read_glove_text(path)["dog"][0].item() == np.float32(expected)


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
        pytest.param("BZh91AY&SY", id="bz2-magic-as-text"),
    ],
)
def test_read_glove_words_with_unusual_characters(tmp_path, word):
    """GloVe splits lines at '\\n' only and fields at ' ': str.splitlines() and str.split()
    would cut these words (GloVe 840B has words with U+0085, U+2028 and U+00A0)."""
    path = write(tmp_path, "g.txt", f"cat 1 2\n{word} 5 6\ndog 3 4\n")
    assert_embeddings(read_glove_text(path), ["cat", word, "dog"], [[1, 2], [5, 6], [3, 4]])


def test_read_glove_one_dimension_and_one_word(tmp_path):
    assert_embeddings(
        read_glove_text(write(tmp_path, "d1.txt", "cat 1\ndog -2\n")), ["cat", "dog"], [[1], [-2]]
    )
    assert_embeddings(read_glove_text(write(tmp_path, "w1.txt", "cat 1 2")), ["cat"], [[1, 2]])
    # one dimension: a first line of two integers is a word and its number, not a header
    assert_embeddings(
        read_glove_text(write(tmp_path, "h1.txt", "2 1\n3 4\n")), ["2", "3"], [[1], [4]]
    )


@pytest.mark.slow
def test_read_glove_very_long_line(tmp_path):
    dim = 300_000  # a 600 kB line
    values = np.arange(dim, dtype=np.float32) % 7 - 3
    line = " ".join(str(int(v)) for v in values)
    path = write(tmp_path, "long.txt", f"cat {line}\ndog {line}\n")
    e = read_glove_text(path)
    assert e.words == ["cat", "dog"] and e.dim == dim
    assert np.array_equal(e.vectors.numpy(), np.stack([values, values]))


def test_read_glove_word_longer_than_an_arrow_block(tmp_path):
    """Arrow reads in blocks (4 MiB by default) that must hold whole lines."""
    word = "w" * 5_000_000
    e = read_glove_text(write(tmp_path, "w.txt", f"{word} 1 2\ncat 3 4\n"))
    assert e.words == [word, "cat"]


def test_read_glove_rounds_as_the_seeds_do(tmp_path):
    """float32 of the nearest double, as ``np.array(values, dtype="float32")`` in seed 003:
    both readers agree even on digits just above a float32 tie."""
    tokens = ["1.000000059604644775390625000000000001", "0.1", "3.4028234663852886e38", "1e-45"]
    path = write(tmp_path, "r.txt", "w " + " ".join(tokens) + "\n")
    expected = np.array([float(t) for t in tokens]).astype(np.float32)
    assert np.array_equal(read_glove_text(path).vectors.numpy()[0], expected)


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_bad_glove_compressed(tmp_path, compress):
    """Compressed files are not read (decompress first, or read through a pipe); they are
    recognised by their first bytes, whatever their name, instead of blamed as not UTF-8."""
    path = write(tmp_path, "g.txt", compress(b"2 2\ncat\t1 2\ndog 3 4\n"))
    with pytest.raises(
        ValueError,
        match=r"g\.txt: gzip, bz2 or xz compressed: decompress it first \(gunzip, bunzip2 or "
        r"unxz\), or read it through a pipe",
    ):
        read_glove_text(path)


def test_read_glove_gz_name_but_plain_text(tmp_path):
    assert_embeddings(
        read_glove_text(write(tmp_path, "plain.txt.gz", "cat 1 2\ndog 3 4\n")), *CAT_DOG
    )


def test_read_glove_where_mapping_fails(tmp_path, monkeypatch):
    """A file system that cannot map files (some network and FUSE ones): the file is read."""

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(glove_text.mmap, "mmap", refuse)
    e = read_glove_text(write(tmp_path, "g.txt", "cat 1 2\ndog 3 4\n"))
    assert e.words == ["cat", "dog"] and e["dog"].tolist() == [3.0, 4.0]


def test_read_glove_path_kinds(tmp_path, monkeypatch):
    path = write(tmp_path, "g.txt", "cat 1 2\ndog 3 4\n")
    assert_embeddings(read_glove_text(str(path)), *CAT_DOG)
    assert_embeddings(read_glove_text(path), *CAT_DOG)

    class Named:  # any os.PathLike
        def __fspath__(self):
            return str(path)

    assert_embeddings(read_glove_text(Named()), *CAT_DOG)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert_embeddings(read_glove_text("~/g.txt"), *CAT_DOG)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
@pytest.mark.parametrize("kind", ["text", "zip"])
def test_read_glove_from_a_pipe(tmp_path, kind):
    """A pipe (e.g. ``<(zcat glove.txt.gz)``) cannot be mapped and can be read only once: it
    is read, a zip archive in it too."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    text = "2 2\ncat\t1 2\ndog 3 4\n"
    content = glove_zip(tmp_path, {"g.txt": text}).read_bytes() if kind == "zip" else text.encode()

    def feed():
        with open(fifo, "wb") as f:
            f.write(content)

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    try:
        assert_embeddings(read_glove_text(fifo), *CAT_DOG)
    finally:
        thread.join(timeout=10)


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
    "duplicates-first-repeat": (
        "5 2\na 1 2\nb 3 4\nc 5 6\nb 7 8\na 9 0\n",  # header: line numbers shift by one
        r"duplicates-first-repeat\.txt, line 5: word 'b' repeats line 3; each word must",
    ),
    "header-count": (
        "3 2\ncat 1 2\ndog 3 4\n",
        r"header-count\.txt, line 1: word2vec header '3 2' announces 3 words; the file has 2 "
        r"\(truncated\?\)",
    ),
    "header-dim": (
        "2 5\ncat 1 2\ndog 3 4\n",
        r"header-dim\.txt, line 1: word2vec header '2 5' announces 2 words of 5 numbers; "
        r"line 2 has 2$",
    ),
    "latin-1-line-1": (
        "caf\xe9 1 2\ndog 3 4\n".encode("latin-1"),
        r"latin-1-line-1\.txt, line 1: not UTF-8 \(byte 0xe9 at offset 3\); GloVe files are "
        r"UTF-8: convert it first, e\.g\. `iconv -f latin1 -t utf-8 in out`",
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
}


@pytest.mark.parametrize(
    ("name", "content", "message"), [pytest.param(n, *v, id=n) for n, v in BAD_FILES.items()]
)
def test_bad_glove_file(tmp_path, name, content, message):
    path = write(tmp_path, f"{name}.txt", content)
    with pytest.raises(ValueError, match=message) as info:
        read_glove_text(path)
    assert str(path) in str(info.value)  # the whole path, not only the name


def large_file(bad_line: int, bad: str, end: str, header: bool, tabs: bool) -> bytes:
    """4,000 lines of 20 numbers (about 0.7 MB) with line ``bad_line`` (counted in the file,
    header included) replaced by ``bad``."""
    sep = "\t" if tabs else " "
    lines = [
        f"w{i}{sep}" + sep.join(f"{(i * 20 + j) % 997 / 1000:.5f}" for j in range(20))
        for i in range(4000)
    ]
    lines = ([f"{len(lines)} 20"] if header else []) + lines
    lines[bad_line - 1] = bad
    return (end.join(lines) + end).encode()


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("header", [False, True], ids=["", "header"])
@pytest.mark.parametrize("tabs", [False, True], ids=["", "tabs"])
@pytest.mark.parametrize("where", ["second", "middle", "last"])
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("odd 1 2", r"got 2 values after 'odd'"),
        ("odd " + " ".join(["0.5"] * 19) + " 0,5", r"value '0,5' after 'odd' is not a number"),
        ("", r"empty line; expected a word and 20 numbers"),
    ],
    ids=["short", "comma", "empty"],
)
def test_bad_line_in_a_large_file(tmp_path, end, header, tabs, where, bad, message):
    """The first malformed line is named in a file of many lines, whatever its line ends,
    header and separators (numbers are checked 1,000 lines at a time: 4,000 lines are four
    such parts)."""
    number = {"second": 2 + header, "middle": 2345, "last": 4000 + header}[where]
    path = write(tmp_path, "big.txt", large_file(number, bad, end, header, tabs))
    if bad == "" and where == "last":  # blank lines at the end are allowed, but counted
        if header:
            with pytest.raises(ValueError, match=r"announces 4000 words; the file has 3999"):
                read_glove_text(path)
        else:
            assert len(read_glove_text(path)) == 3999
        return
    with pytest.raises(ValueError, match=rf"big\.txt, line {number}: .*{message}"):
        read_glove_text(path)


def test_a_second_bad_line_does_not_hide_the_first(tmp_path):
    lines = large_file(3000, "odd 1 2", "\n", False, False).split(b"\n")
    lines[999] = b"early 1 2"
    path = write(tmp_path, "two.txt", b"\n".join(lines))
    with pytest.raises(ValueError, match=r"two\.txt, line 1000: .* after 'early'"):
        read_glove_text(path)


@given(st.text(" \t\n\rab", max_size=40))
def test_canonical_keeps_every_line_and_its_fields(text):
    """The rewrite for Arrow keeps each line (``"\\r \\n"`` is two line ends, not one) and
    its fields, joined by single spaces."""
    rewritten = glove_text._canonical(memoryview(text.encode()))
    rewritten = text if rewritten is None else rewritten.decode()  # None: already so
    lines = glove_text._lines(text)
    assert rewritten.split("\n") == [" ".join(glove_text._fields(line)) for line in lines]


def test_blank_line_of_a_space_between_cr_and_lf(tmp_path):
    path = write(tmp_path, "g.txt", "cat 1 2\r \ndog 3 4\n")
    with pytest.raises(ValueError, match=r"g\.txt, line 2: empty line; expected a word and 2"):
        read_glove_text(path)


def glove_zip(tmp_path, members=None):
    """A zip archive like GloVe's own glove.6B.zip (two members here, deflated)."""
    path = tmp_path / "glove.6B.zip"
    members = members or {
        "glove.6B.50d.txt": "cat 1 2\ndog 3 4\n",
        "glove.6B.100d.txt": "cat 1 2 5\ndog 3 4 5\n",
    }
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, content in members.items():
            z.writestr(name, content)
    return path


def test_read_glove_zip_member(tmp_path):
    path = glove_zip(tmp_path)
    assert_embeddings(read_glove_text(path, member="glove.6B.50d.txt"), *CAT_DOG)
    e = read_glove_text(str(path), member="glove.6B.100d.txt")
    assert e.dim == 3 and e.words == ["cat", "dog"]
    (tmp_path / "one").mkdir()
    one = glove_zip(tmp_path / "one", {"g.txt": "2 2\ncat 1 2\ndog\t3 4\n"})
    assert_embeddings(read_glove_text(one), *CAT_DOG)  # one member: no need to name it


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (
            None,
            r"glove\.6B\.zip: the zip archive holds 2 files: glove\.6B\.50d\.txt, "
            r"glove\.6B\.100d\.txt; name the one to read: read_glove_text\("
            r"'.*glove\.6B\.zip', member='glove\.6B\.50d\.txt'\)",
        ),
        (
            "glove.6B.300d.txt",
            r"glove\.6B\.zip: the zip archive holds no member 'glove\.6B\.300d\.txt'; it holds "
            r"glove\.6B\.50d\.txt, glove\.6B\.100d\.txt; name the one to read: read_glove_text",
        ),
    ],
)
def test_bad_glove_zip_member(tmp_path, member, message):
    with pytest.raises(ValueError, match=message):
        read_glove_text(glove_zip(tmp_path), member=member)


def test_bad_glove_line_in_a_zip_member(tmp_path):
    path = glove_zip(tmp_path, {"glove.6B.50d.txt": "cat 1 2\ndog 3 x\n", "b.txt": ""})
    with pytest.raises(
        ValueError,
        match=r"glove\.6B\.zip/glove\.6B\.50d\.txt, line 2: value 'x' after 'dog' is not a "
        r"number",
    ):
        read_glove_text(path, member="glove.6B.50d.txt")


def test_bad_glove_damaged_zip(tmp_path):
    path = glove_zip(tmp_path)
    path.write_bytes(path.read_bytes()[:60])
    with pytest.raises(ValueError, match=r"glove\.6B\.zip: a zip archive that could not be read"):
        read_glove_text(path, member="glove.6B.50d.txt")


def test_bad_glove_member_of_a_plain_file(tmp_path):
    path = write(tmp_path, "g.txt", "cat 1 2\n")
    with pytest.raises(ValueError, match=r"g\.txt: member='g\.txt' names a file inside a zip"):
        read_glove_text(path, member="g.txt")
    with pytest.raises(TypeError, match=r"member must be a str \(a file inside the zip"):
        read_glove_text(glove_zip(tmp_path), member=0)


def test_bad_glove_directory(tmp_path):
    (tmp_path / "glove.6B.50d.txt").write_text("cat 1 2\n", encoding="utf-8")
    with pytest.raises(
        IsADirectoryError,
        match=r"path must be a GloVe text file; got the directory '.*', which holds "
        r"glove\.6B\.50d\.txt",
    ):
        read_glove_text(tmp_path)


@pytest.mark.parametrize(
    ("path", "got"), [(b"g.txt", "bytes"), (3, "int"), (None, "NoneType"), (["g.txt"], "list")]
)
def test_bad_glove_path_type(path, got):
    with pytest.raises(TypeError, match=rf"path must be a str or os\.PathLike; got {got}"):
        read_glove_text(path)


def test_bad_glove_open_file_object(tmp_path):
    path = write(tmp_path, "g.txt", "cat 1 2\n")
    with (
        open(path, encoding="utf-8") as f,
        pytest.raises(TypeError, match=r"path must be a str or os\.PathLike; got TextIOWrapper"),
    ):
        read_glove_text(f)


# ---------------------------------------------------------------- generated files

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
def test_read_glove_generated_files(tmp_path_factory, words, dim, data):
    """Random separators, line ends, words, number spellings, header, BOM, trailing blank
    lines: the intended words and vectors."""
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
    # one word of one number, both whole numbers, the number >= 2 ("12 5"): a word2vec header
    # without words, refused (test_bad_glove_header_and_nothing_else)
    number = spell.format(float(values[0][0])) if dim == 1 else ""
    assume(not (len(words) == 1 and words[0].isascii() and words[0].isdigit()
                and number.isascii() and number.isdigit() and int(number) >= 2))  # fmt: skip
    end = data.draw(LINE_ENDS)
    text = end.join(lines) + data.draw(st.sampled_from(["", end, end + end]))
    if data.draw(st.booleans()):
        text = "\ufeff" + text
    path = tmp_path_factory.mktemp("gen") / "g.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = np.array([[float(spell.format(float(v))) for v in row] for row in values]).astype(
        np.float32
    )

    e = read_glove_text(path)
    assert e.words == words
    assert np.array_equal(e.vectors.numpy(), expected)


def patched_zip(tmp_path, flag_bits: int = 0, method: int | None = None):
    """A zip archive of one stored member, ``g.txt``, with its general-purpose flags or its
    compression method rewritten in both headers (Python's zipfile writes neither encrypted
    nor Deflate64 members)."""
    path = tmp_path / "locked.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("g.txt", "cat 1 2\ndog 3 4\n")
    raw = bytearray(path.read_bytes())
    local, central = raw.find(b"PK\x03\x04"), raw.find(b"PK\x01\x02")
    for flags_at, method_at in ((local + 6, local + 8), (central + 8, central + 10)):
        raw[flags_at : flags_at + 2] = (int.from_bytes(raw[flags_at : flags_at + 2], "little")
                                        | flag_bits).to_bytes(2, "little")  # fmt: skip
        if method is not None:
            raw[method_at : method_at + 2] = method.to_bytes(2, "little")
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize("member", [None, "g.txt"])
def test_bad_glove_encrypted_zip_member(tmp_path, member):
    """Before: zipfile's RuntimeError "File 'g.txt' is encrypted, password required for
    extraction", naming no archive."""
    path = patched_zip(tmp_path, flag_bits=0x1)
    with pytest.raises(
        ValueError,
        match=r"locked\.zip: a zip archive that could not be read \(RuntimeError: File 'g\.txt' "
        r"is encrypted, password required for extraction\); download it again if it is "
        r"damaged, or extract the file with unzip or 7z \(which read encrypted members",
    ):
        read_glove_text(path, member=member)


def test_bad_glove_zip_member_of_an_unreadable_method(tmp_path):
    """Before: zipfile's NotImplementedError "That compression method is not supported"."""
    path = patched_zip(tmp_path, method=9)  # Deflate64
    with pytest.raises(
        ValueError,
        match=r"locked\.zip: a zip archive that could not be read \(NotImplementedError: That "
        r"compression method is not supported\); .* extract the file with unzip or 7z",
    ):
        read_glove_text(path, member="g.txt")
    assert_embeddings(read_glove_text(patched_zip(tmp_path)), *CAT_DOG)  # unpatched: read


def test_bad_glove_zip_of_many_files(tmp_path):
    path = glove_zip(tmp_path, {f"g{i}.txt": "cat 1 2\n" for i in range(7)})
    with pytest.raises(
        ValueError,
        match=r"glove\.6B\.zip: the zip archive holds 7 files: g0\.txt, g1\.txt, g2\.txt, "
        r"g3\.txt, g4\.txt, \.\.\.; name the one to read: "
        r"read_glove_text\('.*', member='g0\.txt'\)",
    ):
        read_glove_text(path)


def test_bad_glove_empty_zip(tmp_path):
    path = tmp_path / "empty.zip"
    zipfile.ZipFile(path, "w").close()
    with pytest.raises(
        ValueError, match=r"empty\.zip: the zip archive holds 0 files: none; name the one to read"
    ):
        read_glove_text(path)


@pytest.mark.parametrize(
    ("content", "shown"),
    [("400000 50", "400000 50"), ("400000 50\n", "400000 50"), ("3\t300 \r\n\n", "3 300"),
     ("0 2", "0 2")],
)  # fmt: skip
def test_bad_glove_header_and_nothing_else(tmp_path, content, shown):
    """Before: a file cut after its word2vec header read as one word, "400000", of one number."""
    path = write(tmp_path, "cut.txt", content)
    with pytest.raises(
        ValueError,
        match=rf"cut\.txt, line 1: word2vec header '{shown}' announces \d+ words of \d+ numbers; "
        r"no line 2 \(cut short\?\)",
    ):
        read_glove_text(path)


def test_one_line_of_two_numbers_with_one_dimension_is_a_word(tmp_path):
    """No header announces one dimension: "2 1" alone is the word "2" and its number."""
    assert_embeddings(read_glove_text(write(tmp_path, "one.txt", "2 1\n")), ["2"], [[1]])
