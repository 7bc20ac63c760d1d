"""Move weights between attnlib, ``torch.nn.MultiheadAttention`` and Keras 3.

The same multi-head attention is stored three ways:

- attnlib: ``q_proj.weight``, ``k_proj.weight``, ``v_proj.weight`` ``(E, E)``, used as
  ``y = x W^T``; ``out_proj.weight`` ``(E, E)``.
- ``torch.nn.MultiheadAttention``: ``in_proj_weight`` ``(3E, E)``, the rows of W_Q, then
  W_K, then W_V; ``out_proj.weight`` ``(E, E)``.
- Keras 3: ``query/kernel``, ``key/kernel``, ``value/kernel`` ``(E, H, D)``, used as
  ``y = x K``; ``attention_output/kernel`` ``(H, D, E)``.

so ``W_Q = in_proj_weight[:E] = query_kernel.reshape(E, E).T`` and
``W_O = attention_output_kernel.reshape(E, E).T``; biases follow the same pattern.
Keras is imported by :func:`from_keras` / :func:`to_keras` only.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import torch
from torch import Tensor, nn

from attnlib.multihead import MultiHeadAttention, NaiveMultiHeadAttention
from attnlib.seq2seq import DecoderBlock, EncoderDecoder
from attnlib.transformer import TransformerBlock

__all__ = [
    "block_from_torch",
    "block_to_torch",
    "decoder_block_from_torch",
    "decoder_block_to_torch",
    "encoder_decoder_from_torch",
    "encoder_decoder_to_torch",
    "from_keras",
    "from_torch",
    "fused_from_naive",
    "naive_from_fused",
    "to_keras",
    "to_torch",
]


def _copy(linear: nn.Linear, weight: Tensor, bias: Tensor | None) -> None:
    with torch.no_grad():
        linear.weight.copy_(weight)
        if linear.bias is not None:
            linear.bias.copy_(bias)


def _check_module(m, cls, target: str | None = None, name: str = "m") -> None:
    """An allow-list: ``m`` is a ``cls`` itself, not a subclass (a subclass computes something
    more, :class:`attnlib.ModernAttention`'s options or a variant of tomorrow, that no converter
    knows how to carry: it is refused without an edit here); with a ``target`` (which has
    neither grouped-query attention nor positions inside its attention), one whose key/value
    heads are its query heads and which has no ``positions``."""
    if type(m) is not cls:
        more = (
            f" (a subclass of it computes more than the converters carry: they accept "
            f"{cls.__name__} itself)"
            if isinstance(m, cls)
            else ""
        )
        raise TypeError(f"{name} must be an attnlib.{cls.__name__}; got {type(m).__name__}{more}")
    if not target:
        return
    if m.num_kv_heads != m.num_heads:
        raise ValueError(
            f"{name} must have num_kv_heads == num_heads for {target}, which has no "
            f"grouped-query attention; got num_kv_heads={m.num_kv_heads}, num_heads={m.num_heads}"
        )
    if m.positions is not None:
        raise ValueError(
            f"{name} must have positions=None for {target}, which has no rotary (RoPE) or ALiBi "
            f"positions inside its attention (its outputs would differ); got "
            f"positions={m.positions!r}"
        )


def _like(cls, m):
    """A new ``cls`` with the sizes, dropout, dtype, device and mode of the module ``m``."""
    new = cls(
        m.embed_dim,
        m.num_heads,
        bias=m.bias,
        kdim=m.kdim,
        vdim=m.vdim,
        head_dim=m.head_dim,
        dropout=m.dropout,
    )
    new.to(device=m.out_proj.weight.device, dtype=m.out_proj.weight.dtype)
    return new.train(m.training)


def from_torch(mha: nn.MultiheadAttention) -> MultiHeadAttention:
    """A :class:`attnlib.MultiHeadAttention` with the weights of a
    ``torch.nn.MultiheadAttention``.

    ``in_proj_weight`` ``(3E, E)`` is split into ``W_Q, W_K, W_V`` (in that order, rows
    ``0:E``, ``E:2E``, ``2E:3E``); ``in_proj_bias`` likewise. The result is batch-first
    whatever ``mha.batch_first`` is, returns per-head weights, and takes boolean masks with
    ``True`` = may attend (pass ``~attn_mask``; a float ``attn_mask`` is passed as it is).
    With ``kdim``/``vdim`` the separate ``q_proj_weight``, ``k_proj_weight``,
    ``v_proj_weight`` are copied. ``dropout``, dtype and device are kept, and so is the
    training/eval mode.

    Args:
        mha: ``torch.nn.MultiheadAttention`` without ``add_bias_kv`` and ``add_zero_attn``.

    Returns:
        ``MultiHeadAttention(E, H, bias=..., kdim=..., vdim=..., dropout=mha.dropout)``.

    Raises:
        TypeError: if ``mha`` is not an ``nn.MultiheadAttention``.
        ValueError: if ``mha`` has ``add_bias_kv=True`` or ``add_zero_attn=True`` (attnlib has
            neither).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mha = nn.MultiheadAttention(12, 3, batch_first=True).eval()
        >>> x = torch.randn(2, 5, 12)
        >>> torch.allclose(from_torch(mha)(x)[0], mha(x, x, x)[0], atol=1e-6)
        True
    """
    if not isinstance(mha, nn.MultiheadAttention):
        raise TypeError(f"mha must be a torch.nn.MultiheadAttention; got {type(mha).__name__}")
    if mha.bias_k is not None:
        raise ValueError("mha must not use add_bias_kv=True (attnlib has no bias_k/bias_v)")
    if mha.add_zero_attn:
        raise ValueError(
            "mha must not use add_zero_attn=True (attnlib does not append a zero key and value; "
            "the outputs would differ)"
        )
    bias = mha.in_proj_bias is not None
    ours = MultiHeadAttention(
        mha.embed_dim, mha.num_heads, bias=bias, kdim=mha.kdim, vdim=mha.vdim, dropout=mha.dropout
    )
    ours.to(device=mha.out_proj.weight.device, dtype=mha.out_proj.weight.dtype)
    ours.train(mha.training)
    if mha._qkv_same_embed_dim:
        weights = mha.in_proj_weight.detach().chunk(3)  # 3 x (E, E): W_Q, W_K, W_V
    else:  # (E, E), (E, kdim), (E, vdim)
        weights = (
            mha.q_proj_weight.detach(),
            mha.k_proj_weight.detach(),
            mha.v_proj_weight.detach(),
        )
    biases = mha.in_proj_bias.detach().chunk(3) if bias else (None, None, None)
    for proj, w, b in zip((ours.q_proj, ours.k_proj, ours.v_proj), weights, biases):
        _copy(proj, w, b)
    _copy(ours.out_proj, mha.out_proj.weight.detach(), mha.out_proj.bias)
    return ours


def to_torch(m: MultiHeadAttention) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention(E, H, bias=m.bias, batch_first=True)`` with the
    weights of ``m``; the inverse of :func:`from_torch`. ``kdim``, ``vdim``, ``dropout``,
    dtype, device and the training/eval mode are kept.

    Args:
        m: the :class:`attnlib.MultiHeadAttention` to copy; its ``head_dim`` must be
            ``E / H`` (PyTorch's layer has no other).

    Returns:
        ``torch.nn.MultiheadAttention`` with ``in_proj_weight = cat(W_Q, W_K, W_V)``
        ``(3E, E)`` (or ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight`` when
        ``kdim``/``vdim`` differ from ``E``) and the same ``out_proj``. Its boolean
        ``attn_mask`` is ``~mask``.

    Raises:
        TypeError: if ``m`` is not an :class:`attnlib.MultiHeadAttention`.
        ValueError: if ``m.head_dim * m.num_heads != m.embed_dim``, ``m`` has
            ``num_kv_heads != num_heads`` or ``positions`` (``"rope"``, ``"alibi"``): PyTorch's
            layer has neither grouped-query attention nor RoPE or ALiBi.

    Example:
        >>> m = MultiHeadAttention(12, 4, bias=True)
        >>> to_torch(m).in_proj_weight.shape
        torch.Size([36, 12])
    """
    _check_module(m, MultiHeadAttention, "torch.nn.MultiheadAttention")
    if m.head_dim * m.num_heads != m.embed_dim:
        raise ValueError(
            f"m must have head_dim * num_heads == embed_dim for torch.nn.MultiheadAttention; got "
            f"head_dim={m.head_dim}, num_heads={m.num_heads}, embed_dim={m.embed_dim}"
        )
    mha = nn.MultiheadAttention(
        m.embed_dim,
        m.num_heads,
        bias=m.bias,
        batch_first=True,
        kdim=m.kdim,
        vdim=m.vdim,
        dropout=m.dropout,
        device=m.out_proj.weight.device,
        dtype=m.out_proj.weight.dtype,
    )
    mha.train(m.training)
    with torch.no_grad():
        if mha._qkv_same_embed_dim:
            mha.in_proj_weight.copy_(
                torch.cat([m.q_proj.weight, m.k_proj.weight, m.v_proj.weight])  # (3E, E)
            )
        else:
            mha.q_proj_weight.copy_(m.q_proj.weight)  # (E, E)
            mha.k_proj_weight.copy_(m.k_proj.weight)  # (E, kdim)
            mha.v_proj_weight.copy_(m.v_proj.weight)  # (E, vdim)
        if m.bias:
            mha.in_proj_bias.copy_(torch.cat([m.q_proj.bias, m.k_proj.bias, m.v_proj.bias]))
    _copy(mha.out_proj, m.out_proj.weight.detach(), m.out_proj.bias)
    return mha


