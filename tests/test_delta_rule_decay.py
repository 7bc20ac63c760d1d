"""The gated delta rule's decay at its edges (issue 48): ``alpha_t`` of 0, of a float's smallest
numbers, and of 1, given as a probability (``decay=``) or in log space (``log_decay=``).

The old parallel and chunked forms took ``log(alpha)`` and subtracted cumulative sums: a decay of
0 gave ``-inf - (-inf)``, NaN, while the recurrent form stayed finite. Oracles: the recurrent
form (the definition) in float64, on the decays the tested dtype holds; a case of two tokens
by hand; and the rule's meaning, that a decay of 0 forgets every token before it. Sizes all
differ: N=2, H=3, L=13, D=4, D_v=5; chunks of 1, 4, 5 and 16 tokens.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from attnlib.linear_attention import (
    LinearAttention,
    StateCache,
    delta_rule,
    delta_rule_chunked,
    delta_rule_recurrent,
)
from hypothesis import given
from hypothesis import strategies as st

N, H, L, D, DV = 2, 3, 13, 4, 5
CHUNKS = [1, 4, 5, 16]
DTYPES = [torch.float64, torch.float32, torch.float16]
# alpha_t: exactly 0, tiny (1e-45 is float32's smallest subnormal; both round to 0 in float16),
# just below 1 and exactly 1
EDGES = [0.0, 1e-30, 1e-45, 1e-6, 0.5, 1.0 - 1e-7, 1.0]
TOL = {
    torch.float64: dict(rtol=1e-10, atol=1e-10),
    torch.float32: dict(rtol=1e-4, atol=1e-4),
    torch.float16: dict(rtol=2e-2, atol=2e-2),
}


def inputs(dtype, alpha, seed=0):
    """q, k, v, beta of the shapes above in ``dtype``, and ``alpha`` ``(N, H, L)`` in it."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(N, H, L, D, generator=g, dtype=torch.float64) / math.sqrt(D)
    k = torch.randn(N, H, L, D, generator=g, dtype=torch.float64)
    v = torch.randn(N, H, L, DV, generator=g, dtype=torch.float64)
    beta = torch.rand(N, H, L, generator=g, dtype=torch.float64)
    return [t.to(dtype) for t in (q, k, v, beta, alpha)]


def edge_decays(seed=0):
    """``(N, H, L)`` decays drawn from EDGES, with a 0 in the middle of every row."""
    g = torch.Generator().manual_seed(seed)
    alpha = torch.tensor(EDGES, dtype=torch.float64)[
        torch.randint(len(EDGES), (N, H, L), generator=g)
    ]
    alpha[..., L // 2] = 0.0
    return alpha


def reference(q, k, v, beta, alpha):
    """The recurrent form in float64 on exactly the numbers the tested dtype holds."""
    return delta_rule_recurrent(*(t.double() for t in (q, k, v, beta)), decay=alpha.double())


def forms(chunk_size):
    return {
        "recurrent": delta_rule_recurrent,
        "parallel": delta_rule,
        "chunked": lambda *a, **kw: delta_rule_chunked(*a, chunk_size=chunk_size, **kw),
    }


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("chunk_size", CHUNKS)
@pytest.mark.parametrize("space", ["decay", "log_decay"])
def test_every_form_is_finite_and_right_at_the_edges_of_the_decay(dtype, chunk_size, space):
    """Decays of 0, 1e-30, 1e-45 and 1 (the old parallel and chunked forms gave NaN): each form
    is finite and equals the float64 recurrent form, float16 within 2e-2."""
    q, k, v, beta, alpha = inputs(dtype, edge_decays())
    want, want_S = reference(q, k, v, beta, alpha)
    arg = {space: alpha if space == "decay" else torch.log(alpha)}  # -inf where alpha = 0
    for name, form in forms(chunk_size).items():
        out, S = form(q, k, v, beta, **arg)
        assert out.dtype == S.dtype == dtype
        assert torch.isfinite(out).all() and torch.isfinite(S).all(), name
        torch.testing.assert_close(out.double(), want, **TOL[dtype], msg=name)
        torch.testing.assert_close(S.double(), want_S, **TOL[dtype], msg=name)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_sigmoid_that_underflows_is_a_finite_log_decay(dtype):
    """``sigmoid(-120)`` is 0 in float32 (from -89; from -18 in float16), ``logsigmoid`` -120:
    the log-space decay is the one a layer passes; every form agrees with float64."""
    logits = torch.linspace(-120.0, 8.0, N * H * L, dtype=torch.float64).view(N, H, L)
    log_alpha = F.logsigmoid(logits.to(dtype))
    assert torch.isfinite(log_alpha).all()
    q, k, v, beta, _ = inputs(dtype, logits)
    want, want_S = delta_rule_recurrent(
        *(t.double() for t in (q, k, v, beta)), log_decay=log_alpha.double()
    )
    for name, form in forms(4).items():
        out, S = form(q, k, v, beta, log_decay=log_alpha)
        torch.testing.assert_close(out.double(), want, **TOL[dtype], msg=name)
        torch.testing.assert_close(S.double(), want_S, **TOL[dtype], msg=name)


@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 20),  # L
    st.integers(1, 21),  # chunk size
    st.lists(st.sampled_from(EDGES), min_size=1, max_size=20),
    st.sampled_from([torch.float64, torch.float32]),
)
def test_property_forms_agree_for_any_decay_in_0_1(seed, length, chunk, edges, dtype):
    """Any sequence of decays from 0 to 1 (edges and uniform draws), any chunking: the three
    forms agree and are finite."""
    g = torch.Generator().manual_seed(seed)
    alpha = torch.rand(1, 2, length, generator=g, dtype=torch.float64)
    edge = torch.tensor(edges, dtype=torch.float64)
    take = torch.rand(1, 2, length, generator=g) < 0.5
    alpha = torch.where(take, edge[torch.arange(length) % len(edges)], alpha).to(dtype)
    q, k = torch.randn(2, 1, 2, length, 3, generator=g, dtype=torch.float64).to(dtype)
    v = torch.randn(1, 2, length, 2, generator=g, dtype=torch.float64).to(dtype)
    beta = torch.rand(1, 2, length, generator=g, dtype=torch.float64).to(dtype)
    want, want_S = reference(q, k, v, beta, alpha)
    for name, form in forms(chunk).items():
        out, S = form(q, k, v, beta, decay=alpha)
        torch.testing.assert_close(out.double(), want, **TOL[dtype], msg=name)
        torch.testing.assert_close(S.double(), want_S, **TOL[dtype], msg=name)


