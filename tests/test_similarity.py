"""attnlib.similarity: cosine of vectors and of the rows of matrices.

Hand-computed cases, then oracles (exact rational arithmetic, scipy, float64 NumPy) on
hypothesis-drawn vectors whose sizes span each dtype's whole range, the documented
choices for zero, NaN and infinite vectors, and bad input.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.spatial.distance
import torch
from attnlib import cosine_matrix, cosine_similarity
from conftest import SHIP_SENTENCE
from hypothesis import given
from hypothesis import strategies as st


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


ONE = torch.ones(3)
ROWS = torch.ones(2, 3)

BAD_COSINE_INPUTS = [
    # (function, arguments, exception, message)
    (
        cosine_similarity,
        (torch.ones(3), torch.ones(2)),
        ValueError,
        r"u and v must have the same length; got u \(3,\) and v \(2,\)",
    ),
    (
        cosine_similarity,
        (torch.ones(1, 3), ONE),
        ValueError,
        r"u must be 1-D; got 2-D with shape \(1, 3\); for the cosines of the rows of "
        r"matrices use cosine_matrix",
    ),
    (
        cosine_similarity,
        (torch.tensor(1.0), ONE),
        ValueError,
        r"u must be 1-D; got 0-D with shape \(\)",
    ),
    (
        cosine_similarity,
        (ONE, [1.0, 2.0, 2.0]),
        TypeError,
        r"v must be a torch.Tensor; got list; convert it with torch.as_tensor\(v\)",
    ),
    (
        cosine_similarity,
        (np.ones(3), ONE),
        TypeError,
        r"u must be a torch.Tensor; got ndarray; convert it with torch.as_tensor\(u\)",
    ),
    (cosine_similarity, (ONE, "ship"), TypeError, r"v must be a torch.Tensor; got str$"),
    (
        cosine_similarity,
        (torch.tensor([1, 2, 2]), ONE),
        TypeError,
        r"u must be a floating-point tensor; got dtype torch.int64; convert it with u.float\(\)",
    ),
    (
        cosine_similarity,
        (ONE, torch.ones(3, dtype=torch.bool)),
        TypeError,
        r"v must be a floating-point tensor; got dtype torch.bool; convert it with v.float\(\)",
    ),
    (
        cosine_similarity,
        (ONE, torch.ones(3, dtype=torch.complex64)),
        TypeError,
        r"v must be a floating-point tensor; got dtype torch.complex64",
    ),
    (
        cosine_similarity,
        (torch.ones(0), torch.ones(0)),
        ValueError,
        r"u must have at least one component \(D >= 1\); got shape \(0,\)",
    ),
    (
        cosine_similarity,
        (ONE, torch.ones(3, device="meta")),
        ValueError,
        r"u and v must be on the same device; got u on cpu and v on meta",
    ),
    (
        cosine_matrix,
        (ROWS, torch.ones(4, 2)),
        ValueError,
        r"Y must have shape \(m, D=3\) like X; got \(4, 2\)",
    ),
    (
        cosine_matrix,
        (ONE,),
        ValueError,
        r"X must be 2-D; got 1-D with shape \(3,\); for two vectors use cosine_similarity, "
        r"for one vector as a row use X\[None\]",
    ),
    (cosine_matrix, (ROWS, ONE), ValueError, r"Y must be 2-D; got 1-D with shape \(3,\)"),
    (
        cosine_matrix,
        (torch.ones(2, 2, 3),),
        ValueError,
        r"X must be 2-D; got 3-D with shape \(2, 2, 3\)",
    ),
    (
        cosine_matrix,
        (torch.ones(2, 3, dtype=torch.long),),
        TypeError,
        r"X must be a floating-point tensor; got dtype torch.int64; convert it with X.float\(\)",
    ),
    (
        cosine_matrix,
        (np.ones((2, 3)),),
        TypeError,
        r"X must be a torch.Tensor; got ndarray; convert it with torch.as_tensor\(X\)",
    ),
    (
        cosine_matrix,
        (ROWS, [[1.0, 0.0, 0.0]]),
        TypeError,
        r"Y must be a torch.Tensor; got list; convert it with torch.as_tensor\(Y\)",
    ),
    (
        cosine_matrix,
        (torch.ones(2, 0),),
        ValueError,
        r"X must have at least one component \(D >= 1\); got shape \(2, 0\)",
    ),
    (
        cosine_matrix,
        (ROWS, torch.ones(2, 3, device="meta")),
        ValueError,
        r"X and Y must be on the same device; got X on cpu and Y on meta",
    ),
]


@pytest.mark.parametrize(
    ("function", "args", "error", "message"),
    [pytest.param(*case, id=f"{case[0].__name__}-{i}") for i, case in enumerate(BAD_COSINE_INPUTS)],
)
def test_bad_cosine_inputs(function, args, error, message):
    with pytest.raises(error, match=message):
        function(*args)


# ---------------------------------------------------------------- oracles


def exact_cosine(u, v):
    """The cosine of two lists of floats, exact up to the final rounding: every product
    and sum in rationals (``Fraction``), then one square root. Independent of attnlib's
    computation (no scaling, no floating-point norm); zero vectors give 0, as documented."""
    fu, fv = [Fraction(x) for x in u], [Fraction(x) for x in v]
    dot = sum(a * b for a, b in zip(fu, fv))
    uu, vv = sum(a * a for a in fu), sum(b * b for b in fv)
    if uu == 0 or vv == 0:
        return 0.0
    size = math.sqrt(dot * dot / (uu * vv))  # |cos|, a Fraction in [0, 1] rounded once
    return size if dot >= 0 else -size


def scipy_cosine(x, y):
    """scipy.spatial.distance.cosine (1 - cos) in float64; 0 with a zero vector."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if not x.any() or not y.any():
        return 0.0
    return 1.0 - scipy.spatial.distance.cosine(x, y)


