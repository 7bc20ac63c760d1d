"""attnlib.experiment: reproducible training and interleaved timing."""

from __future__ import annotations

import pytest
import torch
from attnlib import experiment


def train_once() -> torch.Tensor:
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 1)
    x = torch.randn(4096, 64, generator=torch.Generator().manual_seed(1))
    optimiser = torch.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(5):
        loss = layer(x).pow(2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return layer.weight.detach().clone()


def test_reproducible_trains_the_same_weights_whatever_the_thread_count():
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 4):
            torch.set_num_threads(threads)
            with experiment.reproducible():
                results.append(train_once())
        assert all(torch.equal(results[0], r) for r in results[1:])
    finally:
        torch.set_num_threads(before)


def test_reproducible_restores_the_settings_after_an_error():
    before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    with pytest.raises(KeyError), experiment.reproducible():
        assert torch.get_num_threads() == 1
        raise KeyError("inside")
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == before


def test_reproducible_is_a_decorator_too():
    @experiment.reproducible()
    def threads():
        return torch.get_num_threads()

    assert threads() == 1


def test_time_rounds_rotates_the_order_and_times_every_function_every_round():
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    times = experiment.time_rounds(fns, "order", rounds=3, min_run_time=0.0)
    assert [len(times[name]) for name in "abc"] == [3, 3, 3]
    firsts = []
    for name in calls:  # the first call of each measurement block starts a round's turn
        if not firsts or firsts[-1] != name:
            firsts.append(name)
    assert firsts[:3] == ["a", "b", "c"]  # round 0 in the given order
    assert firsts[3:6] == ["b", "c", "a"]  # round 1 starts with the second function
    assert experiment.median_time(times["a"]) > 0


@pytest.mark.parametrize(
    ("fns", "rounds", "error", "match"),
    [
        ([], 1, TypeError, "fns must be a dict of name -> callable; got list"),
        ({"a": 1}, 1, TypeError, "fns must be a dict of name -> callable"),
        ({}, 1, ValueError, "fns must name at least one function"),
        ({"a": print}, 1.5, TypeError, "rounds must be an int >= 1; got float"),
        ({"a": print}, 0, ValueError, "rounds must be >= 1; got 0"),
    ],
)
def test_time_rounds_errors(fns, rounds, error, match):
    with pytest.raises(error, match=match):
        experiment.time_rounds(fns, "bad", rounds=rounds)


def test_ratio_of_numbers_and_measurements():
    assert experiment.ratio([2.0, 6.0, 4.0], [1.0, 2.0, 4.0]) == (2.0, 1.0, 3.0)
    times = experiment.time_rounds({"a": lambda: None}, "r", rounds=2, min_run_time=0.0)
    median, low, high = experiment.ratio(times["a"], times["a"])
    assert median == low == high == 1.0


def test_machine_names_the_versions():
    line = experiment.machine()
    assert f"torch {torch.__version__}" in line and "CPUs" in line
