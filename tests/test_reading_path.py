"""The reader's path: short sentences, few colons, a core of at most six hours, honest times.

The figures are those of the team's readability tool, measured by ``scripts/reading_time.py``
(which also leaves out what a first reading skips: collapsed deep dives, exercise solutions,
hidden code).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import reading_time
import yaml

ROOT = Path(__file__).resolve().parents[1]
# The core path: chapters 1 to 11, the first three parts of _toc.yml.
CORE_PATH = [
    c["file"].removeprefix("chapters/")
    for part in yaml.safe_load((ROOT / "_toc.yml").read_text())["parts"][:3]
    for c in part["chapters"]
]
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))
TOP_LINE = re.compile(r"\*Core: about (\d+) minutes; deep dives: (\d+) more\.\*")


def chapter(name: str) -> Path:
    return ROOT / "chapters" / f"{name}.ipynb"


@pytest.mark.parametrize("name", CHAPTERS)
def test_sentences_and_colons(name):
    stats = reading_time.stats(chapter(name))
    assert stats["over30"] <= 0.10, f"{name}: {stats['over30']:.0%} of sentences over 30 words"
    assert stats["colons"] <= 12, f"{name}: {stats['colons']:.1f} colons per 1,000 words"


@pytest.mark.parametrize("name", CHAPTERS)
def test_each_chapter_says_how_long_its_core_takes(name):
    cells = json.loads(chapter(name).read_text())["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    found = TOP_LINE.search(text)
    assert found, f"{name}: no '*Core: about X minutes; deep dives: Y more.*' line"
    core = reading_time.stats(chapter(name), core=True)["minutes"]
    whole = reading_time.stats(chapter(name))["minutes"]
    said_core, said_more = int(found[1]), int(found[2])
    assert abs(said_core - core) <= 5, f"{name}: says {said_core} min, measures {core:.0f}"
    assert said_more >= 5 and abs(said_core + said_more - whole) <= 10, (name, whole)


def test_the_core_path_takes_at_most_six_hours():
    minutes = sum(reading_time.stats(chapter(n), core=True)["minutes"] for n in CORE_PATH)
    assert minutes <= 360, f"the core path takes {minutes:.0f} minutes"
    hours = {5.0: "five", 5.5: "five and a half", 6.0: "six"}[round(minutes / 30) / 2]
    assert f"about {hours} hours" in (ROOT / "intro.md").read_text()


def test_the_measure_is_the_team_tool_s_where_it_is_beside_the_clone():
    tool = ROOT.parent / "shared" / "tools" / "readability.py"
    if not tool.exists():
        pytest.skip(f"{tool} is not beside this clone: nothing to compare with")
    spec = importlib.util.spec_from_file_location("readability", tool)
    readability = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(readability)
    for name in CHAPTERS:
        theirs = readability.stats(*readability.load(chapter(name)))
        assert reading_time.stats(chapter(name)) == {k: theirs[k] for k in reading_time.KEYS}
