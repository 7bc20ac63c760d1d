"""attnlib.positions: sinusoidal encoding, rotary embedding (RoPE), ALiBi.

Oracles: the formulas written out element by element, RoPE as complex multiplication (the
form of Meta's LLaMA reference code), the rotate-half layout up to a column permutation,
and ALiBi's slopes as in the paper's reference implementation.
"""

import math

import attnlib
import pytest
import torch
import torch.nn.functional as F
from attnlib.positions import alibi_bias, alibi_slopes, rotary_embedding, sinusoidal_encoding
from hypothesis import given
from hypothesis import strategies as st

# ---- sinusoidal encoding ----------------------------------------------------------------


def test_sinusoidal_hand_computed():
    pe = sinusoidal_encoding(3, 4)
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [math.sin(1), math.cos(1), math.sin(1 / 100), math.cos(1 / 100)],
            [math.sin(2), math.cos(2), math.sin(2 / 100), math.cos(2 / 100)],
        ]
    )
    torch.testing.assert_close(pe, expected)
    assert pe.dtype == torch.float32 and pe.shape == (3, 4)


@pytest.mark.parametrize("length,dim,base", [(7, 6, 10000.0), (11, 50, 10000.0), (5, 2, 3.0)])
def test_sinusoidal_matches_the_formula_element_by_element(length, dim, base):
    pe = sinusoidal_encoding(length, dim, base=base, dtype=torch.float64)
    for p in range(length):
        for i in range(dim // 2):
            angle = p / base ** (2 * i / dim)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_sinusoidal_dot_product_depends_on_distance_only():
    pe = sinusoidal_encoding(40, 16, dtype=torch.float64)
    gram = pe @ pe.T  # (40, 40)
    for k in range(1, 10):  # PE_p . PE_{p+k} = sum_i cos(k w_i), whatever p
        diagonal = torch.diagonal(gram, offset=k)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal))
    torch.testing.assert_close(torch.diagonal(gram), torch.full((40,), 8.0, dtype=torch.float64))


def test_sinusoidal_dtype_and_device():
    assert sinusoidal_encoding(2, 2, dtype=torch.float16).dtype == torch.float16


@pytest.mark.parametrize(
    "args,kwargs,error,match",
    [
        ((4, 5), {}, ValueError, r"dim must be even \(sin and cos columns come in pairs\); got 5"),
        ((0, 4), {}, ValueError, r"length must be a positive integer; got 0"),
        ((4, 0), {}, ValueError, r"dim must be a positive integer; got 0"),
        ((4.0, 4), {}, TypeError, r"length must be a positive integer; got float 4.0"),
        ((4, 4), {"base": 1.0}, ValueError, r"base must be a number > 1; got 1.0"),
        ((4, 4), {"base": float("inf")}, ValueError, r"base must be finite; got inf"),
        ((4, 4), {"base": "10"}, TypeError, r"base must be a number > 1; got str '10'"),
        ((4, 4), {"dtype": torch.int64}, TypeError, r"dtype must be a floating-point torch.dtype"),
    ],
)
def test_sinusoidal_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        sinusoidal_encoding(*args, **kwargs)


# ---- rotary embedding -------------------------------------------------------------------


def rope_complex(x, positions, base=10000.0):
    """LLaMA's reference form: pairs as complex numbers times e^{i p theta}."""
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = positions.to(torch.float64)[:, None] * theta  # (L, D/2)
    z = torch.view_as_complex(x.to(torch.float64).unflatten(-1, (D // 2, 2)).contiguous())
    rotated = torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles))
    return rotated.flatten(-2).to(x.dtype)


def rope_rotate_half(x, positions, base=10000.0):
    """LLaMA-style "rotate half" layout: column i is paired with column i + D/2."""
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = positions.to(torch.float64)[:, None] * theta
    cos = torch.cat([angles.cos(), angles.cos()], -1).to(x.dtype)
    sin = torch.cat([angles.sin(), angles.sin()], -1).to(x.dtype)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def test_rotary_hand_computed():
    x = torch.tensor([[1.0, 0.0, 0.0, 2.0], [1.0, 0.0, 0.0, 2.0]])
    out = rotary_embedding(x, base=4.0)  # theta = (1, 1/2)
    expected = torch.tensor(
        [
            [1.0, 0.0, 0.0, 2.0],
            [math.cos(1), math.sin(1), -2 * math.sin(0.5), 2 * math.cos(0.5)],
        ]
    )
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("shape", [(5, 8), (2, 7, 6), (2, 3, 5, 4)])
def test_rotary_matches_complex_multiplication(shape):
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=torch.float64)
    positions = torch.tensor([3, 0, 17, 2, 9, 1, 4])[: shape[-2]]
    torch.testing.assert_close(rotary_embedding(x, positions), rope_complex(x, positions))
    default = torch.arange(shape[-2])
    torch.testing.assert_close(rotary_embedding(x), rope_complex(x, default))


def test_rotate_half_is_the_same_rotation_with_columns_permuted():
    torch.manual_seed(1)
    D = 8
    x = torch.randn(2, 6, D, dtype=torch.float64)
    perm = torch.cat([torch.arange(0, D, 2), torch.arange(1, D, 2)])  # even cols, then odd
    positions = torch.arange(6)
    ours = rotary_embedding(x, positions)
    # interleaved (x0, x1, x2, x3, ...) <-> halves (x0, x2, ..., x1, x3, ...)
    torch.testing.assert_close(ours[..., perm], rope_rotate_half(x[..., perm], positions))


