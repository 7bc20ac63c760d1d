"""One attention interface (issue 48): every self-attention layer answers the same private call,
makes and checks its own cache, and a cache serves one layer. Each probe of the issue fails on
the code before it: (a) one cache passed to two layers, (b) the cache's key setter, (c) a
hybrid model refusing its own cache, (d) a linear layer's cache of another ``conv_size``."""

from __future__ import annotations

import pytest
import torch
from attnlib import (
    LanguageModel,
    ModernAttention,
    MultiHeadAttention,
    PostNormBlock,
    TransformerBlock,
    causal_mask,
)
from attnlib.convert import naive_from_fused, to_keras, to_torch
from attnlib.decoding import KVCache, ModelCache
from attnlib.latent import MultiHeadLatentAttention
from attnlib.layers import make_attention
from attnlib.linear_attention import LinearAttention, StateCache
from attnlib.positions import PositionScheme, Rotary

E, H = 12, 3


def test_a_one_cache_for_two_layers_is_refused():
    """(a): before, the second layer appended its keys to the first one's (length 2 after one
    token) and its output was off by 0.53."""
    torch.manual_seed(0)
    a, b, cache = MultiHeadAttention(E, H), MultiHeadAttention(E, H), KVCache()
    x = torch.randn(1, 1, E)
    a(x, cache=cache)
    with pytest.raises(
        ValueError,
        match=r"cache belongs to the layer MultiHeadAttention\(embed_"
        r"dim=12, num_heads=3, bias=False\) at 0x[0-9a-f]+; got another layer, "
        r"MultiHeadAttention\(.*start a new KVCache\(\) per layer",
    ):
        b(x, cache=cache)
    assert cache.length == 1  # the refused step changed nothing
    a(x, cache=cache)  # its own layer goes on
    assert cache.length == 2


def test_a_the_layers_of_a_model_are_named_by_index():
    torch.manual_seed(0)
    model, other = LanguageModel(30, E, H, 2, max_len=16), LanguageModel(30, E, H, 2, max_len=16)
    cache = other.new_cache()
    with pytest.raises(ValueError, match=r"cache \(layer 0\) belongs to the layer "):
        model(torch.tensor([[1, 2]]), cache=cache)
    swapped = model.new_cache()
    swapped.layers.reverse()
    with pytest.raises(ValueError, match=r"cache \(layer 0\) belongs to the layer "):
        model(torch.tensor([[1, 2]]), cache=swapped)


def test_b_no_setter_can_desynchronise_the_positions():
    """(b): ``cache.key = cache.key[:, :, :2]`` left ``length`` at 3, so the next step numbered
    the kept keys 2, 3, 4. The setters are gone; ``crop`` goes back consistently."""
    cache = KVCache()
    k = torch.zeros(1, 1, 3, 2)
    cache.update(k, k)
    with pytest.raises(AttributeError):
        cache.key = cache.key[:, :, :2]
    with pytest.raises(AttributeError):
        cache.value = cache.value[:, :, :2]
    cache.crop(2)
    cache.update(k[:, :, :1], k[:, :, :1])
    assert cache.positions.tolist() == [0, 1, 2] and cache.length == 3
    with pytest.raises(ValueError, match=r"length must be in|length must be an integer in 0\.\.3"):
        cache.crop(4)
    windowed = KVCache(window=2)
    windowed.update(k, k)
    with pytest.raises(ValueError, match=r"length must be 3 for a KVCache\(window=2\)"):
        windowed.crop(2)


def test_b_crop_repeats_a_step_exactly():
    torch.manual_seed(0)
    layer = MultiHeadAttention(E, H).eval()
    x = torch.randn(1, 6, E)
    cache = layer.new_cache()
    layer(x[:, :5], cache=cache)
    first = layer(x[:, 5:], cache=cache)[0]
    cache.crop(5)
    assert torch.equal(layer(x[:, 5:], cache=cache)[0], first)


