"""What the chapters' experiments share: reproducible training and fair timing.

* :func:`reproducible` trains the same model on every machine: deterministic algorithms on
  one thread (a reduction split over another number of threads adds in another order).
* :func:`time_rounds` times several functions fairly on a shared, noisy machine: every
  function once per round, in a rotating order, with PyTorch's ``torch.utils.benchmark``;
  :func:`median_time` and :func:`ratio` summarise the rounds.
* :func:`machine` is the one line a measurement is printed with.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import platform
import statistics
from collections.abc import Callable, Iterator

import numpy as np
import torch
from torch.utils import benchmark

__all__ = ["machine", "median_time", "ratio", "reproducible", "time_rounds"]


@contextlib.contextmanager
def reproducible() -> Iterator[None]:
    """Deterministic algorithms on one thread inside the block; the settings come back after.

    Training on one thread makes a model's weights independent of the machine's thread
    count: torch splits a large sum over its threads, and another split adds the same
    numbers in another order. Usable as a context manager or as a decorator.

    Returns:
        A context manager (``with reproducible(): ...``).

    Raises:
        RuntimeError: inside the block, from an operation that has no deterministic
            implementation (torch's own error, naming the operation).

    Example:
        >>> threads = torch.get_num_threads()
        >>> with reproducible():
        ...     torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
        (1, True)
        >>> torch.get_num_threads() == threads
        True
    """
    deterministic, threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)


def machine() -> str:
    """The machine and versions a measurement ran on, as one line.

    Returns:
        ``"<cpu>, <n> CPUs; Python <v>, torch <v>, NumPy <v>"``.

    Example:
        >>> "torch " + torch.__version__ in machine()
        True
    """
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
        f"Python {platform.python_version()}, torch {torch.__version__}, NumPy {np.__version__}"
    )


def time_rounds(
    fns: dict[str, Callable[[], object]],
    label: str,
    description: str = "",
    *,
    rounds: int = 3,
    min_run_time: float = 0.02,
    threads: int = 1,
) -> dict[str, list[benchmark.Measurement]]:
    """Time every function once per round, in a rotating order: ``name -> [Measurement]``.

    A shared machine drifts; measuring all functions in each round, each round starting
    with another one, lets a slow phase hit them alike. Each measurement is
    ``torch.utils.benchmark.Timer(...).blocked_autorange(min_run_time)``, which warms up
    and runs the call in blocks; ``threads`` is the Timer's thread count (its default, 1).

    Args:
        fns: name -> a function of no arguments.
        label, description: the labels of PyTorch's ``Compare`` table.
        rounds: measurements per function, an ``int >= 1``.
        min_run_time: seconds each measurement runs at least.
        threads: torch threads during the measurement.

    Returns:
        ``{name: [Measurement, ...]}``, ``rounds`` measurements per function.

    Raises:
        TypeError: if ``fns`` is not a dict of callables or ``rounds`` is not an int.
        ValueError: if ``fns`` is empty or ``rounds < 1``.

    Example:
        >>> times = time_rounds({"sum": lambda: sum(range(10))}, "demo", rounds=2)
        >>> len(times["sum"]), times["sum"][0].median > 0
        (2, True)
    """
    if not isinstance(fns, dict) or not all(callable(f) for f in fns.values()):
        raise TypeError(f"fns must be a dict of name -> callable; got {type(fns).__name__}")
    if not fns:
        raise ValueError("fns must name at least one function to time; got an empty dict")
    if isinstance(rounds, bool) or not isinstance(rounds, numbers.Integral):
        raise TypeError(f"rounds must be an int >= 1; got {type(rounds).__name__}")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1; got {rounds}")
    names = list(fns)
    measured: dict[str, list[benchmark.Measurement]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            timer = benchmark.Timer(
                "fn()",
                globals={"fn": fns[name]},
                label=label,
                sub_label=str(name),
                description=description,
                num_threads=threads,
            )
            measured[name].append(timer.blocked_autorange(min_run_time=min_run_time))
    return measured


def median_time(measurements: list[benchmark.Measurement]) -> float:
    """Seconds per call: the median over the rounds of each round's median.

    Args:
        measurements: the rounds of one function, as :func:`time_rounds` returns them.

    Returns:
        Seconds, a ``float``.

    Raises:
        AttributeError: if an entry is not a ``Measurement`` (it has no ``median``).

    Example:
        >>> median_time(time_rounds({"f": lambda: None}, "demo", rounds=3)["f"]) > 0
        True
    """
    return float(np.median([m.median for m in measurements]))


def ratio(a: list, b: list) -> tuple[float, float, float]:
    """Median, smallest and largest over the rounds of ``a[i] / b[i]``.

    Args:
        a, b: the rounds of two functions, Measurements (their medians are used) or
            numbers, in the same order.

    Returns:
        ``(median, smallest, largest)`` of the per-round ratios.

    Raises:
        ValueError: if there are no rounds (``statistics.median`` of nothing).

    Example:
        >>> ratio([2.0, 3.0, 4.0], [1.0, 1.0, 2.0])
        (2.0, 2.0, 3.0)
    """
    values = [getattr(x, "median", x) / getattr(y, "median", y) for x, y in zip(a, b)]
    return statistics.median(values), min(values), max(values)
