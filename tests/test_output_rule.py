"""The rule for printed numbers (README, "Numbers are compared as numbers"), over every chapter.

A rounding error has no stable digits on any machine: the size of a difference between two
computations that agree (``3.3e-16`` in float64, ``2.98e-07`` in float32) changes with the CPU,
its kernels and the thread count. So no compared output prints one. A chapter asserts such a
difference below a bound and prints the bound (``largest difference below 1e-12``).

The check reads each compared output line by line and finds:

- a number printed next to a word of comparison ("difference", "error", "deviation", ...)
  that is below 1e-4 and not written as a bound ("below 1e-6", "within 1e-5", "< 1e-12");
- any number below 1e-9, or a zero printed in scientific notation (``0.0e+00``): nothing this
  book measures is that small, so such a number is rounding noise, whatever the line says.

Cells tagged ``nbval-ignore-output`` (timings, versions) are not compared, and not read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))

_NUMBER = re.compile(r"(?<![\w.])[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?(?![\w]|\.\d)")
_COMPARISON = re.compile(r"differ|error|deviat|discrepan|mismatch|residual", re.IGNORECASE)
_BOUND = re.compile(r"(?:below|within|under|than|to|<|≤|<=|tol\w*|eps)\s*=?\s*\(?$", re.IGNORECASE)


def noise(line: str) -> list[str]:
    """The numbers of ``line`` that look like rounding noise printed as a result.

    >>> noise("scores 9.54e-07, weights 2.98e-07: largest differences from attnlib")
    ['9.54e-07', '2.98e-07']
    >>> noise("output, state: largest difference below 1e-12")
    []
    >>> noise("parallel   output 3.3e-16, state 0.0e+00")
    ['3.3e-16', '0.0e+00']
    >>> noise("scale 1: ship 0.99997, crew 3.2e-05")  # a weight, not a difference
    []
    """
    found = []
    compares = _COMPARISON.search(line) is not None
    for match in _NUMBER.finditer(line):
        text = match.group()
        value = abs(float(text))
        scientific = "e" in text.lower()
        if _BOUND.search(line[: match.start()].rstrip()):
            continue  # "below 1e-12": a bound, written as the rule asks
        if (value == 0 and scientific) or 0 < value < 1e-9 or (compares and 0 < value < 1e-4):
            found.append(text)
    return found


def compared_outputs(notebook: Path):
    """``(cell index, line)`` for every line of every output that nbval compares."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        if "nbval-ignore-output" in cell.get("metadata", {}).get("tags", []):
            continue
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            for line in "".join(text).splitlines():
                yield index, line


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_no_rounding_error_is_printed_as_a_result(notebook):
    bad = [
        f"cell {index}: {line.strip()!r} prints {', '.join(numbers)}"
        for index, line in compared_outputs(notebook)
        if (numbers := noise(line))
    ]
    assert not bad, (
        f"{notebook.name} prints rounding errors as compared outputs (assert them below a "
        "bound and print the bound, README: Numbers are compared as numbers):\n" + "\n".join(bad)
    )


@pytest.mark.parametrize(
    "line",
    [
        "output: largest difference from attnlib 2.98e-08",
        "gated delta rule, chunked (C = 3)  largest difference 8.9e-16",
        "row sums: tensor([-1.5613e-17, -1.0408e-17, -2.6021e-18,  0.0000e+00],",
        "max abs error 4.2e-06 against float64",
        "linear attention, recurrent        output 0.0e+00, state 0.0e+00",
    ],
)
def test_the_check_finds_noise(line):
    assert noise(line)


@pytest.mark.parametrize(
    "line",
    [
        "the same outputs and weights, within 1e-5",
        "every row sums to zero (to 1e-12): True",
        "float32 spacing near 0.55: 6.0e-08",
        "(ln1): LayerNorm((64,), eps=1e-05, elementwise_affine=True, bias=False)",
        "b_h = 10: the keys get 1.8e-04 of the weight; largest |output| 9.3e-05",
        "by hand and attnlib: scores, weights, output: largest difference below 1e-5",
        "validation loss 0.0312, error rate 0.5%",
    ],
)
def test_the_check_passes_results_and_bounds(line):
    assert noise(line) == []


_TRAINS = re.compile(r"(?<![.\w])train\(|train_odyssey\.train\(|\.backward\(\)|optimizer\.step\(")


def test_every_chapter_that_trains_is_rerun_at_another_thread_count():
    """``make nbval-threads`` checks the chapters in the Makefile's LIVE_TRAINING at 3 threads:
    every chapter whose compared cells train a model must be listed there."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    listed = set(re.search(r"^LIVE_TRAINING := (.*)$", makefile, re.MULTILINE)[1].split())
    training = set()
    for notebook in CHAPTERS:
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            tags = cell.get("metadata", {}).get("tags", [])
            if cell["cell_type"] == "code" and "nbval-ignore-output" not in tags:
                if _TRAINS.search("".join(cell["source"])):
                    training.add(notebook.stem)
    assert training == listed, (
        f"chapters that train live: {sorted(training)}; listed: {sorted(listed)}"
    )
