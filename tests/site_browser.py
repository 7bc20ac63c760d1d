"""The browser and the server of the site tests (tests/test_site*.py), in one place.

A pytest plugin, loaded by those files (``pytest_plugins = ["site_browser"]``), so that the
unit tests, which share tests/conftest.py, never need Playwright. The browser, its contexts
and tabs are pytest-playwright's fixtures (``browser``, ``new_context``, ``context``,
``page``), set here to drive Debian's Chromium (no browser download) with no network: every
host name but 127.0.0.1 fails to resolve, nothing runs in the background, each context is a
fresh profile. A tab is 1280 x 900 CSS px unless a test asks for another context with
``@pytest.mark.browser_context_args(**PHONE)``. Each ``page`` records what went wrong in it
(:func:`watch`), which :func:`assert_clean` checks. ``site_url`` serves the built book,
``_build/html``, on 127.0.0.1 at a free port.

Without Chromium, pytest-playwright or a built site, the tests that need them skip, saying
why; with the environment variable CI set they fail instead.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    "--no-sandbox",
    "--disable-gpu",
]
TIMEOUT_MS = 30_000
DESKTOP = {"width": 1280, "height": 900}
PHONE = {  # a phone: 390 x 844 CSS px, 3 device pixels each, touch
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
}


def unavailable(reason: str) -> None:
    """Skip, or fail under CI, where a browser test cannot run."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: the site test must run, not skip)", pytrace=False)
    pytest.skip(reason)


def needs_site() -> None:
    if not (SITE / "index.html").exists():
        unavailable(f"no built site at {SITE}: run `make book` first")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="session")
def site_url():
    """The built site, served on 127.0.0.1 at a free port."""
    needs_site()
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


try:
    import pytest_playwright  # noqa: F401 (its fixtures: browser, new_context, context, page)
except ImportError:  # the tests that need a browser skip (or fail under CI), saying why

    def _missing():
        unavailable("the Python package pytest-playwright is not installed (requirements.txt)")

    browser = pytest.fixture(scope="session", name="browser")(lambda: _missing())
    browser_context_args = pytest.fixture(scope="session", name="browser_context_args")(
        lambda: _missing()
    )
    new_context = pytest.fixture(name="new_context")(lambda: _missing())
    context = pytest.fixture(name="context")(lambda: _missing())
else:

    @pytest.fixture(scope="session")
    def browser_type_launch_args(browser_type_launch_args):
        """Debian's Chromium, headless, offline."""
        if not Path(CHROMIUM).is_file():
            unavailable(
                f"no Chromium at {CHROMIUM} (install Debian's: apt-get install -y chromium, "
                "which `make test` does; or set CHROMIUM=/path/to/chromium)"
            )
        return {
            **browser_type_launch_args,
            "executable_path": CHROMIUM,
            "headless": True,
            "args": CHROMIUM_ARGS,
        }

    @pytest.fixture(scope="session")
    def browser_context_args(browser_context_args):
        return {**browser_context_args, "viewport": DESKTOP}


def watch(tab):
    """Record on the tab what goes wrong in it: ``tab.errors`` (console errors, exceptions,
    HTTP errors but a missing favicon.ico, which a phone's browser asks for) and
    ``tab.external`` (requests to other hosts than 127.0.0.1, blocked)."""
    tab.set_default_timeout(TIMEOUT_MS)
    tab.errors, tab.external = [], []

    def console(message):
        if message.type == "error" and "/favicon.ico" not in message.location.get("url", ""):
            tab.errors.append(f"console: {message.text} ({message.location.get('url')})")

    def response(response):
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            tab.errors.append(f"HTTP {response.status}: {response.url}")

    def route(route):
        url = urlsplit(route.request.url)
        if url.scheme in ("http", "https") and url.hostname != "127.0.0.1":
            tab.external.append(route.request.url)
            route.abort("blockedbyclient")
        else:
            route.continue_()

    tab.on("console", console)
    tab.on("pageerror", lambda error: tab.errors.append(f"exception: {error}"))
    tab.on("response", response)
    tab.route("**/*", route)
    return tab


@pytest.fixture
def page(context):
    """pytest-playwright's page, watched (:func:`watch`)."""
    return watch(context.new_page())


def assert_clean(tab) -> None:
    assert not tab.external, f"requests to other hosts: {tab.external}"
    assert not tab.errors, "errors in the browser:\n" + "\n".join(tab.errors)
