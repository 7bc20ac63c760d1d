"""Shared measuring code for the benchmarks (and chapter 8 of the book).

Everything here returns data (numbers, dicts, dataclasses); printing is left to the caller,
except for the small table formatters. The functions:

- :func:`machine_info` / :func:`format_machine_info`: CPU count, threads, versions.
- :func:`set_threads`: fix ``torch.set_num_threads`` (and say what it is).
- :func:`time_call`, :func:`time_interleaved`: best / median of ``repeats`` timed calls in
  this process (interleaved: one call of each function per round, so drifts in the machine's
  speed hit every function alike).
- :func:`run_python`: run code in a fresh interpreter and get back the value it emits.
- :func:`time_in_subprocess`: time an expression in a fresh interpreter (cold timings:
  nothing imported or cached before ``setup``).
- :func:`peak_memory`: the peak memory of one evaluation of an expression, in a fresh
  interpreter (see that function for the method).
- :class:`Goal`, :func:`format_table`, :func:`markdown_table`, :func:`write_results`.

Command line::

    python benchmarks/_harness.py              # machine info
    python benchmarks/_harness.py --json       # the same, as JSON
    python benchmarks/_harness.py --calibrate  # check peak_memory on known allocations
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Goal",
    "Timing",
    "format_machine_info",
    "format_table",
    "machine_info",
    "markdown_table",
    "peak_memory",
    "run_python",
    "set_threads",
    "time_call",
    "time_in_subprocess",
    "time_interleaved",
    "write_results",
]

MIB = 2**20
_RESULT_MARK = "@@attnlib-benchmark-result@@ "

# glibc's malloc moves its mmap threshold up after large frees, after which freed blocks stay
# in the heap (resident): a second call could then reuse pages the warm-up left resident and
# look smaller than it is. A fixed threshold turns the adjustment off, so every block of
# 128 KiB or more is mmap'ed when allocated and unmapped when freed: RSS follows live memory.
_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


# ---- machine ------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_total() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def machine_info() -> dict[str, Any]:
    """What a benchmark ran on: CPU, cores, threads, memory and library versions.

    Returns:
        A JSON-serialisable dict: ``cpu``, ``cpu_count`` (logical CPUs of the machine),
        ``cpus_available`` (those this process may run on), ``torch_threads``,
        ``torch_interop_threads``, ``omp_num_threads`` (the environment variable or
        ``None``), ``memory_bytes``, ``python``, ``platform``, ``torch``, ``numpy``,
        ``attnlib`` versions, ``blas`` (MKL or not), ``load_average`` (1, 5, 15 minutes;
        other processes running during a benchmark slow it down and add noise).
    """
    import numpy as np
    import torch

    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count()
    try:
        import attnlib

        attnlib_version = attnlib.__version__
    except ImportError:
        attnlib_version = None
    return {
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": available,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "memory_bytes": _memory_total(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "attnlib": attnlib_version,
        "blas": "MKL" if torch.backends.mkl.is_available() else "other (no MKL)",
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def format_machine_info(info: Mapping[str, Any] | None = None) -> str:
    """A few lines describing :func:`machine_info` (called now if ``info`` is ``None``)."""
    info = machine_info() if info is None else info
    memory = info.get("memory_bytes")
    memory = f"{memory / 2**30:.1f} GiB RAM" if memory else "RAM unknown"
    load = info.get("load_average")
    busy = ""
    if load and info["cpus_available"] and load[0] > 0.5 * info["cpus_available"]:
        busy = " (busy machine: other processes compete for the CPUs, timings are noisy)"
    load = "load average " + " ".join(f"{x:.2f}" for x in load) + busy if load else ""
    return (
        f"CPU: {info['cpu']}, {info['cpu_count']} logical CPUs "
        f"({info['cpus_available']} available), {memory}\n"
        f"torch threads: {info['torch_threads']} (interop {info['torch_interop_threads']}, "
        f"OMP_NUM_THREADS={info['omp_num_threads']})\n"
        f"Python {info['python']}, torch {info['torch']} ({info['blas']}), "
        f"numpy {info['numpy']}, attnlib {info['attnlib']}\n"
        f"{info['platform']}" + (f"\n{load}" if load else "")
    )


def set_threads(threads: int | None = None) -> int:
    """Fix the number of threads torch uses for intra-op parallelism.

    Args:
        threads: the number; ``None`` keeps torch's current setting (by default the number
            of physical cores).

    Returns:
        ``torch.get_num_threads()`` after the call: print it next to every timing.
    """
    import torch

    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer or None; got {threads!r}")
        torch.set_num_threads(threads)
    return torch.get_num_threads()


# ---- timing in this process ---------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Seconds per call, one entry per measured repeat.

    ``times`` are wall-clock (``time.perf_counter``); ``cpu_times`` the CPU time of the
    process over the same calls (``time.process_time``: all threads, user + system). On a
    busy machine wall time grows with the waiting, CPU time much less; CPU time counts every
    thread, so it is larger than wall time for multi-threaded code.
    """

    times: tuple[float, ...]
    cpu_times: tuple[float, ...] = ()

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def repeats(self) -> int:
        return len(self.times)

    @property
    def cpu_best(self) -> float | None:
        return min(self.cpu_times) if self.cpu_times else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_s": self.best,
            "median_s": self.median,
            "mean_s": self.mean,
            "repeats": self.repeats,
            "times_s": list(self.times),
            "cpu_best_s": self.cpu_best,
            "cpu_times_s": list(self.cpu_times),
        }