def test_rotary_scores_depend_on_relative_position_only():
    torch.manual_seed(2)
    q, k = torch.randn(2, 16, dtype=torch.float64)
    L = 12
    Q = rotary_embedding(q.expand(L, 16))  # the same query at positions 0..L-1
    K = rotary_embedding(k.expand(L, 16))
    scores = Q @ K.T  # (L, L): entry (m, n) depends only on n - m
    for offset in range(-L + 1, L):
        d = torch.diagonal(scores, offset=offset)
        torch.testing.assert_close(d, d[:1].expand_as(d))
    assert not torch.allclose(torch.diagonal(scores, 1)[0], torch.diagonal(scores, 2)[0])


def test_rotary_preserves_norms_and_shifting_all_positions_changes_no_score():
    torch.manual_seed(3)
    q, k = torch.randn(2, 5, 6, dtype=torch.float64)
    pos = torch.arange(5)
    torch.testing.assert_close(rotary_embedding(q, pos).norm(dim=-1), q.norm(dim=-1))
    scores = rotary_embedding(q, pos) @ rotary_embedding(k, pos).T
    shifted = rotary_embedding(q, pos + 100) @ rotary_embedding(k, pos + 100).T
    torch.testing.assert_close(scores, shifted)


def test_rotary_float_positions_and_dtype_kept():
    x = torch.randn(3, 4, dtype=torch.float16)
    out = rotary_embedding(x, torch.tensor([0.0, 0.5, 1.5]))
    assert out.dtype == torch.float16 and out.shape == (3, 4)


@given(
    L=st.integers(1, 6),
    half=st.integers(1, 4),
    batch=st.lists(st.integers(1, 3), max_size=2),
    seed=st.integers(0, 2**16),
)
def test_property_rotary_inverse_is_rotation_by_minus_position(L, half, batch, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*batch, L, 2 * half, generator=g, dtype=torch.float64)
    pos = torch.randint(0, 1000, (L,), generator=g)
    torch.testing.assert_close(rotary_embedding(rotary_embedding(x, pos), -pos), x)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(x=torch.zeros(3, 5)), ValueError, r"x must have an even last dimension D .*\(3, 5\)"),
        (dict(x=torch.zeros(4)), ValueError, r"x must be at least 2-D; got 1-D"),
        (dict(x=torch.zeros(3, 4, dtype=torch.long)), TypeError, r"x must be a floating-point"),
        (
            dict(x=torch.zeros(3, 4), positions=torch.arange(4)),
            ValueError,
            r"positions must have shape \(L=3,\), one position per row .*; got \(4,\)",
        ),
        (dict(x=torch.zeros(3, 4), positions=[0, 1, 2]), TypeError, r"positions must be a torch"),
        (dict(x=torch.zeros(3, 4), base=0.5), ValueError, r"base must be a number > 1; got 0.5"),
    ],
)
def test_rotary_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        rotary_embedding(**kwargs)


# ---- ALiBi ----------------------------------------------------------------------------------


def paper_slopes(n):
    """ofirpress/attention_with_linear_biases, get_slopes (fairseq's models/transformer.py)."""

    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + paper_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )


def test_alibi_slopes_of_eight_heads_are_halves():
    expected = torch.tensor([2.0**-k for k in range(1, 9)])
    torch.testing.assert_close(alibi_slopes(8), expected)


def test_alibi_slopes_not_a_power_of_two_hand_computed():
    torch.testing.assert_close(
        alibi_slopes(6), torch.tensor([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])
    )


@pytest.mark.parametrize("H", [1, 2, 3, 5, 6, 7, 8, 12, 16, 20, 24, 32])
def test_alibi_slopes_match_the_papers_code(H):
    torch.testing.assert_close(alibi_slopes(H), torch.tensor(paper_slopes(H), dtype=torch.float32))


def test_alibi_bias_formula():
    H, L, S = 3, 4, 6
    bias = alibi_bias(H, L, S)
    assert bias.shape == (H, L, S) and bias.dtype == torch.float32
    m = alibi_slopes(H)
    for h in range(H):
        for i in range(L):
            for j in range(S):
                assert bias[h, i, j].item() == pytest.approx(-m[h].item() * abs(i - j))
    assert not torch.signbit(torch.diagonal(bias, dim1=1, dim2=2)).any()  # +0.0, not -0.0
    assert torch.equal(alibi_bias(2, 5), alibi_bias(2, 5, 5))


def test_alibi_as_float_mask_equals_torch_sdpa():
    torch.manual_seed(4)
    N, H, L, D = 2, 4, 5, 3
    q, k, v = torch.randn(3, N, H, L, D).unbind(0)
    bias = alibi_bias(H, L) + torch.where(attnlib.causal_mask(L), 0.0, -math.inf)  # (H, L, L)
    out, w = attnlib.scaled_dot_product_attention(q, k, v, mask=bias)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    assert (w.triu(1) == 0).all()


@pytest.mark.parametrize(
    "args,match",
    [
        ((0, 3), r"num_heads must be a positive integer; got 0"),
        ((2, 0), r"L must be a positive integer; got 0"),
        ((2, 3, -1), r"S must be a positive integer; got -1"),
        ((2.5, 3), r"num_heads must be a positive integer; got float 2.5"),
    ],
)
def test_alibi_bad_input(args, match):
    error = ValueError if all(type(a) is int for a in args) else TypeError
    with pytest.raises(error, match=match):
        alibi_bias(*args)
