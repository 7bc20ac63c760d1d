"""The built book (`_build/html`) in offline headless Chromium, at 1280 px and on a phone, served
and as file://; screenshots in `_build/screenshots/`. Without Chromium, pytest-playwright or a
built site the browser tests skip (fail, where CI is set)."""

import functools
import http.server
import json
import os
import re
import shutil
import threading
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
PHONE = {  # a phone: 390 x 844 CSS px, 3 device pixels each, touch
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
}
on_a_phone = pytest.mark.browser_context_args(**PHONE)


# ---- the browser and the server ---------------------------------------------------------


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


@pytest.fixture(scope="session")
def base_urls(site_url):
    return {"served": site_url, "file": SITE.resolve().as_uri()}


try:  # pytest-playwright's fixtures: browser, new_context, context (a fresh profile), page
    import pytest_playwright  # noqa: F401
    from playwright.sync_api import expect
except ImportError:

    def _missing():
        unavailable("the Python package pytest-playwright is not installed (requirements.txt)")

    for _name in ("browser", "browser_context_args", "new_context", "context"):
        globals()[_name] = pytest.fixture(_missing, scope="session", name=_name)
else:

    @pytest.fixture(scope="session")
    def browser_type_launch_args(browser_type_launch_args):
        """Debian's Chromium (no browser download), headless; only 127.0.0.1 resolves."""
        if not Path(CHROMIUM).is_file():
            unavailable(
                f"no Chromium at {CHROMIUM} (install Debian's: apt-get install -y chromium, "
                "which `make test` does; or set CHROMIUM=/path/to/chromium)"
            )
        offline = ["--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--disable-quic"]
        args = {"executable_path": CHROMIUM, "headless": True, "args": [*offline, "--disable-gpu"]}
        return {**browser_type_launch_args, **args}

    @pytest.fixture(scope="session")
    def browser_context_args(browser_context_args):
        return {**browser_context_args, "viewport": {"width": 1280, "height": 900}}


def watch(tab):
    """Record console errors, exceptions, HTTP errors (but favicon.ico's) in ``tab.errors``."""
    tab.errors, tab.external = [], []

    def console(message):
        if message.type == "error" and "/favicon.ico" not in message.location.get("url", ""):
            tab.errors.append(f"console: {message.text} ({message.location.get('url')})")

    def response(response):
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            tab.errors.append(f"HTTP {response.status}: {response.url}")

    def request(request):  # to other hosts (the browser cannot resolve them)
        url = urlsplit(request.url)
        if url.scheme in ("http", "https") and url.hostname != "127.0.0.1":
            tab.external.append(request.url)

    tab.on("console", console)
    tab.on("pageerror", lambda error: tab.errors.append(f"exception: {error}"))
    tab.on("response", response)
    tab.on("request", request)
    return tab


@pytest.fixture
def page(context):
    """pytest-playwright's page, watched (:func:`watch`)."""
    return watch(context.new_page())


def assert_clean(tab) -> None:
    assert not tab.external, f"requests to other hosts: {tab.external}"
    assert not tab.errors, "errors in the browser:\n" + "\n".join(tab.errors)


def _open(tab, url: str):
    """`tab` at `url`, its math typeset (MathJax's script ran by the load event), fonts ready."""
    tab.goto(url)
    if tab.locator(".math").count():
        tab.wait_for_function("() => window.MathJax?.startup?.promise", timeout=5_000)
        tab.evaluate("() => MathJax.startup.promise.then(() => true)")
    tab.evaluate("() => document.fonts.ready.then(() => true)")
    return tab


def _shot(target, name: str, folder: Path = SCREENSHOTS) -> None:
    """A screenshot of a tab or an element, `<folder>/<name, its / as ->.png`."""
    folder.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=folder / f"{name.replace('/', '-')}.png")


def _each(tab, selector: str, js: str = "e.value") -> list:
    """`js` of each element `e` that `selector` matches."""
    return tab.eval_on_selector_all(selector, f"els => els.map(e => {js})")


# ---- every page ---------------------------------------------------------------------------

TOC = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))


def toc_pages(entry: dict) -> list[str]:
    """Docnames of every page under a `_toc.yml` entry, in order, e.g. 'chapters/01_glove'."""
    pages = [str(Path(entry["file"]).with_suffix(""))] if "file" in entry else []
    for key in ("parts", "chapters", "sections"):
        pages += [page for child in entry.get(key, []) for page in toc_pages(child)]
    return pages


PAGES = [TOC["root"], *toc_pages(TOC)]
EXPLORER_PAGE = "chapters/attention_explorer"
# Opened as files too: the front page, a chapter with math, figures and tables, the explorer.
FILE_PAGES = [p for p in PAGES if p in ("intro", "chapters/02_cosine_similarity", EXPLORER_PAGE)]
# The chapters of the numbered parts, numbered 1, 2, ... across the parts.
NUMBERED = [
    c["file"] for p in TOC.get("parts", []) if p.get("numbered") for c in p.get("chapters", [])
]