def _check_counts(repeats: int, warmup: int, number: int) -> None:
    for name, n, low in (("repeats", repeats, 1), ("warmup", warmup, 0), ("number", number, 1)):
        if isinstance(n, bool) or not isinstance(n, int) or n < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {n!r}")


def time_call(
    fn: Callable[[], object], *, repeats: int = 7, warmup: int = 1, number: int = 1
) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` timings of ``number`` calls.

    Returns:
        :class:`Timing` of seconds per call (each repeat's time divided by ``number``).
    """
    return time_interleaved({"fn": fn}, repeats=repeats, warmup=warmup, number=number)["fn"]


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    *,
    repeats: int = 10,
    warmup: int = 1,
    number: int = 1,
) -> dict[str, Timing]:
    """Time several functions in rounds: each round times every function once.

    Interleaving spreads slow phases of the machine (another process, frequency changes)
    over all functions instead of penalising whichever ran then. The order rotates from
    round to round so no function always runs first (or right after the same neighbour).

    Args:
        fns: name -> function of no argument.
        repeats: rounds timed; warmup: untimed rounds first; number: calls per timing.

    Returns:
        name -> :class:`Timing` (seconds per call).
    """
    _check_counts(repeats, warmup, number)
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for r in range(warmup + repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            fn = fns[name]
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(number):
                fn()
            elapsed = (time.perf_counter() - start) / number
            elapsed_cpu = (time.process_time() - start_cpu) / number
            if r >= warmup:
                times[name].append(elapsed)
                cpu[name].append(elapsed_cpu)
    return {name: Timing(tuple(times[name]), tuple(cpu[name])) for name in names}


# ---- fresh interpreters -------------------------------------------------------------------


def _child_env(threads: int | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUTF8"] = "1"  # the seeds' open(file) without encoding= reads UTF-8
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
    env.update(extra or {})
    return env


def _prelude(threads: int | None) -> str:
    return textwrap.dedent(
        f"""
        import json as _json, sys as _sys, time as _time
        _MARK = {_RESULT_MARK!r}
        def emit(value):
            print(_MARK + _json.dumps(value), flush=True)
        _THREADS = {threads!r}
        if _THREADS is not None:
            import torch as _torch
            _torch.set_num_threads(_THREADS)
        """
    )


def run_python(
    code: str,
    *,
    threads: int | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 1800.0,
    cwd: str | os.PathLike | None = None,
) -> Any:
    """Run ``code`` in a fresh Python interpreter (``sys.executable -c``) and return the value
    it passes to ``emit(value)`` (a function the child has; the value must be JSON-able).

    Args:
        code: Python source; call ``emit(...)`` once with the result.
        threads: if given, ``torch.set_num_threads(threads)`` first (torch imported then) and
            ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` set in the child's environment.
        env: extra environment variables. timeout: seconds. cwd: working directory.

    Returns:
        The emitted value (the last one if several).

    Raises:
        RuntimeError: if the child fails or emits nothing (with its stderr).
    """
    source = _prelude(threads) + "\n" + textwrap.dedent(code)
    proc = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        env=_child_env(threads, env),
        timeout=timeout,
        cwd=cwd,
    )
    results = [
        line[len(_RESULT_MARK) :]
        for line in proc.stdout.splitlines()
        if line.startswith(_RESULT_MARK)
    ]
    if proc.returncode != 0 or not results:
        raise RuntimeError(
            f"benchmark subprocess failed (exit code {proc.returncode}, "
            f"{len(results)} results); stderr:\n{proc.stderr[-4000:]}"
        )
    return json.loads(results[-1])


def time_in_subprocess(
    setup: str,
    expr: str,
    *,
    repeats: int = 1,
    warmup: int = 0,
    threads: int | None = None,
    check: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 1800.0,
) -> tuple[Timing, Any]:
    """Time ``expr`` in a fresh interpreter, after ``setup`` (untimed).

    With ``warmup=0, repeats=1`` this is a *cold* timing: the first call in a new process,
    with whatever lazy imports and caches the call fills itself.

    Args:
        setup: statements run first, untimed (imports, inputs, definitions).
        expr: the expression timed; its value is kept in ``_r`` until the next call.
        repeats, warmup: timed and untimed evaluations.
        threads: see :func:`run_python`.
        check: an expression evaluated after timing, with the last result as ``_r``; its
            (JSON-able) value is returned, e.g. ``"len(_r)"``.

    Returns:
        ``(Timing, check value or None)``.
    """
    _check_counts(repeats, warmup, 1)
    code = f"""
{textwrap.dedent(setup).strip()}
_code = compile({expr!r}, "<expr>", "eval")
for _ in range({warmup}):
    _r = None
    _r = eval(_code)
