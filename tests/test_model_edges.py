"""Edges found by probing attention, the block and the language model: the ``meta`` device
(shapes without values), empty decoding steps, ids of every integer dtype, tiny temperatures,
and caches made for another model.

Sizes are all different (E=12, H=3, D=4, L=5, S=7, N=2, V=31, 2 layers).
"""

import pytest
import torch
from attnlib import (
    LanguageModel,
    MultiHeadAttention,
    NaiveMultiHeadAttention,
    TransformerBlock,
    attention_weights,
    causal_mask,
    scaled_dot_product_attention,
)
from attnlib.efficient import tiled_attention

E, H, D, L, S, N, V, LAYERS, MAX_LEN = 12, 3, 4, 5, 7, 2, 31, 2, 16


def lm(seed=0, **kwargs):
    torch.manual_seed(seed)
    return LanguageModel(V, E, H, LAYERS, max_len=MAX_LEN, **kwargs).eval()


def ids(length=L, batch=N, seed=0):
    return torch.randint(0, V, (batch, length), generator=torch.Generator().manual_seed(seed))


# ---- the meta device: shapes without values ----------------------------------------------------


def meta(*shape):
    return torch.empty(*shape, device="meta")


@pytest.mark.parametrize("mask", ["bool", "float", "causal"])
def test_masked_functions_on_meta_give_shapes(mask):
    """A masked call used to test the values for inf (Tensor.item() on a meta tensor raised a
    RuntimeError naming no argument); on meta it takes the path that needs no values."""
    q, k, v = meta(N, L, 8), meta(N, S, 8), meta(N, S, 6)
    kwargs = {"is_causal": True}
    if mask != "causal":
        m = causal_mask(L, S, device="meta")
        kwargs = {"mask": m if mask == "bool" else torch.zeros(L, S, device="meta")}
    out, w = scaled_dot_product_attention(q, k, v, **kwargs)
    assert (out.shape, w.shape, out.device.type) == ((N, L, 6), (N, L, S), "meta")
    assert attention_weights(q, k, **kwargs).shape == (N, L, S)
    assert tiled_attention(q, k, v, block_size=3, **kwargs).shape == (N, L, 6)


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
def test_masked_modules_on_meta_give_shapes(cls, need_weights):
    with torch.device("meta"):
        m = cls(E, H, bias=True)
        x, kv = torch.empty(N, L, E), torch.empty(N, S, E)
        out, w = m(x, kv, mask=causal_mask(L, S), need_weights=need_weights)
    assert out.shape == (N, L, E) and out.device.type == "meta"
    assert (w is None) != need_weights and (w is None or w.shape == (N, H, L, S))


def test_block_and_model_on_meta_give_shapes():
    with torch.device("meta"):
        block = TransformerBlock(E, H)
        assert block(torch.empty(N, L, E), mask=causal_mask(L))[0].shape == (N, L, E)
        model = LanguageModel(V, E, H, LAYERS, max_len=MAX_LEN)
        logits, weights = model(torch.zeros(N, L, dtype=torch.long), need_weights=True)
    assert logits.shape == (N, L, V) and logits.device.type == "meta"
    assert [w.shape for w in weights] == [(N, H, L, L)] * LAYERS


# ---- ids of every integer dtype ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_int64_and_int32_ids_give_the_same_logits(dtype):
    model = lm()
    torch.testing.assert_close(model(ids().to(dtype))[0], model(ids())[0])
    assert torch.equal(
        model.generate(ids().to(dtype), 2, temperature=0)[:, L:].long(),
        model.generate(ids(), 2, temperature=0)[:, L:],
    )


@pytest.mark.parametrize(
    "dtype,hint",
    [
        (torch.uint8, r" \(a uint8 or bool index tensor is a mask in PyTorch, not indices\)"),
        (torch.bool, r" \(a uint8 or bool index tensor is a mask in PyTorch, not indices\)"),
        (torch.int8, ""),
        (torch.int16, ""),
    ],
)
def test_other_integer_ids_are_a_type_error(dtype, hint):
    """uint8 and int8 ids used to reach nn.Embedding, whose RuntimeError names 'indices' and
    'CharTensor'; now a TypeError names ids and the dtypes it takes."""
    model, bad = lm(), ids().to(dtype)
    match = (
        rf"ids must be an integer tensor of token indices, int64 or int32; got dtype {dtype}"
        rf"{hint}: convert with ids.long\(\)"
    )
    with pytest.raises(TypeError, match=match):
        model(bad)
    with pytest.raises(TypeError, match=match):
        model.generate(bad, 2)
