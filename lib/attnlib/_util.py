"""Small helpers of the package that are not checks: how a module or a value prints, and how a
text file is read (its errors naming the file)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def repr_options(*options: tuple[str, object, object]) -> str:
    """``", name=value"`` for each ``(name, value, default)`` whose value is not the default:
    the optional part of a module's ``extra_repr``."""
    return "".join(f", {name}={value}" for name, value, default in options if value != default)


def short_repr(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_path(path) -> Path:
    """``path`` as a ``Path`` with ``~`` expanded; TypeError for anything but a file name."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"path must be a str or os.PathLike; got {type(path).__name__} (pass the file's "
            "name, not an open file or bytes)"
        )
    return Path(path).expanduser()


def directory_error(path: Path, expected: str) -> IsADirectoryError:
    """IsADirectoryError naming a few of the files the directory holds."""
    try:
        names = sorted(p.name for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError:
        names = []
    holds = f", which holds {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
    return IsADirectoryError(
        f"path must be {expected}; got the directory {str(path)!r}{holds if names else ''}"
    )


def read_text_file(path, expected: str, hint: str) -> tuple[Path, str]:
    """``(path, text)`` of a UTF-8 text file, with universal newlines; the errors name the
    file: ``IsADirectoryError`` listing what a directory holds, ``ValueError`` giving the line
    and offset of the first byte that is not UTF-8, followed by ``hint``."""
    path = as_path(path)
    if path.is_dir():
        raise directory_error(path, expected)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(
            f"{path}, line {line}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}); "
            f"{hint}"
        ) from None
    return path, text.replace("\r\n", "\n").replace("\r", "\n")


@contextlib.contextmanager
def atomic_path(path: Path):
    """Yield a temporary name beside ``path`` to write; on success rename it over ``path``
    (the file appears whole or not at all), on any error remove it and leave ``path`` as it
    was."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        yield Path(name)
        os.chmod(name, 0o644)  # mkstemp makes the file private; open() would not
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
