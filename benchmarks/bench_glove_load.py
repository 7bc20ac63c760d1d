"""Loading GloVe 6B 50d (400,000 words), cold: the seeds' readers against attnlib's.

The full ``glove.6B.50d.txt`` (171 MB) is written once from the packaged vectors into
``$ATTNLIB_CACHE`` (default ``~/.cache/attnlib``); ``--glove-file`` names another copy.
Each measurement is one call in a fresh process (the script runs itself with ``--child
LOADER PATH``), timed with ``time.perf_counter`` around the call only: a *cold* call, with
what it imports lazily (pyarrow, the GloVe wheel) included, Python's start-up and ``import
torch, numpy, attnlib`` not. ``torch.utils.benchmark.Timer`` would not do: its ``timeit`` and
``blocked_autorange`` warm the statement up first. The OS file cache is warm. Loaders, run
in interleaved rounds:

- seed 000's ``read_embeddings`` and seed 003's ``load``, as the seeds wrote them;
- ``attnlib.read_glove_text(path)``; ``attnlib.load_glove()`` (memory-mapped ``.npy``).

Goals: ``load_glove()`` >= 40 x faster than seed 000; ``read_glove_text`` >= 5 x faster than
seed 003 (the median over rounds of the per-round ratio; the range is printed).

Usage::

    python benchmarks/bench_glove_load.py [--rounds 3] [--glove-file PATH]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import _common
import attnlib
import numpy as np
import torch


def read_embeddings(file):  # seed 000, In [3] (its docstring left out)
    embeddings = {}
    with open(file, encoding="utf8") as glove:
        for line in glove:
            values = line.strip().split()
            word = values[0]
            vector = [float(value) for value in values[1:]]
            vector = torch.FloatTensor(vector)
            embeddings[word] = vector
    return embeddings


def load(file):  # seed 003, In [2] (its docstring left out; it opens without an encoding)
    file = file
    embeddings = {}
    glove = open(file)
    for line in glove:
        values = line.strip().split()
        word = values[0]
        vector = np.array(values[1:], dtype="float32")
        embeddings[word] = vector
    glove.close()
    embeddings_dict = embeddings
    embedded_words = sorted(list(embeddings_dict.keys()))  # noqa: F841 (as the seed wrote it)
    return embeddings_dict


LOADERS = {
    "seed 000 read_embeddings": read_embeddings,
    "seed 003 load": load,
    "attnlib.read_glove_text": attnlib.read_glove_text,
    "attnlib.load_glove": lambda path: attnlib.load_glove(),
}


def full_glove(path: Path | None) -> Path:
    """The 400k-word text file, written from the packaged vectors if it is not there."""
    cache = Path(os.environ.get("ATTNLIB_CACHE") or Path.home() / ".cache" / "attnlib")
    path = path or cache / "glove.6B.50d.txt"
    if not (path.is_file() and path.stat().st_size > 100_000_000):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
        from make_glove_subset import write_glove_text  # the writer lives with its user

        glove = attnlib.load_glove()
        write_glove_text(path, glove.words, glove.vectors)
    return path


def cold(name: str, path: Path) -> float:
    """Seconds of one call of a loader, in a fresh process."""
    cmd = [sys.executable, __file__, "--child", name, str(path)]
    env = {**os.environ, "PYTHONUTF8": "1"}  # seed 003's open() without encoding reads UTF-8
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{name} failed:\n{done.stderr[-3000:]}")
    return float(done.stdout.split()[-1])


def child(name: str, path: str) -> None:
    start = time.perf_counter()
    glove = LOADERS[name](path)
    seconds = time.perf_counter() - start
    if len(glove) != 400_000 or abs(float(glove["ship"][0]) - 1.5213) > 1e-6:
        raise SystemExit(f"{name}: {len(glove)} words, ship[0] = {glove['ship'][0]}")
    print(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--glove-file", type=Path, default=None)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    print(_common.machine())
    path = full_glove(args.glove_file)
    print(f"{path} ({path.stat().st_size:,} bytes), one cold call per process\n")
    times = {name: [] for name in LOADERS}
    for r in range(args.rounds):
        names = list(LOADERS)[r % len(LOADERS) :] + list(LOADERS)[: r % len(LOADERS)]
        for name in names:
            times[name].append(cold(name, path))
    for name, values in times.items():
        low, high = min(values), max(values)
        print(f"{name:<26} median {np.median(values):7.3f} s  (range {low:.3f}-{high:.3f})")
    ok = True
    for slow, fast, goal in (
        ("seed 000 read_embeddings", "attnlib.load_glove", ">= 40"),
        ("seed 003 load", "attnlib.read_glove_text", ">= 5"),
    ):
        line = _common.ratio_line(f"{slow} / {fast}", _common.ratio(times[slow], times[fast]), goal)
        ok &= line.endswith("PASS")
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
