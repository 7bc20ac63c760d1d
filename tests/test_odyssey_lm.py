"""The committed Odyssey language model (data/odyssey_lm/) is the one scripts/train_odyssey.py
trains: its vocabulary is rebuilt from the text, its weights reproduce the stored held-out
perplexity, the script's first steps reproduce the stored losses, and it beats the counts."""

import json
import math
from pathlib import Path

import pytest
import torch
import train_odyssey
from attnlib.corpus import perplexity

ROOT = Path(__file__).resolve().parents[1]
LM_DIR = ROOT / "data" / "odyssey_lm"


script = train_odyssey


@pytest.fixture(scope="module")
def results():
    return json.loads((LM_DIR / "results.json").read_text())


@pytest.fixture(scope="module")
def splits():
    train, valid, test = script.load_splits()
    vocab = script.build_vocab(train)
    return vocab, *(vocab.encode(t) for t in (train, valid, test))


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: more threads only wait on each other
    yield
    torch.set_num_threads(threads)


def test_the_files_are_small():
    sizes = {p.name: p.stat().st_size for p in LM_DIR.iterdir()}
    assert set(sizes) == {"model.pt", "results.json", "vocab.txt"}
    assert sum(sizes.values()) <= 10 * 2**20, sizes


def test_vocabulary_is_rebuilt_from_the_text(splits):
    vocab = splits[0]
    assert (LM_DIR / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1] == vocab.words


def test_results_describe_every_model(results):
    assert list(results["models"]) == list(script.VARIANTS)
    assert results["config"] == script.MAIN
    for name, run in results["models"].items():
        assert run["config"] == dict(script.MAIN, **script.VARIANTS[name])
        assert run["curve"]["step"][-1] == results["train"]["steps"]
        assert run["valid_ppl"] == min(run["curve"]["valid_ppl"])  # early stopping kept the best


def test_weights_reproduce_the_stored_perplexity(results, splits):
    vocab, _, valid_ids, test_ids = splits
    model = script.make_model(dict(results["config"], glove=False), vocab, script.TRAIN["context"])
    model.load_state_dict(torch.load(LM_DIR / "model.pt", weights_only=True))
    main = results["models"]["main"]
    context = results["train"]["context"]
    assert math.isclose(perplexity(model, test_ids, context), main["test_ppl"], rel_tol=1e-4)
    assert math.isclose(perplexity(model, valid_ids, context), main["valid_ppl"], rel_tol=1e-4)


def test_the_first_steps_reproduce_the_stored_losses(results, splits):
    vocab, train_ids, valid_ids, _ = splits
    settings = results["train"]
    model = script.make_model(results["config"], vocab, settings["context"])
    _, replay, _ = script.train(
        model,
        train_ids,
        valid_ids,
        **{k: settings[k] for k in script.TRAIN_ARGS},
        stop_after=settings["replay_steps"],
        log=lambda line: None,
    )
    stored = results["models"]["main"]["replay_losses"]
    assert len(replay) == len(stored) == settings["replay_steps"]
    torch.testing.assert_close(torch.tensor(replay), torch.tensor(stored), rtol=1e-4, atol=1e-4)


def test_the_model_beats_every_count_model(results):
    model = results["models"]["main"]["test_ppl"]
    for name, counts in results["counts"].items():
        assert model < 0.9 * counts["test_ppl"], (name, counts["test_ppl"], model)
    # and attention is what makes the difference: without it the model is far behind
    assert results["models"]["no_attention"]["test_ppl"] > 1.2 * model