def block_from_torch(layer: nn.TransformerEncoderLayer) -> TransformerBlock:
    """A :class:`attnlib.TransformerBlock` with the weights of a pre-LayerNorm
    ``torch.nn.TransformerEncoderLayer``.

    PyTorch's layer names the parts ``norm1``, ``self_attn``, ``norm2``, ``linear1`` and
    ``linear2``; the block calls them ``ln1``, ``attn`` (copied by :func:`from_torch`),
    ``ln2`` and ``mlp[0]``, ``mlp[2]``. With the same input and a causal mask (``True`` = may
    attend here, ``attn_mask`` or ``is_causal`` there) both compute the same output.
    The block is batch-first whatever ``layer.batch_first`` is; dropout, ``eps``, dtype,
    device and the training/eval mode are kept. PyTorch's layer also drops inside the MLP,
    so in training mode with dropout the two differ.

    Args:
        layer: ``nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward,
            activation="gelu", norm_first=True)`` (``bias`` either way).

    Returns:
        ``TransformerBlock(d_model, nhead, mlp_ratio=dim_feedforward / d_model, ...)``.

    Raises:
        TypeError: if ``layer`` is not an ``nn.TransformerEncoderLayer``.
        ValueError: if ``layer`` is post-LayerNorm (``norm_first=False``), its activation is
            not GELU (the block is pre-LN with GELU, as GPT-2), or its two LayerNorms have
            different ``eps``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> layer = nn.TransformerEncoderLayer(12, 3, 20, dropout=0.0, activation="gelu",
        ...                                    batch_first=True, norm_first=True).eval()
        >>> x = torch.randn(2, 5, 12)
        >>> mask = torch.ones(5, 5).tril().bool()  # True = may attend
        >>> ours, _ = block_from_torch(layer)(x, mask=mask)
        >>> torch.allclose(ours, layer(x, src_mask=~mask), atol=1e-6)
        True
    """
    if not isinstance(layer, nn.TransformerEncoderLayer):
        raise TypeError(
            f"layer must be a torch.nn.TransformerEncoderLayer; got {type(layer).__name__}"
        )
    _check_pre_ln_gelu(layer, "TransformerBlock")
    block = _block_like(TransformerBlock, layer)
    block.attn = from_torch(layer.self_attn)
    _copy_block_parts(block, layer, to_block=True)
    return block.train(layer.training)


