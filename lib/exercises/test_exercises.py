"""Each exercise's checks, one test per exercise, on your code or (``--solutions``) the book's.

A failing exercise is reported in one line: "not implemented yet" with the chapter and section
to read, or the first case that fails and what is wrong in it.
"""

import pytest

from exercises.checks import EXERCISES, run, where


@pytest.mark.parametrize("name", list(EXERCISES), ids=[ex.id for ex in EXERCISES.values()])
def test_exercise(name, implementation):
    ex = EXERCISES[name]
    try:
        results = run(name, getattr(implementation, name))
    except NotImplementedError:
        results = None  # failed outside the except block: no "during handling" traceback
    if results is None:
        pytest.fail(f"{ex.title}: not implemented yet (see {where(ex)})", pytrace=False)
    failures = [(case, message) for case, message in results if message is not None]
    if failures:
        case, message = failures[0]
        more = (
            f" (and {len(failures) - 1} more; check({name!r}) lists them)" if failures[1:] else ""
        )
        pytest.fail(f"{ex.title}: {case}: {message}{more}", pytrace=False)