_times, _cpu = [], []
for _ in range({repeats}):
    _r = None
    _t0, _c0 = _time.perf_counter(), _time.process_time()
    _r = eval(_code)
    _times.append(_time.perf_counter() - _t0)
    _cpu.append(_time.process_time() - _c0)
_check = {check!r}
emit({{"times": _times, "cpu": _cpu, "check": eval(_check) if _check else None}})
"""
    out = run_python(code, threads=threads, env=env, timeout=timeout)
    return Timing(tuple(out["times"]), tuple(out["cpu"])), out["check"]


def peak_memory(
    setup: str,
    expr: str,
    *,
    warmup: bool = True,
    threads: int | None = None,
    check: str | None = None,
    timeout: float | None = 1800.0,
) -> dict[str, Any]:
    """Peak memory of one evaluation of ``expr``, measured in a fresh interpreter.

    Method (Linux): run ``setup``, evaluate ``expr`` once as a warm-up (kernels, lazy
    imports, thread pools) and drop its result; then reset the kernel's peak-RSS counter
    (``VmHWM``, by writing ``5`` to ``/proc/self/clear_refs``), evaluate ``expr`` again and
    read the new ``VmHWM``. The peak is ``VmHWM - VmRSS`` just before the call: everything
    the call held at its fullest moment, its result included. glibc's malloc is told to give
    freed blocks back at once (``MALLOC_MMAP_THRESHOLD_``), so resident memory follows live
    memory. Where ``clear_refs`` cannot be written (not Linux, or not allowed), the
    fallback is the ``ru_maxrss`` delta around the first (then not warmed-up) call, which
    is only right when that call makes the process's highest peak so far.

    Args:
        setup: statements run first (imports, inputs); not counted.
        expr: the expression measured.
        warmup: evaluate once before measuring (ignored by the fallback).
        threads: see :func:`run_python`.
        check: an expression on the result ``_r`` whose value is returned as ``check``.

    Returns:
        dict with ``peak_bytes``, ``baseline_rss_bytes`` (just before the call),
        ``memory_method`` (how it was measured) and ``check``.
    """
    code = f"""
import gc as _gc, os as _os, resource as _resource
def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
def _can_reset():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status("VmHWM") is not None
    except OSError:
        return False
{textwrap.dedent(setup).strip()}
_code = compile({expr!r}, "<expr>", "eval")
_gc.collect()
if _can_reset():
    _method = "VmHWM reset (/proc/self/clear_refs) minus VmRSS before the call"
    if {warmup!r}:
        _r = eval(_code)
        _r = None
        _gc.collect()
    _before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    _r = eval(_code)
    _peak = _status("VmHWM") - _before
else:
    _method = "ru_maxrss delta around the first call (no warm-up)"
    _unit = 1 if _sys.platform == "darwin" else 1024
    _before = _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss * _unit
    _r = eval(_code)
    _peak = _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss * _unit - _before
_check = {check!r}
emit({{"peak_bytes": _peak, "baseline_rss_bytes": _before, "memory_method": _method,
       "check": eval(_check) if _check else None}})