def block_to_torch(block: TransformerBlock) -> nn.TransformerEncoderLayer:
    """A ``torch.nn.TransformerEncoderLayer(E, H, rE, activation="gelu", batch_first=True,
    norm_first=True)`` with the weights of ``block``; the inverse of :func:`block_from_torch`.

    Its ``src_mask`` is the opposite of the block's boolean ``mask`` (``True`` = blocked
    there); pass ``~mask`` or ``is_causal=True`` with the causal mask.

    Args:
        block: a :class:`attnlib.TransformerBlock` with an MLP (``mlp_ratio > 0``), no
            grouped-query attention and no ``positions`` inside its attention (PyTorch's layer
            has neither RoPE nor ALiBi).

    Returns:
        ``nn.TransformerEncoderLayer`` with the same sizes, dropout, ``eps``, bias, dtype,
        device and training/eval mode.

    Raises:
        TypeError: if ``block`` is not an :class:`attnlib.TransformerBlock`.
        ValueError: if ``block`` has no MLP, another norm or MLP than the default ones
            (``norm=``, ``mlp=``, ``post_norm=``), uses ``positions``, latent attention or
            ``activation="gelu_tanh"``, or has ``num_kv_heads`` other than ``num_heads`` (the
            message names ``block.attn``).

    Example:
        >>> block = TransformerBlock(12, 3, mlp_ratio=2.0)
        >>> layer = block_to_torch(block)
        >>> layer.linear1.weight.shape, layer.self_attn.in_proj_weight.shape
        (torch.Size([24, 12]), torch.Size([36, 12]))
    """
    if type(block) is not TransformerBlock:
        raise TypeError(f"block must be an attnlib.TransformerBlock; got {type(block).__name__}")
    if block.mlp is None:
        raise ValueError(
            "block must have an MLP (mlp_ratio > 0): nn.TransformerEncoderLayer always has one; "
            "got an attention-only block"
        )
    parts = {"ln1": block.ln1, "ln2": block.ln2, "mlp": block.mlp}
    foreign = [f"{k}={type(v).__name__}" for k, v in parts.items() if type(v) not in _TORCH_PARTS]
    foreign += [k for k in ("post_attn_norm", "post_mlp_norm") if getattr(block, k) is not None]
    if foreign:
        raise ValueError(
            "block must have the default parts (nn.LayerNorm norms, the GELU MLP nn.Sequential, "
            "no post-norms): nn.TransformerEncoderLayer has no other; got " + ", ".join(foreign)
        )
    if type(block.attn) is not MultiHeadAttention:
        raise ValueError(
            "block must use attnlib.MultiHeadAttention itself (nn.TransformerEncoderLayer has no "
            f"other attention); got block.attn = {type(block.attn).__name__}"
        )
    if block.attn.positions is not None:
        raise ValueError(
            f"block must not use positions inside its attention (nn.TransformerEncoderLayer has "
            f"no RoPE or ALiBi); got positions={block.attn.positions!r}"
        )
    if block.activation != "gelu":
        raise ValueError(
            'block must use activation="gelu" (the exact GELU of nn.TransformerEncoderLayer\'s '
            f'activation="gelu"); got activation={block.activation!r}'
        )
    _check_module(block.attn, MultiHeadAttention, "nn.TransformerEncoderLayer", "block.attn")
    mha = to_torch(block.attn)
    layer = nn.TransformerEncoderLayer(
        block.embed_dim, block.num_heads, **_torch_layer_options(block)
    )
    layer.self_attn.load_state_dict(mha.state_dict())
    _copy_block_parts(block, layer, to_block=False)
    return layer.train(block.training)


