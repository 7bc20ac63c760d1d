"""scripts/make_glove_subset.py: write_glove_text, the writer of GloVe's text format that
makes data/glove.6B.50d.subset.txt, and the subset it writes."""

import os
import stat

import make_glove_subset
import numpy as np
import pytest
import torch
from attnlib import read_glove_text
from conftest import CAT_DOG, GLOVE_SUBSET, SHIP_START, assert_embeddings
from make_glove_subset import write_glove_text


def test_write_read_round_trip_exact(tmp_path):
    rng = np.random.default_rng(0)
    exponents = rng.integers(-8, 8, (20, 7)).astype(np.float32)
    vectors = (rng.standard_normal((20, 7)) * 10.0**exponents).astype(np.float32)
    vectors[0, :4] = SHIP_START
    vectors[1, :3] = [np.float32(1) / 3, -0.0, np.finfo(np.float32).max]
    vectors[2, :2] = [np.finfo(np.float32).tiny, 1e-45]  # smallest normal and subnormal
    words = ["ship"] + [f"w{i}" for i in range(1, 20)]
    path = write_glove_text(tmp_path / "out.txt", words, vectors)
    assert path == tmp_path / "out.txt"
    back = read_glove_text(path)
    assert back.words == words
    assert np.array_equal(back.vectors.numpy(), vectors)  # bit for bit
    assert path.read_text(encoding="utf-8").startswith("ship 1.5213 0.10522 0.38162 -0.50801 ")
    assert sorted(os.listdir(tmp_path)) == ["out.txt"]  # no temporary file left behind


def test_write_glove_from_tensor_and_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_glove_text(
            tmp_path / "t.txt", ["a", "b"], torch.tensor([[1.0, 2.0], [3.0, 4.5]])
        )
    finally:
        os.umask(old)
    assert path.read_text(encoding="utf-8") == "a 1 2\nb 3 4.5\n"  # as the original files
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's 0600


def test_write_glove_is_atomic_on_error(tmp_path, monkeypatch):
    path = tmp_path / "keep.txt"
    path.write_text("old 1.0\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vectors must have shape \(2, D\); got \(3, 2\)"):
        write_glove_text(path, ["a", "b"], np.zeros((3, 2)))
    with pytest.raises(
        ValueError,
        match=r"words must be non-empty and contain no space, tab, '\\r' or '\\n' \(the "
        r"file's separators\); got 'a b' at position 0",
    ):
        write_glove_text(path, ["a b", "", "c"], np.zeros((3, 2)))

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(make_glove_subset.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        write_glove_text(path, ["a"], np.ones((1, 2)))
    assert path.read_text(encoding="utf-8") == "old 1.0\n"  # untouched
    assert sorted(os.listdir(tmp_path)) == ["keep.txt"]  # the temporary file is removed


def test_write_glove_round_trips_unusual_words(tmp_path):
    words = ["a\u2028b", "a\x85b", ". . .".replace(" ", "\xa0"), "a\x0bb", "\ufeffmid", "1", "NA"]
    vectors = np.arange(2 * len(words), dtype=np.float32).reshape(-1, 2) - 3.5
    path = write_glove_text(tmp_path / "odd.txt", words, vectors)
    assert_embeddings(read_glove_text(path), words, vectors)
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

    original = make_glove_subset._format_values
    monkeypatch.setattr(make_glove_subset, "_format_values", failing_format)
    monkeypatch.setattr(make_glove_subset, "_WRITE_ROWS", 2)
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


def test_subset_file_is_what_the_script_writes(glove, tmp_path):
    """data/ holds exactly what the script writes today (rerun the script after changing it)."""
    out = tmp_path / "subset.txt"
    assert make_glove_subset.main(["--out", str(out)]) == 0
    assert out.read_bytes() == GLOVE_SUBSET.read_bytes()
