"""The built website on a phone (390 px wide) and opened as files, in Chromium, offline.

Runs after the book is built, as tests/test_site.py does (whose list of pages it uses; the
server and browser are the fixtures of tests/site_browser.py). Every page of `_toc.yml` is
opened at 390 x 844 CSS px, 3 device pixels per CSS pixel (a phone), served from
`_build/html` on 127.0.0.1; three of them (the front page, chapter 2 and the explorer) also
as `file://` URLs (a reader who opens the built book from disk). On each:

* no page is wider than the screen (code, wide tables and equations scroll inside their
  own box, the page does not);
* the menu button opens the book's navigation, and the contents button the page's
  contents, each as a dialog that Escape closes (pydata-sphinx-theme #2451: see
  `_static/sidebar-toggles.js`);
* no word is broken inside a table cell;
* every image has a real alt text (its figure's caption: `_ext/figure_alt.py`), not its
  file path.

At 1280 px (tests/test_site.py checks every page's tables and width there) the menu button
hides and shows the navigation, and "Live Code" says, offline, that it needs the network
(`_static/thebe-offline.js`).

Screenshots: `_build/screenshots/phone/<page>.png` (the top of each served page) and
`intro.menu.png` (the navigation open).
"""

from __future__ import annotations

import re

import pytest

pytest.register_assert_rewrite("site_browser")  # its assertions explain themselves
from site_browser import PHONE, SCREENSHOTS, SITE  # noqa: E402
from test_site import (  # noqa: E402
    BROKEN_WORDS,
    EXPLORER_PAGE,
    LOAD_IMAGES,
    PAGES,
    WIDTH_REPORT,
    source_of,
)

pytest_plugins = ["site_browser"]  # the browser, its tabs and the server (pytest-playwright)
on_a_phone = pytest.mark.browser_context_args(**PHONE)
PHONE_SHOTS = SCREENSHOTS / "phone"
MODES = ["served", "file"]
# Opened as files: the front page, a chapter with math, figures and tables, and the explorer
# (the layout is the same as served; these catch what only file:// changes: paths, scripts).
FILE_PAGES = [p for p in PAGES if p in ("intro", "chapters/02_cosine_similarity", EXPLORER_PAGE)]


def _open(tab, base: str, page: str):
    """`tab` on `page` (at `base`: the server's URL or the site's file:// URL), loaded, its
    equations typeset and its fonts ready."""
    tab.goto(f"{base}/{page}.html")
    tab.evaluate(
        """() => Promise.race([
            new Promise(done => setTimeout(done, 5000)),
            (window.MathJax && MathJax.startup && MathJax.startup.promise
                ? MathJax.startup.promise : Promise.resolve()).then(() => document.fonts.ready),
        ]).then(() => true)"""
    )
    return tab


@pytest.fixture(scope="session")
def base_urls(site_url):
    """The site's root, served and as files."""
    return {"served": site_url, "file": SITE.resolve().as_uri()}


# Words of table cells drawn on more than one line, as "cell text: word". A word is what
# lies between spaces, hyphens and slashes ("self-" / "attention" is a fine line break).
BAD_ALTS = r"""() => [...document.querySelectorAll('article img')]
    .map(img => ({src: img.getAttribute('src'), alt: (img.getAttribute('alt') || '').trim()}))
    .filter(({src, alt}) => alt.length < 10 || /\.(png|jpe?g|gif|svg|webp)$/i.test(alt)
        || alt.includes('_images/') || alt === src)
    .map(({src, alt}) => `${src}: alt="${alt}"`)"""

# What sticks out of the screen: the page's width, and the widest elements beyond it.


def _dialog_opened(tab, button: str, dialog: str) -> dict:
    """Click the visible `button` of the article's header; report whether `dialog` opened
    with links in it, then close it with Escape."""
    tab.locator(button).click()
    tab.wait_for_function(f"() => document.querySelector('{dialog}').open", timeout=3_000)
    report = tab.evaluate(
        f"""() => {{
            const d = document.querySelector('{dialog}'), r = d.getBoundingClientRect();
            const links = [...d.querySelectorAll('a')].filter(a => a.offsetParent !== null);
            return {{links: links.length, width: r.width, left: r.left}};
        }}"""
    )
    return report


def _close(tab, dialog: str) -> None:
    tab.keyboard.press("Escape")
    tab.wait_for_function(f"() => !document.querySelector('{dialog}').open", timeout=3_000)


@on_a_phone
@pytest.mark.parametrize(
    ("doc", "mode"),
    [(doc, "served") for doc in PAGES] + [(doc, "file") for doc in FILE_PAGES],
)
def test_page_reads_on_a_phone(page, base_urls, doc, mode):
    tab = _open(page, base_urls[mode], doc)
    width = tab.evaluate(WIDTH_REPORT)
    assert width["scroll"] <= width["width"], (
        f"the page is {width['scroll']} px wide on a {width['width']} px screen; "
        f"sticking out: {width['culprits']}"
    )
    assert not (broken := tab.evaluate(BROKEN_WORDS)), f"words broken in table cells: {broken}"
    assert not (bad := tab.evaluate(BAD_ALTS)), f"images without a real alt text: {bad}"
    if mode == "served":
        PHONE_SHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=PHONE_SHOTS / f"{doc.replace('/', '-')}.png")

    # The menu: the book's navigation, in a dialog over the page.
    menu = ".bd-header-article .primary-toggle"
    assert tab.locator(menu).is_visible(), "no menu button on a phone"
    opened = _dialog_opened(tab, menu, "#pst-primary-sidebar-modal")
    assert opened["links"] >= len(PAGES) - 1, f"the menu shows {opened['links']} links"
    assert 0 <= opened["left"] and opened["width"] <= PHONE["viewport"]["width"], opened
    if mode == "served" and doc == "intro":  # the menu is the same on every page
        tab.screenshot(path=PHONE_SHOTS / f"{doc.replace('/', '-')}.menu.png")
    _close(tab, "#pst-primary-sidebar-modal")

    # The page's contents, on pages that have sections.
    contents = ".bd-header-article .secondary-toggle"
    if tab.locator(contents).is_visible():
        opened = _dialog_opened(tab, contents, "#pst-secondary-sidebar-modal")
        assert opened["links"] >= 1, "the page's contents show no section"
        _close(tab, "#pst-secondary-sidebar-modal")
    elif source_of(doc).suffix == ".ipynb":
        pytest.fail("no contents button on a chapter")


