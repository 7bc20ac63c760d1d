"""Compare notebook outputs as numbers: nbval's check, with a tolerance of one last digit.

No printed digit holds on every CPU: any rounding has boundaries, and some reader's machine
sits on one (a Xeon with AMX printed ``2.9734e-04`` where the stored output says
``2.9735e-04``). So a stored output and a fresh one are compared token by token:

- words and symbols exactly (whitespace only separates tokens: its amount is layout);
- integers (no point, no exponent) exactly;
- each decimal number (with a point or an exponent, a sign, ``nan`` or ``inf``) within one
  unit of its last printed digit: ``|a - b| <= max(ulp(a), ulp(b))`` where ``ulp("2.9734e-04")
  = 1e-08`` and ``ulp("0.20") = 0.01``, computed in decimal arithmetic (no float rounding on
  the boundary); ``nan`` equals ``nan``, an infinity equals only the same infinity.

So ``2.9734e-04`` / ``2.9735e-04``, ``0.1999`` / ``0.2000`` and ``-0.0000`` / ``0.0000`` pass;
``0.1999`` / ``0.2001`` (two units), a changed word and a changed integer fail.

A number that comes out of training (or of anything else whose result moves across CPUs by
more than its last digit) is compared with the tolerance that its cell declares with a tag:
``nbval-atol-0.05`` (absolute) and/or ``nbval-rtol-0.1`` (relative to the larger of the two).
Under such a tag integers are compared as numbers too (a perplexity of ``275`` against ``276``),
words still exactly. The tag is for cells whose text tells the reader that their last digits
may differ, and never a blanket ignore: ``README.md``, "Numbers are compared as numbers", has
the rule and how each tolerance was measured.

A number is a run of digits not glued to a word or a dotted name: ``layers.0.attn`` and
``W1`` are words, compared exactly, and so is a version such as ``2.13.0``.

pytest-doctestplus' ``FLOAT_CMP`` was the model; it compares with a relative tolerance
(``rtol=1e-05``), which fails ``2.9734e-04`` / ``2.9735e-04`` (3.4e-05 apart) and passes a
change in a sixth digit that the text printed, so the rule here is the printed digit's.

Used as a pytest plugin next to nbval (``-p nbval_numbers``), it makes nbval's comparison of
two outputs use :func:`same_output`; nbval's report of a real difference is unchanged. Run as a
script, it checks one chapter (``make nbval`` runs it on each, memory addresses masked by
``tests/nbval_sanitize.cfg``)::

    python scripts/nbval_numbers.py chapters/X.ipynb

exiting 0 when every output matches (a notebook without code cells passes), 1 otherwise.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import NamedTuple

# A decimal or an integer, optionally signed, not glued to a word or a dotted name on either
# side; or nan / inf as a word. Group "num" is the number, "word" anything else but space.
_NUMBER = (
    r"(?<![\w.])[+-]?"
    r"(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?"
    r"(?![\w]|\.\d)"
)
_SPECIAL = r"(?<![\w.])[+-]?(?:nan|inf|NaN|Inf|NAN|INF|Infinity|infinity)(?!\w)"
_TOKEN = re.compile(
    rf"(?P<num>{_SPECIAL}|{_NUMBER})|(?P<word>[^\s]+?(?={_SPECIAL}|{_NUMBER}|\s|$))"
)

__all__ = ["tokens", "same_number", "same_output", "first_difference", "Tolerance", "tolerance"]


class Tolerance(NamedTuple):
    """A cell's declared tolerance (its tags ``nbval-atol-X`` and ``nbval-rtol-X``)."""

    atol: Decimal = Decimal(0)
    rtol: Decimal = Decimal(0)


_NONE = Tolerance()
_TOLERANCE_TAG = re.compile(r"nbval-(?P<kind>atol|rtol)-(?P<value>\d+(?:\.\d+)?)")


def tolerance(tags) -> Tolerance:
    """The tolerance a cell's tags declare; ``ValueError`` for a malformed ``nbval-*tol-`` tag.

    >>> tolerance(["hide-input", "nbval-atol-0.05", "nbval-rtol-0.1"])
    Tolerance(atol=Decimal('0.05'), rtol=Decimal('0.1'))
    >>> tolerance([]) == Tolerance()
    True
    """
    found = {}
    for tag in tags or ():
        if not re.match(r"nbval-[ar]tol", tag):
            continue
        match = _TOLERANCE_TAG.fullmatch(tag)
        if match is None:
            raise ValueError(
                f"cell tag {tag!r}: expected nbval-atol-X or nbval-rtol-X with X a decimal "
                "number such as 0.05"
            )
        found[match["kind"]] = Decimal(match["value"])
    return Tolerance(**found)


def tokens(text: str) -> list[str]:
    """The tokens of ``text``: numbers, and the runs of other non-space characters between them.

    >>> tokens("tensor([ 0.1000, -2.5e-03])")
    ['tensor([', '0.1000', ',', '-2.5e-03', '])']
    >>> tokens("layers.0.attn W1 has 3 heads")
    ['layers.0.attn', 'W1', 'has', '3', 'heads']
    """
    return [m.group() for m in _TOKEN.finditer(text)]


def _is_number(token: str) -> bool:
    return bool(re.fullmatch(f"{_SPECIAL}|{_NUMBER}", token))


