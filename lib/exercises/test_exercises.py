"""Each exercise's checks, one test per exercise, on your code or (``--solutions``) the book's.

A failing exercise is reported in one line: "not implemented yet" with the chapter and section
to read, or the first case that fails and what is wrong in it.
"""

import pytest

from exercises.checks import EXERCISES, one_line


@pytest.mark.parametrize("name", list(EXERCISES), ids=[ex.id for ex in EXERCISES.values()])
def test_exercise(name, implementation):
    failure = one_line(name, getattr(implementation, name))
    if failure is not None:
        pytest.fail(failure, pytrace=False)