# Per dtype: the range of exponents e of 2**e that a vector's largest entry may reach (from
# the smallest subnormal to just below the overflow), and the precision of the computation
# (float16 and bfloat16 are computed in float32).
EXPONENTS = {
    torch.float16: (-20, 15),
    torch.bfloat16: (-130, 126),
    torch.float32: (-140, 126),
    torch.float64: (-1060, 1022),
}
COMPUTED_IN = {torch.float16: torch.float32, torch.bfloat16: torch.float32}


def tolerance(dtype, d):
    """Absolute error allowed on a cosine in [-1, 1]: the final rounding to ``dtype`` and
    a few roundings per component in the precision of the computation."""
    compute = COMPUTED_IN.get(dtype, dtype)
    return 2 * torch.finfo(dtype).eps + 4 * d * torch.finfo(compute).eps


@st.composite
def scaled_rows(draw, dtype, n, d):
    """An (n, d) tensor of ``dtype`` whose rows each have their own magnitude, 2**e for an
    exponent e drawn over the dtype's whole range (so tiny, ordinary and huge rows meet)."""
    lo, hi = EXPONENTS[dtype]
    rows = []
    for _ in range(n):
        exponent = draw(st.integers(lo, hi))
        mantissas = draw(st.lists(st.floats(-1.0, 1.0), min_size=d, max_size=d))
        rows.append([m * 2.0**exponent for m in mantissas])
    return torch.tensor(rows, dtype=torch.float64).to(dtype)


DTYPES = st.sampled_from([torch.float16, torch.bfloat16, torch.float32, torch.float64])


@st.composite
def vector_pairs(draw):
    dtype = draw(DTYPES)
    d = draw(st.integers(1, 12))
    uv = draw(scaled_rows(dtype, 2, d))
    return uv[0], uv[1]


@st.composite
def matrix_pairs(draw):
    dtype = draw(st.sampled_from([torch.float16, torch.bfloat16, torch.float32]))
    d = draw(st.integers(1, 8))
    X = draw(scaled_rows(dtype, draw(st.integers(1, 5)), d))
    Y = draw(st.none() | scaled_rows(dtype, draw(st.integers(1, 4)), d))
    return X, Y


# ---------------------------------------------------------------- tiny and huge vectors


