"""attnlib.similarity: cosine of vectors and of the rows of matrices."""

import math

import pytest
import torch
from attnlib import cosine_matrix, cosine_similarity
from conftest import SHIP_SENTENCE


def test_cosine_by_hand():
    u, v = torch.tensor([1.0, 2.0, 2.0]), torch.tensor([3.0, 0.0, 4.0])
    # u.v = 3 + 8 = 11, |u| = 3, |v| = 5
    assert cosine_similarity(u, v).item() == pytest.approx(11 / 15, abs=1e-7)
    assert cosine_similarity(u, v).shape == ()


def test_cosine_special_angles():
    e1, e2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    assert cosine_similarity(e1, e2).item() == 0.0
    assert cosine_similarity(e1, -e1).item() == pytest.approx(-1.0)
    assert cosine_similarity(e1, 7 * e1).item() == pytest.approx(1.0)
    assert cosine_similarity(e1, e1 + e2).item() == pytest.approx(1 / math.sqrt(2))
    assert cosine_similarity(torch.zeros(2), e1).item() == 0.0  # not NaN


def test_cosine_matrix_by_hand():
    X = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, -2.0]])
    Y = torch.tensor([[3.0, 4.0], [0.0, 1.0]])
    r = 1 / math.sqrt(2)
    expected = [[0.6, 0.0], [7 / 5 * r, r], [-0.8, -1.0]]
    C = cosine_matrix(X, Y)
    assert C.shape == (3, 2)
    torch.testing.assert_close(C, torch.tensor(expected))
    for i in range(3):
        for j in range(2):
            torch.testing.assert_close(C[i, j], cosine_similarity(X[i], Y[j]))


def test_cosine_matrix_defaults_to_itself():
    X = torch.randn(5, 4)
    C = cosine_matrix(X)
    torch.testing.assert_close(C, C.T)
    torch.testing.assert_close(C.diagonal(), torch.ones(5))
    torch.testing.assert_close(C, cosine_matrix(X, X))


def test_cosine_row_of_ship(glove):
    X = glove.matrix(SHIP_SENTENCE)
    C = cosine_matrix(X)
    seed = [0.35, 0.42, 0.41, 0.49, 0.54, 0.38, 1.00, 0.46, 0.54, 0.38, 0.78]
    assert [round(c, 2) for c in C[6].tolist()] == seed
    assert cosine_similarity(glove["ship"], glove["crew"]).item() == pytest.approx(0.7848, abs=1e-4)


def test_bad_cosine_inputs():
    with pytest.raises(
        ValueError, match=r"u and v must have the same length; got u \(3,\) and v \(2,\)"
    ):
        cosine_similarity(torch.ones(3), torch.ones(2))
    with pytest.raises(ValueError, match=r"u must be 1-D; got 2-D with shape \(1, 3\)"):
        cosine_similarity(torch.ones(1, 3), torch.ones(3))
    with pytest.raises(TypeError, match="v must be a torch.Tensor; got list"):
        cosine_similarity(torch.ones(2), [1.0, 2.0])
    with pytest.raises(ValueError, match=r"Y must have shape \(m, D=3\) like X; got \(4, 2\)"):
        cosine_matrix(torch.ones(2, 3), torch.ones(4, 2))
    with pytest.raises(ValueError, match=r"X must be 2-D; got 1-D with shape \(3,\)"):
        cosine_matrix(torch.ones(3))
    with pytest.raises(TypeError, match="X must be a floating-point tensor; got dtype torch.int64"):
        cosine_matrix(torch.ones(2, 3, dtype=torch.long))
