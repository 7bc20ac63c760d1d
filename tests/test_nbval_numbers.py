"""The numeric output check (scripts/nbval_numbers.py): one last digit passes, nothing more.

Unit cases for the comparison, then nbval itself on small notebooks whose stored outputs
differ from a fresh run by one unit, by two units, by a word and by an integer.
"""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path

import nbformat
import nbval_numbers
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nbval_numbers import (
    Tolerance,
    first_difference,
    same_number,
    same_output,
    tokens,
    tolerance,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("stored", "fresh"),
    [
        ("2.9735e-04", "2.9734e-04"),  # the Xeon with AMX, chapter "Positions"
        ("0.1999", "0.2000"),
        ("-0.0000", "0.0000"),
        ("0.0000", "-0.0000"),
        ("1.0000e+00", "9.9999e-01"),  # across a power of ten: 1e-04 vs 1e-05, the larger unit
        ("0.55", "0.56"),
        ("1.", "2."),  # torch's "1." has its last digit in the units
        ("nan", "nan"),
        ("-inf", "-inf"),
        ("0.2", "0.25"),  # a coarser print: within its unit
        ("3.14159", "3.14159"),
    ],
)
def test_one_last_digit_passes(stored, fresh):
    assert same_number(stored, fresh)
    assert same_output(f"x = {stored} (step 3)", f"x = {fresh} (step 3)")


@pytest.mark.parametrize(
    ("stored", "fresh"),
    [
        ("2.9735e-04", "2.9733e-04"),  # two units
        ("0.1999", "0.2001"),
        ("-0.0001", "0.0001"),
        ("0.55", "0.57"),
        ("1.0000e+00", "1.0000e+01"),  # the exponent
        ("nan", "0.0000"),
        ("inf", "-inf"),
        ("inf", "1e308"),
        ("7", "8"),  # integers exactly
        ("7", "7.0"),
        ("-0", "0"),
        ("12", "012"),
    ],
)
def test_more_than_a_last_digit_fails(stored, fresh):
    assert not same_number(stored, fresh)
    assert not same_output(f"x = {stored} (step 3)", f"x = {fresh} (step 3)")


@pytest.mark.parametrize(
    ("stored", "fresh"),
    [
        ("ship 0.55", "shop 0.55"),  # a changed word
        ("3 heads of 0.25", "4 heads of 0.25"),  # a changed integer
        ("layers.0.attn", "layers.1.attn"),  # a dotted name is a word, not a decimal
        ("torch 2.13.0", "torch 2.13.1"),  # so is a version
        ("W1 0.5", "W2 0.5"),
        ("0.5, 0.25", "0.5; 0.25"),  # a symbol
        ("a b c", "a b"),  # a missing token
        ("0.1 0.2", "0.1 0.2 0.3"),
    ],
)
def test_words_symbols_and_integers_are_exact(stored, fresh):
    assert not same_output(stored, fresh)
    assert first_difference(stored, fresh) is not None


def test_tensors_and_tables():
    stored = (
        "tensor([[ 0.4519,  0.2741,  0.2741],\n"
        "        [-0.0000,  1.0000e-04, nan]])\n"
        "ship\t0.55\t0.13\n"
    )
    fresh = (
        "tensor([[0.4520, 0.2740, 0.2741],\n"  # a sign flip removes torch's padding
        "        [0.0000, 1.0001e-04, nan]])\n"
        "ship\t0.54\t0.13\n"
    )
    assert same_output(stored, fresh)
    assert not same_output(stored, fresh.replace("0.2740", "0.2739"))


def test_a_table_printed_in_halves():
    """A wide table that wraps into two blocks, each with its own header (pandas, torch)."""
    stored = "   a       b\n0  0.1235  0.5000\n\n   c\n0  2.0000e-05\n"
    fresh = "   a       b\n0  0.1234  0.5001\n\n   c\n0  2.0001e-05\n"
    assert same_output(stored, fresh)
    assert not same_output(stored, fresh.replace("   c", "   d"))


def test_tokens_keep_words_and_split_numbers():
    assert tokens("tensor([ 0.1000, -2.5e-03])") == ["tensor([", "0.1000", ",", "-2.5e-03", "])"]
    assert tokens("a-1.5 is 0.5.") == ["a-", "1.5", "is", "0.5", "."]
    assert tokens("information nanoGPT nan -inf") == ["information", "nanoGPT", "nan", "-inf"]
    assert tokens("<td>0.1234</td>") == ["<td>", "0.1234", "</td>"]


