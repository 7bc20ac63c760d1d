"""data/lr_stability.json is what scripts/lr_stability.py trains: the script's settings, every
run's record consistent with itself, and the first steps of the largest rate replayed."""

import json
import math
from pathlib import Path

import lr_stability as script
import pytest
import torch
import train_odyssey

RESULTS = Path(__file__).resolve().parents[1] / "data" / "lr_stability.json"


@pytest.fixture(scope="module")
def results():
    return json.loads(RESULTS.read_text())


def test_every_run_with_the_scripts_settings(results):
    assert results["settings"] == {
        "names": list(script.NAMES),
        "rates": list(script.RATES),
        "steps": script.STEPS,
        "seed": script.SEED,
    }
    assert list(results["runs"]) == list(script.NAMES)
    for name, by_rate in results["runs"].items():
        assert list(by_rate) == [f"{lr:g}" for lr in script.RATES], name
        for rate, run in by_rate.items():
            config = dict(train_odyssey.BASE, **train_odyssey.VARIANTS[name])
            assert run["config"] == dict(config, lr=float(rate), steps=script.STEPS)
            assert run["curve"]["step"][-1] == script.STEPS
            assert run["valid_ppl"] == run["curve"]["valid_ppl"][-1]
            valid = run["valid_ppl"]
            assert run["diverged"] == (not math.isfinite(valid) or valid > script.UNIGRAM_PPL)


def test_the_unigram_perplexity_is_the_stored_one():
    counts = json.loads((train_odyssey.OUT / "results.json").read_text())["counts"]["words"]
    assert round(counts["1-gram"]["test"]["ppl"], 1) == script.UNIGRAM_PPL


def test_the_first_steps_of_the_largest_rate_replay(results):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = train_odyssey.Data(bpe=False)
        lr = script.RATES[-1]
        config = dict(train_odyssey.BASE, **train_odyssey.VARIANTS["main"], lr=lr)
        model = train_odyssey.make_model(
            config, data.vocab_size("words"), 0, train_odyssey.glove_matrix(data.vocab)
        )
        ids = data.ids["words"]
        _, losses = train_odyssey.train(
            model,
            ids["train"],
            ids["valid"],
            steps=script.STEPS,
            context=config["context"],
            batch_size=config["batch_size"],
            lr=lr,
            weight_decay=config["weight_decay"],
            seed=script.SEED,
            stop_after=11,
            log=lambda line: None,
        )
    finally:
        torch.set_num_threads(threads)
    stored = results["runs"]["main"][f"{lr:g}"]["losses"][:2]  # every 10th loss: steps 1, 11
    replayed = torch.tensor(losses[::10])
    torch.testing.assert_close(replayed, torch.tensor(stored), rtol=1e-4, atol=1e-4)