def _is_integer(token: str) -> bool:
    return bool(re.fullmatch(r"[+-]?\d+", token))


def _decimal(token: str) -> Decimal:
    lowered = token.lower().replace("infinity", "inf")
    return Decimal(lowered)


def _unit(value: Decimal) -> Decimal:
    """One unit of the last printed digit: ``Decimal('2.9734e-04')`` -> ``1E-8``."""
    return Decimal(1).scaleb(value.as_tuple().exponent)


def same_number(stored: str, fresh: str, tol: Tolerance = _NONE) -> bool:
    """Whether two printed numbers agree: integers exactly, decimals within one last digit;
    under a declared tolerance ``tol``, both also within ``atol`` or ``rtol``.

    >>> same_number("2.9735e-04", "2.9734e-04"), same_number("0.1999", "0.2001")
    (True, False)
    >>> same_number("-0.0000", "0.0000"), same_number("nan", "nan"), same_number("7", "8")
    (True, True, False)
    >>> loose = Tolerance(atol=Decimal("0.05"), rtol=Decimal("0.01"))
    >>> same_number("0.22", "0.25", loose), same_number("275", "276", loose)
    (True, True)
    >>> same_number("0.22", "0.30", loose), same_number("275", "280", loose)
    (False, False)
    """
    if stored == fresh:
        return True
    if tol == _NONE and (_is_integer(stored) or _is_integer(fresh)):
        return False  # an integer is compared as text: "7" is not "7.0", nor "8"
    try:
        a, b = _decimal(stored), _decimal(fresh)
    except InvalidOperation:
        return False
    if a.is_nan() or b.is_nan():
        return a.is_nan() and b.is_nan()
    if a.is_infinite() or b.is_infinite():
        return a == b
    allowed = max(_unit(a), _unit(b), tol.atol, tol.rtol * max(abs(a), abs(b)))
    return abs(a - b) <= allowed


def first_difference(
    stored: str, fresh: str, tol: Tolerance = _NONE
) -> tuple[int, str | None, str | None] | None:
    """``None`` when the outputs agree (:func:`same_output`); else the index of the first
    differing token and the two tokens (``None`` where one output has no more tokens).

    >>> first_difference("loss 0.1999 after 3 steps", "loss 0.2000 after 3 steps") is None
    True
    >>> first_difference("loss 0.1999 after 3 steps", "loss 0.1999 after 4 steps")
    (3, '3', '4')
    """
    a, b = tokens(stored), tokens(fresh)
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x is None or y is None:
            return i, x, y
        if x == y:
            continue
        if not (_is_number(x) and _is_number(y) and same_number(x, y, tol)):
            return i, x, y
    return None


def same_output(stored, fresh, tol: Tolerance = _NONE) -> bool:
    """Whether a stored output and a fresh one agree token by token (non-strings: ``==``).

    >>> same_output("w[8, keys] = 2.9735e-04", "w[8, keys] = 2.9734e-04")
    True
    >>> same_output("ship 0.55", "shop 0.55")
    False
    """
    if not (isinstance(stored, str) and isinstance(fresh, str)):
        return stored == fresh
    return stored == fresh or first_difference(stored, fresh, tol) is None


# ---- the pytest plugin ----------------------------------------------------------------------
class _Tolerant(str):
    """A sanitized output that compares with another by :func:`same_output` (nbval compares
    the values it gets from ``sanitize`` with ``!=``), with its cell's declared tolerance."""

    tol: Tolerance = _NONE

    def __eq__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        theirs = getattr(other, "tol", _NONE)
        tol = Tolerance(max(self.tol.atol, theirs.atol), max(self.tol.rtol, theirs.rtol))
        return same_output(str(self), str(other), tol)

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__


def pytest_configure(config) -> None:
    """Make nbval's comparison numeric: its ``sanitize`` returns :class:`_Tolerant` strings."""
    from nbval.plugin import IPyNbCell

    if getattr(IPyNbCell.sanitize, "_numeric", False):
        return
    original = IPyNbCell.sanitize

    def sanitize(self, s):
        s = original(self, s)
        if not isinstance(s, str):
            return s
        s = _Tolerant(s)
        s.tol = tolerance(self.cell.metadata.get("tags"))
        return s

    sanitize._numeric = True
    IPyNbCell.sanitize = sanitize


# ---- the chapter check ----------------------------------------------------------------------
def command(notebook: Path) -> list[str]:
    """The pytest command line that checks ``notebook``: nbval with this plugin."""
    sanitize = Path(__file__).resolve().parents[1] / "tests" / "nbval_sanitize.cfg"
    options = "-q -p nbval_numbers -p no:randomly -p no:xdist --nbval-sanitize-with".split()
    return [sys.executable, "-m", "pytest", *options, str(sanitize), "--nbval", str(notebook)]


def main(notebook: str) -> int:
    # the plugin is imported before pytest reads its pythonpath: scripts/ goes on PYTHONPATH
    path = [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
    run = subprocess.run(command(Path(notebook)), env=env, check=False)
    return 0 if run.returncode in (0, 5) else 1  # 5: nothing collected (no code cells)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/nbval_numbers.py chapters/X.ipynb (one notebook)")
    sys.exit(main(sys.argv[1]))
