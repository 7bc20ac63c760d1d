"""Every printed heatmap of a sentence links to the explorer with its sentence and mode filled in.

Issue 24, point 6: after each heatmap whose numbers the in-page explorer reproduces (GloVe
cosines and scaled dot products, with a temperature or the causal mask, the training chapter's
two trained heads, the Odyssey language model, the induction model), the chapter has a link
such as ``<a class="explorer-link" href="attention_explorer.html?mode=dot&sentence=...">``.
This file finds every ``a.explorer-link`` of the built book (``_build/html``) and, in headless
Chromium with the network off (the fixtures and helpers of ``test_site.py``):

* checks that the link follows a figure and is visible;
* clicks it on its chapter's page, as a reader does, and checks that the explorer starts with
  the link's mode in ``select#explorer-mode``, its sentence in ``#explorer-sentence``, and its
  temperature ``T`` and ``causal`` setting, without an unknown-word message;
* in the GloVe modes, compares the page's table with the weights attnlib computes for that
  sentence, mode, temperature and mask (1e-3, as ``test_site.py``); in the model modes, checks
  the tokens and compares the table of every layer and head with attnlib's weights (1e-4);
* clicks a GloVe link and a model link on pages opened as files (``file://``).

There must be at least ``MIN_LINKS`` links, and every mode of the explorer must be linked.
Run after the book is built; without Chromium, Playwright or a built site the browser tests
skip (or fail under CI), as in ``test_site.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import pytest
import test_site
from test_site import (
    EXPLORER_PAGE,
    MODEL_TOLERANCE,
    PAGES,
    SITE,
    PageVisit,
    _attnlib_run,
    _compare,
    _model_ids,
    _table,
    _unavailable,
    _wait_idle,
    expected_weights,
)

browser = test_site.browser  # the fixtures of the site test: Chromium, offline
site_url = test_site.site_url  # the built site, served on 127.0.0.1

MIN_LINKS = 20  # the links of the book when this test was written (issue 24, point 6)
GLOVE_MODES = ("dot", "cosine", "head0", "head1")
MODEL_MODES = ("lm", "induction")


class _LinkParser(HTMLParser):
    """The href and the text of every <a class="explorer-link"> of a page, in order."""

    def __init__(self):
        super().__init__()
        self.links: list[dict] = []
        self._open: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and "explorer-link" in (attrs.get("class") or "").split():
            self._open = {"href": attrs.get("href") or "", "text": ""}

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data

    def handle_endtag(self, tag):
        if tag == "a" and self._open is not None:
            self.links.append(self._open)
            self._open = None


def explorer_links() -> list[dict]:
    """Every explorer link of the built book: page, index on the page, href, text, settings."""
    links = []
    for page in PAGES:
        html = SITE / f"{page}.html"
        if not html.exists():
            continue
        parser = _LinkParser()
        parser.feed(html.read_text(encoding="utf-8"))
        for index, link in enumerate(parser.links):
            query = parse_qs(urlsplit(link["href"]).query)
            settings = {key: values[0] for key, values in query.items()}
            links.append({"page": page, "index": index, **link, "settings": settings})
    return links


LINKS = explorer_links()


def _link_id(link: dict) -> str:
    return f"{link['page'].split('/')[-1]}-{link['index']}-{link['settings'].get('mode')}"


def test_the_book_links_its_heatmaps_to_the_explorer():
    """Enough links, every explorer mode linked, each with a known mode and a sentence, and
    each pointing at the explorer page next to its chapter."""
    if not (SITE / "index.html").exists():
        _unavailable(f"no built site at {SITE}: run `make book` first")
    per_page = Counter(link["page"] for link in LINKS)
    print(f"{len(LINKS)} explorer links: {dict(per_page)}")
    assert len(LINKS) >= MIN_LINKS, f"only {len(LINKS)} explorer links; expected {MIN_LINKS}"
    modes = Counter(link["settings"].get("mode") for link in LINKS)
    print(f"modes: {dict(modes)}")
    missing = set(GLOVE_MODES + MODEL_MODES) - set(modes)
    assert not missing, f"no link opens the explorer's modes {sorted(missing)}"
    for link in LINKS:
        settings, where = link["settings"], f"{link['page']} link {link['index']}"
        assert urlsplit(link["href"]).path == "attention_explorer.html", (
            f"{where}: {link['href']} is not the explorer page next to the chapters"
        )
        assert link["page"].startswith("chapters/"), f"{where}: a relative link outside chapters/"
        assert settings.get("mode") in GLOVE_MODES + MODEL_MODES, f"{where}: {settings}"
        assert settings.get("sentence", "").strip(), f"{where}: no sentence in {link['href']}"
        assert set(settings) <= {"mode", "sentence", "T", "causal", "layer", "head"}, (
            f"{where}: {settings}"
        )
        assert link["text"].strip(), f"{where}: a link without text"


# A link follows its figure: the figure's cell is among the three blocks before the link's
# paragraph (a sentence reading the map, or the link of the figure's other head, may come
# between), with no heading in between.
LINK_REPORT = """(a) => {
    const block = a.closest('p, li, div');
    let before = block && block.previousElementSibling, afterFigure = false;
    for (let i = 0; before && i < 3 && !/^H[1-6]$/.test(before.tagName); i++) {
        if (before.matches('figure, img') || before.querySelector('figure img, img')) {
            afterFigure = true;
            break;
        }
        before = before.previousElementSibling;
    }
    return {
        href: a.href,
        visible: a.offsetParent !== null && a.getBoundingClientRect().width > 0,
        afterFigure: afterFigure,
    };
}"""


def _check_explorer(visit, settings: dict) -> None:
    """The explorer in visit.tab shows the link's settings and attnlib's numbers."""
    tab = visit.tab
    tab.wait_for_selector("#explorer-app[data-ready]", state="attached")
    ready = tab.get_attribute("#explorer-app", "data-ready")
    assert ready == "true", f"{tab.text_content('#explorer-message')} {visit.errors}"
    mode, sentence = settings["mode"], settings["sentence"]
    temperature = float(settings.get("T", 1))
    causal = settings.get("causal", "0") != "0"
    _wait_idle(tab)
    assert tab.input_value("#explorer-mode") == mode
    assert tab.input_value("#explorer-sentence") == sentence
    message = tab.locator("#explorer-message")
    if mode in GLOVE_MODES:
        assert float(tab.input_value("#explorer-temperature")) == temperature
        assert tab.is_checked("#explorer-causal") == causal
        assert not message.is_visible(), tab.text_content("#explorer-message")
        words, expected = expected_weights(sentence, mode, temperature, causal)
        worst = _compare(_table(tab), words, expected)
        print(f"{mode} {sentence!r} T={temperature} causal={causal}: {worst:.1e} from attnlib")
        return
    tab.wait_for_selector("#explorer-next li", state="attached")
    assert not message.is_visible(), tab.text_content("#explorer-message")
    # the heatmap the link names (?layer=&head=, default 0) is the one shown on arrival
    assert tab.input_value("#explorer-layer") == settings.get("layer", "0")
    assert tab.input_value("#explorer-head") == settings.get("head", "0")
    ids = _model_ids(mode, sentence)
    assert json.loads(tab.get_attribute("#explorer-app", "data-tokens")) == ids
    _, weights = _attnlib_run(mode, ids)  # layers x (H, L, L)
    worst = 0.0
    for layer, layer_weights in enumerate(weights):
        for head, expected in enumerate(layer_weights):
            tab.select_option("#explorer-layer", str(layer))
            tab.select_option("#explorer-head", str(head))
            rows = _table(tab)
            worst = max(worst, _compare(rows, [row["word"] for row in rows], expected))
    print(f"{mode} {sentence!r}: every head within {worst:.1e} of attnlib")
    assert worst <= MODEL_TOLERANCE, f"weights differ from attnlib's by {worst:.2e}"


def _follow(visit, url: str, index: int, settings: dict) -> None:
    """Open a chapter page, click its explorer link number `index`, check the explorer."""
    tab = visit.tab
    tab.goto(url, wait_until="load")
    link = tab.locator("a.explorer-link").nth(index)
    report = link.evaluate(LINK_REPORT)
    assert report["visible"], f"link {index} of {url} is not visible"
    assert report["afterFigure"], f"link {index} of {url} does not follow a figure"
    explorer = SITE / f"{EXPLORER_PAGE}.html"
    target = urlsplit(report["href"])
    assert target.path.endswith(f"/{EXPLORER_PAGE}.html"), f"{report['href']} is not {explorer}"
    with tab.expect_navigation(wait_until="load"):
        link.click()
    assert parse_qs(urlsplit(tab.url).query).get("mode") == [settings["mode"]]
    _check_explorer(visit, settings)


LINK_PAGES = sorted({link["page"] for link in LINKS})


@pytest.mark.parametrize("page", LINK_PAGES, ids=[p.split("/")[-1] for p in LINK_PAGES])
def test_explorer_links_open_the_printed_maps(browser, site_url, page):
    """Every explorer link of a chapter: the first is clicked from the chapter's page, the
    others are read on the same page and followed in a second tab (one load of the chapter,
    one of the explorer per link)."""
    links = [link for link in LINKS if link["page"] == page]
    visit = PageVisit(browser, site_url, page)
    try:
        _follow(visit, visit.url, links[0]["index"], links[0]["settings"])
        visit.tab.goto(visit.url, wait_until="load")
        reports = [
            visit.tab.locator("a.explorer-link").nth(link["index"]).evaluate(LINK_REPORT)
            for link in links[1:]
        ]
        for link, report in zip(links[1:], reports):
            where = f"link {link['index']} of {visit.url}"
            assert report["visible"], f"{where} is not visible"
            assert report["afterFigure"], f"{where} does not follow a figure"
            assert urlsplit(report["href"]).path.endswith(f"/{EXPLORER_PAGE}.html"), report
            visit.tab.goto(report["href"], wait_until="load")
            assert parse_qs(urlsplit(visit.tab.url).query).get("mode") == [link["settings"]["mode"]]
            _check_explorer(visit, link["settings"])
        assert not visit.external, f"requests to other hosts: {visit.external}"
        assert not visit.errors, "errors in the browser:\n" + "\n".join(visit.errors)
    finally:
        visit.close()


def _first(modes: tuple[str, ...]) -> list[dict]:
    return [next(link for link in LINKS if link["settings"].get("mode") in modes)] if LINKS else []


@pytest.mark.parametrize(
    "link", _first(GLOVE_MODES) + _first(MODEL_MODES), ids=lambda link: _link_id(link)
)
def test_explorer_link_works_opened_as_a_file(browser, link):
    page = (SITE / f"{link['page']}.html").as_uri()
    visit = PageVisit(browser, "", link["page"])
    visit.url, visit.site_host = page, ""
    try:
        _follow(visit, page, link["index"], link["settings"])
        assert urlsplit(visit.tab.url).scheme == "file"
        assert not visit.errors, "errors in the browser:\n" + "\n".join(visit.errors)
    finally:
        visit.close()