_TORCH_PARTS = (nn.LayerNorm, nn.Sequential)  # what a block shares with PyTorch's layer


def _copy_block_parts(block: TransformerBlock, layer: nn.TransformerEncoderLayer, to_block: bool):
    """Copy the LayerNorms and the MLP between a block and PyTorch's layer (not attention)."""
    pairs = [
        (block.ln1, layer.norm1),
        (block.ln2, layer.norm2),
        (block.mlp[0], layer.linear1),
        (block.mlp[2], layer.linear2),
    ]
    with torch.no_grad():
        for ours, theirs in pairs:
            target, source = (ours, theirs) if to_block else (theirs, ours)
            target.weight.copy_(source.weight)
            if target.bias is not None:
                target.bias.copy_(source.bias)


def _check_pre_ln_gelu(layer, what: str) -> None:
    """``layer`` (a PyTorch encoder or decoder layer) is pre-LN with the exact GELU and one
    ``eps``, as attnlib's blocks are."""
    if not layer.norm_first:
        raise ValueError(
            f"layer must be pre-LayerNorm (norm_first=True): {what} normalises before each "
            "part; got norm_first=False"
        )
    gelu = layer.activation is nn.functional.gelu or (
        isinstance(layer.activation, nn.GELU) and layer.activation.approximate == "none"
    )
    if not gelu:
        raise ValueError(f'layer must use activation="gelu"; got {layer.activation!r}')
    norms = {name: m for name, m in layer.named_children() if name.startswith("norm")}
    if len({n.eps for n in norms.values()}) > 1:
        raise ValueError(
            f"layer must have the same eps in {' and '.join(norms)} ({what} has one norm_eps); "
            f"got {', '.join(f'{name}.eps={n.eps}' for name, n in norms.items())}"
        )


def _block_like(cls, layer):
    """A ``cls`` (``TransformerBlock`` or ``DecoderBlock``) of the sizes, dropout, bias, ``eps``,
    dtype and device of PyTorch's ``layer``; its weights are copied afterwards."""
    E, hidden = layer.linear1.in_features, layer.linear1.out_features
    weight = layer.linear1.weight
    return cls(
        E,
        layer.self_attn.num_heads,
        mlp_ratio=hidden / E,
        dropout=layer.dropout.p,
        bias=layer.linear1.bias is not None,
        norm_eps=layer.norm1.eps,
    ).to(device=weight.device, dtype=weight.dtype)


def _torch_layer_options(block) -> dict:
    """The keyword arguments of ``nn.TransformerEncoderLayer``, ``nn.TransformerDecoderLayer``
    and ``nn.Transformer`` that a block of ``attnlib`` fixes: pre-LN, GELU, batch first, its
    MLP's width and bias, dropout, ``eps``, dtype and device."""
    weight = block.mlp[0].weight
    return dict(
        dim_feedforward=weight.shape[0],
        dropout=block.dropout,
        activation="gelu",
        layer_norm_eps=block.ln1.eps,
        batch_first=True,
        norm_first=True,
        bias=block.mlp[0].bias is not None,
        device=weight.device,
        dtype=weight.dtype,
    )


def _copy_pairs(pairs, forward: bool) -> None:
    """Copy weight and bias from the second module of each pair to the first (``forward``),
    or the other way."""
    with torch.no_grad():
        for ours, theirs in pairs:
            target, source = (ours, theirs) if forward else (theirs, ours)
            target.weight.copy_(source.weight)
            if target.bias is not None:
                target.bias.copy_(source.bias)


def _decoder_pairs(block: DecoderBlock, layer: nn.TransformerDecoderLayer):
    return [
        (block.ln1, layer.norm1),
        (block.ln2, layer.norm2),
        (block.ln3, layer.norm3),
        (block.mlp[0], layer.linear1),
        (block.mlp[2], layer.linear2),
    ]


