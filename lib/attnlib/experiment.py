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
import importlib.util
import math
import os
import platform
import statistics
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from attnlib._checks import check_int, check_real
from attnlib._util import short_repr

if TYPE_CHECKING:  # torch.utils.benchmark takes 0.2-1 s to import: only where it is used
    from torch.utils import benchmark

__all__ = ["book_script", "machine", "median_time", "ratio", "reproducible", "time_rounds"]

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"  # the book's, beside lib/


def book_script(name: str) -> types.ModuleType:
    """One of the book's scripts, ``scripts/<name>.py`` of the checkout this attnlib lives in,
    imported as a module (once per process, as ``import`` does).

    The chapters load the scripts that made their data and trained their models this way,
    ``train_odyssey = attnlib.experiment.book_script("train_odyssey")``, instead of putting
    ``scripts/`` on ``sys.path``. The scripts belong to the book, not to the package (the
    wheel ships ``attnlib`` only): they are found beside ``lib/`` in a checkout (locally, on
    Binder and Colab). While a script runs its top level, its folder is searched first, so
    that it finds its sibling helpers (``_atomic``) as it does when run from the shell.

    Args:
        name: the script's file name without ``.py``, e.g. ``"train_dates"``.

    Returns:
        The module, registered as ``sys.modules[name]``: the same object on every call, and the
        one ``import name`` gives where ``scripts/`` is on the path (the tests).

    Raises:
        TypeError: if ``name`` is not a ``str``.
        FileNotFoundError: if ``scripts/<name>.py`` does not exist: no such script, or this
            ``attnlib`` is installed from a wheel rather than used from the book's checkout
            (the message names the folder searched).

    Example:
        >>> dates = book_script("train_dates")
        >>> dates.TARGET_VOCAB[:3], book_script("train_dates") is dates
        (['<pad>', '<bos>', '<eos>'], True)
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, a script's name; got {type(name).__name__}")
    path = SCRIPTS / f"{name}.py"
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == path:
        return loaded
    if not path.is_file():
        raise FileNotFoundError(
            f"name must be one of the book's scripts in {SCRIPTS}; got {name!r}, and there is "
            f"no {path.name} there (a wheel of attnlib has no scripts: use the book's checkout)"
        )
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder, added = str(SCRIPTS), str(SCRIPTS) not in sys.path
    if added:  # while its top level runs: its sibling helpers, as from the shell
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        if added:
            sys.path.remove(folder)
    return module


@contextlib.contextmanager
def reproducible() -> Iterator[None]:
    """Deterministic algorithms on one thread inside the block; the settings come back after.

    Training on one thread makes a model's weights independent of the machine's thread
    count: torch splits a large sum over its threads, and another split adds the same
    numbers in another order. Usable as a context manager or as a decorator.

    Inside the block ``torch.use_deterministic_algorithms(True)`` holds (an operation without a
    deterministic implementation raises, it does not only warn); on exit the three settings
    found on entry come back exactly: deterministic algorithms on or off, their ``warn_only``
    flag (``torch.is_deterministic_algorithms_warn_only_enabled()``), and the thread count.

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
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
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
        label, description: the labels of PyTorch's ``Compare`` table, ``str``.
        rounds: measurements per function, an ``int >= 1``.
        min_run_time: seconds each measurement runs at least, a finite number ``>= 0``.
        threads: torch threads during the measurement, an ``int >= 1``.

    Returns:
        ``{name: [Measurement, ...]}``, ``rounds`` measurements per function.

    Raises:
        TypeError: if ``fns`` is not a dict or one of its values is not callable (naming it),
            ``label`` or ``description`` is not a ``str``, ``rounds`` or ``threads`` is not an
            ``int``, or ``min_run_time`` is not a real number (a ``bool`` is none of these).
        ValueError: if ``fns`` is empty, ``rounds < 1``, ``threads < 1``, or ``min_run_time``
            is negative or not finite.

    Example:
        >>> times = time_rounds({"sum": lambda: sum(range(10))}, "demo", rounds=2)
        >>> len(times["sum"]), times["sum"][0].median > 0
        (2, True)
    """
    if not isinstance(fns, dict):
        raise TypeError(f"fns must be a dict of name -> callable; got {type(fns).__name__}")
    for name, fn in fns.items():
        if not callable(fn):
            raise TypeError(
                f"fns must be a dict of name -> callable (a function of no arguments); "
                f"fns[{name!r}] is {type(fn).__name__} {short_repr(fn)}, which cannot be called "
                f"(write lambda: ... around the call to time)"
            )
    if not fns:
        raise ValueError("fns must name at least one function to time; got an empty dict")
    for name, text in (("label", label), ("description", description)):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str; got {type(text).__name__} {short_repr(text)}")
    rounds = check_int("rounds", rounds, low=1, what="an int >= 1")
    what = "a number of seconds >= 0"
    min_run_time = check_real("min_run_time", min_run_time, what, lambda t: t >= 0)
    threads = check_int("threads", threads, low=1)
    from torch.utils import benchmark  # lazy: slow to import, needed only here

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
        measurements: the rounds of one function, as :func:`time_rounds` returns them
            (``times[name]``, not the whole dict).

    Returns:
        Seconds, a ``float``.

    Raises:
        TypeError: if ``measurements`` is not a list or tuple of ``Measurement``.
        ValueError: if it is empty (the median of no rounds is not a time).

    Example:
        >>> median_time(time_rounds({"f": lambda: None}, "demo", rounds=3)["f"]) > 0
        True
    """
    if not isinstance(measurements, (list, tuple)):
        hint = (
            " (pass the rounds of one function: times[name])"
            if isinstance(measurements, dict)
            else ""
        )
        raise TypeError(
            f"measurements must be a list of torch.utils.benchmark.Measurement; got "
            f"{type(measurements).__name__}{hint}"
        )
    if not measurements:
        raise ValueError("measurements must hold at least one round; got an empty list")
    from torch.utils import benchmark  # lazy: slow to import

    for i, m in enumerate(measurements):
        if not isinstance(m, benchmark.Measurement):
            raise TypeError(
                f"measurements must all be torch.utils.benchmark.Measurement; got "
                f"{type(m).__name__} {short_repr(m)} at position {i}"
            )
    return float(np.median([m.median for m in measurements]))


