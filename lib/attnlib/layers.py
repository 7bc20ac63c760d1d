"""One mapping from the options a block or a model takes to an attention module.

The blocks are composed of modules (:class:`attnlib.TransformerBlock` takes an ``attn=``
module); the keyword options the chapters use, ``positions="rope"``, ``linear="delta"``,
``latent_dim=``, ``qk_norm=True``, ..., are a convenience that :func:`make_attention` turns
into one of those modules, here and nowhere else:

===============================================  ============================================
options                                          module
===============================================  ============================================
``linear="linear" | "delta" | "gated_delta"``    :class:`attnlib.linear_attention.LinearAttention`
``latent_dim=d_c`` (``positions="rope"``: RoPE)  :class:`attnlib.latent.MultiHeadLatentAttention`
``qk_norm``, ``softcap``, ``sink``, ``gate``     :class:`attnlib.ModernAttention`
anything else (``num_kv_heads``, ``positions``)  :class:`attnlib.MultiHeadAttention`
===============================================  ============================================

A new variant is a class with the attention interface (``_self_attention``, ``new_cache``,
``check_cache``, ``takes_mask``: see :class:`attnlib.MultiHeadAttention`), passed to a block as
``attn=`` or to a model as ``block=``; a row here only if it should have a keyword too.
"""

from __future__ import annotations

from torch import nn

from attnlib._checks import check_int
from attnlib.latent import MultiHeadLatentAttention
from attnlib.linear_attention import LinearAttention
from attnlib.multihead import ModernAttention, MultiHeadAttention
from attnlib.positions import ALiBi, _position_scheme

__all__ = ["make_attention"]

MODERN_OPTIONS = ("qk_norm", "softcap", "sink", "gate")  # ModernAttention's own
SOFTMAX_OPTIONS = ("num_kv_heads", "positions", "latent_dim", *MODERN_OPTIONS)  # not for linear


def _given(options: dict) -> dict:
    """The options that are on: neither ``None`` nor ``False`` (by identity: a ``0`` where a
    ``bool`` is due is passed on, to be refused by the layer)."""
    return {k: v for k, v in options.items() if v is not None and v is not False}


def make_attention(
    embed_dim: int,
    num_heads: int,
    *,
    bias: bool = False,
    dropout: float = 0.0,
    linear: str | None = None,
    latent_dim: int | None = None,
    **options,
) -> nn.Module:
    """The attention module of a block's keyword options (see the module's table).

    Args:
        embed_dim: ``E``.
        num_heads: ``H``.
        bias: biases in the projections.
        dropout: probability of dropping an attention weight (softmax attention).
        linear: a linear-attention rule, ``"linear"``, ``"delta"`` or ``"gated_delta"``:
            a :class:`attnlib.linear_attention.LinearAttention`, which takes no other option.
        latent_dim: ``d_c``: a :class:`attnlib.latent.MultiHeadLatentAttention` whose RoPE key
            has ``D / 2`` features with ``positions="rope"`` (DeepSeek-V2's ratio); it takes
            neither ``num_kv_heads``, ALiBi, nor the options of :class:`attnlib.ModernAttention`.
        **options: the keywords of :class:`attnlib.MultiHeadAttention` (``num_kv_heads``,
            ``positions``, ``rope_base``, ...) and of :class:`attnlib.ModernAttention`
            (``qk_norm``, ``softcap``, ``sink``, ``gate``: any of them on gives one).

    Returns:
        The module, its parameters created in the order the blocks always created them.

    Raises:
        ValueError: if ``linear`` comes with an option of softmax attention, or ``latent_dim``
            with ``num_kv_heads``, ALiBi or an option of :class:`attnlib.ModernAttention`; and
            whatever the module raises for its arguments.
        TypeError: whatever the module raises for its arguments.

    Example:
        >>> type(make_attention(12, 3, positions="rope")).__name__
        'MultiHeadAttention'
        >>> type(make_attention(12, 3, qk_norm=True)).__name__
        'ModernAttention'
        >>> type(make_attention(12, 3, linear="delta", bias=True)).__name__
        'LinearAttention'
    """
    given = _given({"latent_dim": latent_dim, **options})
    if linear is not None:
        if given:
            shown = [f"{k}={v!r}" if v is not True else k for k, v in given.items()]
            raise ValueError(
                "linear (a linear-attention layer) takes none of num_kv_heads, positions, "
                "latent_dim, qk_norm, softcap, sink, gate (its convolution and state order "
                f"the tokens); got {', '.join(shown)}"
            )
        return LinearAttention(embed_dim, num_heads, rule=linear, bias=bias)
    modern = {k: options.pop(k) for k in MODERN_OPTIONS if k in options}
    if latent_dim is not None:
        if _given(modern):
            raise ValueError(
                "latent_dim (multi-head latent attention) takes none of qk_norm, softcap, "
                f"sink, gate; got {', '.join(f'{k}={v}' for k, v in modern.items())}"
            )
        return _latent_attention(embed_dim, num_heads, latent_dim, bias, dropout, **options)
    if _given(modern):
        return ModernAttention(
            embed_dim, num_heads, bias=bias, dropout=dropout, **modern, **options
        )
    return MultiHeadAttention(embed_dim, num_heads, bias=bias, dropout=dropout, **options)


def _latent_attention(E, H, latent_dim, bias, dropout, num_kv_heads=None, positions=None):
    """A block's :class:`MultiHeadLatentAttention`, its RoPE key ``D / 2`` wide with RoPE."""
    scheme = _position_scheme(positions)
    if num_kv_heads is not None or isinstance(scheme, ALiBi):
        raise ValueError(
            "latent_dim (multi-head latent attention) takes neither num_kv_heads nor ALiBi "
            f"positions; got num_kv_heads={num_kv_heads!r}, positions={positions!r}"
        )
    H = check_int("num_heads", H, low=1)
    rope_dim = 0 if scheme is None else (E // H) // 2
    base = 10000.0 if scheme is None else scheme.base
    return MultiHeadLatentAttention(
        E, H, latent_dim=latent_dim, rope_dim=rope_dim, bias=bias, dropout=dropout, rope_base=base
    )
