"""data/dates/ against scripts/train_dates.py: the data, the three stored translators, their
scores and their first training steps."""

import datetime
import json
from pathlib import Path

import pytest
import torch
import train_dates as script

DATES = Path(__file__).resolve().parents[1] / "data" / "dates"


@pytest.fixture(scope="module")
def results():
    return json.loads((DATES / "results.json").read_text())


@pytest.fixture(scope="module")
def test_pairs():
    return script.make_pairs(script.TEST_PAIRS, script.SEED + 1, "test")


def test_numbers_in_words_by_hand():
    assert [script.ordinal_word(d) for d in (1, 3, 12, 20, 21, 30, 31)] == [
        "first", "third", "twelfth", "twentieth", "twenty-first", "thirtieth", "thirty-first",
    ]  # fmt: skip
    assert [script.suffix(d) for d in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd",
    ]  # fmt: skip
    assert script.year_words(1864) == "eighteen hundred and sixty-four"
    assert script.year_words(1900) == "nineteen hundred"
    assert script.year_words(2005) == "two thousand and five"
    assert script.source_tokens("Sept. 23, 1864") == [
        "sept",
        ".",
        "2",
        "3",
        ",",
        "1",
        "8",
        "6",
        "4",
    ]


def test_every_form_writes_the_date_and_its_tokens_are_known():
    for form in script.FORMS:
        for day, month, year in ((1, 1, 1600), (29, 2, 1904), (31, 12, 2099), (23, 9, 1864)):
            tokens = script.source_tokens(form(day, month, year))
            assert all(t in script.SOURCE_ID for t in tokens)
            assert len(tokens) <= script.MAX_LEN
    source, target = script.encode([("Sept. 23, 1864", "1864-09-23")])
    assert script.decode_target(target[0]) == "1864-09-23"
    assert source.shape == (1, script.MAX_LEN) and (source[0, 9:] == 0).all()


def test_pairs_are_deterministic_real_and_held_out(test_pairs):
    train = script.make_pairs(2000, script.SEED, "train")
    assert train == script.make_pairs(2000, script.SEED, "train")
    for pairs, held in ((train, False), (test_pairs, True)):
        for _, iso in pairs:
            ordinal = datetime.date.fromisoformat(iso).toordinal()
            assert script.held_out(ordinal) == held
    assert len({text for text, _ in test_pairs}) > 990  # almost no repeats
    forms = {text.split()[0] for text, _ in test_pairs}
    assert {"the", "on", "in"} <= forms


def test_results_describe_the_script(results):
    assert results["settings"] == script.SETTINGS and results["transformer"] == script.TRANSFORMER
    assert (results["batch"], results["train_pairs"], results["test_pairs"], results["seed"]) == (
        script.BATCH,
        script.TRAIN_PAIRS,
        script.TEST_PAIRS,
        script.SEED,
    )
    for name, settings in script.SETTINGS.items():
        run = results["models"][name]
        assert run["steps"] == settings["steps"] == len(run["losses"])
        assert run["losses"][-1] < 0.05 < run["losses"][0]


@pytest.mark.parametrize("name", list(script.SETTINGS))
def test_stored_models_give_their_accuracy(results, test_pairs, name):
    model = script.make_model(name)
    model.load_state_dict(torch.load(DATES / f"{name}.pt", weights_only=True))
    accuracy, wrong = script.evaluate(model, test_pairs)
    stored = results["models"][name]
    assert abs(accuracy - stored["accuracy"]) <= 0.002  # greedy argmax: one pair in 500 may flip
    assert accuracy > 0.95
    assert accuracy == 1 - len(wrong) / len(test_pairs)
    assert sum(p.numel() for p in model.parameters()) == stored["parameters"]


@pytest.mark.parametrize("name", list(script.SETTINGS))
def test_first_steps_replay(results, name):
    source, target = script.encode(script.make_pairs(script.TRAIN_PAIRS, script.SEED, "train"))
    settings = script.SETTINGS[name]
    losses = script.train(
        script.make_model(name),
        source,
        target,
        steps=settings["steps"],
        lr=settings["lr"],
        stop_after=5,
        log=lambda line: None,
    )
    stored = results["models"][name]["losses"][:5]
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(stored), rtol=1e-3, atol=1e-4)
