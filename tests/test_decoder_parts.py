"""The parts of a 2025 decoder (issue 49): RMSNorm, GatedMLP, a block composed of modules
(norms, attention, MLP; Gemma 3's sandwich norms), proven equal to ``transformers``' LLaMA and
Gemma 3 layers on small random configurations made offline (no model hub)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from attnlib import GatedMLP, RMSNorm  # noqa: E402
from torch import nn  # noqa: E402

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}
# transformers' RMSNorms compute in float32 even for a float64 input: float32's tolerance there
HF_TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-6, atol=1e-6)}
DTYPES = [torch.float32, torch.float64]


def randomize(module: nn.Module, seed: int = 0) -> nn.Module:
    """Every parameter of ``module`` drawn from N(0, 0.5^2) (norm scales too, so that a
    forgotten offset or a swapped weight shows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    return module


# --- RMSNorm -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_equals_torch_rmsnorm(dtype):
    torch.manual_seed(0)
    ours = randomize(RMSNorm(5, eps=1e-6)).to(dtype)
    theirs = nn.RMSNorm(5, eps=1e-6).to(dtype)
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 3, 5, dtype=dtype) * 3
    torch.testing.assert_close(ours(x), theirs(x), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_by_hand(dtype):
    torch.manual_seed(1)
    norm = randomize(RMSNorm(7, eps=1e-5, offset=1.0)).to(dtype)
    x = torch.randn(3, 4, 7, dtype=dtype)
    by_hand = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * (1 + norm.weight)
    torch.testing.assert_close(norm(x), by_hand, **TOL[dtype])


def test_rmsnorm_starts_as_the_plain_normalisation():
    x = torch.randn(2, 3, 6)
    plain = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    for offset in (0.0, 1.0):
        torch.testing.assert_close(RMSNorm(6, offset=offset)(x), plain)
    assert torch.equal(RMSNorm(6).weight, torch.ones(6))
    assert torch.equal(RMSNorm(6, offset=1.0).weight, torch.zeros(6))


def test_rmsnorm_half_precision_is_computed_in_float32():
    norm = randomize(RMSNorm(6)).to(torch.bfloat16)
    x = torch.randn(4, 6).to(torch.bfloat16) * 100
    y = norm(x)
    assert y.dtype == torch.bfloat16
    exact = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(y, (exact * norm.weight.float()).to(torch.bfloat16))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_equals_llama_and_gemma3_rmsnorm(dtype):
    pytest.importorskip("transformers")
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    x = torch.randn(2, 3, 9, dtype=dtype, generator=torch.Generator().manual_seed(2)) * 2
    for theirs, offset in ((LlamaRMSNorm(9, eps=1e-6), 0.0), (Gemma3RMSNorm(9, eps=1e-6), 1.0)):
        randomize(theirs, seed=3)
        ours = RMSNorm(9, eps=1e-6, offset=offset)
        ours.load_state_dict(theirs.state_dict())  # same name, same stored numbers
        ours, theirs = ours.to(dtype), theirs.to(dtype)
        torch.testing.assert_close(ours(x), theirs(x), **HF_TOL[dtype])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dim": 0}, ValueError, "dim must be a positive integer; got 0"),
        ({"dim": 4.0}, TypeError, "dim must be a positive integer; got float"),
        ({"dim": 4, "eps": -1.0}, ValueError, "eps must be a number >= 0; got -1.0"),
        ({"dim": 4, "eps": "1e-6"}, TypeError, "eps must be a number >= 0; got str"),
        ({"dim": 4, "offset": float("inf")}, ValueError, "offset must be finite; got inf"),
        ({"dim": 4, "offset": None}, TypeError, "offset must be a finite number; got NoneType"),
    ],
)
def test_rmsnorm_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        RMSNorm(**kwargs)


def test_rmsnorm_bad_inputs():
    norm = RMSNorm(4)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., d=4\); got \(2, 5\)"):
        norm(torch.randn(2, 5))
    with pytest.raises(ValueError, match="x must be at least 1-D; got 0-D"):
        norm(torch.tensor(1.0))
    with pytest.raises(TypeError, match="x must be a floating-point tensor; got dtype torch.int64"):
        norm(torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="x has dtype torch.float64 but the module's weights"):
        norm(torch.randn(2, 4, dtype=torch.float64))


# --- GatedMLP ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("activation", "phi"),
    [
        ("silu", F.silu),
        ("gelu_tanh", lambda z: F.gelu(z, approximate="tanh")),
        ("gelu", F.gelu),
    ],
)
def test_gated_mlp_by_hand(activation, phi, dtype):
    mlp = randomize(GatedMLP(6, 11, activation=activation, bias=True)).to(dtype)
    x = torch.randn(2, 3, 6, dtype=dtype)
    gate = x @ mlp.gate_proj.weight.T + mlp.gate_proj.bias  # (2, 3, 11)
    up = x @ mlp.up_proj.weight.T + mlp.up_proj.bias  # (2, 3, 11)
    by_hand = (phi(gate) * up) @ mlp.down_proj.weight.T + mlp.down_proj.bias  # (2, 3, 6)
    torch.testing.assert_close(mlp(x), by_hand, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_gated_mlp_equals_llama_and_gemma3_mlp(dtype):
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma3.modeling_gemma3 import Gemma3MLP
    from transformers.models.llama.modeling_llama import LlamaMLP

    llama = transformers.LlamaConfig(hidden_size=10, intermediate_size=17, num_attention_heads=5)
    gemma = transformers.Gemma3TextConfig(
        hidden_size=10,
        intermediate_size=17,
        num_attention_heads=5,
        num_key_value_heads=1,
        head_dim=4,
    )
    x = torch.randn(2, 3, 10, dtype=dtype, generator=torch.Generator().manual_seed(4))
    for theirs, activation in ((LlamaMLP(llama), "silu"), (Gemma3MLP(gemma), "gelu_tanh")):
        randomize(theirs, seed=5)
        ours = GatedMLP(10, 17, activation=activation)
        ours.load_state_dict(theirs.state_dict())  # gate_proj, up_proj, down_proj by name
        ours, theirs = ours.to(dtype), theirs.to(dtype)
        torch.testing.assert_close(ours(x), theirs(x), **TOL[dtype])


def test_gated_mlp_exact_gelu_is_not_gemmas():
    mlp = randomize(GatedMLP(6, 11, activation="gelu_tanh"))
    exact = GatedMLP(6, 11, activation="gelu")
    exact.load_state_dict(mlp.state_dict())
    x = torch.randn(4, 6) * 3
    assert not torch.allclose(mlp(x), exact(x), atol=1e-6)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0, 4), {}, ValueError, "dim must be a positive integer; got 0"),
        ((4, 0), {}, ValueError, "hidden must be a positive integer; got 0"),
        ((4, 2.5), {}, TypeError, "hidden must be a positive integer; got float"),
        ((4, 8), {"activation": "relu"}, ValueError, r"activation must be one of \('silu'"),
        ((4, 8), {"activation": F.silu}, TypeError, "activation must be a str"),
        ((4, 8), {"bias": 1}, TypeError, "bias must be a bool; got int 1"),
    ],
)
def test_gated_mlp_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        GatedMLP(*args, **kwargs)


def test_gated_mlp_bad_inputs():
    mlp = GatedMLP(4, 8)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., E=4\); got \(2, 5\)"):
        mlp(torch.randn(2, 5))
    with pytest.raises(TypeError, match="x must be a torch.Tensor; got list"):
        mlp([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(TypeError, match="x has dtype torch.float64 but the module's weights"):
        mlp(torch.randn(2, 4, dtype=torch.float64))