@pytest.mark.parametrize("mode", MODES)
def test_menu_button_collapses_the_navigation_at_1280(page, base_urls, mode):
    tab = _open(page, base_urls[mode], "chapters/06_pytorch_multihead_attention")
    sidebar = tab.locator("#pst-primary-sidebar")
    article = tab.locator("article")
    assert sidebar.is_visible()
    narrow = article.bounding_box()["width"]
    tab.locator(".bd-header-article .primary-toggle").click()
    sidebar.wait_for(state="hidden", timeout=3_000)
    tab.wait_for_timeout(500)  # the theme's transition
    assert article.bounding_box()["width"] > narrow + 100, "the text did not widen"
    assert not tab.evaluate("document.querySelector('#pst-primary-sidebar-modal').open")
    tab.locator(".bd-header-article .primary-toggle").click()
    sidebar.wait_for(state="visible", timeout=3_000)


def test_live_code_says_it_needs_the_network(page, base_urls):
    tab = _open(page, base_urls["served"], "chapters/02_cosine_similarity")
    tab.click("button[aria-label='Launch interactive content']")
    tab.locator(".dropdown-launch-buttons button[onclick*='initThebe']").click()
    button = tab.locator(".thebe-launch-button")
    button.wait_for(state="visible")
    tab.wait_for_function(
        "() => /needs the network/.test(document.querySelector('.thebe-launch-button')"
        ".textContent)",
        timeout=25_000,
    )
    text = button.text_content()
    assert "Loading thebe" not in text and re.search(r"download", text), text


# ---- sharp figures: the chapters' first cell makes inline figures 2x PNGs ---------------------


def _png_outputs(notebook) -> list[tuple[int, int, dict]]:
    """(pixel width, pixel height, metadata) of each cell's PNG output, in order."""
    import base64
    import struct

    shown = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "image/png" in output.get("data", {}):
                png = base64.b64decode(output["data"]["image/png"])
                width, height = struct.unpack(">II", png[16:24])
                shown.append((width, height, dict(output.get("metadata", {}).get("image/png", {}))))
    return shown


@on_a_phone
def test_the_general_index_fits_a_phone(page, base_urls):
    """genindex.html, the index every page links to, was 567 px wide at 390."""
    page.goto(f"{base_urls['served']}/genindex.html")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390, f"genindex.html is {width} px wide on a 390 px screen"
    assert page.locator("table.genindextable li").count() > 100  # the index is there


@on_a_phone
def test_a_tap_in_the_contents_closes_the_dialog(page, base_urls):
    """On a phone, tapping a section in the page's contents scrolls to it and closes the
    contents dialog (it stayed open over the page)."""
    tab = _open(page, base_urls["served"], "chapters/03_scaled_dot_product_attention")
    _dialog_opened(tab, ".bd-header-article .secondary-toggle", "#pst-secondary-sidebar-modal")
    tab.locator("#pst-secondary-sidebar-modal a[href^='#']").nth(2).click()
    tab.wait_for_timeout(300)
    assert not tab.evaluate("document.querySelector('#pst-secondary-sidebar-modal').open")
    assert tab.evaluate("() => scrollY") > 0, "the page did not scroll to the section"


SHRUNKEN_FIGURES = r"""() => [...document.querySelectorAll('article img')]
    .filter(img => img.naturalWidth > 0)
    .map(img => {
        // a 2x ("retina") PNG declares its size in CSS pixels; others are drawn 1:1
        const natural = Number(img.getAttribute('width')) || img.naturalWidth;
        const link = img.closest('a');
        return {src: img.getAttribute('src'), scale: img.getBoundingClientRect().width / natural,
                opens: !!link && link.getAttribute('href') === img.getAttribute('src')};
    })"""


@on_a_phone
@pytest.mark.parametrize(
    "doc", ["chapters/03_scaled_dot_product_attention", "chapters/cross_attention"]
)
def test_a_shrunken_figure_opens_at_full_size(page, base_urls, doc):
    """On a phone a figure drawn for the column is shown at about half its size (Fig. 3.3's
    digits were 4.5 CSS px). Every image shown below 80 % of its size is a link to its own
    file (Sphinx's image-reference), which the browser shows at full size and lets the reader
    zoom (digits of 8 pt are 11 CSS px there)."""
    tab = _open(page, base_urls["served"], doc)
    tab.evaluate(LOAD_IMAGES)  # every image, the lazy ones too
    figures = tab.evaluate(SHRUNKEN_FIGURES)
    shrunken = [f for f in figures if f["scale"] < 0.8]
    assert shrunken, "no figure is shrunken on a phone: the test checks nothing"
    closed = [f["src"] for f in shrunken if not f["opens"]]
    assert not closed, f"shrunken figures that do not open at full size: {closed}"
    href = shrunken[0]["src"]
    response = tab.request.get(f"{base_urls['served']}/{doc.rsplit('/', 1)[0]}/{href}")
    assert response.ok and response.headers["content-type"].startswith("image/")
