"""The diagrams in figures/ are what scripts/draw_diagrams.py draws, byte for byte.

If this fails after a change to the script, run ``python scripts/draw_diagrams.py`` and
commit the new SVG files; if it fails with nothing changed, the installed matplotlib is not
the pinned one (requirements.txt): its SVG writer's output differs between versions.
"""

from pathlib import Path

import draw_diagrams
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "draw_diagrams.py"
NAMES = [
    "weighted_sum.svg",
    "qkv_projections.svg",
    "heads_split_merge.svg",
    "tiled_attention.svg",
    "transformer_block.svg",
    "dot_product.svg",
    "softmax.svg",
    "masks.svg",
    "training_loop.svg",
    "positions.svg",
    "next_token.svg",
    "kv_cache.svg",
    "induction_circuit.svg",
    "encoder_decoder.svg",
]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    written = draw_diagrams.main(out)
    assert sorted(p.name for p in written) == sorted(NAMES)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_committed_diagram_is_what_the_script_draws(drawn, name):
    committed = ROOT / "figures" / name
    assert committed.exists(), f"figures/{name} is missing: run scripts/draw_diagrams.py"
    assert (drawn / name).read_bytes() == committed.read_bytes(), (
        f"figures/{name} differs from what scripts/draw_diagrams.py draws: run the script "
        "and commit the result"
    )


@pytest.mark.parametrize("name", NAMES)
def test_diagram_is_small_and_has_no_date(drawn, name):
    svg = (drawn / name).read_text(encoding="utf-8")
    assert len(svg.encode()) <= 100_000
    assert "<dc:date>" not in svg
    assert svg.count("<svg ") == 1 and 'width="576pt"' in svg  # 8 inches wide
