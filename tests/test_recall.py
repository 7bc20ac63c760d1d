"""The recall benchmark (data/recall/results.json) is what scripts/train_recall.py trains: the
task is what its docstring says, the settings are the script's, a run's first steps replay, the
state sizes are counted right, and the accuracies say what the chapter says they say."""

import json
from pathlib import Path

import pytest
import torch
import train_recall as script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "data" / "recall" / "results.json"


@pytest.fixture(scope="module")
def results():
    return json.loads(RESULTS.read_text())


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_task():
    inputs, targets = script.recall_batch(50, torch.Generator().manual_seed(3), pairs=5)
    assert inputs.shape == targets.shape == (50, 19)
    for x, y in zip(inputs.tolist(), targets.tolist()):
        sequence = x + [y[-1]]
        listed, asked = sequence[:10], sequence[10:]
        keys, values = listed[0::2], listed[1::2]
        assert len(set(keys)) == 5 and all(1 <= k <= script.KEYS for k in keys)
        assert all(script.KEYS < v <= 2 * script.KEYS for v in values)
        assert sorted(asked[0::2]) == sorted(keys)  # every key asked once
        answer = dict(zip(keys, values))
        assert asked[1::2] == [answer[k] for k in asked[0::2]]
        scored = [(i, t) for i, t in enumerate(y) if t != -100]
        assert [i for i, _ in scored] == list(range(10, 19, 2))  # after each asked key
        assert all(t == answer[x[i]] for i, t in scored)


def test_state_sizes_are_counted():
    E, L, C = script.E, 4 * script.PAIRS - 1, (script.CONV - 1) * script.E
    H = 8
    D = E // H
    expected = {
        "softmax": 4 * (C + 2 * L * E),
        "window": 4 * (C + 2 * H * E),  # a window of 8
        "linear": 4 * (C + H * (D * D + D)),
        "delta": 4 * (C + H * D * D),
        "hybrid": 3 * (C + H * D * D) + C + 2 * L * E,
    }
    for name, size in expected.items():
        assert script.make_model(name, H).state_size(L) == size, name
    assert script.make_model("window", 64).state_size(L) == 4 * (C + 2 * L * E)  # all of L


def test_results_hold_every_run_with_the_scripts_settings(results):
    assert results["settings"] == script.settings()
    assert list(results["runs"]) == list(script.MIXERS)
    L = 4 * script.PAIRS - 1
    for name, by_size in results["runs"].items():
        assert [int(size) for size in by_size] == list(script.SIZES[name]), name
        for size, run in by_size.items():
            model = script.make_model(name, int(size))
            assert run["mixers"] == list(script.MIXERS[name]) and run["size"] == int(size)
            assert run["state_size"] == model.state_size(L)
            assert run["parameters"] == sum(p.numel() for p in model.parameters())
            assert run["curve"]["step"][-1] == script.TRAIN["steps"]
            assert run["accuracy"] == run["curve"]["accuracy"][-1]
            assert 0 <= run["accuracy"] <= 1 and run["seconds"] > 0


@pytest.mark.parametrize("name", list(script.MIXERS))
def test_the_first_steps_replay(results, name):
    size = script.SIZES[name][-1]
    model = script.make_model(name, size)
    losses, _ = script.train(model, **script.TRAIN, stop_after=script.REPLAY_STEPS)
    stored = results["runs"][name][str(size)]["replay_losses"]
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(stored), rtol=1e-4, atol=1e-4)
