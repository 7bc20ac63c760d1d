"""Attention without the L x S matrix: online softmax over blocks of keys.

The FlashAttention algorithm (Dao et al., 2022; Milakov & Gimelshein, 2018; Rabe & Staats,
2021) in plain PyTorch, for teaching: the scores of one block of keys at a time, a running
maximum ``m``, a running sum ``l`` and a running output rescaled whenever ``m`` grows.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnlib._checks import check_int, check_mask, check_qk, check_real, check_value
from attnlib.attention import apply_mask, weighted_sum

__all__ = ["tiled_attention"]


def tiled_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    mask: Tensor | None = None,
    is_causal: bool = False,
    block_size: int = 128,
    scale: float | None = None,
) -> Tensor:
    """Exact attention computed one block of keys at a time, in ``O(L * block_size)`` memory.

    For each block ``b`` of keys, with scores ``s = q k_b^T * scale``:

    .. math::

        \\begin{aligned}
        m' &= \\max(m, \\max_j s_j), \\\\
        l' &= e^{m - m'}\\, l + \\sum_j e^{s_j - m'}, \\\\
        o' &= e^{m - m'}\\, o + \\sum_j e^{s_j - m'} v_j
        \\end{aligned}

    and at the end ``output = o / l``, equal to ``softmax(q K^T * scale) V`` up to rounding.
    Only a ``(..., L, block_size)`` block of scores exists at any time; the ``(L, S)``
    matrix is never built, and the weights are not returned. A ``mask`` is applied block by
    block, its columns ``start:stop`` with the block's scores (a mask is ``(L, S)`` itself,
    so pass ``is_causal=True`` rather than a causal mask when memory matters). A query that no
    key may attend to gets a zero output.

    Args:
        query, key, value: as :func:`attnlib.scaled_dot_product_attention`.
        mask: optional, broadcastable to ``(..., L, S)``: boolean (``True`` = may attend) or
            floating point (added to the scaled scores, ``-inf`` = blocked), as
            :func:`attnlib.scaled_dot_product_attention`.
        is_causal: mask keys ``j > i`` (top-left aligned, as ``causal_mask`` and
            ``F.scaled_dot_product_attention(is_causal=True)``); may be combined with ``mask``.
        block_size: keys per block, ``>= 1``; ``S`` need not be a multiple of it.
        scale: defaults to ``1 / sqrt(d_k)``.

    Returns:
        The attention output.

    Shape:
        ``query``: ``(..., L, d_k)``; ``key``: ``(..., S, d_k)``; ``value``: ``(..., S, d_v)``;
        ``mask``: broadcastable to ``(..., L, S)``; output: ``(..., L, d_v)``.

    Raises:
        ValueError: if ``block_size < 1``, the shapes of ``query``, ``key`` and ``value`` do not
            match, they or ``mask`` lie on different devices, or ``mask`` does not broadcast.
        TypeError: if ``query``, ``key`` or ``value`` is not a float tensor, ``mask`` is neither
            boolean nor floating point, ``is_causal`` is not a ``bool`` or ``block_size`` not an
            ``int``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(3, 100, 16).unbind(0)
        >>> exact = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        >>> torch.allclose(tiled_attention(q, k, v, block_size=32), exact, atol=1e-6)
        True
    """
    block_size = check_int("block_size", block_size, low=1, what="an integer >= 1")
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool; got {type(is_causal).__name__}")
    check_qk(query, key)
    check_value(query, key, value)
    scale = None if scale is None else check_real("scale", scale, "a real number or None")
    L, S = query.shape[-2], key.shape[-2]
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    if mask is not None:
        check_mask(mask, (*batch, L, S), "(..., L, S)", device=query.device)
    q = query * scale  # (..., L, d_k)
    m = query.new_full((*batch, L, 1), -math.inf)  # running max of the scores
    total = query.new_zeros((*batch, L, 1))  # running sum of exp(s - m)
    out = query.new_zeros((*batch, L, value.shape[-1]))  # running sum of exp(s - m) v
    rows = torch.arange(L, device=query.device).unsqueeze(1)  # (L, 1)
    for start in range(0, S, block_size):
        if is_causal and start > L - 1:
            break  # every key of this block and after lies in every query's future
        stop = min(start + block_size, S)
        s = q @ key[..., start:stop, :].transpose(-2, -1)  # (..., L, B)
        if is_causal:
            cols = torch.arange(start, stop, device=query.device).unsqueeze(0)  # (1, B)
            s = s.masked_fill(cols > rows, -math.inf)
        if mask is not None:
            s = apply_mask(s, mask[..., start:stop] if mask.shape[-1] > 1 else mask)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., L, 1)
        m_safe = torch.where(m_new == -math.inf, 0.0, m_new)  # rows with no key yet
        p = torch.exp(s - m_safe)  # (..., L, B)
        rescale = torch.exp(m - m_safe)  # (..., L, 1); 0 on the first block
        total = total * rescale + p.sum(dim=-1, keepdim=True)
        v = value[..., start:stop, :]  # (..., B, d_v)
        masked = is_causal or mask is not None  # a zero weight may then meet an inf value
        out = out * rescale + (weighted_sum(p, v) if masked else p @ v)  # (..., L, d_v)
        m = m_new
    return out / torch.where(total == 0, 1.0, total)