def decoder_block_from_torch(layer: nn.TransformerDecoderLayer) -> DecoderBlock:
    """A :class:`attnlib.seq2seq.DecoderBlock` with the weights of a pre-LayerNorm
    ``torch.nn.TransformerDecoderLayer``.

    PyTorch's parts ``norm1``, ``self_attn``, ``norm2``, ``multihead_attn``, ``norm3``,
    ``linear1``, ``linear2`` become ``ln1``, ``self_attn``, ``ln2``, ``cross_attn``, ``ln3``,
    ``mlp[0]``, ``mlp[2]``. With ``tgt_mask`` the opposite of the block's ``mask`` (``True`` =
    blocked there) and ``memory_key_padding_mask`` the opposite of a source mask, both compute
    the same output. Batch-first whatever ``layer.batch_first`` is; dropout, ``eps``, dtype,
    device and mode are kept (PyTorch also drops inside the MLP: in training mode with
    dropout the two differ).

    Args:
        layer: ``nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward,
            activation="gelu", norm_first=True)``.

    Returns:
        ``DecoderBlock(d_model, nhead, mlp_ratio=dim_feedforward / d_model, ...)``.

    Raises:
        TypeError: if ``layer`` is not an ``nn.TransformerDecoderLayer``.
        ValueError: if ``layer`` is post-LayerNorm, its activation is not the exact GELU, or
            its LayerNorms have different ``eps``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> layer = nn.TransformerDecoderLayer(12, 3, 20, dropout=0.0, activation="gelu",
        ...                                    batch_first=True, norm_first=True).eval()
        >>> x, memory = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
        >>> causal = torch.ones(5, 5).tril().bool()  # True = may attend
        >>> ours, _ = decoder_block_from_torch(layer)(x, memory, mask=causal)
        >>> torch.allclose(ours, layer(x, memory, tgt_mask=~causal), atol=1e-6)
        True
    """
    if not isinstance(layer, nn.TransformerDecoderLayer):
        raise TypeError(
            f"layer must be a torch.nn.TransformerDecoderLayer; got {type(layer).__name__}"
        )
    _check_pre_ln_gelu(layer, "DecoderBlock")
    block = _block_like(DecoderBlock, layer)
    block.self_attn = from_torch(layer.self_attn)
    block.cross_attn = from_torch(layer.multihead_attn)
    _copy_pairs(_decoder_pairs(block, layer), forward=True)
    return block.train(layer.training)


def decoder_block_to_torch(block: DecoderBlock) -> nn.TransformerDecoderLayer:
    """A ``torch.nn.TransformerDecoderLayer(E, H, rE, activation="gelu", batch_first=True,
    norm_first=True)`` with the weights of ``block``; the inverse of
    :func:`decoder_block_from_torch`.

    Args:
        block: a :class:`attnlib.seq2seq.DecoderBlock` with the exact GELU.

    Returns:
        ``nn.TransformerDecoderLayer`` with the same sizes, dropout, ``eps``, bias, dtype,
        device and mode.

    Raises:
        TypeError: if ``block`` is not a :class:`attnlib.seq2seq.DecoderBlock`.
        ValueError: if ``block`` uses ``activation="gelu_tanh"``.

    Example:
        >>> from attnlib.seq2seq import DecoderBlock
        >>> layer = decoder_block_to_torch(DecoderBlock(12, 3, mlp_ratio=2.0))
        >>> layer.linear1.weight.shape, layer.multihead_attn.in_proj_weight.shape
        (torch.Size([24, 12]), torch.Size([36, 12]))
    """
    if not isinstance(block, DecoderBlock):
        raise TypeError(
            f"block must be an attnlib.seq2seq.DecoderBlock; got {type(block).__name__}"
        )
    if block.activation != "gelu":
        raise ValueError(
            'block must use activation="gelu" (nn.TransformerDecoderLayer\'s exact GELU); got '
            f"activation={block.activation!r}"
        )
    layer = nn.TransformerDecoderLayer(
        block.embed_dim, block.num_heads, **_torch_layer_options(block)
    )
    layer.self_attn.load_state_dict(to_torch(block.self_attn).state_dict())
    layer.multihead_attn.load_state_dict(to_torch(block.cross_attn).state_dict())
    _copy_pairs(_decoder_pairs(block, layer), forward=False)
    return layer.train(block.training)


