"""How the scripts and the book's extension write a file: atomically.

A reader of the file (a chapter, the site, ``make``) sees the old file or the new one, never
half of one: the bytes go to a temporary file in the same folder (the same file system, so
the rename is atomic), are flushed to disk, and the temporary file is renamed over the
target. On any error, the temporary file is removed and the target is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "write_atomic"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` for the caller to write (with any writer, e.g.
    ``torch.save``); on leaving the block it is flushed to disk, made readable by all
    (``0o644``, as ``open`` would make it) and renamed over ``path``.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "out.txt"
        >>> with atomic_path(out) as tmp:
        ...     _ = tmp.write_text("hello")
        >>> out.read_text(), sorted(p.name for p in out.parent.iterdir())
        ('hello', ['out.txt'])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as file:
            os.fsync(file.fileno())  # on disk before the rename makes it visible
        os.chmod(tmp, 0o644)  # mkstemp makes the file private; these are shared data
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike, data: bytes | str) -> bool:
    """Write ``data`` (a ``str`` is encoded as UTF-8) to ``path`` atomically; do nothing if
    the file already holds these bytes (its time stamp stays, so ``make`` sees no change).

    Returns:
        Whether the file was written.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    if path.is_file() and path.read_bytes() == data:
        return False
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return True
