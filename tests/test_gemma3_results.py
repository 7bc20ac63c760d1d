"""data/gemma3/results.json is what scripts/gemma_measure.py computes (issue 49): its structure,
its sums, and three of its numbers computed again (a pass-key cell, the first tokens of the
StreamingLLM run, one text's bits per byte from its nats)."""

import json
import math
from pathlib import Path

import gemma_measure as script
import pytest
import torch
from attnlib import gemma3

RESULTS = json.loads((Path(script.OUT)).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def loaded():
    torch.set_num_threads(min(2, torch.get_num_threads()))
    return gemma3.load_gemma3()


def test_the_results_are_of_this_file():
    assert RESULTS["gguf"] == gemma3.GGUF_SHA256


def test_bits_per_byte_are_the_nats_over_the_bytes():
    books = script.test_books()
    test = RESULTS["bpb_odyssey_test"]
    assert test["bytes"] == sum(len(b.encode("utf-8")) for b in books) == 46_798
    for part in ("bpb_odyssey_test", "bpb_book_prose"):
        r = RESULTS[part]
        assert r["bpb"] == pytest.approx(r["nats"] / math.log(2) / r["bytes"], rel=1e-12)
        assert 0.3 < r["bpb"] < 2.0


def test_the_tables_have_every_cell():
    layers, heads = 18, 4
    for key in ("sink_mass",):
        assert len(RESULTS[key]) == layers and {len(r) for r in RESULTS[key]} == {heads}
    assert len(RESULTS["induction"]["score"]) == layers
    stream = RESULTS["streaming"]
    assert set(stream) == {"as trained", "window", "window + 4 sinks"}
    assert {len(v) for v in stream.values()} == {4095}  # every token after the first
    cells = RESULTS["passkey"]["cells"]
    lengths, depths = RESULTS["passkey"]["lengths"], RESULTS["passkey"]["depths"]
    keys = RESULTS["passkey"]["keys"]
    with_global = len(lengths) * len(depths) * keys
    without = (len(lengths) - 1) * len(depths) * keys  # 512 tokens: the same computation
    assert len(cells) == with_global + without
    assert all(0 <= c["right"] <= c["of"] for c in cells)


def test_before_the_window_slides_the_three_caches_agree():
    stream = {k: torch.tensor(v) for k, v in RESULTS["streaming"].items()}
    first = stream["as trained"][:511]
    for way in ("window", "window + 4 sinks"):
        torch.testing.assert_close(stream[way][:511], first, atol=1e-3, rtol=0)


def test_a_passkey_cell_computed_again(loaded):
    model, tok = loaded
    filler = script.filler_ids(tok)
    cell = RESULTS["passkey"]["cells"][0]
    again = script.passkey(model, tok, filler, lengths=(512,), depths=(cell["depth"],), keys=1)
    mine = again["cells"][0]
    assert (mine["key"], mine["right"], mine["of"]) == (cell["key"], cell["right"], cell["of"])
    assert mine["nats"] == pytest.approx(cell["nats"], abs=1e-3)


def test_the_first_streaming_tokens_computed_again(loaded):
    model, tok = loaded
    ids = script.odyssey_ids(tok)[:129]
    nats = script.read(model, ids, script.caches(model), script.PIECE)
    expected = torch.tensor(RESULTS["streaming"]["as trained"][:128])
    torch.testing.assert_close(nats, expected, atol=2e-3, rtol=0)
