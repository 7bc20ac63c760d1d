"""scripts/_atomic.py: every script and the explorer's extension write files through it."""

import os
import stat

import pytest
from _atomic import atomic_path, write_atomic


def test_atomic_path_replaces_the_file_when_the_block_ends(tmp_path):
    path = tmp_path / "new" / "folder" / "out.txt"  # folders are made
    with atomic_path(path) as tmp:
        assert tmp.parent == path.parent and tmp != path
        tmp.write_text("written")
        assert not path.exists()  # nothing visible before the block ends
    assert path.read_text() == "written"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # readable by all, like shared data
    assert [p.name for p in path.parent.iterdir()] == ["out.txt"]


def test_atomic_path_keeps_the_old_file_on_an_error(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="writer failed"), atomic_path(path) as tmp:
        tmp.write_text("half of the new")
        raise RuntimeError("writer failed")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]  # no temporary left


def test_write_atomic_encodes_text_and_skips_unchanged_bytes(tmp_path):
    path = tmp_path / "out.txt"
    assert write_atomic(path, "ὀδυσσεύς")
    assert path.read_bytes() == "ὀδυσσεύς".encode()
    mtime = path.stat().st_mtime_ns
    assert not write_atomic(path, "ὀδυσσεύς".encode())  # the same bytes: not rewritten
    assert path.stat().st_mtime_ns == mtime
    assert write_atomic(path, b"other") and path.read_bytes() == b"other"


def test_write_atomic_when_the_rename_fails(tmp_path, monkeypatch):
    path = tmp_path / "out.txt"
    path.write_bytes(b"old")

    def full(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