def test_first_difference_names_the_tokens():
    assert first_difference("loss 0.1999 at 3", "loss 0.2002 at 3") == (1, "0.1999", "0.2002")
    assert first_difference("a b", "a") == (1, "b", None)


def test_non_strings_compare_as_themselves():
    assert same_output(["a"], ["a"]) and not same_output(["a"], ["b"])


@given(st.integers(-(10**6), 10**6), st.integers(0, 6), st.sampled_from([-1, 0, 1]))
def test_property_one_unit_passes_two_fail(n, places, step):
    """Any decimal and its neighbours one unit away agree; two units away they do not."""

    def fmt(k):
        return f"{k / 10**places:.{places}f}" if places else f"{k}."

    assert same_number(fmt(n), fmt(n + step))
    assert not same_number(fmt(n), fmt(n + 2)) and not same_number(fmt(n), fmt(n - 2))


# ---- nbval itself ---------------------------------------------------------------------------
CASES = [  # (stored output, printed now, passes)
    ("weights_learned[8, keys] = 2.9735e-04", "weights_learned[8, keys] = 2.9734e-04", True),
    ("p = 0.1999, -0.0000", "p = 0.2000, 0.0000", True),
    ("p = 0.1999", "p = 0.2001", False),
    ("ship 0.55", "shop 0.55", False),
    ("3 heads", "4 heads", False),
]


# A trained number under its cell's declared tolerance (stored, printed, passes, tags)
TAGGED = [
    (
        "loss 0.22 nats after 1,000 steps",
        "loss 0.25 nats after 1,000 steps",
        True,
        ["nbval-atol-0.05"],
    ),
    ("loss 0.22 nats", "loss 0.25 nats", False, []),  # no tag: one last digit only
    ("loss 0.22 nats", "loss 0.28 nats", False, ["nbval-atol-0.05"]),
    ("loss 0.22 nats", "loss 0.25 bits", False, ["nbval-atol-0.05"]),  # words stay exact
    ("perplexity 276", "perplexity 275", True, ["nbval-rtol-0.01"]),  # integers as numbers
    ("perplexity 276", "perplexity 281", False, ["nbval-rtol-0.01"]),
]


def test_declared_tolerance():
    loose = Tolerance(atol=Decimal("0.05"))
    assert same_number("0.22", "0.25", loose) and not same_number("0.22", "0.25")
    assert same_number("0.01", "0.06", loose) and not same_number("0.01", "0.07", loose)
    relative = Tolerance(rtol=Decimal("0.1"))
    assert same_number("560", "600", relative) and not same_number("560", "630", relative)
    assert same_output("step 560, 0.14", "step 600, 0.15", relative)
    assert not same_output("step 560 of 1000", "step 560 of 1001")  # untagged integers: exact


def test_tolerance_tags():
    assert tolerance(["nbval-atol-0.05", "hide-input"]) == Tolerance(atol=Decimal("0.05"))
    assert tolerance(None) == Tolerance() == tolerance(["nbval-ignore-output"])
    for bad in ("nbval-atol-", "nbval-rtol-5%", "nbval-atol-1e-3"):
        with pytest.raises(ValueError, match=f"cell tag '{bad}': expected nbval-atol-X"):
            tolerance([bad])


def test_nbval_compares_numbers(tmp_path):
    """One notebook, a cell per case (one kernel start): nbval with the plugin, as
    ``make nbval`` runs it, passes exactly the cells within a last digit."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    cases = [(*case, []) for case in CASES] + TAGGED
    for i, (stored, printed, _, tags) in enumerate(cases, start=1):
        cell = nbformat.v4.new_code_cell(f"print({printed!r})", execution_count=i)
        cell.metadata["tags"] = tags
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored + "\n")]
        nb.cells.append(cell)
    notebook = tmp_path / "nb.ipynb"
    nbformat.write(nb, notebook)
    junit = tmp_path / "junit.xml"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "scripts"))
    command = nbval_numbers.command(notebook) + [f"--junitxml={junit}"]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    results = list(ET.parse(junit).getroot().iter("testcase"))
    assert len(results) == len(cases), run.stdout + run.stderr
    for case, (stored, printed, passes, _) in zip(results, cases):
        failed = case.find("failure") is not None or case.find("error") is not None
        assert failed != passes, (stored, printed, run.stdout)
        if failed:
            assert "Cell outputs differ" in ET.tostring(case, encoding="unicode")


def test_a_notebook_without_code_passes(tmp_path):
    """nbval collects nothing (pytest's exit 5): the chapter check passes (exit 0)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Only prose")]
    nbformat.write(nb, tmp_path / "prose.ipynb")
    assert nbval_numbers.main(str(tmp_path / "prose.ipynb")) == 0
