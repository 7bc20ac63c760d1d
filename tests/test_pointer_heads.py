"""scripts/train_pointer_heads.py writes the committed data/pointer_heads.json again.

The explorer runs these two heads in the page; the chapter "Training attention" checks the
file against the heads it trains. Here the script itself is run (about ten seconds on one
thread) and its output compared with the committed file, as numbers: another CPU may round
the last bits differently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    import train_pointer_heads

    return train_pointer_heads


def test_the_script_writes_the_committed_heads(script, tmp_path):
    threads = torch.get_num_threads()
    try:
        script.main(["--out", str(tmp_path / "heads.json")])
    finally:
        torch.set_num_threads(threads)
    fresh = json.loads((tmp_path / "heads.json").read_text())
    committed = json.loads((ROOT / "data" / "pointer_heads.json").read_text())
    assert fresh.keys() == committed.keys()
    for key in ("embed_dim", "num_heads", "head_names"):
        assert fresh[key] == committed[key], key
    for key in ("q_proj_weight", "k_proj_weight"):
        torch.testing.assert_close(
            torch.tensor(fresh[key]), torch.tensor(committed[key]), atol=1e-5, rtol=0
        )
