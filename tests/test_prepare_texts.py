"""scripts/prepare_texts.py: Butler's Odyssey and Iliad, cleaned into data/odyssey.txt and
data/iliad.txt, and the committed files."""

import hashlib
import os
import re
import shutil
from pathlib import Path

import prepare_texts
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"


RUNNING_SENTENCE = "Now, however, I must go back to my ship and to my crew"


@pytest.fixture(scope="module")
def texts():
    """The committed outputs, read once: {"odyssey": text, "iliad": text}."""
    return {
        name: (DATA / f"{name}.txt").read_text(encoding="utf-8") for name in ("odyssey", "iliad")
    }


# ---------------------------------------------------------------- the committed files


def test_outputs_are_up_to_date(capsys):
    """data/ holds exactly what the script writes (rerun it after changing it)."""
    assert prepare_texts.check() == []
    assert prepare_texts.main(["--check"]) == 0
    assert capsys.readouterr().err == ""


def test_raw_files_are_the_recorded_copies():
    for text in prepare_texts.TEXTS:
        data = (DATA / text.raw).read_bytes()
        assert hashlib.sha256(data).hexdigest() == text.sha256


@pytest.mark.parametrize("name", ["odyssey", "iliad"])
def test_24_books_in_order(texts, name):
    text = texts[name]
    assert (DATA / f"{name}.txt").read_bytes() == text.encode("utf-8")  # no \r, UTF-8
    books = prepare_texts.split_books(text)
    assert list(books) == list(prepare_texts.ROMAN)
    assert all(len(paragraphs) > 10 for paragraphs in books.values())
    headings = [line for line in text.split("\n") if line.startswith("BOOK ")]
    assert headings == [f"BOOK {r}" for r in prepare_texts.ROMAN]  # no trailing dot
    assert text.startswith("BOOK I\n\n") and text.endswith(".\n")


@pytest.mark.parametrize("name", ["odyssey", "iliad"])
def test_no_boilerplate_or_footnote_markers(texts, name):
    for line in texts[name].split("\n"):
        for word in ("Gutenberg", "GUTENBERG", "FOOTNOTES", "PREFACE", "CONTENTS", "Illustration"):
            assert word not in line
        assert not re.search(r"\d", line), line[:80]  # footnote references are bare numbers
        assert line == line.strip() and "  " not in line
    assert "THE ODYSSEY" not in texts[name] and "THE ILIAD" not in texts[name]
    assert "MINERVA’S VISIT TO ITHACA" not in texts[name]  # the Odyssey's argument of book I


def test_odyssey_book_i_and_the_end(texts):
    books = prepare_texts.split_books(texts["odyssey"])
    assert books["I"][0].startswith("Tell me, O Muse, of that ingenious hero who travelled")
    assert sum(RUNNING_SENTENCE in p for p in books["I"]) == 1
    assert not any(RUNNING_SENTENCE in p for r, ps in books.items() if r != "I" for p in ps)
    assert books["XXIV"][-1].endswith(
        "presently made a covenant of peace between the two contending parties."
    )
    assert "the abode of Menelaus [and found him" in books["IV"][0]  # was "Menelaus36 [and"


def test_iliad_book_i_and_the_end(texts):
    books = prepare_texts.split_books(texts["iliad"])
    assert books["I"][0].startswith("Sing, O goddess, the anger of Achilles son of Peleus, that")
    assert books["XXIV"][-1] == (
        "Thus, then, did they celebrate the funeral of Hector tamer of horses."
    )
    assert not any(p.startswith("The quarrel between Agamemnon") for p in books["I"])


# ---------------------------------------------------------------- a hand-made raw text