def encoder_decoder_to_torch(model: EncoderDecoder) -> nn.Transformer:
    """``torch.nn.Transformer`` holding the encoder and decoder of ``model``: its blocks and
    final LayerNorms, batch-first, pre-LN, GELU.

    ``nn.Transformer`` has no embeddings, positions or read-out: given
    ``model.embed_source(source)`` and ``model.embed_target(target)``, with ``tgt_mask`` the
    causal mask's opposite and ``src_key_padding_mask`` and ``memory_key_padding_mask`` the
    source mask's, it returns the decoder's output, on which ``model.lm_head`` gives the
    model's logits.

    Args:
        model: an :class:`attnlib.seq2seq.EncoderDecoder` with the exact GELU.

    Returns:
        ``nn.Transformer(E, H, num_encoder_layers, num_decoder_layers, rE, dropout,
        activation="gelu", batch_first=True, norm_first=True)`` in ``model``'s dtype, device
        and mode.

    Raises:
        TypeError: if ``model`` is not an :class:`attnlib.seq2seq.EncoderDecoder`.
        ValueError: as :func:`block_to_torch` and :func:`decoder_block_to_torch`.

    Example:
        >>> from attnlib.seq2seq import EncoderDecoder
        >>> core = encoder_decoder_to_torch(EncoderDecoder(30, 20, 16, 4, 2, 3, max_len=8))
        >>> len(core.encoder.layers), len(core.decoder.layers), core.decoder.norm.weight.shape
        (2, 3, torch.Size([16]))
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(
            f"model must be an attnlib.seq2seq.EncoderDecoder; got {type(model).__name__}"
        )
    first = model.decoder[0]
    with warnings.catch_warnings():  # PyTorch's note that pre-LN layers take no nested-tensor
        warnings.filterwarnings("ignore", "enable_nested_tensor", UserWarning)  # fast path
        core = nn.Transformer(
            first.embed_dim,
            first.num_heads,
            num_encoder_layers=len(model.encoder),
            num_decoder_layers=len(model.decoder),
            **_torch_layer_options(first),
        )
    core.encoder.layers = nn.ModuleList(block_to_torch(b) for b in model.encoder)
    core.decoder.layers = nn.ModuleList(decoder_block_to_torch(b) for b in model.decoder)
    _copy_pairs([(model.encoder_norm, core.encoder.norm)], forward=False)
    _copy_pairs([(model.decoder_norm, core.decoder.norm)], forward=False)
    return core.train(model.training)


def encoder_decoder_from_torch(
    core: nn.Transformer, *, source_vocab: int, target_vocab: int, max_len: int
) -> EncoderDecoder:
    """An :class:`attnlib.seq2seq.EncoderDecoder` whose encoder and decoder are those of
    ``core``; the inverse of :func:`encoder_decoder_to_torch`. The embeddings and the read-out,
    which ``nn.Transformer`` lacks, are newly initialised.

    Args:
        core: ``nn.Transformer(..., activation="gelu", norm_first=True)`` with its default
            encoder and decoder (final LayerNorms included).
        source_vocab, target_vocab, max_len: as :class:`attnlib.seq2seq.EncoderDecoder`.

    Returns:
        The model, in ``core``'s dtype, device and mode.

    Raises:
        TypeError: if ``core`` is not an ``nn.Transformer``.
        ValueError: as :func:`block_from_torch` and :func:`decoder_block_from_torch`.

    Example:
        >>> core = nn.Transformer(16, 4, 2, 3, 32, activation="gelu", batch_first=True,
        ...                       norm_first=True)
        >>> model = encoder_decoder_from_torch(core, source_vocab=30, target_vocab=20, max_len=8)
        >>> len(model.encoder), len(model.decoder), model.decoder[0].mlp[0].out_features
        (2, 3, 32)
    """
    if not isinstance(core, nn.Transformer):
        raise TypeError(f"core must be a torch.nn.Transformer; got {type(core).__name__}")
    first = core.decoder.layers[0]
    weight = first.linear1.weight
    model = EncoderDecoder(
        source_vocab,
        target_vocab,
        first.linear1.in_features,
        first.self_attn.num_heads,
        len(core.encoder.layers),
        len(core.decoder.layers),
        max_len=max_len,
        mlp_ratio=first.linear1.out_features / first.linear1.in_features,
        dropout=first.dropout.p,
        bias=first.linear1.bias is not None,
        norm_eps=first.norm1.eps,
    ).to(device=weight.device, dtype=weight.dtype)
    model.encoder = nn.ModuleList(block_from_torch(layer) for layer in core.encoder.layers)
    model.decoder = nn.ModuleList(decoder_block_from_torch(layer) for layer in core.decoder.layers)
    _copy_pairs([(model.encoder_norm, core.encoder.norm)], forward=True)
    _copy_pairs([(model.decoder_norm, core.decoder.norm)], forward=True)
    return model.train(core.training)


def naive_from_fused(m: MultiHeadAttention) -> NaiveMultiHeadAttention:
    """A :class:`attnlib.NaiveMultiHeadAttention` with the weights of a fused one.

    Head ``h`` of the list gets rows ``h*D:(h+1)*D`` of each of ``W_Q, W_K, W_V`` (the rows
    that make the ``h``-th slice of ``Q``, ``K``, ``V`` in the fused model).

    Args:
        m: the fused :class:`attnlib.MultiHeadAttention`.

    Returns:
        ``NaiveMultiHeadAttention(E, H, bias=m.bias)`` computing the same outputs and weights.

    Raises:
        TypeError: if ``m`` is not an :class:`attnlib.MultiHeadAttention`.
        ValueError: if ``m`` has ``num_kv_heads != num_heads`` or ``positions`` (``"rope"``,
            ``"alibi"``): the naive heads have neither grouped-query attention nor positions.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> fused = MultiHeadAttention(12, 3)
        >>> naive = naive_from_fused(fused)
        >>> naive.heads[1].q_proj.weight.shape  # rows 4:8 of W_Q
        torch.Size([4, 12])
        >>> x = torch.randn(5, 12)
        >>> torch.allclose(naive(x)[0], fused(x)[0], atol=1e-6)
        True
    """
    _check_module(m, MultiHeadAttention, "NaiveMultiHeadAttention")
    naive = _like(NaiveMultiHeadAttention, m)
    D = m.head_dim
    for h, head in enumerate(naive.heads):
        rows = slice(h * D, (h + 1) * D)
        for name in ("q_proj", "k_proj", "v_proj"):
            fused = getattr(m, name)
            bias = None if fused.bias is None else fused.bias[rows]
            _copy(getattr(head, name), fused.weight.detach()[rows], bias)
    _copy(naive.out_proj, m.out_proj.weight.detach(), m.out_proj.bias)
    return naive


def fused_from_naive(m: NaiveMultiHeadAttention) -> MultiHeadAttention:
    """A fused :class:`attnlib.MultiHeadAttention` with the weights of a naive one: the
    per-head ``(D, E)`` matrices stacked into ``(E, E)``; inverse of :func:`naive_from_fused`.

    Args:
        m: the :class:`attnlib.NaiveMultiHeadAttention`.

    Returns:
        ``MultiHeadAttention(E, H, bias=m.bias)`` computing the same outputs and weights.

    Raises:
        TypeError: if ``m`` is not an :class:`attnlib.NaiveMultiHeadAttention`.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> naive = NaiveMultiHeadAttention(12, 4, bias=True)
        >>> fused = fused_from_naive(naive)
        >>> x = torch.randn(2, 5, 12)
        >>> torch.allclose(fused(x)[1], naive(x)[1], atol=1e-6)
        True
    """
    _check_module(m, NaiveMultiHeadAttention)
    fused = _like(MultiHeadAttention, m)
    for name in ("q_proj", "k_proj", "v_proj"):
        parts = [getattr(head, name) for head in m.heads]
        weight = torch.cat([p.weight.detach() for p in parts])  # (H*D, E) = (E, E)
        bias = torch.cat([p.bias.detach() for p in parts]) if m.bias else None
        _copy(getattr(fused, name), weight, bias)
    _copy(fused.out_proj, m.out_proj.weight.detach(), m.out_proj.bias)
    return fused


def _keras():
    """Import Keras 3 on the PyTorch backend, or say clearly why it cannot be."""
    if "keras" in sys.modules:
        import keras

        backend = keras.backend.backend()
        if backend != "torch":
            raise RuntimeError(
                f"keras is already imported with the {backend!r} backend; attnlib.convert needs "
                "the 'torch' backend: set os.environ['KERAS_BACKEND'] = 'torch' before the first "
                "`import keras` (restart the kernel)"
            )
        return keras
    wanted = os.environ.setdefault("KERAS_BACKEND", "torch")
    if wanted != "torch":
        raise RuntimeError(
            f"KERAS_BACKEND is {wanted!r}; attnlib.convert needs 'torch': set "
            "os.environ['KERAS_BACKEND'] = 'torch' before importing keras"
        )
    import keras

    return keras


def _variable_to_torch(variable) -> Tensor:
    """A copy of a Keras variable's value as a torch tensor (on the torch backend the value
    already is one; no NumPy round trip)."""
    value = variable.value
    if isinstance(value, Tensor):
        return value.detach().cpu().clone()
    return torch.from_numpy(np.array(value))  # pragma: no cover - other backends


def from_keras(layer) -> MultiHeadAttention:
    """A :class:`attnlib.MultiHeadAttention` with the weights of a built Keras 3
    ``keras.layers.MultiHeadAttention`` (PyTorch backend).

    Keras stores ``query/kernel`` as ``(E, H, D)`` and computes ``x @ kernel``; PyTorch
    stores ``(E_out, E_in)`` and computes ``x @ W.T``, so ``W_Q = kernel.reshape(E, H*D).T``.
    ``attention_output/kernel`` ``(H, D, E)`` gives ``W_O = kernel.reshape(H*D, E).T``.

    Args:
        layer: a built ``keras.layers.MultiHeadAttention`` with ``value_dim == key_dim``
            (or ``value_dim=None``), ``output_shape=None``, ``attention_axes`` ``None`` or
            ``(1,)``, on 3-D inputs ``(N, L, E)``. ``key_dim`` may be anything (it becomes
            ``head_dim``), and the key and value inputs may have other widths (``kdim``,
            ``vdim``).

    Returns:
        ``MultiHeadAttention(E, num_heads, bias=..., kdim=..., vdim=..., head_dim=key_dim,
        dropout=...)``, with the layer's dtype, in eval mode (a Keras layer drops only when
        called with ``training=True``; call ``.train()`` for that).

    Raises:
        TypeError: if ``layer`` is not a Keras ``MultiHeadAttention``.
        ValueError: if ``layer`` is not built or has another shape.
        RuntimeError: if Keras is imported with another backend than ``torch``.

    Example:
        >>> import os
        >>> os.environ["KERAS_BACKEND"] = "torch"  # before the first import of keras
        >>> import keras
        >>> layer = keras.layers.MultiHeadAttention(num_heads=3, key_dim=4)
        >>> x = torch.randn(2, 5, 12)
        >>> y = layer(x, x)  # builds the layer: query/kernel (12, 3, 4)
        >>> torch.allclose(from_keras(layer)(x)[0], y, atol=1e-6)
        True
    """
    keras = _keras()
    if not isinstance(layer, keras.layers.MultiHeadAttention):
        raise TypeError(
            f"layer must be a keras.layers.MultiHeadAttention; got {type(layer).__name__}"
        )
    if not layer.built:
        raise ValueError(
            "layer must be built (call it once, or layer.build(...)) before from_keras"
        )
    config = layer.get_config()
    kernels = {w.path.split("/")[-2] + "/" + w.path.split("/")[-1]: w for w in layer.weights}
    q_kernel = _variable_to_torch(kernels["query/kernel"])  # (E, H, D)
    E, H, D = q_kernel.shape
    kdim, vdim = kernels["key/kernel"].shape[0], kernels["value/kernel"].shape[0]
    problems = []
    if config["value_dim"] != config["key_dim"]:
        problems.append(f"value_dim={config['value_dim']} != key_dim={config['key_dim']}")
    if config.get("output_shape") is not None:
        problems.append(f"output_shape={config['output_shape']}")
    if config.get("attention_axes") not in (None, (1,), [1]):
        problems.append(f"attention_axes={config['attention_axes']}")
    if config.get("use_gate"):
        problems.append("use_gate=True")
    if config.get("sliding_window") is not None:
        problems.append(f"sliding_window={config['sliding_window']}")
    if problems:
        raise ValueError(
            "layer must be a Keras MultiHeadAttention with value_dim == key_dim, no "
            "output_shape, attention over axis 1, no gate and no sliding window; got "
            + ", ".join(problems)
        )
    bias = bool(config["use_bias"])
    ours = MultiHeadAttention(
        E, H, bias=bias, kdim=kdim, vdim=vdim, head_dim=D, dropout=float(config["dropout"])
    )
    ours.to(q_kernel.dtype).eval()  # as Keras' call, which drops only with training=True

    def get(name):
        return _variable_to_torch(kernels[name])

    for prefix, proj in (("query", ours.q_proj), ("key", ours.k_proj), ("value", ours.v_proj)):
        kernel = get(f"{prefix}/kernel")  # (E_in, H, D)
        w = kernel.reshape(kernel.shape[0], H * D).T  # (E_in, H*D) -> (H*D, E_in)
        b = get(f"{prefix}/bias").reshape(H * D) if bias else None  # (H, D) -> (H*D,)
        _copy(proj, w, b)
    w = get("attention_output/kernel").reshape(H * D, E).T  # (H, D, E) -> (H*D, E) -> (E, H*D)
    _copy(ours.out_proj, w, get("attention_output/bias") if bias else None)
    return ours


def to_keras(m: MultiHeadAttention, name: str | None = None):
    """A built Keras 3 ``MultiHeadAttention(num_heads=H, key_dim=D, use_bias=m.bias)`` with
    the weights of ``m``; inverse of :func:`from_keras`. Sets ``KERAS_BACKEND=torch`` if
    Keras is not imported yet.

    Args:
        m: the :class:`attnlib.MultiHeadAttention` to copy.
        name: the Keras layer name (default: Keras numbers it, ``multi_head_attention_3``).

    Returns:
        A built ``keras.layers.MultiHeadAttention``; call it as ``layer(query, value, key)``
        (value before key) with ``attention_mask=mask`` (``True`` = may attend).

    Raises:
        TypeError: if ``m`` is not an :class:`attnlib.MultiHeadAttention`.
        ValueError: if ``m`` has ``num_kv_heads != num_heads`` or ``positions`` (``"rope"``,
            ``"alibi"``): Keras' layer has neither grouped-query attention nor RoPE or ALiBi.
        RuntimeError: if Keras is imported with another backend than ``torch``.

    Example:
        >>> m = MultiHeadAttention(12, 3, bias=True)
        >>> layer = to_keras(m)
        >>> [tuple(w.shape) for w in layer.weights][:2]  # query/kernel, query/bias
        [(12, 3, 4), (3, 4)]
        >>> x = torch.randn(2, 5, 12)
        >>> torch.allclose(layer(x, x), m(x)[0], atol=1e-6)
        True
    """
    _check_module(m, MultiHeadAttention, "keras.layers.MultiHeadAttention")
    keras = _keras()
    E, H, D = m.embed_dim, m.num_heads, m.head_dim
    layer = keras.layers.MultiHeadAttention(
        num_heads=H,
        key_dim=D,
        use_bias=m.bias,
        dropout=m.dropout,
        name=name,
        dtype=str(m.out_proj.weight.dtype).removeprefix("torch."),
    )
    layer.build((None, None, E), (None, None, m.vdim), (None, None, m.kdim))  # query, value, key

    def np_(t):
        return t.detach().cpu().numpy()

    weights = []
    for proj in (m.q_proj, m.k_proj, m.v_proj):
        w = np_(proj.weight).T  # (H*D, E_in) -> (E_in, H*D)
        weights.append(w.reshape(w.shape[0], H, D))  # (E_in, H, D)
        if m.bias:
            weights.append(np_(proj.bias).reshape(H, D))  # (H*D,) -> (H, D)
    weights.append(np_(m.out_proj.weight).T.reshape(H, D, E))  # (E, H*D) -> (H*D, E) -> (H, D, E)
    if m.bias:
        weights.append(np_(m.out_proj.bias))
    layer.set_weights(weights)
    return layer