def test_c_a_hybrid_model_takes_its_own_cache_at_every_step():
    """(c): before, the second step compared every layer's cache with layer 0's shape (a
    linear layer's state against latent attention's RoPE keys) and refused it."""
    torch.manual_seed(0)
    model = LanguageModel(
        30, E, H, 2, max_len=32, linear=("delta", None), latent_dim=6, positions="rope"
    ).eval()
    ids = torch.randint(0, 30, (2, 7))
    full, _ = model(ids)
    cache = model.new_cache()
    steps = [model(ids[:, :4], cache=cache)[0]]
    steps += [model(ids[:, t : t + 1], cache=cache)[0] for t in range(4, 7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert [type(c).__name__ for c in cache.layers] == ["StateCache", "KVCache"]


def test_d_a_state_cache_of_another_conv_size_names_conv_size():
    """(d): before, a reshape error from inside the convolution."""
    torch.manual_seed(0)
    wide, narrow = LinearAttention(E, H, conv_size=4), LinearAttention(E, H, conv_size=2)
    cache = StateCache()
    wide(torch.randn(1, 3, E), cache=cache)
    with pytest.raises(
        ValueError,
        match=r"cache holds the last 3 inputs of a convolution of "
        r"conv_size=4; this layer has conv_size=2",
    ):
        narrow(torch.randn(1, 1, E), cache=cache)


LAYERS = {
    "mha": lambda: MultiHeadAttention(E, H, positions="rope"),
    "modern": lambda: ModernAttention(E, H, qk_norm=True, sink=True),
    "latent": lambda: MultiHeadLatentAttention(E, H, latent_dim=6, rope_dim=2),
    "linear": lambda: LinearAttention(E, H, rule="gated_delta"),
}


@pytest.mark.parametrize("name", LAYERS)
def test_every_layer_has_the_interface_and_a_block_takes_it(name):
    """One block, any layer: the cached steps equal one causal pass."""
    torch.manual_seed(0)
    block = TransformerBlock(E, attn=LAYERS[name]()).eval()
    x = torch.randn(2, 6, E)
    mask = causal_mask(6) if block.attn.takes_mask else None
    full, _ = block(x, mask=mask)
    cache = block.attn.new_cache()
    steps = [block(x[:, t : t + 1], cache=cache)[0] for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_a_block_given_attn_refuses_options_too():
    with pytest.raises(ValueError, match=r"attn must come alone .*got num_heads=3"):
        TransformerBlock(E, H, attn=MultiHeadAttention(E, H))
    with pytest.raises(ValueError, match=r"attn.embed_dim=12"):
        TransformerBlock(24, attn=MultiHeadAttention(E, H))


def test_make_attention_is_the_one_mapping():
    assert type(make_attention(E, H, positions="rope")) is MultiHeadAttention
    assert type(make_attention(E, H, qk_norm=True)) is ModernAttention
    assert type(make_attention(E, H, latent_dim=6)) is MultiHeadLatentAttention
    assert type(make_attention(E, H, linear="delta")) is LinearAttention
    assert type(TransformerBlock(E, H, softcap=5.0).attn) is ModernAttention


def test_a_model_builds_its_layers_from_a_per_layer_spec():
    """``block=`` gives layer i; a post-LN decoder is a library block, cache and all."""
    torch.manual_seed(0)
    model = LanguageModel(
        30, E, H, 2, max_len=16, block=lambda i: PostNormBlock(E, H, mlp_ratio=2.0)
    ).eval()
    assert [type(b).__name__ for b in model.blocks] == ["PostNormBlock"] * 2
    ids = torch.randint(0, 30, (1, 5))
    full, _ = model(ids)
    cache = model.new_cache()
    steps = [model(ids[:, t : t + 1], cache=cache)[0] for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_a_position_scheme_is_any_object_of_the_protocol():
    """A scheme written here (no edit to the layers): it shifts every key by a constant, which
    the softmax ignores; and a NoPE that does nothing equals no positions."""

    class Shift:
        def __call__(self, q, k, q_pos, k_pos):
            return q, k, torch.full((1, 1, q.shape[2], k.shape[2]), 7.0)

        def check_head_dim(self, head_dim):
            if head_dim < 2:
                raise ValueError(f"Shift needs head_dim >= 2; got {head_dim}")

    assert isinstance(Shift(), PositionScheme)
    torch.manual_seed(0)
    shifted = MultiHeadAttention(E, H, positions=Shift()).eval()
    plain = MultiHeadAttention(E, H).eval()
    plain.load_state_dict(shifted.state_dict())
    x = torch.randn(2, 5, E)
    torch.testing.assert_close(shifted(x)[0], plain(x)[0], atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match=r"Shift needs head_dim >= 2; got 1"):
        MultiHeadAttention(E, 12, positions=Shift())
    model = LanguageModel(30, E, H, 1, max_len=8, positions=Shift())
    assert isinstance(model.blocks[0].attn.positions, Shift)
    with pytest.raises(ValueError, match=r"positions must be None, 'rope', 'alibi', or a posi"):
        MultiHeadAttention(E, H, positions=Rotary)  # the class, not a scheme


def test_converters_refuse_a_new_subclass_with_no_edit():
    """An allow-list: a variant written tomorrow is refused by every converter."""

    class DifferentialAttention(MultiHeadAttention):
        pass

    m = DifferentialAttention(E, H)
    for convert in (to_torch, naive_from_fused, to_keras):
        with pytest.raises(
            TypeError,
            match=r"m must be an attnlib.MultiHeadAttention; got "
            r"DifferentialAttention \(a subclass",
        ):
            convert(m)


def test_model_cache_is_in_decoding_and_at_the_top():
    import attnlib
    import attnlib.transformer

    assert attnlib.ModelCache is ModelCache
    assert not hasattr(attnlib.transformer, "ModelCache") or (
        attnlib.transformer.ModelCache is ModelCache
    )


def test_chapters_load_the_book_scripts_without_a_path_edit():
    """What the chapters used ``sys.path.insert(0, "../scripts")`` for."""
    import sys

    from attnlib.experiment import SCRIPTS, book_script

    before = list(sys.path)
    dates = book_script("train_dates")
    assert dates.TARGET_ID["<bos>"] == 1 and callable(dates.make_model)
    assert book_script("train_dates") is dates is sys.modules["train_dates"]
    odyssey = book_script("train_odyssey")
    assert {"BASE", "DISCOUNTS", "WEIGHTS", "Data", "make_model", "train"} <= set(vars(odyssey))
    assert sys.path == before
    with pytest.raises(FileNotFoundError, match=r"name must be one of the book's scripts in "):
        book_script("no_such_script")
    with pytest.raises(TypeError, match=r"name must be a str"):
        book_script(SCRIPTS / "train_dates.py")