@pytest.mark.parametrize("name", ["recurrent", "parallel", "chunked"])
@pytest.mark.parametrize("space", ["decay", "log_decay"])
def test_a_decay_of_0_by_hand(name, space):
    """L = 2, D = D_v = 1, keys 3 and 3 (normalised: 1 and 1), alpha = (1, 0): S_1 = 0.5 (4 - 0)
    = 2 and o_1 = 2 S_1 = 4; alpha_2 = 0 empties the state, S_2 = 0.25 (-2 - 0) = -0.5, and
    o_2 = -1 S_2 = 0.5 (without the reset: S_2 = 2 + 0.25 (-2 - 2) = 1)."""
    f64 = dict(dtype=torch.float64)
    q = torch.tensor([[[2.0], [-1.0]]], **f64)
    k = torch.tensor([[[3.0], [3.0]]], **f64)
    v = torch.tensor([[[4.0], [-2.0]]], **f64)
    beta = torch.tensor([[0.5, 0.25]], **f64)
    alpha = torch.tensor([[1.0, 0.0]], **f64)
    arg = {space: alpha if space == "decay" else torch.tensor([[0.0, -math.inf]], **f64)}
    out, S = forms(1 if name == "chunked" else 2)[name](q, k, v, beta, **arg)
    assert out.flatten().tolist() == [4.0, 0.5] and S.item() == -0.5


@pytest.mark.parametrize("chunk_size", CHUNKS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_a_decay_of_0_forgets_every_token_before_it(chunk_size, dtype):
    """alpha_t = 0 at t = 6: the outputs from t on and the final state do not depend on the
    tokens before t (nor on the state passed in), in every form: other keys, values and betas
    before t give the same numbers, and so does the sequence cut at t."""
    t = 6
    alpha = torch.rand(N, H, L, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    alpha[..., t] = 0.0
    q, k, v, beta, alpha = inputs(dtype, alpha)
    k2, v2, beta2 = k.clone(), v.clone(), beta.clone()
    k2[..., :t, :], v2[..., :t, :] = -3 * k[..., :t, :], v[..., :t, :] + 7
    beta2[..., :t] = 1 - beta[..., :t]
    state = torch.randn(N, H, D, DV, dtype=dtype)
    tol = TOL[torch.float64] if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-6)
    for name, form in forms(chunk_size).items():
        out, S = form(q, k, v, beta, decay=alpha)
        other, S_other = form(q, k2, v2, beta2, decay=alpha, state=state)
        cut = [x[..., t:, :] for x in (q, k, v)]
        alone, S_alone = form(*cut, beta[..., t:], decay=alpha[..., t:])
        torch.testing.assert_close(other[..., t:, :], out[..., t:, :], **tol, msg=name)
        torch.testing.assert_close(S_other, S, **tol, msg=name)
        torch.testing.assert_close(alone, out[..., t:, :], **tol, msg=name)
        torch.testing.assert_close(S_alone, S, **tol, msg=name)


def test_ordinary_decays_give_the_numbers_of_log_space_decays():
    """``decay=alpha`` and ``log_decay=log(alpha)`` are the same rule; the recurrent form with
    ``decay=`` multiplies by alpha itself (the chapter's numbers)."""
    alpha = 0.5 + 0.5 * torch.rand(N, H, L, generator=torch.Generator().manual_seed(2))
    q, k, v, beta, alpha = inputs(torch.float64, alpha.double())
    for name, form in forms(4).items():
        out, S = form(q, k, v, beta, decay=alpha)
        out_log, S_log = form(q, k, v, beta, log_decay=torch.log(alpha))
        torch.testing.assert_close(out_log, out, **TOL[torch.float64], msg=name)
        torch.testing.assert_close(S_log, S, **TOL[torch.float64], msg=name)


@pytest.mark.parametrize("name", ["recurrent", "parallel", "chunked"])
def test_gradients_through_log_decay_are_finite_at_a_reset(name):
    """A log-decay of -inf (a reset) or -1e4: finite gradients for every input. (Through
    ``decay=`` a decay of exactly 0 has none: the chain rule passes through ``log 0``.)"""
    log_alpha = torch.log(edge_decays(3))  # -inf where alpha = 0
    log_alpha[0, 0, 2] = -1e4
    q, k, v, beta, log_alpha = inputs(torch.float64, log_alpha)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v, beta, log_alpha)]
    out, S = forms(5)[name](*leaves[:4], log_decay=leaves[4])
    (out.square().sum() + S.sum()).backward()
    for leaf in leaves:
        assert torch.isfinite(leaf.grad).all()


