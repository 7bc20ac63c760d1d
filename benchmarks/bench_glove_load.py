"""Loading GloVe 6B 50d (400,000 words), cold: the seeds' readers against attnlib's.

The full ``glove.6B.50d.txt`` (171 MB) is written once from the packaged vectors into
``$ATTNLIB_CACHE`` (default ``~/.cache/attnlib``); ``--glove-file`` names another copy.
Each measurement is one call in a fresh process (the script runs itself with ``--child
LOADER PATH``), timed with ``time.perf_counter`` around the call only: a *cold* call, with
what it imports lazily (pyarrow, the GloVe wheel) included, Python's start-up and ``import
torch, numpy, attnlib`` not. ``torch.utils.benchmark.Timer`` would not do: its ``timeit`` and
``blocked_autorange`` warm the statement up first. The OS file cache is warm. Loaders, run
in interleaved rounds (each round in a rotated order, so a slow phase of a shared machine
hits every loader alike):

- seed 000's ``read_embeddings`` and seed 003's ``load``, as the seeds wrote them;
- ``attnlib.read_glove_text(path)``; ``attnlib.load_glove()`` (memory-mapped ``.npy``).

Each call is timed twice: wall-clock seconds (what a reader waits; the goals are on these) and
the process's CPU seconds (``time.process_time``, all its threads), which a busy machine
disturbs less. ``read_glove_text`` parses with Arrow's CSV reader on ``pyarrow.cpu_count()``
threads, every core of the machine unless ``OMP_NUM_THREADS`` says fewer (as a reader's
machine runs it); ``--arrow-threads 1`` measures it on one thread. Torch runs on one thread
in every child (``torch.set_num_threads(1)``); the seeds use one thread whatever is set.

Goals: ``load_glove()`` >= 40 x faster than seed 000; ``read_glove_text`` >= 3.5 x faster than
seed 003 (the median over rounds of the per-round ratio; the range is printed).

Usage::

    nice -n 10 python benchmarks/bench_glove_load.py [--rounds 5] [--glove-file PATH]
        [--arrow-threads N]
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


def cold(name: str, path: Path, arrow_threads: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one call of a loader, in a fresh process."""
    cmd = [sys.executable, __file__, "--child", name, str(path)]
    env = {
        **os.environ,
        "PYTHONUTF8": "1",  # seed 003's open() without encoding reads UTF-8
        "ATTNLIB_BENCH_ARROW_THREADS": str(arrow_threads),
    }
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{name} failed:\n{done.stderr[-3000:]}")
    wall, cpu = done.stdout.split()[-2:]
    return float(wall), float(cpu)


def child(name: str, path: str) -> None:
    threads = int(os.environ.get("ATTNLIB_BENCH_ARROW_THREADS", "0"))
    if threads:
        import pyarrow

        pyarrow.set_cpu_count(threads)
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    glove = LOADERS[name](path)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if len(glove) != 400_000 or abs(float(glove["ship"][0]) - 1.5213) > 1e-6:
        raise SystemExit(f"{name}: {len(glove)} words, ship[0] = {glove['ship'][0]}")
    print(seconds, cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--glove-file", type=Path, default=None)
    parser.add_argument("--arrow-threads", type=int, default=0, help="0: pyarrow's default")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    import pyarrow

    print(_common.machine())
    arrow = args.arrow_threads or pyarrow.cpu_count()
    print(f"children: torch 1 thread, pyarrow {arrow} thread(s); load {load()}")
    path = full_glove(args.glove_file)
    print(f"{path} ({path.stat().st_size:,} bytes), one cold call per process\n")
    wall = {name: [] for name in LOADERS}
    cpu = {name: [] for name in LOADERS}
    for r in range(args.rounds):
        names = list(LOADERS)[r % len(LOADERS) :] + list(LOADERS)[: r % len(LOADERS)]
        for name in names:
            w, c = cold(name, path, args.arrow_threads)
            wall[name].append(w)
            cpu[name].append(c)
    for name in LOADERS:
        w, c = wall[name], cpu[name]
        print(
            f"{name:<26} wall median {np.median(w):7.3f} s (range {min(w):.3f}-{max(w):.3f}); "
            f"CPU median {np.median(c):7.3f} s (range {min(c):.3f}-{max(c):.3f})"
        )
    print(f"load after: {load()}")
    ok = True
    for slow, fast, goal in (
        ("seed 000 read_embeddings", "attnlib.load_glove", ">= 40"),
        ("seed 003 load", "attnlib.read_glove_text", ">= 3.5"),
    ):
        line = _common.ratio_line(f"{slow} / {fast}", _common.ratio(wall[slow], wall[fast]), goal)
        ok &= line.endswith("PASS")
        print(line)
        print(
            _common.ratio_line(f"  CPU time, {slow} / {fast}", _common.ratio(cpu[slow], cpu[fast]))
        )
    return 0 if ok else 1


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes): how busy it was."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
