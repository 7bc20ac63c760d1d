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
        (
            {"f": 3},
            1,
            TypeError,
            r"fns must be a dict of name -> callable \(a function of no "
            r"arguments\); fns\['f'\] is int 3, which cannot be called \(write lambda: \.\.\. "
            r"around the call to time\)",
        ),
        ({"a": print, "b": None}, 1, TypeError, r"fns\['b'\] is NoneType None"),
        ({}, 1, ValueError, "fns must name at least one function"),
        ({"a": print}, 1.5, TypeError, "rounds must be an int >= 1; got float"),
        ({"a": print}, 0, ValueError, "rounds must be an int >= 1; got 0"),
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


@pytest.mark.parametrize("warn_only", [False, True])
@pytest.mark.parametrize("deterministic", [False, True])
def test_reproducible_restores_warn_only(deterministic, warn_only):
    """Before: torch.use_deterministic_algorithms(True, warn_only=True) came back as
    warn_only=False after the block."""
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    try:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        with experiment.reproducible():
            assert torch.are_deterministic_algorithms_enabled()
            assert not torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.are_deterministic_algorithms_enabled() == deterministic
        assert torch.is_deterministic_algorithms_warn_only_enabled() == warn_only
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"label": 3}, TypeError, r"label must be a str; got int 3"),
        ({"description": None}, TypeError, r"description must be a str; got NoneType None"),
        ({"min_run_time": "1"}, TypeError, r"min_run_time must be a number of seconds >= 0; "
         r"got str '1'"),
        ({"min_run_time": -1.0}, ValueError, r"min_run_time must be a number of seconds >= 0; "
         r"got -1\.0"),
        ({"min_run_time": float("nan")}, ValueError, r"min_run_time must be .*; got nan"),
        ({"min_run_time": float("inf")}, ValueError, r"min_run_time must be finite; got inf"),
        ({"threads": 0}, ValueError, r"threads must be a positive integer; got 0"),
        ({"threads": True}, TypeError, r"threads must be a positive integer; got bool True"),
    ],
)  # fmt: skip
def test_time_rounds_other_arguments(kwargs, error, match):
    """Before: threads=0 raised torch's "set_num_threads expects a positive integer", label=3
    was accepted and broke PyTorch's Compare table later."""
    args = {"fns": {"a": print}, "label": "bad"} | kwargs
    with pytest.raises(error, match=match):
        experiment.time_rounds(**args)


def test_median_time_of_nothing():
    """Before: NaN (NumPy's median of no values, with a RuntimeWarning)."""
    with pytest.raises(
        ValueError, match=r"measurements must hold at least one round; got an empty"
    ):
        experiment.median_time([])


@pytest.mark.parametrize(
    ("measurements", "match"),
    [
        ([1.0, 2.0], r"measurements must all be torch\.utils\.benchmark\.Measurement; got float "
                     r"1\.0 at position 0"),
        ({"f": []}, r"measurements must be a list of torch\.utils\.benchmark\.Measurement; got "
                    r"dict \(pass the rounds of one function: times\[name\]\)"),
        (None, r"measurements must be a list of .*Measurement; got NoneType$"),
    ],
)  # fmt: skip
def test_median_time_of_the_wrong_type(measurements, match):
    """Before: AttributeError: 'float' object has no attribute 'median'."""
    with pytest.raises(TypeError, match=match):
        experiment.median_time(measurements)


@pytest.mark.parametrize(
    ("a", "b", "error", "match"),
    [
        ([2.0, 6.0, 4.0], [1.0, 2.0], ValueError,
         r"a and b must have the same number of rounds \(ratio i is a\[i\] / b\[i\]\); got 3 "
         r"and 2"),
        ([], [], ValueError, r"a and b must hold at least one round; got none"),
        ([1.0], [0.0], ValueError, r"b\[0\] must be a Measurement or a finite number > 0 "
         r"\(a time\); got 0\.0"),
        ([float("nan")], [1.0], ValueError, r"a\[0\] must be a Measurement or a finite number "
         r"> 0 .*; got nan"),
        ([1.0, "2"], [1.0, 1.0], TypeError, r"a\[1\] must be a Measurement or a finite number "
         r"> 0 \(a time\); got str '2'"),
        ([True], [1.0], TypeError, r"a\[0\] must be a Measurement or a finite number > 0 .*; "
         r"got bool True"),
        (3.0, [1.0], TypeError, r"a must be a list of Measurements or numbers \(the rounds of one "
                                r"function\); got float"),
    ],
)  # fmt: skip
def test_ratio_errors(a, b, error, match):
    """Before: rounds without a partner were dropped (zip), no rounds gave statistics' "no
    median for empty data", 0 a ZeroDivisionError."""
    with pytest.raises(error, match=match):
        experiment.ratio(a, b)


def test_ratio_of_numpy_numbers():
    np = pytest.importorskip("numpy")
    assert experiment.ratio([np.float64(2.0), np.int64(6)], (1, np.float32(2.0))) == (
        2.5,
        2.0,
        3.0,
    )