RAW = (
    "\ufeffThe Project Gutenberg eBook of The Odyssey\r\n"
    "\r\n"
    "*** START OF THE PROJECT GUTENBERG EBOOK THE ODYSSEY ***\r\n"
    "\r\n"
    "Contents\r\n"
    "\r\n"
    " PREFACE\r\n"
    " BOOK I.\r\n"
    " BOOK II.\r\n"
    "\r\n"
    "PREFACE\r\n"
    "\r\n"
    "This translation is intended to supplement a work.\r\n"
    "\r\n"
    "THE ODYSSEY\r\n"
    "\r\n"
    "\r\n"
    "BOOK I.\r\n"
    "\r\n"
    "\r\n"
    "THE GODS IN COUNCIL—MINERVA’S\r\n"
    "VISIT TO ITHACA.1\r\n"
    "\r\n"
    "Tell me, O Muse, of that  ingenious\r\n"
    "hero, who was black.2 He had\r\n"
    "\r\n"
    "\r\n"
    "   “Nurse,3 I must go\r\n"
    "back to my ship. 4 And above all others 5—for it is I.\r\n"
    "[Illustration: a ship]\r\n"
    "\r\n"
    "BOOK II.\r\n"
    "\r\n"
    "ASSEMBLY OF THE PEOPLE.\r\n"
    "\r\n"
    "Now when Dawn appeared, [and]\r\n"
    "6 None of our islands\r\n"
    "\r\n"
    "\r\n"
    "\r\n"
    "FOOTNOTES:\r\n"
    "\r\n"
    "[1] [ The visit.]\r\n"
    "\r\n"
    "[2] [ Black races.]\r\n"
    "\r\n"
    "[3] [ A note.]\r\n"
    "\r\n"
    "4[] [ A note with a typo, as note 29 of the Odyssey.]\r\n"
    "\r\n"
    "[5] [ BOOK III.]\r\n"
    "\r\n"
    "[6] [ The last note.]\r\n"
    "\r\n"
    "*** END OF THE PROJECT GUTENBERG EBOOK THE ODYSSEY ***\r\n"
    "Project Gutenberg licence.\r\n"
)
CLEAN = (
    "BOOK I\n"
    "\n"
    "Tell me, O Muse, of that ingenious hero, who was black. He had\n"
    "\n"
    "“Nurse, I must go back to my ship. And above all others—for it is I.\n"
    "\n"
    "BOOK II\n"
    "\n"
    "Now when Dawn appeared, [and] None of our islands\n"
)


def test_clean_hand_made_text():
    text = prepare_texts.clean_odyssey(RAW, books=2)
    assert text == CLEAN
    assert prepare_texts.split_books(text) == {
        "I": [
            "Tell me, O Muse, of that ingenious hero, who was black. He had",
            "“Nurse, I must go back to my ship. And above all others—for it is I.",
        ],
        "II": ["Now when Dawn appeared, [and] None of our islands"],
    }
    assert prepare_texts.clean_odyssey(RAW.replace("\r\n", "\n"), books=2) == CLEAN


def test_clean_iliad_style_text():
    """The Iliad's layout: indented lines, "BOOK I." headings, arguments in sentence case, no
    footnotes, and Project Gutenberg's footer after the books."""
    raw = RAW.replace("THE GODS IN COUNCIL", "The gods in council").replace("\n", "\n      ")
    raw = raw[: raw.index("      FOOTNOTES:")] + "*** END OF THE PROJECT GUTENBERG EBOOK ***\n"
    raw = re.sub(r" ?\d", "", raw)  # no footnotes, so no references
    assert prepare_texts.clean_iliad(raw, books=2) == CLEAN
    with pytest.raises(ValueError, match=r"BOOK I must start with its argument"):
        prepare_texts.clean_odyssey(raw, books=2)  # the Odyssey's arguments are in capitals


