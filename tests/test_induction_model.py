"""The committed induction model (`data/induction/`, written by `scripts/train_induction.py`) is
the induction chapter's: its losses and head scores on the chapter's test batch are the ones
the chapter prints, and retraining it (about 6 s, one thread) gives the same model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import train_induction

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "induction"

# What chapters/induction_heads.ipynb prints for seed 0 (rounded to 2 decimals there).
CHAPTER = {
    "first_copy_loss": 4.42,
    "repeated_loss": 0.06,
    "previous_token_score": [[0.72, 0.26], [0.04, 0.04]],
    "induction_score": [[0.00, 0.01], [0.89, 0.89]],
}


@pytest.fixture(scope="module")
def committed():
    torch.set_num_threads(1)
    model = train_induction.new_model()
    model.load_state_dict(torch.load(DATA / "model.pt", weights_only=True))
    config = json.loads((DATA / "config.json").read_text(encoding="utf-8"))
    return model.eval(), config


def _close(measured: dict, expected: dict, tolerance: float) -> None:
    for key, value in expected.items():
        got = torch.tensor(measured[key], dtype=torch.float64)
        want = torch.tensor(value, dtype=torch.float64)
        assert (got - want).abs().max() <= tolerance, (key, measured[key], value)


def test_config_describes_the_chapters_model(committed):
    _, config = committed
    assert config["model"] == train_induction.CONFIG
    assert config["model"]["positions"] == "rope" and config["model"]["mlp_ratio"] == 0
    assert config["train"]["seed"] == 0 and config["train"]["steps"] == 1000
    assert config["tokens"] == {"vocab": 64, "bos": 64, "T_min": 6, "T_max": 16}


def test_committed_weights_give_the_chapters_numbers(committed):
    model, config = committed
    measured = train_induction.measure(model)
    _close(measured, CHAPTER, 0.005 + 1e-9)  # the chapter's 2 decimals
    _close(measured, config["measured"], 1e-4)  # and what the script recorded


@pytest.mark.slow
def test_retraining_gives_the_same_model(committed):
    model, _ = committed
    torch.set_num_threads(1)
    again = train_induction.train()
    _close(train_induction.measure(again), train_induction.measure(model), 1e-3)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(again.state_dict()[name], tensor, atol=1e-3, rtol=1e-3)