def notebook_counts(notebook: Path) -> tuple[int, int]:
    """Its image outputs (not those a widget or script outranks in myst-nb), and its exercises."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    images = {"image/svg+xml", "image/png", "image/jpeg", "image/gif"}
    outranking = {"application/vnd.jupyter.widget-view+json", "application/javascript"}
    figures = sum(
        bool(images & data.keys()) and not outranking & data.keys()
        for cell in cells
        if cell["cell_type"] == "code"
        and not {"remove-cell", "remove-output"} & set(cell.get("metadata", {}).get("tags", []))
        for data in (output.get("data", {}) for output in cell.get("outputs", []))
    )
    markdown = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return figures, markdown.count("```{exercise}")


# Words of table cells drawn on two lines ("cell: word"; "self-" / "attention" is a fine break).
BROKEN_WORDS = r"""() => {
    const broken = [];
    for (const cell of document.querySelectorAll('article table td, article table th')) {
        if (cell.offsetParent === null) continue;  // hidden (a closed solution, say)
        const where = cell.textContent.trim().slice(0, 40);
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        while (walker.nextNode()) {
            const text = walker.currentNode, range = document.createRange();
            for (const match of text.nodeValue.matchAll(/[^\s\-\u2010-\u2014\/]+/g)) {
                range.setStart(text, match.index);
                range.setEnd(text, match.index + match[0].length);
                const lines = new Set([...range.getClientRects()]
                    .filter(r => r.width > 0).map(r => Math.round(r.top)));
                if (lines.size > 1) broken.push(`${where}: ${match[0]}`);
            }
        }
    }
    return broken;
}"""

# The page's width, and what sticks out of the window (not inside a box that scrolls or clips).
WIDTH_REPORT = r"""() => {
    const width = document.documentElement.clientWidth;
    const scroll = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
    const clipped = el => {
        for (let box = el.parentElement; box && box !== document.body; box = box.parentElement) {
            if (getComputedStyle(box).overflowX !== 'visible') return true;
        }
        return false;
    };
    const culprits = scroll <= width ? [] : [...document.querySelectorAll('body *')]
        .filter(el => el.getBoundingClientRect().right > width + 1 && !clipped(el))
        .map(el => `${el.tagName} ${el.className}: ${el.textContent.trim().slice(0, 50)}`);
    return {width, scroll, culprits: culprits.slice(-8)};
}"""


def assert_fits(tab) -> None:
    """Nothing wider than the window, and no word broken in a table cell."""
    width = tab.evaluate(WIDTH_REPORT)
    assert width["scroll"] <= width["width"], f"the page is wider than the window: {width}"
    assert not (broken := tab.evaluate(BROKEN_WORDS)), f"words broken in table cells: {broken}"


# Raw TeX left untypeset: $$, \( \) \[ \], \begin{, $...$ holding \, ^ or _ (not "$5").
RAW_TEX = re.compile(r"\$\$|\\[()\[\]]|\\begin\{|\$[^$\n]*[\\^_][^$\n]*\$")

MATH_REPORT = r"""() => {
    const math = [...document.querySelectorAll('.math')];
    const unrendered = math.filter(el => !el.querySelector('mjx-container'))
        .map(el => el.textContent.trim().slice(0, 80));
    const failed = [...document.querySelectorAll('mjx-merror, [data-mjx-error]')]
        .map(el => el.getAttribute('data-mjx-error') || el.textContent.slice(0, 80));
    // An undefined macro is typeset as itself in red (MathJax's noundefined package).
    const startup = window.MathJax?.startup;
    for (const item of startup?.toMML && startup.document ? startup.document.math : []) {
        const mml = startup.toMML(item.root);
        if (/<merror|<mtext mathcolor="red">\\/.test(mml)) failed.push(item.math.trim());
    }
    const article = (document.querySelector('article') || document.body).cloneNode(true);
    article.querySelectorAll('pre, code, script, style, mjx-container, .highlight')
        .forEach(el => el.remove());
    return {unrendered, failed, text: article.textContent};
}"""

# Lazy images (_ext/light_pages.py) load as the reader scrolls: load them all, and wait.
LOAD_IMAGES = """() => Promise.all([...document.querySelectorAll('img')].map(img => {
    img.loading = 'eager';
    return img.complete ? null : new Promise(done => { img.onload = img.onerror = done; });
})).then(() => true)"""


LAYOUT_REPORT = r"""() => {
    const article = document.querySelector('article') || document.body;
    const shown = el => el.offsetParent !== null && el.getBoundingClientRect().height > 0;
    const text = el => el ? el.textContent : '';
    const heading = article.querySelector('h1')?.cloneNode(true);
    const number = heading?.querySelector('.section-number')?.textContent.trim() ?? null;
    heading?.querySelectorAll('.section-number, .headerlink').forEach(e => e.remove());
    return {
        number, title: heading?.textContent.trim() ?? null,
        figures: [...article.querySelectorAll('figure')].map(f => ({
            number: text(f.querySelector('figcaption .caption-number')),
            caption: text(f.querySelector('figcaption .caption-text'))})),
        loose_images: [...article.querySelectorAll('.cell_output img')]
            .filter(img => !img.closest('figure')).length,
        exercises: [...article.querySelectorAll('.exercise.admonition')]
            .map(e => text(e.querySelector('.caption-number'))),
        solutions_shown: [...article.querySelectorAll('.solution.admonition')].map(s =>
            [...s.children].filter(c => !c.classList.contains('admonition-title')).some(shown)),
        // a code block or output, or the box a table scrolls in, that hides part of itself
        too_wide: [...article.querySelectorAll('pre, table')]
            .map(el => el.tagName === 'TABLE' ? el.parentElement : el)
            .filter(el => shown(el) && el.scrollWidth > el.clientWidth + 1)
            .map(el => el.textContent.trim().split('\n')[0].slice(0, 80)),
        footer: [...document.querySelectorAll('footer')].map(f => f.textContent).join(' '),
    };
}"""


@pytest.mark.parametrize("doc", PAGES)
def test_page_renders_offline(page, site_url, doc):
    html = SITE / f"{doc}.html"
    assert html.exists(), f"{doc!r} is in _toc.yml but {html} was not built"
    notebook = ROOT / f"{doc}.ipynb"  # a chapter's source (other pages' are Markdown)
    _open(page, f"{site_url}/{doc}.html")
    if page.locator(".math").count():  # _static/mathjax-chunks.js ran: typeset in batches
        assert page.evaluate("() => window.MathJax.config.startup.typeset") is False
    math = page.evaluate(MATH_REPORT)
    assert not math["unrendered"], f"equations not typeset by MathJax: {math['unrendered']}"
    assert not math["failed"], f"MathJax errors: {math['failed']}"
    raw = sorted(set(RAW_TEX.findall(math["text"])))
    assert not raw, f"raw TeX left in the page's text: {raw}"

    page.evaluate(LOAD_IMAGES)
    broken = _each(page, "article img", "e.complete && e.naturalWidth > 0 ? '' : e.src")
    assert not any(broken), f"images that did not load: {broken}"
    assert_fits(page)
    _shot(page, doc)  # the top of the page
    assert [part["numbered"] for part in TOC["parts"][:3]] == [True, True, True]
    captions = _each(page, "nav.bd-links p.caption .caption-text", "e.textContent.trim()")
    assert captions == [part["caption"] for part in TOC["parts"]], "the TOC's parts"
    links = _each(page, "nav.bd-links a.reference", "e.textContent.trim()")
    assert "3. Scaled dot-product attention" in links, links
    assert not [t for t in links if re.match(r"\d+\. \d+\.", t)], "a number twice"
    if notebook.exists():
        figures, exercises = notebook_counts(notebook)  # every image output shown, ...
        shown = page.locator("article .cell_output img").count()
        assert shown >= figures, f"{shown} figures of {figures}"
        # ... the TOC's number in the title (once), on every figure (each with a caption) and
        # exercise; solutions closed until clicked; code and tables within the column; licence.
        if doc == EXPLORER_PAGE:  # its table is filled once the vectors have loaded
            page.wait_for_selector("#explorer-weights td")
        report = page.evaluate(LAYOUT_REPORT)
        prefix = f"{NUMBERED.index(doc) + 1}." if doc in NUMBERED else ""
        if prefix:
            assert report["number"] == prefix, report["number"]
        assert not re.match(r"\d", report["title"] or ""), f"a number in the title: {report}"
        assert report["loose_images"] == 0, "plots outside a numbered figure"
        for figure in report["figures"]:
            assert re.fullmatch(rf"Fig\. {re.escape(prefix)}\d+ ?", figure["number"]), figure
            assert len(figure["caption"].strip()) > 10, f"no caption: {figure}"
        numbers = [f"Exercise {prefix}{k} " for k in range(1, exercises + 1)]
        assert report["exercises"] == numbers, report["exercises"]
        assert len(report["solutions_shown"]) == exercises, "an exercise without a solution"
        assert not any(report["solutions_shown"]), "a solution is open before it is clicked"
        assert not report["too_wide"], f"wider than the column: {report['too_wide']}"
        for button in page.locator(".solution.admonition .toggle-button").all():
            button.click()
        opened = page.evaluate(LAYOUT_REPORT)
        assert all(opened["solutions_shown"]), "a solution does not open"
        assert not opened["too_wide"], f"wider than the column: {opened['too_wide']}"
        assert "CC BY 4.0" in report["footer"], report["footer"]
        # The launch menu: Colab, Binder and Thebe, visible once it opens, on this notebook.
        page.click("button[aria-label='Launch interactive content']")
        menu = page.locator(".dropdown-launch-buttons .dropdown-menu")
        menu.wait_for(state="visible")
        thebe = menu.locator("button[onclick*='initThebe']")
        assert thebe.count() == 1 and thebe.is_visible(), "no Live Code in the launch menu"
        for selector in ("a[href*='colab.research.google.com']", "a[href*='mybinder.org/v2/']"):
            item = menu.locator(selector)
            assert item.count() == 1 and item.is_visible(), f"no {selector} in the launch menu"
            href = item.get_attribute("href")
            assert href.endswith(f"{doc}.ipynb"), f"launch link {href} opens another notebook"
        _shot(page, f"{doc}.launch")
        download = page.locator(f"a[href$='_sources/{doc}.ipynb']")  # the download menu
        assert download.count() == 1, f"no download link to {doc}.ipynb"
        target = (html.parent / download.get_attribute("href")).resolve()
        assert target.is_file(), f"the download link points to a missing file: {target}"

    # Every FontAwesome icon drawn (a glyph before it, from the theme's webfonts, now loaded).
    icons = page.evaluate("""() => document.fonts.ready.then(() => ({
        missing: [...document.querySelectorAll('i[class*="fa-"], span[class*="fa-"]')]
            .filter(i => ['none', 'normal', '""'].includes(getComputedStyle(i, '::before').content))
            .map(i => i.className),
        fonts: document.fonts.check('900 16px "Font Awesome 6 Free"')
            && document.fonts.check('400 16px "Font Awesome 6 Brands"'),
    }))""")
    assert not icons["missing"] and icons["fonts"], f"icons not drawn: {icons}"
    # At most 3 MB transferred (issue 36), all loaded but the explorer's data (its models: at
    # most 8 MB, tested below; GloVe's 2.7 MB alone is more than the page's 2.2 MB).
    page.wait_for_load_state("networkidle")
    files = page.evaluate("""() => [...performance.getEntriesByType('navigation'),
        ...performance.getEntriesByType('resource')].map(e => [e.name, e.transferSize])""")
    explorer = any("/_static/explorer/" in url for url, _ in files)
    assert explorer == (doc == EXPLORER_PAGE), "the explorer's files load on its page only"
    weight = sum(n for url, n in files if not re.search(r"/explorer/\w+-explorer\.js", url))
    heaviest = sorted(files, key=lambda file: -file[1])[:5]
    assert weight <= 3_000_000, f"{doc} weighs {weight:,} bytes: {heaviest}"
    assert_clean(page)
    if doc == "chapters/02_cosine_similarity":  # offline, Live Code says it needs the network
        page.locator(".dropdown-launch-buttons button[onclick*='initThebe']").click()
        button = page.locator(".thebe-launch-button")  # (_static/thebe-offline.js)
        button.filter(has_text="needs the network").wait_for(timeout=25_000)
        text = button.text_content()
        assert "Loading thebe" not in text and "download" in text, text


# ---- on a phone, and opened as files ------------------------------------------------------

SHRUNKEN_FIGURES = r"""() => [...document.querySelectorAll('article img')]
    .filter(img => img.naturalWidth > 0)
    .map(img => {
        // a 2x ("retina") PNG declares its size in CSS pixels; others are drawn 1:1
        const natural = Number(img.getAttribute('width')) || img.naturalWidth;
        return {src: img.getAttribute('src'), scale: img.getBoundingClientRect().width / natural,
                opens: img.closest('a')?.getAttribute('href') === img.getAttribute('src')};
    })"""
# Images of the article whose alt text is missing, a file name or a path (`_ext/figure_alt.py`
# gives each its figure's caption).
BAD_ALTS = r"""() => [...document.querySelectorAll('article img')]
    .map(img => ({src: img.getAttribute('src'), alt: (img.getAttribute('alt') || '').trim()}))
    .filter(({src, alt}) => alt.length < 10 || /\.(png|jpe?g|gif|svg|webp)$/i.test(alt)
        || alt.includes('_images/') || alt === src)
    .map(({src, alt}) => `${src}: alt="${alt}"`)"""
SHRUNKEN = ("chapters/03_scaled_dot_product_attention", "chapters/cross_attention")  # on a phone
MENU, CONTENTS = ".bd-header-article .primary-toggle", ".bd-header-article .secondary-toggle"
MENU_DIALOG, CONTENTS_DIALOG = "#pst-primary-sidebar-modal", "#pst-secondary-sidebar-modal"


def _dialog_opened(tab, button: str, dialog: str) -> dict:
    """Click `button`; wait for `dialog` to open; its box and how many links it shows."""
    tab.locator(button).click()
    expect(tab.locator(dialog)).to_have_js_property("open", True)
    box = tab.locator(dialog).bounding_box()
    return {**box, "links": tab.locator(f"{dialog} a:visible").count()}


def _close(tab, dialog: str) -> None:
    tab.keyboard.press("Escape")
    expect(tab.locator(dialog)).to_have_js_property("open", False)


@on_a_phone
@pytest.mark.parametrize(
    ("doc", "how"), [(doc, "served") for doc in PAGES] + [(doc, "file") for doc in FILE_PAGES]
)
def test_page_reads_on_a_phone(page, base_urls, doc, how):
    """Real alt texts; shrunken figures open at full size; the menu and contents open dialogs that
    Escape or a tap on a section close (pydata-sphinx-theme #2451: _static/sidebar-toggles.js)."""
    tab = _open(page, f"{base_urls[how]}/{doc}.html")
    assert_fits(tab)
    assert not (bad := tab.evaluate(BAD_ALTS)), f"images without a real alt text: {bad}"
    if how == "served":
        _shot(tab, doc, SCREENSHOTS / "phone")
        # Images below 80 % of their size (Fig. 3.3's digits were 4.5 CSS px) link to their file.
        tab.evaluate(LOAD_IMAGES)  # every image, the lazy ones too
        shrunken = [f for f in tab.evaluate(SHRUNKEN_FIGURES) if f["scale"] < 0.8]
        assert shrunken or doc not in SHRUNKEN, "no figure is shrunken: the test checks nothing"
        closed = [f["src"] for f in shrunken if not f["opens"]]
        assert not closed, f"shrunken figures that do not open at full size: {closed}"
        for response in [tab.request.get(urljoin(tab.url, f["src"])) for f in shrunken[:1]]:
            assert response.ok and response.headers["content-type"].startswith("image/")
    assert tab.locator(MENU).is_visible(), "no menu button on a phone"
    opened = _dialog_opened(tab, MENU, MENU_DIALOG)
    assert opened["links"] >= len(PAGES) - 1, f"the menu shows {opened['links']} links"
    assert 0 <= opened["x"] and opened["width"] <= PHONE["viewport"]["width"], opened
    if how == "served" and doc == "intro":  # the menu is the same on every page
        _shot(tab, "intro.menu", SCREENSHOTS / "phone")
    _close(tab, MENU_DIALOG)
    if tab.locator(CONTENTS).is_visible():  # on pages that have sections
        opened = _dialog_opened(tab, CONTENTS, CONTENTS_DIALOG)
        assert opened["links"] >= 1, "the page's contents show no section"
        _close(tab, CONTENTS_DIALOG)
        _dialog_opened(tab, CONTENTS, CONTENTS_DIALOG)
        tab.locator(f"{CONTENTS_DIALOG} a[href^='#']:visible").last.click()
        tab.wait_for_timeout(300)
        assert not tab.evaluate(f"document.querySelector('{CONTENTS_DIALOG}').open")
        assert tab.evaluate("() => scrollY") > 0, "the page did not scroll to the section"
    else:
        assert not (ROOT / f"{doc}.ipynb").exists(), "no contents button on a chapter"


@pytest.mark.parametrize("how", ["served", "file"])
def test_menu_button_collapses_the_navigation_at_1280(page, base_urls, how):
    tab = _open(page, f"{base_urls[how]}/chapters/06_pytorch_multihead_attention.html")
    sidebar, article = tab.locator("#pst-primary-sidebar"), tab.locator("article")
    assert sidebar.is_visible()
    narrow = article.bounding_box()["width"]
    tab.locator(MENU).click()
    sidebar.wait_for(state="hidden", timeout=3_000)
    tab.wait_for_timeout(500)  # the theme's transition
    assert article.bounding_box()["width"] > narrow + 100, "the text did not widen"
    assert not tab.evaluate(f"document.querySelector('{MENU_DIALOG}').open")
    tab.locator(MENU).click()
    sidebar.wait_for(state="visible", timeout=3_000)


@on_a_phone
@pytest.mark.parametrize(
    ("doc", "entry", "least"), [("genindex", "li", 100), ("py-modindex", "tr", 10)]
)
def test_the_indexes_fit_a_phone(page, site_url, doc, entry, least):
    """The indexes every page links to (genindex.html was 567 px wide at 390), offline."""
    page.goto(f"{site_url}/{doc}.html")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390, f"{doc}.html is {width} px wide on a 390 px screen"
    assert page.locator(f"table.indextable {entry}").count() > least  # the index is there
    assert_clean(page)


# ---- the attention explorer ---------------------------------------------------------------
# It computes in the page from data written at build time (_ext/explorer_data.py).

EXPLORER_TOLERANCE, MODEL_TOLERANCE = 1e-3, 1e-4
SENTENCE = "I must go back to my ship and to my crew"
GLOVE_MODES, MODEL_MODES = ("dot", "cosine", "head0", "head1"), ("lm", "induction")


def expected_weights(sentence: str, mode: str, temperature: float = 1.0, causal: bool = False):
    """The weights the page must show, computed with attnlib: (words, (L, L) tensor)."""
    import attnlib
    import torch

    words = attnlib.tokenize(sentence)
    X = attnlib.load_glove().matrix(words)  # (L, 50)
    L, E = X.shape
    mask = attnlib.causal_mask(L) if causal else None
    if mode == "cosine":  # chapter 2: raw cosines, no softmax; masked cosines are 0
        C = attnlib.cosine_matrix(X)
        return words, C * mask if causal else C
    if mode == "dot":  # chapter 3, at temperature T
        return words, attnlib.attention_weights(X, X, mask=mask, scale=1 / (temperature * E**0.5))
    head = int(mode.removeprefix("head"))  # the training chapter's trained heads
    heads = json.loads((ROOT / "data" / "pointer_heads.json").read_text(encoding="utf-8"))
    layer = attnlib.MultiHeadAttention(heads["embed_dim"], heads["num_heads"])
    D = E // layer.num_heads
    with torch.no_grad():
        layer.q_proj.weight.copy_(torch.tensor(heads["q_proj_weight"]))
        layer.k_proj.weight.copy_(torch.tensor(heads["k_proj_weight"]))
        _, weights = layer(X, mask=mask, need_weights=True)  # (H, L, L), temperature 1
        Q = layer.q_proj(X)[:, head * D : (head + 1) * D]  # X W_Q,h
        K = layer.k_proj(X)[:, head * D : (head + 1) * D]
        scaled = attnlib.attention_weights(Q, K, mask=mask, scale=1 / (temperature * D**0.5))
    if temperature == 1:
        torch.testing.assert_close(scaled, weights[head])
    return words, scaled


def _ready(tab):
    """Wait for the explorer in `tab` to be ready (its data loaded); record when it was."""
    tab.wait_for_selector("#explorer-app[data-ready]", state="attached")
    message = tab.text_content("#explorer-message")
    assert tab.get_attribute("#explorer-app", "data-ready") == "true", f"{message} {tab.errors}"
    tab.ready_ms = int(tab.get_attribute("#explorer-app", "data-ready-ms"))
    return tab


def _open_explorer(tab, base: str, query: str = "", dark: bool = False):
    """The explorer at `base` (served or file://) with `query`, ready, dark if asked."""
    if dark:  # what the theme's switch stores; its script sets data-theme="dark" on <html>
        tab.add_init_script("localStorage.theme = 'dark'; localStorage.mode = 'dark';")
    tab.goto(f"{base}/{EXPLORER_PAGE}.html" + (f"?{query}" if query else ""))
    return _ready(tab)


@pytest.fixture(scope="module")
def _explorer_tab(browser, browser_context_args, site_url):
    context = browser.new_context(**browser_context_args)
    yield _open_explorer(watch(context.new_page()), site_url)
    context.close()


@pytest.fixture
def explorer(_explorer_tab):
    """The explorer, open and ready, shared by the tests that take it; after each, clean."""
    yield _explorer_tab
    assert_clean(_explorer_tab)


def _set(tab, sentence=SENTENCE, mode="dot", temperature=1.0, causal=False) -> None:
    """Set every control as a reader does (each change fires its events)."""
    tab.select_option("#explorer-mode", mode)
    tab.set_checked("#explorer-causal", causal)
    _set_temperature(tab, temperature, "change")
    tab.fill("#explorer-sentence", sentence)  # fires input


def _set_temperature(tab, value: float, *events: str) -> None:
    """A range input cannot be filled: move it and fire its input (and other) events."""
    tab.eval_on_selector(
        "#explorer-temperature",
        """(el, [value, events]) => { el.value = value; for (const name of events)
            el.dispatchEvent(new Event(name, {bubbles: true})); }""",
        [str(value), ["input", *events]],
    )


def _table(tab) -> list[dict]:
    return tab.evaluate("""() => [...document.querySelectorAll('#explorer-weights tr')].map(tr => ({
        cells: tr.children.length,
        word: tr.querySelector('th') && tr.querySelector('th').textContent,
        values: [...tr.querySelectorAll('td')].map(td => td.dataset.value),
        painted: [...tr.querySelectorAll('td')].every(td => td.style.backgroundColor !== ''),
    }))""")


def _compare(tab, words, expected, tolerance=EXPLORER_TOLERANCE) -> list[dict]:
    """The table: a row and a column per word (None: as it shows), `expected`, heatmap colours."""
    rows = _table(tab)
    words = [row["word"] for row in rows] if words is None else words
    assert [row["word"] for row in rows] == words, "one tr per query word, its th the word"
    for i, row in enumerate(rows):
        assert row["cells"] == 1 + len(words), f"row {words[i]!r}: a th, then one td per key"
        assert row["painted"], f"row {words[i]!r} is not coloured as a heatmap"
        gap = max(abs(float(v) - float(e)) for v, e in zip(row["values"], expected[i]))
        assert gap <= tolerance, f"row {i} ({words[i]!r}) differs from attnlib by {gap:.2e}"
    return rows


@pytest.mark.parametrize("mode", GLOVE_MODES)
@pytest.mark.parametrize(
    ("sentence", "temperature", "causal"),
    [
        (SENTENCE, 1.0, False),
        (SENTENCE, 0.1, False),  # the coldest setting: quantisation errors grow as T falls
        (SENTENCE, 2.5, True),
        ("Tokyo French Japan , Paris Japanese ; France .", 0.35, False),  # capitals, punctuation
        ("france french paris japan japanese tokyo", 1.0, True),
        ("  My\u00a0SHIP\tand\u2003my\ncrew , Odysseus ", 1.0, False),  # str.split()'s spaces
    ],
)
def test_explorer_matches_attnlib(explorer, mode, sentence, temperature, causal):
    """The words are attnlib.tokenize's, the weights attnlib's; masked ones exactly 0."""
    _set(explorer, sentence, mode, temperature, causal)
    rows = _compare(explorer, *expected_weights(sentence, mode, temperature, causal))
    for i, row in enumerate(rows if causal else []):
        assert all(float(v) == 0 for v in row["values"][i + 1 :]), f"row {i} sees ahead"
    assert not explorer.locator("#explorer-message").is_visible()


def test_explorer_splits_the_odyssey_text_as_attnlib_word_tokens(explorer):
    """Curly quotes, "n't", an emoji as one token (it was two "\ufffd" rows, UTF-16 halves)."""
    from attnlib.corpus import word_tokens

    text = "\u201cDon't\u201d, said Ulysses \U0001f6a2 to the ship's crew"
    page = explorer.evaluate("t => AttentionExplorer.wordTokens(t)", text)
    assert page == word_tokens(text)
    assert "\U0001f6a2" in page


def test_explorer_follows_the_reader_typing(explorer):
    """Each key recomputes the map; between two words (an unknown "shi") the last one stays,
    faded (it blanked on 6 of 25 keys). A value set with no input event counts on Enter."""
    _set(explorer, "I")
    for key in " must go back to my ship":
        explorer.press("#explorer-sentence", "Space" if key == " " else key)
        text = explorer.input_value("#explorer-sentence")
        assert len(_table(explorer)) >= 1, f"the map blanked at {text!r}"
    assert explorer.get_attribute("#explorer-weights", "data-stale") is None
    words, expected = expected_weights("I must go back to my ship", "dot")
    _compare(explorer, words, expected)
    explorer.eval_on_selector("#explorer-sentence", "el => { el.value = 'my ship and my crew' }")
    assert [row["word"] for row in _table(explorer)] == words
    explorer.press("#explorer-sentence", "Enter")
    _compare(explorer, *expected_weights("my ship and my crew", "dot"))


@pytest.mark.parametrize(
    ("mode", "text", "unknown", "good", "rows"),
    [
        ("dot", "I must go back to my shhip. and to my crrew", ["shhip.", "crrew"], SENTENCE, 11),
        ("induction", "1 2 x 99 2", ["x", "99"], "1 2 1", 4),
    ],
)
def test_explorer_names_unknown_words(explorer, mode, text, unknown, good, rows):
    """Unknown words are named and give no weights: the GloVe map stays, faded (marked stale)."""
    _set_model(explorer, mode, text)
    message = explorer.locator("#explorer-message")
    assert message.is_visible()
    text = message.text_content()  # (the known "2" of "1 2 x 99 2" is not named)
    assert all(f"'{word}'" in text for word in unknown) and "'2'" not in text, text
    if mode == "dot":
        assert explorer.get_attribute("#explorer-weights", "data-stale") == "true"
    else:
        assert _table(explorer) == [] and explorer.locator("#explorer-next li").count() == 0
    _set_model(explorer, mode, good)  # and back
    assert not message.is_visible() and len(_table(explorer)) == rows
    assert explorer.get_attribute("#explorer-weights", "data-stale") is None


def test_explorer_is_usable_within_seconds(new_context, site_url, explorer):
    """From the navigation's start to the first table, the best of three fresh loads: 2 s is the
    target, but a shared 2-core machine slows it (2.3 s on a fresh clone): fail at 3x the target."""
    times = [explorer.ready_ms]
    for _ in range(2):
        times.append(_open_explorer(watch(new_context().new_page()), site_url).ready_ms)
    assert min(times) <= 6_000, f"ready after {times} ms (target 2,000)"


# ---- the explorer's models: the Odyssey language model and the induction model -----------

LM_PROMPTS = [
    "I must go back to my ship and to my",
    "Then Telemachus said to his mother, \u201cMother, I won\u2019t go",
    "the zyzzyva came to Ithaca",  # an unknown word: <unk>
]
INDUCTION_PROMPTS = ["37 43 12 8 63 9 11 5 37 43 12 8 63 9", "BOS 1 2 3 4 5 6 7 1 2 3 4", "0"]
MODEL_PROMPTS = [("lm", p) for p in LM_PROMPTS] + [("induction", p) for p in INDUCTION_PROMPTS]
LM, INDUCTION = MODEL_PROMPTS[0], MODEL_PROMPTS[3]


@functools.cache
def _model(kind: str):
    """The committed model as attnlib.LanguageModel in eval mode, and its token words."""
    import attnlib
    import torch

    if kind == "lm":
        folder = ROOT / "data" / "odyssey_lm"
        words = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
        model = attnlib.LanguageModel(len(words), 50, 5, 2, max_len=64, positions="learned")
    else:
        folder = ROOT / "data" / "induction"
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        words = [str(i) for i in range(64)] + ["BOS"]
        model = attnlib.LanguageModel(**config["model"])
    model.load_state_dict(torch.load(folder / "model.pt", weights_only=True))
    return model.eval(), words


def _model_ids(kind: str, text: str) -> list[int]:
    """The ids the model reads for a text, as its chapter makes them."""
    from attnlib.corpus import word_tokens

    _, words = _model(kind)
    if kind == "lm":
        index = {w: i for i, w in enumerate(words)}
        return [index.get(w, 0) for w in word_tokens(text)]
    ids = [64 if t.lower() == "bos" else int(t) for t in text.split()]
    return ids if ids[:1] == [64] else [64, *ids]


def _attnlib_run(kind: str, ids: list[int]):
    """attnlib's logits (L, V) and weights, layers x (H, L, L)."""
    import torch

    with torch.no_grad():
        return _model(kind)[0](torch.tensor(ids), need_weights=True)


def _wait_idle(tab) -> None:
    tab.wait_for_selector("#explorer-app:not([data-busy])", state="attached")


def _set_model(tab, mode: str, text: str, temperature: float = 1.0) -> None:
    tab.select_option("#explorer-mode", mode)
    _wait_idle(tab)
    _set_temperature(tab, temperature)
    tab.fill("#explorer-sentence", text)
    _wait_idle(tab)


def _tokens(tab) -> list[int]:
    return json.loads(tab.get_attribute("#explorer-app", "data-tokens"))


def _compare_every_head(tab, weights) -> None:
    """Each layer and head, picked in turn, shows attnlib's weights (layers x (H, L, L))."""
    for layer, layer_weights in enumerate(weights):
        for head, expected in enumerate(layer_weights):
            tab.select_option("#explorer-layer", str(layer))
            tab.select_option("#explorer-head", str(head))
            caption = tab.text_content("#explorer-caption")
            assert f"layer {layer}, head {head}" in caption, caption
            _compare(tab, None, expected, MODEL_TOLERANCE)


@pytest.mark.parametrize(("kind", "text"), MODEL_PROMPTS)
def test_explorer_models_match_attnlib(explorer, kind, text):
    """The page's forward pass (all logits and weights), every head's table, its ten next words."""
    import torch

    ids = _model_ids(kind, text)
    logits, weights = _attnlib_run(kind, ids)
    page = explorer.evaluate(
        """async ([kind, ids]) => {
        const model = await AttentionExplorer.load(kind);
        const out = AttentionExplorer.forward(model, ids, true);
        return {logits: out.logits.map(r => Array.from(r)),
                weights: out.weights.map(l => l.map(h => h.map(r => Array.from(r))))};
    }""",
        [kind, ids],
    )
    close = functools.partial(torch.testing.assert_close, rtol=0, atol=MODEL_TOLERANCE)
    close(torch.tensor(page["logits"], dtype=torch.float64), logits.double())
    close(torch.tensor(page["weights"], dtype=torch.float64), torch.stack(weights).double())
    _set_model(explorer, kind, text)
    assert _tokens(explorer) == ids
    model, words = _model(kind)
    labels = [row["word"] for row in _table(explorer)]
    assert len(labels) == len(ids)
    assert _each(explorer, "#explorer-layer option") == [str(i) for i in range(model.num_layers)]
    heads = range(model.blocks[0].num_heads)
    assert _each(explorer, "#explorer-head option") == [str(h) for h in heads]
    _compare_every_head(explorer, weights)
    top = torch.softmax(logits[-1].double(), dim=-1).topk(10)
    shown = explorer.evaluate("""() => [...document.querySelectorAll('#explorer-next li')]
        .map(li => ({word: li.dataset.word, prob: +li.dataset.prob, text: li.textContent}))""")
    assert [item["word"] for item in shown] == [words[i] for i in top.indices.tolist()]
    for item, p in zip(shown, top.values.tolist()):
        assert abs(item["prob"] - p) <= MODEL_TOLERANCE, (item, p)
        assert f"{100 * p:.1f}%" in item["text"]
    unknown = [w for w in labels if kind == "lm" and w not in words]
    message = explorer.locator("#explorer-message")
    if unknown:
        assert message.is_visible() and all(f"'{w}'" in message.text_content() for w in unknown)
    else:
        assert not message.is_visible(), message.text_content()


def _generate(tab, count: int, temperature: float, top_k: int = 0, seed: int = 0) -> str:
    _set_temperature(tab, temperature)
    tab.fill("#explorer-topk", str(top_k))
    tab.fill("#explorer-seed", str(seed))
    tab.fill("#explorer-count", str(count))
    tab.click("#explorer-generate")
    _wait_idle(tab)  # one token at a time, the page drawn between two
    return tab.input_value("#explorer-sentence")


def test_explorer_generates_without_freezing_the_page(page, site_url):
    """60 words were one block of 1.3 s: now the page shows its progress, disables the button,
    and no task (a step, the final 61 x 61 map) blocks it long: 250 ms quiet, < 600 ms busy."""
    tab = _open_explorer(page, site_url)
    _set_model(tab, "lm", "I")
    tab.evaluate("""() => { window.longTasks = [];
        new PerformanceObserver(list => window.longTasks.push(
            ...list.getEntries().map(e => e.duration))).observe({type: 'longtask'}); }""")
    tab.fill("#explorer-count", "60")
    _set_temperature(tab, 0)
    tab.click("#explorer-generate")
    assert tab.get_attribute("#explorer-app", "data-busy") == "true"
    assert tab.is_disabled("#explorer-generate")
    tab.locator("#explorer-message").filter(has_text="of 60").wait_for()
    _wait_idle(tab)
    assert not tab.is_disabled("#explorer-generate")
    longest = max(tab.evaluate("() => window.longTasks"), default=0)
    assert longest < 600, f"the page was blocked for {longest:.0f} ms in one task"
    assert len(tab.input_value("#explorer-sentence").split()) > 40
    assert_clean(tab)


@pytest.mark.parametrize(("kind", "text"), [LM, INDUCTION])
def test_explorer_generates_greedily_as_attnlib(explorer, kind, text):
    import torch

    _set_model(explorer, kind, text)
    out = _generate(explorer, 8, 0.0)
    assert explorer.text_content("#explorer-temperature-value").startswith("0.00")
    ids = torch.tensor(_model_ids(kind, text))
    expected = _model(kind)[0].generate(ids, 8, temperature=0).tolist()
    assert _model_ids(kind, out) == expected, out
    assert _tokens(explorer) == expected
    assert len(_table(explorer)) == len(expected)  # the heatmap follows the new text
    _, weights = _attnlib_run(kind, expected)
    layer, head = (int(explorer.input_value(f"#explorer-{n}")) for n in ("layer", "head"))
    _compare(explorer, None, weights[layer][head])


def test_explorer_samples_repeatably_within_the_top_k(explorer):
    import torch

    texts = {}
    for seed in (7, 7, 8):
        _set_model(explorer, "lm", LM[1])
        texts.setdefault(seed, []).append(_generate(explorer, 6, 1.5, top_k=5, seed=seed))
    assert texts[7][0] == texts[7][1], "the same seed must give the same words"
    assert texts[7][0] != texts[8][0], "another seed should give other words"
    ids = _model_ids("lm", texts[7][0])
    start = len(_model_ids("lm", LM[1]))
    assert len(ids) == start + 6
    with torch.no_grad():
        logits, _ = _model("lm")[0](torch.tensor(ids))
    for t in range(start, len(ids)):  # every drawn word among the 5 most likely there
        assert ids[t] in logits[t - 1].topk(5).indices.tolist(), (t, texts[7][0])


def test_explorer_random_repeated_sequence_shows_the_induction_stripe(explorer):
    _set_model(explorer, "induction", "1 2 3")
    explorer.click("#explorer-random")
    _wait_idle(explorer)
    tokens = explorer.input_value("#explorer-sentence").split()
    T = len(tokens) // 2
    assert T >= 4 and tokens[:T] == tokens[T:], tokens
    _, weights = _attnlib_run("induction", _model_ids("induction", " ".join(tokens)))
    explorer.select_option("#explorer-layer", "1")
    explorer.select_option("#explorer-head", "1")
    rows = _compare(explorer, ["BOS", *tokens], weights[1][1])
    for t in range(T + 1, 2 * T + 1):  # the second copy looks at the token after the first
        values = [float(v) for v in rows[t]["values"]]
        if len(set(tokens[:T])) == T:  # (a token twice in the copy has two candidates)
            assert max(range(len(values)), key=values.__getitem__) == t - T + 1, (t, values)


@pytest.mark.parametrize("width", [1280, pytest.param(390, marks=on_a_phone)])
def test_a_link_with_settings_lands_on_the_explorer(page, site_url, width):
    """A heatmap's link opens the page with the map in view (it was 1,859 px down on a phone)."""
    tab = _open_explorer(page, site_url, urlencode({"mode": "dot", "sentence": SENTENCE, "T": 2}))
    tab.wait_for_timeout(300)  # late layout (fonts, MathJax) must not push it away
    top = tab.locator("#explorer-weights").bounding_box()["y"]
    height = tab.evaluate("() => innerHeight")
    assert 0 <= top < height, f"the map is not in view at {width} px: {top}, {height}"
    assert tab.evaluate("() => scrollY") > 0


def test_explorer_modes_start_from_their_own_defaults(page, site_url):
    """It starts on chapter 3's weights. A model mode forces the mask and may set T = 0; back
    in a GloVe mode both are as they were (ship's weight was 0.73, not 0.55), and vice versa."""
    tab = _open_explorer(page, site_url)
    words, expected = expected_weights(SENTENCE, "dot")
    rows = _compare(tab, words, expected)
    assert round(float(rows[6]["values"][6]), 2) == 0.55  # ship on itself, as in chapter 3
    assert round(float(rows[6]["values"][10]), 2) == 0.13  # ship on crew
    _set_model(tab, *LM)
    assert tab.is_checked("#explorer-causal")
    _generate(tab, 3, 0.0)  # greedy
    assert float(tab.input_value("#explorer-temperature")) == 0.0
    tab.select_option("#explorer-mode", "dot")
    assert not tab.is_checked("#explorer-causal")
    assert float(tab.input_value("#explorer-temperature")) == 1.0
    assert tab.input_value("#explorer-sentence") == SENTENCE
    _compare(tab, words, expected)
    tab.select_option("#explorer-mode", "lm")
    _wait_idle(tab)
    assert float(tab.input_value("#explorer-temperature")) == 0.0
    assert tab.is_checked("#explorer-causal")
    assert_clean(tab)


# ---- the explorer's MiniLM mode: a trained encoder's stored heads ---------------------------
# all-MiniLM-L6-v2's weights, computed at build time (tests/test_explorer_data.py), only shown.


def _set_minilm(tab, sentence: int, layer: int, head, mode: str = "minilm") -> None:
    """The MiniLM (or Gemma) mode: stored sentence (from 0), layer and head (from 1, or
    "mean")."""
    tab.select_option("#explorer-mode", mode)
    _wait_idle(tab)
    tab.select_option("#explorer-encoder-sentence", str(sentence))
    tab.select_option("#explorer-layer", str(layer))
    tab.select_option("#explorer-head", str(head))


def _compare_stored(tab, tokens: list[str], expected) -> None:
    """The table holds the stored weights exactly (v / 1000), its rows and columns the tokens."""
    keys = _each(tab, "#explorer-weights tr:first-child td", "e.dataset.key")
    assert keys == tokens, "the columns are labelled with the tokens"
    _compare(tab, tokens, expected, 1e-12)


@pytest.mark.parametrize("how", ["served", "file"])
def test_explorer_minilm_shows_the_stored_heads_with_their_tokens(page, base_urls, how):
    import explorer_data

    script = (SITE / "_static" / "explorer" / "minilm-explorer.js").read_bytes()
    key, data = explorer_data.from_script(script)
    assert key == "minilm"
    header, weights = explorer_data.decode_weights(data)  # weights: (layers, H, L, L)
    sentences = header["sentences"]
    query = "mode=minilm&sentence=3&layer=2&head=5"  # the sentence by its number, from 1
    tab = _open_explorer(page, base_urls[how], query)
    _wait_idle(tab)
    tab.wait_for_selector("#explorer-weights td")
    assert tab.input_value("#explorer-encoder-sentence") == "2"
    _compare_stored(tab, sentences[2]["tokens"], weights[2][1, 4])
    texts = _each(tab, "#explorer-encoder-sentence option", "e.textContent")
    assert texts == [s["text"] for s in sentences]
    assert _each(tab, "#explorer-layer option") == [str(i) for i in range(1, 7)]
    assert _each(tab, "#explorer-head option") == [*(str(h) for h in range(1, 13)), "mean"]
    assert not tab.locator("#explorer-sentence").is_visible()  # no typed text here
    assert not tab.locator("#explorer-temperature").is_visible()
    for sentence, layer, head in [(2, 3, 7), (3, 6, 12), (1, 1, 1), (0, 5, 2)]:
        _set_minilm(tab, sentence, layer, head)
        tokens = sentences[sentence]["tokens"]
        assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
        _compare_stored(tab, tokens, weights[sentence][layer - 1, head - 1])
        assert f"layer {layer}, head {head}" in tab.text_content("#explorer-caption")
        assert not tab.locator("#explorer-message").is_visible()
    # the mean of the layer's heads, then a head picked from the layer's small maps
    _set_minilm(tab, 2, 4, "mean")
    _compare_stored(tab, sentences[2]["tokens"], weights[2][3].mean(axis=0))
    thumbs = tab.locator("#explorer-heads button")
    assert thumbs.count() == 12
    thumbs.nth(8).click()
    assert tab.input_value("#explorer-head") == "9"
    assert tab.get_attribute("#explorer-heads button[data-head='9']", "aria-pressed") == "true"
    _compare_stored(tab, sentences[2]["tokens"], weights[2][3, 8])
    # the other modes are unchanged: back to the GloVe weights of the typed sentence
    tab.select_option("#explorer-mode", "dot")
    assert tab.input_value("#explorer-sentence") == SENTENCE
    assert tab.locator("#explorer-temperature").is_visible()
    assert not tab.locator("#explorer-heads").is_visible()
    _compare(tab, *expected_weights(SENTENCE, "dot"))
    assert_clean(tab)


# ---- the explorer's Gemma mode: a trained decoder's stored heads, <bos> and all -----------
# Gemma 3 270M's weights, computed at build time (tests/test_explorer_data.py), only shown.


@pytest.mark.parametrize("how", ["served", "file"])
def test_explorer_gemma_shows_the_stored_decoder_heads(page, base_urls, how):
    import explorer_data

    script = (SITE / "_static" / "explorer" / "gemma-explorer.js").read_bytes()
    key, data = explorer_data.from_script(script)
    assert key == "gemma"
    header, weights = explorer_data.decode_weights(data)  # weights: (18, 4, L, L)
    sentences = header["sentences"]
    tab = _open_explorer(page, base_urls[how], "mode=gemma&sentence=1&layer=6&head=2")
    _wait_idle(tab)
    tab.wait_for_selector("#explorer-weights td")
    assert tab.input_value("#explorer-encoder-sentence") == "0"
    tokens = sentences[0]["tokens"]
    assert tokens[0] == "<bos>" and tokens[1] == "I"
    _compare_stored(tab, tokens, weights[0][5, 1])
    assert _each(tab, "#explorer-encoder-sentence option", "e.textContent") == [
        s["text"] for s in sentences
    ]
    assert _each(tab, "#explorer-layer option") == [str(i) for i in range(1, 19)]
    kinds = ["global" if i % 6 == 0 else "local" for i in range(1, 19)]
    labels = [f"layer {i} ({kind})" for i, kind in enumerate(kinds, 1)]
    assert _each(tab, "#explorer-layer option", "e.textContent") == labels
    assert _each(tab, "#explorer-head option") == ["1", "2", "3", "4", "mean"]
    caption = tab.text_content("#explorer-caption")
    assert "Gemma 3 270M: layer 6, head 2, a global layer" in caption and "causal" in caption
    assert not tab.locator("#explorer-sentence").is_visible()  # no typed text here
    assert not tab.locator("#explorer-temperature").is_visible()
    for sentence, layer, head in [(3, 1, 1), (2, 18, 4), (1, 7, 3)]:
        _set_minilm(tab, sentence, layer, head, mode="gemma")
        _compare_stored(tab, sentences[sentence]["tokens"], weights[sentence][layer - 1, head - 1])
        rows = _table(tab)
        above = [float(v) for i, row in enumerate(rows) for v in row["values"][i + 1 :]]
        assert above and not any(above), "causal: every weight above the diagonal is 0"
        kind = "global" if layer % 6 == 0 else "local"
        assert f"layer {layer}, head {head}, a {kind} layer" in tab.text_content(
            "#explorer-caption"
        )
    _set_minilm(tab, 3, 2, "mean", mode="gemma")
    _compare_stored(tab, sentences[3]["tokens"], weights[3][1].mean(axis=0))
    assert tab.locator("#explorer-heads button").count() == 4
    # MiniLM beside it: the same sentence stays picked, with MiniLM's own layers and tokens
    tab.select_option("#explorer-mode", "minilm")
    _wait_idle(tab)
    assert tab.input_value("#explorer-encoder-sentence") == "3"
    assert _each(tab, "#explorer-layer option") == [str(i) for i in range(1, 7)]
    assert _each(tab, "#explorer-weights tr th", "e.textContent")[0] == "[CLS]"
    tab.select_option("#explorer-mode", "gemma")
    assert _each(tab, "#explorer-weights tr th", "e.textContent")[0] == "<bos>"
    assert_clean(tab)


# The explorer's box, and its texts and heatmap digits (`cells`) of WCAG contrast below 4.5:1.
FIT_REPORT = r"""() => {
    const parse = c => (c.match(/[\d.]+/g) || []).map(Number);
    const lum = rgb => {
        const [r, g, b] = rgb.slice(0, 3).map(v => { v /= 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const ratio = (a, b) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const background = el => {
        for (; el; el = el.parentElement) {
            const c = parse(getComputedStyle(el).backgroundColor);
            if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
        }
        return [255, 255, 255];
    };
    const contrast = el => ratio(lum(parse(getComputedStyle(el).color)), lum(background(el)));
    const page = background(document.body);
    const cell = td => {  // a cell's colour drawn over the page
        const [r, g, b, a = 1] = parse(getComputedStyle(td).backgroundColor);
        const drawn = [r, g, b].map((c, i) => page[i] * (1 - a) + c * a);
        return ratio(lum(parse(getComputedStyle(td).color)), lum(drawn));
    };
    const app = document.getElementById('explorer-app'), box = app.getBoundingClientRect();
    const texts = [...app.querySelectorAll('label, #explorer-weights th, #explorer-next li span, '
        + '#explorer-caption, select, input, button')].filter(el => el.offsetParent !== null
        && (el.textContent.trim() !== '' || el.matches('select, input')));
    return {
        innerWidth: window.innerWidth, pageWidth: document.documentElement.scrollWidth,
        appRight: box.right, appLeft: box.left, appOverflow: app.scrollWidth - app.clientWidth,
        lowContrast: texts.filter(el => contrast(el) < 4.5)
            .map(el => `${el.tagName} '${el.textContent.trim().slice(0, 30)}'`),
        cells: [...document.querySelectorAll('#explorer-weights td')].map(cell)
            .filter(ratio => ratio < 4.5),
    };
}"""


@on_a_phone
@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("how", ["served", "file"])
def test_explorer_fits_a_phone_and_reads_in_both_themes(page, base_urls, how, dark):
    """In every mode it fits the width, and its texts and heatmap digits (white on a mid-blue
    cell were 2.56:1) contrast 4.5:1 with their background, at T = 0.3, 3 and 1. Served, the page
    with every mode's data loads at most 10 MB, the explorer's files (script, style, data) 8 MB."""
    sizes: dict[str, int] = {}
    page.on("requestfinished", lambda r: sizes.__setitem__(r.url, r.sizes()["responseBodySize"]))
    tab = _open_explorer(page, base_urls[how], dark=dark)
    if dark:
        assert tab.evaluate("() => document.documentElement.dataset.theme") == "dark"
    theme = "dark" if dark else "light"
    modes = [("dot", 0.3), ("dot", 3.0), ("dot", 1.0), LM, INDUCTION, ("minilm", ""), ("gemma", "")]
    for mode, text in modes:
        if mode == "dot":
            _set(tab, SENTENCE, mode, temperature=text)
        elif mode in ("minilm", "gemma"):  # the longest stored sentence, every head of its layer
            _set_minilm(tab, 3, 1, 1, mode=mode)
        else:
            _set_model(tab, mode, text)
            _generate(tab, 20, 0.0)  # a long text: the table scrolls, the page does not
        report = tab.evaluate(FIT_REPORT)
        assert report["pageWidth"] <= report["innerWidth"], f"{mode}: page wider: {report}"
        assert report["appLeft"] >= 0 and report["appRight"] <= report["innerWidth"], report
        assert report["appOverflow"] <= 1, f"{mode}: the explorer overflows: {report}"
        assert not report["lowContrast"], f"{mode}, {theme}: hard to read: {report['lowContrast']}"
        assert not report["cells"], f"{mode} {text}, {theme}: digits hard to read: {report}"
        _shot(tab.locator("#explorer-app"), f"explorer-390-{how}-{theme}-{mode}")
    if how == "served":
        tab.wait_for_load_state("networkidle")
        names = {urlsplit(url).path.rsplit("/", 1)[-1] for url in sizes}
        keys = ("glove", "lm", "induction", "minilm", "gemma")
        assert names >= {f"{key}-explorer.js" for key in keys}
        data = {url: n for url, n in sizes.items() if "/_static/explorer/" in url}
        assert sum(data.values()) <= 8_000_000, f"the explorer's files: {data}"
        assert sum(sizes.values()) <= 10_000_000, f"the page loads {sum(sizes.values()):,} bytes"
    assert_clean(tab)


# ---- every printed heatmap links to the explorer, on its map (issue 24, point 6) ----------

# An explorer link of the built HTML: its href and its text (tags inside it dropped).
LINK = re.compile(r'<a class="[^"]*\bexplorer-link\b[^"]*" href="([^"]*)"[^>]*>(.*?)</a>', re.S)


def explorer_links() -> list[dict]:
    """Every explorer link of the built book: page, index on the page, href, text, settings."""
    links = []
    for page in PAGES:
        html = SITE / f"{page}.html"
        found = LINK.findall(html.read_text(encoding="utf-8")) if html.exists() else []
        for index, (href, text) in enumerate(found):
            href, text = unescape(href), unescape(re.sub(r"<[^>]+>", "", text))
            settings = {key: values[0] for key, values in parse_qs(urlsplit(href).query).items()}
            links.append(dict(page=page, index=index, href=href, text=text, settings=settings))
    return links


LINKS = explorer_links()
LINK_PAGES = sorted({link["page"] for link in LINKS})


def test_the_book_links_its_heatmaps_to_the_explorer():
    """Enough links, every mode linked; each with a mode, a sentence, a text; to the explorer."""
    needs_site()
    assert len(LINKS) >= 20, f"only {len(LINKS)} explorer links; the book had 20"
    missing = {*GLOVE_MODES, *MODEL_MODES} - {link["settings"].get("mode") for link in LINKS}
    assert not missing, f"no link opens the explorer's modes {sorted(missing)}"
    for link in LINKS:
        settings, where = link["settings"], f"{link['page']} link {link['index']}"
        assert urlsplit(link["href"]).path == "attention_explorer.html", where
        assert link["page"].startswith("chapters/"), f"{where}: a relative link outside chapters/"
        assert settings.get("mode") in GLOVE_MODES + MODEL_MODES, f"{where}: {settings}"
        assert settings.get("sentence", "").strip(), f"{where}: no sentence in {link['href']}"
        assert set(settings) <= {"mode", "sentence", "T", "causal", "layer", "head"}, where
        assert link["text"].strip(), f"{where}: a link without text"


def _check_explorer(tab, settings: dict) -> None:
    """The explorer in `tab` shows the link's settings and attnlib's numbers."""
    assert parse_qs(urlsplit(tab.url).query).get("mode") == [settings["mode"]]
    _ready(tab)
    mode, sentence = settings["mode"], settings["sentence"]
    temperature, causal = float(settings.get("T", 1)), settings.get("causal", "0") != "0"
    _wait_idle(tab)
    assert tab.input_value("#explorer-mode") == mode
    assert tab.input_value("#explorer-sentence") == sentence
    if mode in MODEL_MODES:
        tab.wait_for_selector("#explorer-next li", state="attached")
    assert not tab.locator("#explorer-message").is_visible(), tab.text_content("#explorer-message")
    if mode in GLOVE_MODES:
        assert float(tab.input_value("#explorer-temperature")) == temperature
        assert tab.is_checked("#explorer-causal") == causal
        _compare(tab, *expected_weights(sentence, mode, temperature, causal))
        return
    # the heatmap the link names (?layer=&head=, default 0) is the one shown on arrival
    assert tab.input_value("#explorer-layer") == settings.get("layer", "0")
    assert tab.input_value("#explorer-head") == settings.get("head", "0")
    assert _tokens(tab) == _model_ids(mode, sentence)
    _compare_every_head(tab, _attnlib_run(mode, _model_ids(mode, sentence))[1])


def _link(tab, where: str, index: int):
    """Link `index` of the page in `tab`, visible, after a figure; its href."""
    link = tab.locator("a.explorer-link").nth(index)
    # A link follows its figure: the figure is among the three blocks before the link's paragraph
    # (a sentence reading the map, or another head's link, may come between), no heading between.
    report = link.evaluate("""(a) => {
        let before = a.closest('p, li, div'), afterFigure = false;
        for (let i = 0; i < 3 && (before = before && before.previousElementSibling); i++) {
            if (/^H[1-6]$/.test(before.tagName)) break;
            afterFigure ||= before.matches('figure, img') || !!before.querySelector('img');
        }
        return {href: a.href, afterFigure,
                visible: a.offsetParent !== null && a.getBoundingClientRect().width > 0};
    }""")
    assert report["visible"], f"link {index} of {where} is not visible"
    assert report["afterFigure"], f"link {index} of {where} does not follow a figure"
    return link, report["href"]


def _follow(tab, url: str, index: int, settings: dict) -> None:
    """Open a chapter page, click its explorer link number `index`, check the explorer."""
    tab.goto(url)
    link, _ = _link(tab, url, index)
    with tab.expect_navigation(wait_until="load"):
        link.click()
    _check_explorer(tab, settings)


@pytest.mark.parametrize("chapter", LINK_PAGES, ids=[p.split("/")[-1] for p in LINK_PAGES])
def test_explorer_links_open_the_printed_maps(page, site_url, chapter):
    """The first link is clicked; the others are opened by their address in the same tab."""
    links = [link for link in LINKS if link["page"] == chapter]
    url = f"{site_url}/{chapter}.html"
    _follow(page, url, links[0]["index"], links[0]["settings"])
    page.goto(url)
    hrefs = [_link(page, url, link["index"])[1] for link in links[1:]]
    for link, href in zip(links[1:], hrefs):
        page.goto(href)
        _check_explorer(page, link["settings"])
    assert_clean(page)


FILE_LINKS = [  # the first GloVe link, the first of each model
    next((k for k in LINKS if k["settings"].get("mode") in modes), None)
    for modes in (GLOVE_MODES, ["lm"], ["induction"])
]


@pytest.mark.parametrize("link", [k for k in FILE_LINKS if k], ids=lambda k: k["settings"]["mode"])
def test_explorer_link_works_opened_as_a_file(page, link):
    """A GloVe link and one of each model, clicked in pages opened as files (file://)."""
    _follow(page, (SITE / f"{link['page']}.html").as_uri(), link["index"], link["settings"])
    assert urlsplit(page.url).scheme == "file"
    assert_clean(page)


# ---- search ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["served", "file"])
def test_search_quotes_the_article_or_says_why_not(page, base_urls, how):
    """Served, each result quotes its page's text around the term, not the sidebar or TeX source;
    from file:// (no excerpts) the results say why and link to the index (180 errors were)."""
    page.goto(f"{base_urls[how]}/search.html?q=softmax")
    page.wait_for_selector("#search-results ul li")
    page.wait_for_timeout(1500)  # the excerpts are fetched after the list
    assert page.locator("#search-results ul li").count() >= 5
    note = page.locator(".search-offline-note")
    assert note.is_visible() == (how == "file"), "the note is shown from file:// only"
    if how == "file":
        assert "open as files" in note.text_content()
        href = note.locator("a").get_attribute("href")
        assert href.endswith("genindex.html") and (SITE / "genindex.html").exists()
    else:
        excerpts = _each(page, "#search-results p.context", "e.textContent")
        assert len(excerpts) >= 5, excerpts
        for text in excerpts:
            assert "\\(" not in text and "\\mathrm" not in text and "\\frac" not in text, text
        assert sum("softmax" in text.lower() for text in excerpts) >= len(excerpts) // 2
    assert_clean(page)


# ---- the API reference --------------------------------------------------------------------

API_PAGE = "chapters/api"
# Methods the chapters use, by the id autodoc gives each entry's <dt> (the test checks every name
# of attnlib.__all__, and of its modules' __all__, too).
API_METHODS = """Embeddings.matrix Embeddings.most_similar SelfAttention.forward
    MultiHeadAttention.forward NaiveMultiHeadAttention.forward GloVe.get_vecs_by_tokens
    tokenizer.SentenceVocabulary.encode tokenizer.SentenceVocabulary.decode""".split()
# The modules the book presents: automodule gives each an anchor id "module-<name>".
API_MODULES = [
    f"attnlib.{name}"
    for name in """embeddings similarity attention multihead convert efficient display positions
    decoding tokenizer""".split()
]
# A name's "Used in" link to a chapter, and the chapter's link to it (file names: stable).
API_USED_IN = {
    "attnlib.softmax": "03_scaled_dot_product_attention.html",
    "attnlib.scaled_dot_product_attention": "03_scaled_dot_product_attention.html",
    "attnlib.SelfAttention": "04_learned_projections.html",
    "attnlib.NaiveMultiHeadAttention": "05_multihead_attention.html",
    "attnlib.convert.from_torch": "06_pytorch_multihead_attention.html",
    "attnlib.convert.from_keras": "07_keras_multihead_attention.html",
    "attnlib.efficient.tiled_attention": "08_efficient_attention.html",
    "attnlib.positions.alibi_bias": "09_positions.html",
    "attnlib.decoding.KVCache": "11_inference.html",
}


def test_api_reference_lists_every_public_name(page, site_url):
    import inspect

    import attnlib

    page.goto(f"{site_url}/{API_PAGE}.html")
    for name in API_METHODS:
        assert page.locator(f'dt.sig-object[id="attnlib.{name}"]').count() == 1, f"no {name}"
    for module in API_MODULES:
        assert page.locator(f'[id="module-{module}"]').count() == 1, f"no module {module}"
        anchor = f'[id="module-{module}"]'  # the section's id, or a target in it
        used = page.locator(f"section:is({anchor}, :has(> {anchor})) > div.api-used-in")
        assert used.count() == 1, f"module {module} has no 'Used in' line"
    ids = []  # of attnlib.__all__, and of its modules' __all__ not public at the top
    for name, obj in ((name, getattr(attnlib, name)) for name in attnlib.__all__):
        ids.append(f"module-attnlib.{name}" if inspect.ismodule(obj) else f"attnlib.{name}")
        for member in obj.__all__ if inspect.ismodule(obj) else []:
            if not (member in attnlib.__all__ and getattr(attnlib, member) is getattr(obj, member)):
                ids.append(f"attnlib.{name}.{member}")
    missing = [i for i in ids if page.locator(f'[id="{i}"]').count() != 1]
    assert not missing, f"public names missing from the API page: {missing}"
    # Every module, class, function and constant (not methods) says where it is used.
    for name in [i for i in ids if not i.startswith("module-")]:
        used = page.locator(f'dt[id="{name}"] + dd > div.api-used-in')
        assert used.count() == 1, f"{name} has no 'Used in' line"
        assert used.inner_text().startswith("Used in:"), used.inner_text()
    for name, chapter in API_USED_IN.items():
        link = page.locator(f'dt[id="{name}"] + dd > div.api-used-in a[href="{chapter}"]')
        assert link.count() == 1, f"{name}: no 'Used in' link to {chapter}"
        assert re.fullmatch(r"chapter \d+", link.inner_text()), link.inner_text()
    assert_clean(page)


def test_chapters_link_names_to_the_api_reference():
    """Chapters link attnlib names to their API entries (_ext/api_usage.py's LinkMentions)."""
    ids = set(re.findall(r'\bid="([^"]+)"', (SITE / "chapters" / "api.html").read_text()))
    for name, chapter in API_USED_IN.items():  # a chapter that uses a name links it
        html = (SITE / "chapters" / chapter).read_text(encoding="utf-8")
        assert f'href="api.html#{name}"' in html, f"{chapter} does not link {name} to the API page"
    broken = []
    for html in sorted((SITE / "chapters").glob("*.html")):
        for target in re.findall(r'href="api\.html#([^"]+)"', html.read_text(encoding="utf-8")):
            if target not in ids:
                broken.append(f"{html.name} -> api.html#{target}")
    assert not broken, f"links to the API page with no such entry: {broken}"
