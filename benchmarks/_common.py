"""What the benchmark scripts share: the machine line, interleaved timing, ratios, peak memory.

**Timing** is PyTorch's own ``torch.utils.benchmark`` (see PyTorch's recipe "PyTorch
Benchmark"): ``Timer(stmt, globals=..., num_threads=...)`` warms up, fixes the thread count
(its default is *one* thread: we pass the number we mean) and ``blocked_autorange`` runs the
statement in blocks for at least ``min_run_time`` seconds, returning a ``Measurement`` (median,
IQR). A shared machine drifts, so one measurement per function is not enough: :func:`rounds`
measures every function once per round, in a rotating order, for several rounds (a slow phase
hits all functions alike), ``Compare`` merges each function's rounds into one row, and
:func:`ratio` gives the median of the per-round ratios of two functions and their range.

**Peak memory** of a CPU call is the kernel's high-water mark of the process's resident
memory, read before and after one call in a fresh process (the mark never goes down, so each
measurement needs its own process). Two simpler tools are wrong here, both checked:
``tracemalloc`` traces Python's allocators (and NumPy's), not PyTorch's C++ allocator:
``torch.ones(16 * 2**20)`` (64 MiB) shows 0 bytes (torch 2.13); and
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` survives ``fork`` + ``exec``: a child started
by a process holding 500 MiB reports ru_maxrss >= 500 MiB before doing anything, which hid
every peak below the parent's size. Linux's ``VmHWM`` (``/proc/self/status``) belongs to the
child's own address space. The child makes the inputs and warms the call up on a small input
(thread pools, lazy initialisation) before the first reading, so the difference is what the
call held at its fullest, its output included. It is exact when the resident memory just
before the call is the high-water mark so far (only the small warm-up was freed), a lower
bound otherwise. ``MALLOC_MMAP_THRESHOLD_`` stops glibc from keeping freed blocks for silent
reuse. PyTorch has no CPU peak counter (``torch.cuda.max_memory_allocated`` is CUDA only).
"""

from __future__ import annotations

import gc
import os
import platform
import subprocess
import sys
from collections.abc import Callable

import torch
from attnlib import experiment
from torch.utils import benchmark


def machine() -> str:
    """One line: CPU, threads, Python, torch, numpy and attnlib versions."""
    import attnlib
    import numpy as np

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{platform.processor() or platform.machine()}, {cpus} CPUs, "
        f"{torch.get_num_threads()} torch threads; Python {platform.python_version()}, "
        f"torch {torch.__version__}, numpy {np.__version__}, attnlib {attnlib.__version__}"
    )


def rounds(
    fns: dict[str, Callable[[], object]],
    label: str,
    description: str = "",
    n: int = 5,
    min_run_time: float = 0.2,
    threads: int | None = None,
) -> dict[str, list[benchmark.Measurement]]:
    """``n`` interleaved ``blocked_autorange`` measurements of each function (name -> list):
    :func:`attnlib.experiment.time_rounds`, on every torch thread unless told otherwise."""
    return experiment.time_rounds(
        fns,
        label,
        description,
        rounds=n,
        min_run_time=min_run_time,
        threads=threads or torch.get_num_threads(),
    )


ratio = experiment.ratio  # median, min and max over rounds of a[i] / b[i]


def ratio_line(name: str, r: tuple[float, float, float], goal: str = "") -> str:
    """``name: 1.02x (0.97-1.08 over rounds)`` and, if given, the goal with PASS/FAIL."""
    med, low, high = r
    text = f"{name}: {med:.3g}x (range {low:.3g}-{high:.3g})"
    if goal:  # e.g. "<= 1.05"
        op, limit = goal.split()
        ok = med <= float(limit) if op == "<=" else med >= float(limit)
        text += f"  goal {goal}: {'PASS' if ok else 'FAIL'}"
    return text


def compare(measurements: dict[str, list[benchmark.Measurement]] | list) -> None:
    """Print PyTorch's ``Compare`` table (rounds of the same function merged into one row)."""
    flat = (
        [m for ms in measurements.values() for m in ms]
        if isinstance(measurements, dict)
        else measurements
    )
    benchmark.Compare(flat).print()


def peak_rss(script: str, *args: str) -> int:
    """Run ``python script --peak *args`` in a fresh process; return the bytes it prints."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
    cmd = [sys.executable, script, "--peak", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return int(done.stdout.split()[-1])


def high_water() -> int:
    """This process's peak resident memory so far, in bytes (Linux's VmHWM)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def measure_peak(call: Callable[[], object], warmup: Callable[[], object]) -> int:
    """In the child: bytes by which ``call()`` raises the resident high-water mark."""
    warmup()
    gc.collect()
    before = high_water()
    result = call()  # alive at the second reading: the output counts
    peak = high_water() - before
    del result
    return peak