"""
    return run_python(code, threads=threads, env=_MALLOC_ENV, timeout=timeout)


# ---- goals, tables, results ---------------------------------------------------------------


@dataclass
class Goal:
    """A measured ratio and its target: ``value <= limit`` or ``value >= limit``."""

    name: str
    value: float
    limit: float
    op: str = "<="  # "<=" or ">="
    detail: str = ""
    passed: bool = field(init=False)

    def __post_init__(self):
        if self.op not in ("<=", ">="):
            raise ValueError(f"op must be '<=' or '>='; got {self.op!r}")
        self.passed = self.value <= self.limit if self.op == "<=" else self.value >= self.limit

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"

    def row(self) -> list[str]:
        return [self.name, f"{self.value:.3g}x", f"{self.op} {self.limit:g}x", self.verdict]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


GOAL_HEADERS = ["goal", "measured", "target", "result"]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row):
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """The same table in Markdown (GitHub/MyST pipe table)."""
    out = ["| " + " | ".join(map(str, headers)) + " |"]
    out.append("|" + "|".join([":---"] + ["---:"] * (len(headers) - 1)) + "|")
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def write_results(out_dir: str | os.PathLike, name: str, data: Mapping[str, Any], text: str):
    """Write ``<out_dir>/<name>.json`` (``data`` and the machine info) and ``<name>.md``.

    Returns:
        The two paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "machine": machine_info(), **data}
    json_path = out / f"{name}.json"
    json_path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    md_path = out / f"{name}.md"
    md_path.write_text(text.rstrip() + "\n", encoding="utf-8")
    return json_path, md_path


def make_result(
    name: str,
    threads: int,
    params: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    goals: Sequence[Goal],
    text: str,
    markdown: str,
    **extra: Any,
) -> dict[str, Any]:
    """The dict every benchmark's ``run()`` returns: data for JSON (``name``, ``threads``,
    ``params``, ``rows``, ``goals`` and ``extra``), plus ``goal_objects``, ``text`` and
    ``markdown`` for printing (see :func:`result_data`)."""
    return {
        "name": name,
        "threads": threads,
        "params": dict(params),
        **extra,
        "rows": list(rows),
        "goals": [g.to_dict() for g in goals],
        "goal_objects": list(goals),
        "text": text,
        "markdown": markdown,
    }


def result_data(result: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a :func:`make_result` dict that goes into the JSON file."""
    return {k: v for k, v in result.items() if k not in ("goal_objects", "text", "markdown")}


def cli_parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark script has: ``--threads`` and
    ``--out``; the script adds its own."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write JSON + Markdown here")
    return parser


def report(result: Mapping[str, Any], out: str | os.PathLike | None) -> int:
    """Print a benchmark's text, write its results under ``out`` if given; the exit code:
    0 if every goal passed, else 1."""
    print(result["text"])
    if out:
        paths = write_results(out, result["name"], result_data(result), result["markdown"])
        print("\nwrote", *paths)
    return 0 if all(g.passed for g in result["goal_objects"]) else 1


def ms(seconds: float) -> str:
    """Seconds as milliseconds with 3 significant digits, e.g. ``'12.3'``."""
    return f"{seconds * 1e3:.3g}" if seconds * 1e3 < 100 else f"{seconds * 1e3:.0f}"


def mib(nbytes: float) -> str:
    """Bytes as MiB with one decimal, e.g. ``'256.0'``."""
    return f"{nbytes / MIB:.1f}"


# ---- command line ---------------------------------------------------------------------------


def calibrate(threads: int | None = None) -> list[dict[str, Any]]:
    """Check :func:`peak_memory` on allocations of known size; returns one dict per case."""
    cases = [
        ("torch.ones(64 MiB)", "torch.ones(16 * 2**20)", 64 * MIB),
        ("torch.ones(64 MiB) * 2 (two live)", "torch.ones(16 * 2**20) * 2", 128 * MIB),
        ("numpy.ones(256 MiB).sum() (freed)", "np.ones(32 * 2**20).sum()", 256 * MIB),
    ]
    rows = []
    for label, expr, expected in cases:
        got = peak_memory("import numpy as np\nimport torch", expr, threads=threads)
        rows.append({"case": label, "expected_bytes": expected, **got})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Machine info and harness self-checks.")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--json", action="store_true", help="print machine info as JSON")
    parser.add_argument("--calibrate", action="store_true", help="check peak_memory")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    if args.json:
        print(json.dumps(machine_info(), indent=2))
    else:
        print(format_machine_info())
    if args.calibrate:
        rows = calibrate(args.threads)
        table = [
            [r["case"], mib(r["expected_bytes"]), mib(r["peak_bytes"]), r["memory_method"]]
            for r in rows
        ]
        print()
        print(format_table(["allocation", "expected MiB", "measured MiB", "method"], table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
