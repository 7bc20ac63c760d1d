"""attnlib.convert: the same weights in attnlib, torch.nn.MultiheadAttention and Keras 3.

PyTorch and Keras are the oracles: weights are copied, then outputs and attention weights
must agree. Sizes are all different (E=12, L=5, S=7, N=2, H in 1, 3, 4).
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from attnlib import MultiHeadAttention, NaiveMultiHeadAttention, causal_mask
from attnlib.convert import (
    from_keras,
    from_torch,
    fused_from_naive,
    naive_from_fused,
    to_keras,
    to_torch,
)
from conftest import ROOT
from torch import nn

E, L, S, N = 12, 5, 7, 2
ATOL, RTOL = 1e-6, 1e-5


def close(a, b):
    torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(b), atol=ATOL, rtol=RTOL)


def random_mask(*shape):
    """A boolean mask with at least one True per row (nn.MultiheadAttention gives NaN for a row
    with nothing to attend to, attnlib zeros)."""
    mask = torch.rand(*shape) > 0.5
    mask[..., torch.randint(0, shape[-1], ())] = True
    return mask


# ---------------------------------------------------------------- torch.nn.MultiheadAttention


class TorchCase:
    """One nn.MultiheadAttention and the matching attnlib model, with inputs in both layouts."""

    def __init__(self, H, bias, layout, cross):
        self.H, self.layout = H, layout
        self.mha = nn.MultiheadAttention(E, H, bias=bias, batch_first=layout == "batch_first")
        self.mha.eval()
        with torch.no_grad():  # PyTorch initialises biases to 0: make them count
            for p in self.mha.parameters():
                if p.dim() == 1:
                    p.normal_()
        self.ours = from_torch(self.mha)
        self.S = S if cross else L
        batch = () if layout == "unbatched" else (N,)
        self.query = torch.randn(*batch, L, E)  # ours: batch first
        self.key = torch.randn(*batch, self.S, E) if cross else self.query
        self.value = torch.randn(*batch, self.S, E) if cross else self.query

    def theirs(self, t):
        return t.transpose(0, 1) if self.layout == "seq_first" else t  # (L, N, E)

    def torch_forward(self, **kwargs):
        q, k, v = (self.theirs(t) for t in (self.query, self.key, self.value))
        out, w = self.mha(q, k, v, **kwargs)
        return self.theirs(out), w

    def ours_forward(self, **kwargs):
        return self.ours(self.query, self.key, self.value, **kwargs)


CASES = [
    (H, bias, layout, cross)
    for H in (1, 3, 4)
    for bias in (False, True)
    for layout in ("batch_first", "seq_first", "unbatched")
    for cross in (False, True)
]


@pytest.fixture(
    params=CASES, ids=lambda c: f"H{c[0]}-bias{c[1]}-{c[2]}-{'cross' if c[3] else 'self'}"
)
def case(request):
    return TorchCase(*request.param)


def test_from_torch_outputs_and_per_head_weights(case):
    out, w = case.ours_forward()
    out_t, w_t = case.torch_forward(average_attn_weights=False)
    close(out, out_t)
    close(w, w_t)
    assert w.shape[-3:] == (case.H, L, case.S)


def test_from_torch_averaged_weights(case):
    _, w = case.ours_forward()
    _, w_t = case.torch_forward(average_attn_weights=True)
    close(w.mean(dim=-3), w_t)


def test_from_torch_attn_mask_is_the_opposite_convention(case):
    mask = random_mask(L, case.S)  # ours: True = may attend
    out, w = case.ours_forward(mask=mask)
    out_t, w_t = case.torch_forward(attn_mask=~mask, average_attn_weights=False)
    close(out, out_t)
    close(w, w_t)
    assert (w[..., ~mask] == 0).all()


def test_from_torch_key_padding_mask(case):
    batch = () if case.layout == "unbatched" else (N,)
    pad = torch.zeros(*batch, case.S, dtype=torch.bool)  # torch: True = ignore this key
    pad[..., -2:] = True
    pad[..., 0] = False
    ours_mask = (~pad).unsqueeze(-2).expand(*batch, L, case.S)  # (..., L, S)
    out, w = case.ours_forward(mask=ours_mask)
    out_t, w_t = case.torch_forward(key_padding_mask=pad, average_attn_weights=False)
    close(out, out_t)
    close(w, w_t)
    assert (w[..., -2:] == 0).all()


def test_from_torch_need_weights_false(case):
    mask = random_mask(L, case.S)
    out, w = case.ours_forward(mask=mask, need_weights=False)
    assert w is None
    out_t, w_t = case.torch_forward(attn_mask=~mask, need_weights=False)
    assert w_t is None
    close(out, out_t)
    close(out, case.ours_forward(mask=mask)[0])


@pytest.mark.parametrize("H", [1, 3, 4])
def test_per_head_masks_match_torch_3d_attn_mask(H):
    mha = nn.MultiheadAttention(E, H, batch_first=True).eval()
    ours = from_torch(mha)
    query, kv = torch.randn(N, L, E), torch.randn(N, S, E)
    mask = random_mask(N, H, L, S)
    out, w = ours(query, kv, kv, mask=mask)
    # PyTorch wants (N * H, L, S), batch-major: row n * H + h
    out_t, w_t = mha(
        query, kv, kv, attn_mask=~mask.reshape(N * H, L, S), average_attn_weights=False
    )
    close(out, out_t)
    close(w, w_t)


@pytest.mark.parametrize("bias", [False, True])
def test_to_torch_round_trip(bias):
    ours = MultiHeadAttention(E, 3, bias=bias)
    mha = to_torch(ours)
    assert isinstance(mha, nn.MultiheadAttention) and mha.batch_first
    assert (mha.in_proj_bias is not None) == bias
    assert torch.equal(mha.in_proj_weight[E : 2 * E], ours.k_proj.weight)  # q, k, v order
    query, kv = torch.randn(N, L, E), torch.randn(N, S, E)
    out_t, w_t = mha.eval()(query, kv, kv, average_attn_weights=False)
    out, w = ours(query, kv)
    close(out, out_t)
    close(w, w_t)
    back = from_torch(mha)
    for (name, a), (_, b) in zip(ours.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), name


def test_from_torch_copies_in_q_k_v_order():
    mha = nn.MultiheadAttention(E, 3)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.arange(3 * E * E, dtype=torch.float32).view(3 * E, E))
    ours = from_torch(mha)
    assert ours.q_proj.weight[0, 0] == 0
    assert ours.k_proj.weight[0, 0] == E * E
    assert ours.v_proj.weight[0, 0] == 2 * E * E
    assert torch.equal(ours.out_proj.weight, mha.out_proj.weight)


# ---------------------------------------------------------------- naive <-> fused


@pytest.mark.parametrize("H", [1, 3, 4])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_naive_fused_both_ways(H, bias, masked):
    query, key, value = torch.randn(N, L, E), torch.randn(N, S, E), torch.randn(N, S, E)
    mask = random_mask(N, H, L, S) if masked else None
    fused = MultiHeadAttention(E, H, bias=bias)
    naive = naive_from_fused(fused)
    assert isinstance(naive, NaiveMultiHeadAttention) and naive.bias == bias
    for a, b in zip(fused(query, key, value, mask=mask), naive(query, key, value, mask=mask)):
        close(a, b)
    naive = NaiveMultiHeadAttention(E, H, bias=bias)
    fused = fused_from_naive(naive)
    assert isinstance(fused, MultiHeadAttention)
    for a, b in zip(naive(query, key, value, mask=mask), fused(query, key, value, mask=mask)):
        close(a, b)
    # and back again: the very same numbers
    again = fused_from_naive(naive_from_fused(fused))
    for (name, a), (_, b) in zip(fused.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name


def test_naive_from_fused_gives_head_h_the_rows_of_slice_h():
    fused = MultiHeadAttention(E, 4)
    naive = naive_from_fused(fused)
    assert torch.equal(naive.heads[2].v_proj.weight, fused.v_proj.weight[6:9])


def test_naive_fused_unbatched_causal():
    fused = MultiHeadAttention(E, 3, bias=True)
    naive = naive_from_fused(fused)
    x = torch.randn(L, E)
    for a, b in zip(fused(x, mask=causal_mask(L)), naive(x, mask=causal_mask(L))):
        close(a, b)


# ---------------------------------------------------------------- torch: bad input


def test_bad_from_torch_add_zero_attn():
    mha = nn.MultiheadAttention(E, 3, add_zero_attn=True)
    with pytest.raises(
        ValueError, match=r"mha must not use add_zero_attn=True \(attnlib does not append"
    ):
        from_torch(mha)


def test_bad_from_torch_add_bias_kv():
    mha = nn.MultiheadAttention(E, 3, add_bias_kv=True)
    with pytest.raises(ValueError, match="mha must not use add_bias_kv=True"):
        from_torch(mha)


def test_bad_types():
    with pytest.raises(
        TypeError, match="mha must be a torch.nn.MultiheadAttention; got MultiHeadAttention"
    ):
        from_torch(MultiHeadAttention(E, 3))
    with pytest.raises(
        TypeError, match="m must be an attnlib.MultiHeadAttention; got MultiheadAttention"
    ):
        to_torch(nn.MultiheadAttention(E, 3))
    with pytest.raises(
        TypeError, match="m must be an attnlib.MultiHeadAttention; got NaiveMultiHeadAttention"
    ):
        naive_from_fused(NaiveMultiHeadAttention(E, 3))
    with pytest.raises(
        TypeError, match="m must be an attnlib.NaiveMultiHeadAttention; got MultiHeadAttention"
    ):
        fused_from_naive(MultiHeadAttention(E, 3))
    with pytest.raises(TypeError, match="m must be an attnlib.MultiHeadAttention; got Linear"):
        to_keras(nn.Linear(2, 2))


# ---------------------------------------------------------------- Keras 3


@pytest.fixture(scope="module")
def keras():
    import keras

    assert keras.backend.backend() == "torch"
    return keras


def keras_call(layer, query, key, value, mask=None):
    """Keras takes (query, value, key): value comes before key."""
    out, scores = layer(query, value, key=key, attention_mask=mask, return_attention_scores=True)
    return torch.as_tensor(out).detach(), torch.as_tensor(scores).detach()


@pytest.mark.parametrize("H", [1, 3, 4])
@pytest.mark.parametrize("bias", [False, True])
def test_to_keras_outputs_and_scores(keras, H, bias):
    ours = MultiHeadAttention(E, H, bias=bias)
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_(0, 0.3)
    layer = to_keras(ours)
    assert isinstance(layer, keras.layers.MultiHeadAttention)
    kernels = {w.path.split("/", 1)[1]: tuple(w.shape) for w in layer.weights}
    assert kernels["query/kernel"] == (E, H, E // H)
    assert kernels["attention_output/kernel"] == (H, E // H, E)
    assert ("query/bias" in kernels) == bias
    query, key, value = torch.randn(N, L, E), torch.randn(N, S, E), torch.randn(N, S, E)
    for mask in (None, random_mask(N, L, S)):
        out_k, scores_k = keras_call(layer, query, key, value, mask)
        out, w = ours(query, key, value, mask=mask)
        close(out, out_k)
        close(w, scores_k)


@pytest.mark.parametrize("bias", [False, True])
def test_keras_round_trip_is_exact(keras, bias):
    ours = MultiHeadAttention(E, 4, bias=bias)
    back = from_keras(to_keras(ours))
    assert back.bias == bias and back.num_heads == 4
    for (name, a), (_, b) in zip(ours.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("H", [1, 3, 4])
@pytest.mark.parametrize("bias", [False, True])
def test_from_keras_glorot_layer(keras, H, bias):
    keras.utils.set_random_seed(0)
    layer = keras.layers.MultiHeadAttention(num_heads=H, key_dim=E // H, use_bias=bias)
    query, key, value = torch.randn(N, L, E), torch.randn(N, S, E), torch.randn(N, S, E)
    layer(query, value, key=key)  # builds the layer with Glorot-uniform kernels
    if bias:  # Keras initialises biases to 0: make them count, keep the Glorot kernels
        rng = np.random.default_rng(0)
        for w in layer.weights:
            if w.path.endswith("bias"):
                w.assign(rng.normal(0, 0.3, size=tuple(w.shape)).astype("float32"))
    ours = from_keras(layer)
    assert ours.bias == bias
    for mask in (None, random_mask(N, L, S)):
        out_k, scores_k = keras_call(layer, query, key, value, mask)
        out, w = ours(query, key, value, mask=mask)
        close(out, out_k)
        close(w, scores_k)


def test_keras_via_torch_to_ours(keras):
    """PyTorch -> attnlib -> Keras: three libraries, one output."""
    mha = nn.MultiheadAttention(E, 3, batch_first=True).eval()
    layer = to_keras(from_torch(mha))
    x = torch.randn(N, L, E)
    out_k, _ = keras_call(layer, x, x, x)
    close(out_k, mha(x, x, x)[0])


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        (dict(num_heads=3, key_dim=4, value_dim=6), r"value_dim=6 != key_dim=4"),
        (dict(num_heads=3, key_dim=4, output_shape=(8,)), r"output_shape="),
    ],
)
def test_bad_keras_layer_shape(keras, kwargs, problem):
    layer = keras.layers.MultiHeadAttention(**kwargs)
    x = torch.randn(N, L, E)
    layer(x, x)
    with pytest.raises(
        ValueError,
        match=r"layer must be a Keras MultiHeadAttention with value_dim == key_dim, "
        r"no output_shape.*; got .*" + problem,
    ):
        from_keras(layer)


def test_bad_keras_layer_not_built_or_not_mha(keras):
    with pytest.raises(ValueError, match=r"layer must be built \(call it once"):
        from_keras(keras.layers.MultiHeadAttention(num_heads=3, key_dim=4))
    with pytest.raises(
        TypeError, match="layer must be a keras.layers.MultiHeadAttention; got Dense"
    ):
        from_keras(keras.layers.Dense(4))


def test_bad_keras_backend_already_imported(keras, monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "tensorflow")
    with pytest.raises(
        RuntimeError,
        match=r"keras is already imported with the 'tensorflow' backend.*KERAS_BACKEND",
    ):
        to_keras(MultiHeadAttention(E, 3))
    with pytest.raises(RuntimeError, match="already imported with the 'tensorflow' backend"):
        from_keras(None)


def test_bad_keras_backend_environment_variable():
    """KERAS_BACKEND=jax, Keras not imported yet: attnlib refuses before importing Keras."""
    script = (
        "import sys\n"
        "from attnlib import MultiHeadAttention\n"
        "from attnlib.convert import to_keras\n"
        "try:\n"
        "    to_keras(MultiHeadAttention(4, 2))\n"
        "except RuntimeError as e:\n"
        "    print('RuntimeError:', e)\n"
        "print('keras imported:', 'keras' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERAS", "PYTEST"))}
    env["KERAS_BACKEND"] = "jax"
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "RuntimeError: KERAS_BACKEND is 'jax'; attnlib.convert needs 'torch'" in result.stdout
    assert "keras imported: False" in result.stdout


# ---------------------------------------------------------------- every converter: equal or refuse

CONFIGS = {  # MultiHeadAttention(E, H, bias=True, **kwargs), E=12
    "plain H=3": (3, {}),
    "plain H=4": (4, {}),
    "kdim vdim": (3, {"kdim": 5, "vdim": 6}),
    "head_dim": (4, {"head_dim": 5}),
    "head_dim kdim vdim": (3, {"head_dim": 5, "kdim": 5, "vdim": 6}),
    "dropout (eval)": (4, {"dropout": 0.3}),
    "grouped-query": (4, {"num_kv_heads": 2}),
    "rope": (3, {"positions": "rope"}),
    "alibi H=3": (3, {"positions": "alibi"}),
    "alibi H=4": (4, {"positions": "alibi"}),
}
REFUSED = {  # (converter, config) -> what the message says; every other pair must be equal
    **{
        (
            conv,
            name,
        ): r"positions=None for .*no rotary \(RoPE\) or ALiBi.*got positions=(Rotary|ALiBi)"
        for conv in ("to_torch", "to_keras", "naive_from_fused")
        for name in ("rope", "alibi H=3", "alibi H=4")
    },
    **{
        (conv, "grouped-query"): "num_kv_heads == num_heads .*got num_kv_heads=2, num_heads=4"
        for conv in ("to_torch", "to_keras", "naive_from_fused")
    },
    **{
        ("to_torch", name): "head_dim \\* num_heads == embed_dim"
        for name in ("head_dim", "head_dim kdim vdim")
    },
}


def randomised(module):
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, 0.4)
    return module.eval()


def converted_forward(conv, m):
    """The converted module's forward, called as attnlib's (query, key, value, mask); None for a
    converter whose result is itself an attnlib module."""
    if conv == "to_torch":
        mha = to_torch(m)
        return lambda q, k, v, mask: mha(q, k, v, attn_mask=~mask)[0]
    if conv == "to_keras":
        layer = to_keras(m)
        return lambda q, k, v, mask: torch.as_tensor(
            layer(q, v, key=k, attention_mask=mask.expand(N, L, S))
        )
    ours = naive_from_fused(m)
    if conv == "fused_from_naive":
        ours = fused_from_naive(ours)
    return lambda q, k, v, mask: ours(q, k, v, mask=mask)[0]


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("conv", ["to_torch", "to_keras", "naive_from_fused", "fused_from_naive"])
def test_every_converter_gives_equal_outputs_or_refuses(conv, config, request):
    """Copied weights, random biases, E=12, H=3 or 4, L=5, S=7: the converted module computes
    the same output (a converter that cannot carry a feature refuses, naming it)."""
    if conv == "to_keras":
        request.getfixturevalue("keras")
    torch.manual_seed(0)
    H, kwargs = CONFIGS[config]
    m = randomised(MultiHeadAttention(E, H, bias=True, **kwargs))
    if (conv, config) in REFUSED and conv != "fused_from_naive":
        with pytest.raises(ValueError, match=REFUSED[conv, config]):
            converted_forward(conv, m)
        return
    if conv == "fused_from_naive" and ("naive_from_fused", config) in REFUSED:
        pytest.skip("no NaiveMultiHeadAttention has this feature")
    query, key, value = torch.randn(N, L, E), torch.randn(N, S, m.kdim), torch.randn(N, S, m.vdim)
    mask = random_mask(L, S)
    forward = converted_forward(conv, m)
    close(forward(query, key, value, mask), m(query, key, value, mask=mask)[0])


def test_from_keras_is_in_eval_mode_as_keras_calls_are(keras):
    """A Keras layer with dropout drops only when called with training=True: the module made
    from it starts in eval mode, so that it computes what the layer computes."""
    m = randomised(MultiHeadAttention(E, 4, bias=True, dropout=0.3))
    layer = to_keras(m)
    back = from_keras(layer)
    assert not back.training and back.dropout == pytest.approx(0.3)
    x = torch.randn(N, L, E)
    close(back(x)[0], torch.as_tensor(layer(x, x)))