@pytest.mark.parametrize("form", [delta_rule, delta_rule_recurrent, delta_rule_chunked])
@pytest.mark.parametrize(
    "arg,match",
    [
        (dict(decay=1.5), r"decay must hold probabilities alpha_t in \[0, 1\] .*; got \[1\.5\]"),
        (dict(decay=-0.25), r"decay must hold probabilities .* resets it\); got \[-0\.25\]"),
        (
            dict(decay=math.nan),
            r"decay must hold probabilities alpha_t in \[0, 1\] .*; got \[nan\]",
        ),
        (dict(log_decay=0.5), r"log_decay must hold log-decays log\(alpha_t\) <= 0 .*got \[0\.5\]"),
        (dict(log_decay=math.inf), r"log_decay must hold log-decays .* resets it\); got \[inf\]"),
        (dict(log_decay=math.nan), r"log_decay must hold log-decays .*; got \[nan\]"),
    ],
)
def test_a_decay_outside_its_range_is_refused(form, arg, match):
    q, k, v, beta, alpha = inputs(torch.float64, edge_decays())
    ((space, bad),) = arg.items()
    values = alpha if space == "decay" else torch.log(alpha)
    values[1, 2, 3] = bad
    with pytest.raises(ValueError, match=match):
        form(q, k, v, beta, **{space: values})


def test_decay_and_log_decay_are_not_both_given():
    q, k, v, beta, alpha = inputs(torch.float64, edge_decays())
    match = r"decay and log_decay must not both be given: decay= takes alpha_t in \[0, 1\]"
    for form in (delta_rule, delta_rule_recurrent, delta_rule_chunked):
        with pytest.raises(ValueError, match=match):
            form(q, k, v, beta, decay=alpha, log_decay=torch.log(alpha))
    with pytest.raises(ValueError, match=r"log_decay must have shape \(\.\.\., L\) = \(2, 3, 13\)"):
        delta_rule(q, k, v, beta, log_decay=alpha[..., :-1])
    with pytest.raises(TypeError, match=r"query and log_decay must have the same dtype"):
        delta_rule_chunked(q, k, v, beta, log_decay=alpha.float())


def test_log_decay_compiles_as_one_graph():
    """The range test reads values: skipped under torch.compile, which traces the rest."""
    q, k, v, beta, alpha = inputs(torch.float32, edge_decays())
    log_alpha = torch.log(alpha)

    def run(q, k, v, beta, log_alpha):
        return delta_rule_chunked(q, k, v, beta, log_decay=log_alpha, chunk_size=4)

    compiled = torch.compile(run, fullgraph=True, backend="eager")
    out, S = compiled(q, k, v, beta, log_alpha)
    want, want_S = run(q, k, v, beta, log_alpha)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(S, want_S)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("dtype,bias", [(torch.float32, -150.0), (torch.float16, -30.0)], ids=str)
def test_a_gated_layer_whose_sigmoid_underflows_stays_finite(dtype, bias):
    """A gated layer with its decay's bias at -150 (float32) or -30 (float16): sigmoid rounds
    to 0, the layer's logsigmoid does not; outputs and gradients are finite (the old layer gave
    NaN), and a text fed token by token gives the output of one pass."""
    torch.manual_seed(0)
    layer = LinearAttention(12, 3, rule="gated_delta", chunk_size=4, bias=True)
    with torch.no_grad():
        layer.decay_proj.bias.fill_(bias)
    layer = layer.to(dtype)
    x = torch.randn(2, 9, 12, dtype=dtype)
    assert (torch.sigmoid(layer.decay_proj(x)) == 0).any()
    out = layer(x)
    assert torch.isfinite(out).all()
    if dtype == torch.float32:
        out.square().sum().backward()
        assert all(torch.isfinite(p.grad).all() for p in layer.parameters())
    cache = StateCache()
    with torch.no_grad():
        steps = torch.cat([layer(x[:, i : i + 1], cache=cache) for i in range(9)], dim=1)
    torch.testing.assert_close(steps, out.detach(), **TOL[dtype])
