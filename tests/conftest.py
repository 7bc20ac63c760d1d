"""Shared set-up for the attnlib tests.

Keras picks its backend once, at its first import, from ``KERAS_BACKEND``; matplotlib
picks its backend at its first ``pyplot`` import. Both are set here, before any test
module (or attnlib) can import them.
"""

import os

os.environ["KERAS_BACKEND"] = "torch"
os.environ["MPLBACKEND"] = "Agg"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GLOVE_SUBSET = ROOT / "data" / "glove.6B.50d.subset.txt"

# Property tests: few examples, no deadline (the first call of a torch op can be slow),
# derandomized so every run checks the same examples, no example database on disk.
settings.register_profile(
    "attnlib",
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    # the autouse seed fixture below runs once per test, not per example: the property
    # tests draw their own seeds from hypothesis
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("attnlib")

# The 3 x 4 matrix of seeds 000 and 003, small enough to check by hand.
X3_ROWS = [[1.0, 0.0, 0.0, 1.0], [0.0, 1.5, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]]

SHIP_SENTENCE = "I must go back to my ship and to my crew"
AMAZON_SENTENCE = "We process and ship your order"
SHIP_START = [1.5213, 0.10522, 0.38162, -0.50801]  # the first numbers of "ship" in GloVe 6B 50d

CAT_DOG = (["cat", "dog"], [[1.0, 2.0], [3.0, 4.0]])  # words, vectors of a tiny GloVe file


def assert_embeddings(e, words, vectors):
    """``e`` holds exactly ``words`` and ``vectors`` (as float32, bit for bit)."""
    assert e.words == words
    assert e.vectors.dtype == torch.float32
    assert np.array_equal(e.vectors.numpy(), np.asarray(vectors, dtype=np.float32))


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    torch.manual_seed(0)


@pytest.fixture
def X3():
    return torch.tensor(X3_ROWS)


@pytest.fixture(scope="session")
def glove():
    """The packaged GloVe 6B 50d vectors (memory-mapped; loaded once)."""
    import attnlib

    return attnlib.load_glove()


@pytest.fixture(scope="session")
def small_embeddings():
    """A five-word vocabulary with vectors small enough to reason about."""
    from attnlib.embeddings import Embeddings

    words = ["ship", "crew", "boat", "sea", "order"]
    vectors = torch.tensor(
        [[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.9, 0.1, 0.1], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    )
    return Embeddings(words, vectors)
