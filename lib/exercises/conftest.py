"""pytest options for the exercises: ``--solutions`` checks the solutions instead of your code.

``make exercises`` runs ``lib/exercises/test_exercises.py`` on ``lib/exercises/stubs.py`` (your
code); ``make exercises-solutions`` (part of ``make test``) runs this folder's tests on
``lib/exercises/solutions.py``.
"""

import importlib

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--solutions",
        action="store_true",
        help="check exercises/solutions.py instead of exercises/stubs.py (your code)",
    )


@pytest.fixture(scope="session")
def implementation(request):
    """The module whose functions are checked: the stubs (your code) or the solutions."""
    # default: this conftest's option exists only when pytest starts in lib/exercises
    name = "solutions" if request.config.getoption("--solutions", default=False) else "stubs"
    return importlib.import_module(f"exercises.{name}")


class OneLine:
    """A failure report that is one line of text, whatever ``--tb`` says."""

    def __init__(self, text: str, tbstyle: str):
        self.text = self.message = text
        self.reprcrash = self  # --tb=line prints str(reprcrash); -ra prints its .message
        self.tbstyle = tbstyle

    def __str__(self) -> str:
        return self.text

    def toterminal(self, tw) -> None:
        if self.tbstyle != "line":  # --tb=line writes the line itself, after this
            tw.line(self.text)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed exercise (``pytest.fail`` with ``pytrace=False``) is reported as its message."""
    outcome = yield
    report = outcome.get_result()
    excinfo = call.excinfo
    if report.failed and excinfo is not None and isinstance(excinfo.value, pytest.fail.Exception):
        report.longrepr = OneLine(str(excinfo.value.msg), item.config.getoption("tbstyle"))