BAD_RAW = [
    # (raw, message)
    pytest.param(
        RAW.replace("appeared,", "appeared 7 times,"),
        r"the footnote references in the books must read 1 to 6 in order \(one per footnote\);"
        r" found 7, the first one out of place at position 6: \[7, 6\]",
        id="number-in-text",
    ),
    pytest.param(
        RAW.replace("ITHACA.1", "ITHACA."),
        r"found 5, the first one out of place at position 1: \[2, 3, 4\]",
        id="missing-reference",
    ),
    pytest.param(
        RAW.replace("[2] [ Black", "[7] [ Black"),
        r"the footnotes must be numbered 1, 2, 3, \.\.\.; found \[1, 7, 3",
        id="footnote-numbers",
    ),
    pytest.param(
        RAW.replace("\nBOOK II.", "\nBOOK III."),
        r"the books must be \['I', 'II'\]; found \['I', 'III'\]",
        id="book-numbers",
    ),
    pytest.param(RAW.replace("BOOK I.", "BOOK ONE."), r"no line 'BOOK I'", id="no-book-i"),
    pytest.param(
        RAW.replace("FOOTNOTES:", "NOTES").replace("*** END", "END"),
        r"no end of the books",
        id="no-end",
    ),
]


@pytest.mark.parametrize(("raw", "message"), BAD_RAW)
def test_clean_refuses_unexpected_text(raw, message):
    with pytest.raises(ValueError, match=message):
        prepare_texts.clean_odyssey(raw, books=2)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("BOOK I\n\nA.\n\nBOOK III\n\nB.\n", r"expected BOOK II; got 'BOOK III'"),
        ("A.\n\nBOOK I\n\nB.\n", r"text before BOOK I: 'A\.'"),
        ("BOOK I\n\nA  B.\n", r"malformed paragraph"),
        ("BOOK I\n\n\nA.\n", r"malformed paragraph"),
        ("BOOK I\n\nA.", r"must end with exactly one"),
        ("BOOK I\r\n\r\nA.\r\n", r"must end with exactly one '\\n' and hold no '\\r'"),
    ],
)
def test_split_books_refuses_malformed_text(text, message):
    with pytest.raises(ValueError, match=message):
        prepare_texts.split_books(text)


# ---------------------------------------------------------------- files


def test_sha256_mismatch_is_a_clear_error(tmp_path):
    path = tmp_path / "odyssey_butler_1900.txt"
    path.write_bytes(b"Tell me, O Muse\n")
    actual = hashlib.sha256(b"Tell me, O Muse\n").hexdigest()
    expected = prepare_texts.ODYSSEY_SHA256
    with pytest.raises(
        prepare_texts.ChecksumError,
        match=rf"odyssey_butler_1900\.txt: sha256 mismatch: expected {expected}, got {actual}",
    ):
        prepare_texts.read_raw(path, expected)
    assert issubclass(prepare_texts.ChecksumError, ValueError)


def test_check_names_the_stale_file(tmp_path, capsys):
    for text in prepare_texts.TEXTS:
        (tmp_path / text.raw).parent.mkdir(exist_ok=True)
        shutil.copyfile(DATA / text.raw, tmp_path / text.raw)
        shutil.copyfile(DATA / text.out, tmp_path / text.out)
    assert prepare_texts.main(["--check", "--data", str(tmp_path)]) == 0
    odyssey = tmp_path / "odyssey.txt"
    odyssey.write_bytes(odyssey.read_bytes().replace(b"\n", b"\r\n"))
    (tmp_path / "iliad.txt").unlink()
    assert prepare_texts.main(["--check", "--data", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"error: {odyssey} differs from what scripts/prepare_texts.py writes" in err
    assert f"error: {tmp_path / 'iliad.txt'} is missing" in err


def test_write_atomic_leaves_the_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "odyssey.txt"
    path.write_text("BOOK I\n\nold.\n", encoding="utf-8")
    prepare_texts.write_atomic(path, "BOOK I\n\n“new”\n")
    assert path.read_bytes() == "BOOK I\n\n“new”\n".encode()
    assert os.listdir(tmp_path) == ["odyssey.txt"]

    def failing_replace(src, dst):
        raise KeyboardInterrupt  # interrupted between writing the temporary file and the rename

    monkeypatch.setattr(prepare_texts.os, "replace", failing_replace)
    with pytest.raises(KeyboardInterrupt):
        prepare_texts.write_atomic(path, "BOOK I\n\nhalf")
    assert path.read_bytes() == "BOOK I\n\n“new”\n".encode()  # untouched
    assert os.listdir(tmp_path) == ["odyssey.txt"]  # the temporary file is removed
