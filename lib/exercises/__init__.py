"""Build it yourself: the book's exercises with a stub to fill in and checks that judge it.

Each exercise is a function (one is a class) in :mod:`exercises.stubs` whose docstring is its
specification and whose body raises ``NotImplementedError`` until you write it. Its checks
(:mod:`exercises.checks`) compare your code with ``attnlib`` and PyTorch on random sizes.

- From the shell: ``make exercises`` runs every exercise's checks on ``lib/exercises/stubs.py``,
  one line per exercise that is not right yet.
- In a notebook (Colab, Binder, Jupyter): write the function in a cell, then
  ``from exercises import check; check("attention", my_attention)``.

One solution of each is in :mod:`exercises.solutions`, for after you have tried.
"""

from exercises.checks import EXERCISES, check, run

__all__ = ["EXERCISES", "check", "run"]