@pytest.mark.parametrize("scale", [1e-13, 1e-20, 1e-38, 1e-42, 1e20, 1e30, 5e37])
def test_cosine_of_tiny_and_huge_float32_vectors(scale):
    # Before: F.normalize's eps=1e-12 floor shrank the cosine of tiny vectors (0.11 for
    # 1e-13 instead of 11/15), and |u|^2 overflowed float32 for entries ~1e20 (cosine 0).
    u = torch.tensor([1.0, 2.0, 2.0]) * scale
    v = torch.tensor([3.0, 0.0, 4.0]) * scale
    expected = exact_cosine(u.tolist(), v.tolist())  # 11/15, up to subnormal rounding of u, v
    assert cosine_similarity(u, v).item() == pytest.approx(expected, abs=1e-6)
    C = cosine_matrix(torch.stack([u, v]))
    torch.testing.assert_close(
        C, torch.tensor([[1.0, expected], [expected, 1.0]]), atol=1e-6, rtol=0
    )


def test_cosine_of_vectors_of_very_different_sizes():
    u = torch.tensor([1.0, 2.0, 2.0]) * 1e-30
    v = torch.tensor([3.0, 0.0, 4.0]) * 1e30
    assert cosine_similarity(u, v).item() == pytest.approx(11 / 15, abs=1e-7)
    torch.testing.assert_close(
        cosine_matrix(u[None], v[None]), torch.tensor([[11 / 15]]), atol=1e-7, rtol=0
    )


@pytest.mark.parametrize("scale", [1e-200, 1e-310, 1e200, 1e300])
def test_cosine_of_tiny_and_huge_float64_vectors(scale):
    # Before: |u|^2 underflowed to 0 (1e-200) or overflowed to inf (1e200) in float64 too.
    u = torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64) * scale
    v = torch.tensor([3.0, 0.0, 4.0], dtype=torch.float64) * scale
    expected = exact_cosine(u.tolist(), v.tolist())
    result = cosine_similarity(u, v)
    assert result.dtype == torch.float64
    assert result.item() == pytest.approx(expected, abs=1e-15)
    assert cosine_matrix(torch.stack([u, v]))[0, 1].item() == pytest.approx(expected, abs=1e-15)


def test_cosine_of_large_float16_vectors():
    # Before: |u| = 6e4 * sqrt(2) passed float16's largest number, 65504: cosine 0.
    u = torch.tensor([6e4, 6e4, 0.0], dtype=torch.float16)
    v = torch.tensor([6e4, 0.0, 0.0], dtype=torch.float16)
    result = cosine_similarity(u, v)
    assert result.dtype == torch.float16
    assert result.item() == pytest.approx(1 / math.sqrt(2), abs=1e-3)
    C = cosine_matrix(torch.stack([u, v]))
    assert C.dtype == torch.float16
    assert C[0, 1].item() == pytest.approx(1 / math.sqrt(2), abs=1e-3)


@given(vector_pairs())
def test_cosine_similarity_matches_exact_oracle(uv):
    u, v = uv
    result = cosine_similarity(u, v)
    assert result.dtype == u.dtype and result.shape == ()
    expected = exact_cosine(u.double().tolist(), v.double().tolist())
    assert abs(result.item() - expected) <= tolerance(u.dtype, len(u))
    assert -1.0 <= result.item() <= 1.0


@given(matrix_pairs())
def test_cosine_matrix_matches_scipy(XY):
    X, Y = XY
    C = cosine_matrix(X, Y)
    Y = X if Y is None else Y
    assert C.dtype == X.dtype and C.shape == (len(X), len(Y))
    expected = [[scipy_cosine(x, y) for y in Y.double().numpy()] for x in X.double().numpy()]
    atol = tolerance(X.dtype, X.shape[1])
    torch.testing.assert_close(
        C.double(), torch.tensor(expected, dtype=torch.float64), atol=atol, rtol=0
    )
    assert C.abs().max().item() <= 1.0


def test_cosines_never_leave_minus_one_to_one():
    # Before: rounding gave 1.0000002 on the diagonal (and acos of it is NaN).
    X = torch.randn(200, 50)
    C = cosine_matrix(X)
    assert C.max().item() <= 1.0 and C.min().item() >= -1.0
    assert not torch.acos(C).isnan().any()
    for x in X[:50]:
        assert cosine_similarity(x, x).item() <= 1.0
        assert cosine_similarity(x, -x).item() >= -1.0


