"""The last bad inputs found by probing the library as an outsider would (issue 23, point 7):
each gives a clear error naming the argument, or a defined result."""

from __future__ import annotations

import pytest
import torch
from attnlib import (
    MultiHeadAttention,
    NaiveMultiHeadAttention,
    SelfAttention,
    TransformerBlock,
    causal_mask,
    scaled_dot_product_attention,
    softmax,
)
from attnlib.decoding import KVCache
from attnlib.efficient import tiled_attention
from attnlib.positions import rotary_embedding, sinusoidal_encoding

E, H = 12, 4


@pytest.mark.parametrize("dim", [5, -3, 2])
def test_softmax_dim_out_of_range(dim):
    with pytest.raises(ValueError, match=rf"dim must be in \[-2, 1\] for the 2-D x; got {dim}"):
        softmax(torch.randn(3, 4), dim=dim)


def test_softmax_dim_of_the_wrong_type():
    with pytest.raises(TypeError, match=r"dim must be an int; got float 1.0"):
        softmax(torch.randn(3, 4), dim=1.0)


def test_softmax_of_a_0d_tensor():
    assert softmax(torch.tensor(3.0)) == 1.0  # as torch.softmax
    assert softmax(torch.tensor(-float("inf"))) == 0.0  # nothing to attend to: 0


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize(
    "n,length,s", [(0, 5, 5), (2, 0, 5), (2, 5, 0), (0, 0, 0)], ids=["N=0", "L=0", "S=0", "all"]
)
def test_empty_batch_or_sequence_gives_an_empty_result(cls, need_weights, n, length, s):
    m = cls(E, H)
    out, w = m(torch.randn(n, length, E), torch.randn(n, s, E), need_weights=need_weights)
    assert out.shape == (n, length, E)
    assert (out == 0).all() if s == 0 else out.isfinite().all()
    assert w is None if not need_weights else w.shape == (n, H, length, s)


def test_empty_sequence_through_a_block():
    y, _ = TransformerBlock(E, H)(torch.randn(2, 0, E))
    assert y.shape == (2, 0, E)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, "float32"])
def test_sinusoidal_encoding_needs_a_float_dtype(dtype):
    with pytest.raises(TypeError, match=r"dtype must be a floating-point torch.dtype; got"):
        sinusoidal_encoding(4, 6, dtype=dtype)


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention, TransformerBlock])
def test_meta_module_with_cpu_input(cls):
    """A module on the meta device holds no values: nn.MultiheadAttention raises, so do we
    (instead of returning memory that was never written)."""
    with torch.device("meta"):
        m = cls(E, H)
    with pytest.raises(
        ValueError,
        match=r"(query|x) is on cpu but the module's weights are on meta; move the input .*"
        r"module.to_empty",
    ):
        m(torch.randn(2, 5, E))


def test_meta_single_head_with_cpu_input():
    with torch.device("meta"):
        head = SelfAttention(E)
    with pytest.raises(ValueError, match=r"query is on cpu but the module's weights are on meta"):
        head(torch.randn(5, E))


def test_key_on_another_device_than_the_module():
    m = MultiHeadAttention(E, H)
    with pytest.raises(ValueError, match=r"key is on meta but the module's weights are on cpu"):
        m(torch.randn(2, 5, E), torch.randn(2, 5, E, device="meta"))


@pytest.mark.parametrize("cls", [SelfAttention, MultiHeadAttention, NaiveMultiHeadAttention])
def test_mask_on_another_device(cls):
    m = cls(E) if cls is SelfAttention else cls(E, H)
    mask = causal_mask(5, device="meta")
    with pytest.raises(ValueError, match=r"mask must be on the device of query, cpu; got meta"):
        m(torch.randn(2, 5, E), mask=mask)


def test_mask_on_another_device_functions():
    q = torch.randn(5, 4)
    mask = causal_mask(5, device="meta")
    match = r"mask must be on the device of query, cpu; got meta"
    with pytest.raises(ValueError, match=match):
        scaled_dot_product_attention(q, q, q, mask=mask)
    with pytest.raises(ValueError, match=match):
        tiled_attention(q, q, q, mask=mask)
    with pytest.raises(ValueError, match=match):
        TransformerBlock(E, H)(torch.randn(5, E), mask=mask)


def test_key_on_another_device_functions():
    q, k = torch.randn(5, 4), torch.randn(5, 4, device="meta")
    with pytest.raises(ValueError, match=r"query and key must be on the same device; got query"):
        scaled_dot_product_attention(q, k, k)


def test_positions_on_another_device():
    x = torch.randn(5, 4)
    with pytest.raises(ValueError, match=r"positions must be on the device of x, cpu; got meta"):
        rotary_embedding(x, torch.arange(5, device="meta"))


def test_mask_and_is_causal_together():
    q = torch.randn(5, 4)
    with pytest.raises(ValueError, match=r"mask and is_causal must not both be given"):
        scaled_dot_product_attention(q, q, q, mask=causal_mask(5), is_causal=True)
    with pytest.raises(TypeError, match=r"is_causal must be a bool; got int"):
        scaled_dot_product_attention(q, q, q, is_causal=1)


def test_is_causal_equals_the_causal_mask():
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 3)
    expected = scaled_dot_product_attention(q, k, v, mask=causal_mask(5, 7))
    got = scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(got, expected)
    fast = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(got[0], fast)


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
def test_cache_of_the_wrong_type(cls):
    with pytest.raises(
        TypeError, match=r"cache must be an attnlib.decoding.Cache \(KVCache, .*\); got dict"
    ):
        cls(E, H)(torch.randn(1, 1, E), cache={})


def test_naive_with_a_cache_equals_the_whole_sequence():
    """cache= on the naive class: one step at a time gives the causal result."""
    torch.manual_seed(0)
    m = NaiveMultiHeadAttention(E, H, bias=True).eval()
    x = torch.randn(2, 6, E)
    full, full_w = m(x, mask=causal_mask(6))
    cache = KVCache()
    prefill, _ = m(x[:, :4], cache=cache)
    steps = [m(x[:, t : t + 1], cache=cache) for t in (4, 5)]
    got = torch.cat([prefill] + [out for out, _ in steps], dim=1)
    torch.testing.assert_close(got, full)
    torch.testing.assert_close(steps[-1][1], full_w[:, :, 5:])
    assert cache.length == 6 and tuple(cache.key.shape) == (2, H, 6, E // H)
    unbatched, _ = m(x[0, :1], cache=KVCache())
    torch.testing.assert_close(unbatched, full[0, :1])


@pytest.mark.parametrize("cls", [MultiHeadAttention, NaiveMultiHeadAttention])
def test_cache_needs_a_self_attention_layer(cls):
    with pytest.raises(ValueError, match=r"cache needs a self-attention layer, kdim = vdim"):
        cls(E, H, kdim=7)(torch.randn(1, 1, E), cache=KVCache())
