"""_ext/figure_alt.py reads the TeX of a caption as plain text, for the figure's alt text."""

import pytest
from figure_alt import plain_tex


@pytest.mark.parametrize(
    ("tex", "text"),
    [
        (r"\mathbf{u} = (2, 1)", "u = (2, 1)"),
        (r"\frac{q \cdot k}{\sqrt{d_k}}", "(q · k)/(√d_k)"),
        (r"\mathrm{softmax}(QK^\top / \sqrt{d})", "softmax(QK^ᵀ / √d)"),
        (r"\left\lVert \mathbf{v} \right\rVert", "‖ v ‖"),
    ],
)
def test_plain_tex(tex, text):
    assert plain_tex(tex) == text