# ---------------------------------------------------------------- zero, NaN, infinity


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_zero_vectors_have_cosine_zero(dtype):
    # Before: in float16, F.normalize's eps=1e-12 rounded to 0 and a zero vector gave NaN.
    u, z = torch.tensor([3.0, 4.0], dtype=dtype), torch.zeros(2, dtype=dtype)
    assert cosine_similarity(z, u).item() == 0.0
    assert cosine_similarity(u, z).item() == 0.0
    assert cosine_similarity(z, z).item() == 0.0
    X = torch.tensor([[3.0, 4.0], [0.0, 0.0], [4.0, -3.0]], dtype=dtype)
    C = cosine_matrix(X)
    expected = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=dtype)
    torch.testing.assert_close(C, expected)
    assert not C.isnan().any()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinite_entries_give_nan_where_they_are(bad):
    u = torch.tensor([1.0, bad, 0.0])
    v = torch.tensor([1.0, 1.0, 1.0])
    assert math.isnan(cosine_similarity(u, v).item())
    assert math.isnan(cosine_similarity(v, u).item())
    X = torch.stack([v, u, torch.tensor([0.0, 1.0, 0.0])])
    C = cosine_matrix(X)
    nan = C.isnan()
    assert nan[1].all() and nan[:, 1].all()  # the bad row and column ...
    assert nan.sum().item() == 5  # ... and nothing else
    assert C[0, 2].item() == pytest.approx(1 / math.sqrt(3))


# ---------------------------------------------------------------- dtypes, devices, shapes


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_dtype_is_kept(dtype):
    u = torch.tensor([1.0, 2.0, 2.0], dtype=dtype)
    v = torch.tensor([3.0, 0.0, 4.0], dtype=dtype)
    result = cosine_similarity(u, v)
    assert result.dtype == dtype
    assert result.item() == pytest.approx(11 / 15, abs=2 * torch.finfo(dtype).eps)
    C = cosine_matrix(torch.stack([u, v]), v[None])
    assert C.dtype == dtype and C.shape == (2, 1)


def test_mixed_dtypes_are_promoted():
    # Before: a RuntimeError from inside torch ("expected both vectors to have same dtype").
    u = torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64)
    v = torch.tensor([3.0, 0.0, 4.0])
    for a, b in [(u, v), (v, u)]:
        result = cosine_similarity(a, b)
        assert result.dtype == torch.float64
        assert result.item() == pytest.approx(11 / 15, abs=1e-7)
    C = cosine_matrix(u[None], v[None].half())
    assert C.dtype == torch.float64
    assert C.item() == pytest.approx(11 / 15, abs=1e-7)


def test_empty_matrices_give_empty_results():
    assert cosine_matrix(torch.ones(0, 3)).shape == (0, 0)
    assert cosine_matrix(torch.ones(0, 3), torch.ones(2, 3)).shape == (0, 2)
    assert cosine_matrix(torch.ones(2, 3), torch.ones(0, 3)).shape == (2, 0)


def test_gradient_matches_the_formula():
    u = torch.tensor([1e-3, -2e-3, 5e-4], dtype=torch.float64, requires_grad=True)
    v = torch.tensor([3.0, 0.5, -4.0], dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(cosine_similarity, (u, v))
    (got_u, got_v) = torch.autograd.grad(cosine_similarity(u, v), (u, v))
    formula = (u @ v) / (u.norm() * v.norm())
    (want_u, want_v) = torch.autograd.grad(formula, (u, v))
    torch.testing.assert_close(got_u, want_u)
    torch.testing.assert_close(got_v, want_v)
    X = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(cosine_matrix, (X,))


def test_glove_matrix_against_numpy(glove):
    # The chapter's (1, V) cosines of ship with all 400,000 words, against float64 NumPy.
    C = cosine_matrix(glove["ship"][None], glove.vectors)
    V = glove.vectors.double().numpy()
    s = glove["ship"].double().numpy()
    expected = V @ s / (np.linalg.norm(V, axis=1) * np.linalg.norm(s))
    assert C.shape == (1, len(V)) and C.dtype == torch.float32
    np.testing.assert_allclose(C[0].numpy(), expected, rtol=0, atol=1e-6)
