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
Run after the book is built; without Chromium, pytest-playwright or a built site the browser
tests skip (or fail under CI), as in ``test_site.py`` (the fixtures of ``site_browser.py``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.register_assert_rewrite("site_browser")  # its assertions explain themselves
from site_browser import SITE, assert_clean, needs_site  # noqa: E402
from test_site import (  # noqa: E402
    EXPLORER_PAGE,
    MODEL_TOLERANCE,
    PAGES,
    _attnlib_run,
    _compare,
    _model_ids,
    _table,
    _wait_idle,
    expected_weights,
)

pytest_plugins = ["site_browser"]  # the browser, its tabs and the server (pytest-playwright)

MIN_LINKS = 20  # the links of the book when this test was written (issue 24, point 6)
GLOVE_MODES = ("dot", "cosine", "head0", "head1")
MODEL_MODES = ("lm", "induction")


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
            links.append(
                {"page": page, "index": index, "href": href, "text": text, "settings": settings}
            )
    return links


LINKS = explorer_links()


def _link_id(link: dict) -> str:
    return f"{link['page'].split('/')[-1]}-{link['index']}-{link['settings'].get('mode')}"


def test_the_book_links_its_heatmaps_to_the_explorer():
    """Enough links, every explorer mode linked, each with a known mode and a sentence, and
    each pointing at the explorer page next to its chapter."""
    needs_site()
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


def _check_explorer(tab, settings: dict) -> None:
    """The explorer in `tab` shows the link's settings and attnlib's numbers."""
    assert parse_qs(urlsplit(tab.url).query).get("mode") == [settings["mode"]]
    tab.wait_for_selector("#explorer-app[data-ready]", state="attached")
    ready = tab.get_attribute("#explorer-app", "data-ready")
    assert ready == "true", f"{tab.text_content('#explorer-message')} {tab.errors}"
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


def _link(tab, where: str, index: int):
    """Link number `index` of the page in `tab`, visible, after a figure, to the explorer
    page; and its address."""
    link = tab.locator("a.explorer-link").nth(index)
    report = link.evaluate(LINK_REPORT)
    assert report["visible"], f"link {index} of {where} is not visible"
    assert report["afterFigure"], f"link {index} of {where} does not follow a figure"
    path = urlsplit(report["href"]).path
    assert path.endswith(f"/{EXPLORER_PAGE}.html"), f"{report['href']} is not the explorer"
    return link, report["href"]


def _follow(tab, url: str, index: int, settings: dict) -> None:
    """Open a chapter page, click its explorer link number `index`, check the explorer."""
    tab.goto(url)
    link, _ = _link(tab, url, index)
    with tab.expect_navigation(wait_until="load"):
        link.click()
    _check_explorer(tab, settings)


LINK_PAGES = sorted({link["page"] for link in LINKS})


@pytest.mark.parametrize("chapter", LINK_PAGES, ids=[p.split("/")[-1] for p in LINK_PAGES])
def test_explorer_links_open_the_printed_maps(page, site_url, chapter):
    """Every explorer link of a chapter: the first is clicked from the chapter's page, the
    others are read on the same page and followed in the same tab (one load of the chapter,
    one of the explorer per link)."""
    links = [link for link in LINKS if link["page"] == chapter]
    url = f"{site_url}/{chapter}.html"
    _follow(page, url, links[0]["index"], links[0]["settings"])
    page.goto(url)
    hrefs = [_link(page, url, link["index"])[1] for link in links[1:]]
    for link, href in zip(links[1:], hrefs):
        page.goto(href)
        _check_explorer(page, link["settings"])
    assert_clean(page)


def _first(modes: tuple[str, ...]) -> list[dict]:
    return [next(link for link in LINKS if link["settings"].get("mode") in modes)] if LINKS else []


@pytest.mark.parametrize(
    "link", _first(GLOVE_MODES) + _first(MODEL_MODES), ids=lambda link: _link_id(link)
)
def test_explorer_link_works_opened_as_a_file(page, link):
    _follow(page, (SITE / f"{link['page']}.html").as_uri(), link["index"], link["settings"])
    assert urlsplit(page.url).scheme == "file"
    assert_clean(page)