def ratio(a: list, b: list) -> tuple[float, float, float]:
    """Median, smallest and largest over the rounds of ``a[i] / b[i]``.

    Args:
        a, b: the rounds of two functions, Measurements (their medians are used) or
            positive numbers of seconds, in the same order; as many in ``b`` as in ``a``.

    Returns:
        ``(median, smallest, largest)`` of the per-round ratios.

    Raises:
        TypeError: if ``a`` or ``b`` is not a list or tuple, or an entry is neither a
            ``Measurement`` nor a real number (a ``bool`` is not one).
        ValueError: if there are no rounds, ``a`` and ``b`` have different numbers of rounds
            (each ratio is of one round's two times: none is dropped), or a number is not
            finite and positive.

    Example:
        >>> ratio([2.0, 3.0, 4.0], [1.0, 1.0, 2.0])
        (2.0, 2.0, 3.0)
    """
    a, b = _seconds("a", a), _seconds("b", b)
    if len(a) != len(b):
        raise ValueError(
            f"a and b must have the same number of rounds (ratio i is a[i] / b[i]); got "
            f"{len(a)} and {len(b)}"
        )
    if not a:
        raise ValueError("a and b must hold at least one round; got none")
    values = [x / y for x, y in zip(a, b)]
    return statistics.median(values), min(values), max(values)


def _seconds(name: str, rounds) -> list[float]:
    """The seconds of each round of ``rounds`` (Measurements, or positive real numbers: Python's,
    NumPy's)."""
    if not isinstance(rounds, (list, tuple)):
        raise TypeError(
            f"{name} must be a list of Measurements or numbers (the rounds of one function); "
            f"got {type(rounds).__name__}"
        )
    from torch.utils import benchmark  # lazy: slow to import

    seconds = []
    for i, x in enumerate(rounds):
        value = x.median if isinstance(x, benchmark.Measurement) else x
        what = "a Measurement or a finite number > 0 (a time)"
        seconds.append(check_real(f"{name}[{i}]", value, what, lambda t: 0 < t < math.inf))
    return seconds
