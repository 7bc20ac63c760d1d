"""Attention without the L x S matrix: online softmax over blocks of keys.

The FlashAttention algorithm (Dao et al., 2022; Milakov & Gimelshein, 2018; Rabe & Staats,
2021) in plain PyTorch, for teaching: the scores of one block of keys at a time, a running
maximum ``m``, a running sum ``l`` and a running output rescaled whenever ``m`` grows
(:func:`tiled_attention`); and its backward pass by hand, which keeps only ``Q, K, V``, the
output and the log-sum-exp ``m + log l`` of each query and recomputes the weights block by
block (:func:`flash_attention`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnlib._checks import (
    check_int,
    check_mask,
    check_qk,
    check_real,
    check_tensor,
    check_value,
    shape_str,
)
from attnlib.attention import apply_mask, weighted_sum

__all__ = ["flash_attention", "tiled_attention"]


def tiled_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    mask: Tensor | None = None,
    is_causal: bool = False,
    block_size: int = 128,
    scale: float | None = None,
    return_lse: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
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

    With ``return_lse=True`` the log-sum-exp of each query's (masked, scaled) scores comes
    too, from the final ``m`` and ``l``:

    .. math::

        \\operatorname{lse}_i = \\log \\sum_j e^{s_{ij}} = m_i + \\log l_i,

    so that the weights are ``exp(s_ij - lse_i)``: what a backward pass needs to recompute
    them block by block (:func:`flash_attention`). A query with nothing to attend to has
    ``lse = -inf`` (and a zero output).

    The result is differentiable by autograd, which then keeps every block's intermediate
    tensors, ``O(L * S)`` in all; :func:`flash_attention` computes the same output with a
    backward that keeps ``O(L * d)``.

    Args:
        query, key, value: as :func:`attnlib.scaled_dot_product_attention`.
        mask: optional, broadcastable to ``(..., L, S)``: boolean (``True`` = may attend) or
            floating point (added to the scaled scores, ``-inf`` = blocked), as
            :func:`attnlib.scaled_dot_product_attention`.
        is_causal: mask keys ``j > i`` (top-left aligned, as ``causal_mask`` and
            ``F.scaled_dot_product_attention(is_causal=True)``); may be combined with ``mask``.
        block_size: keys per block, ``>= 1``; ``S`` need not be a multiple of it.
        scale: defaults to ``1 / sqrt(d_k)``.
        return_lse: also return the log-sum-exp of each query's scores.

    Returns:
        The attention output, or ``(output, lse)`` with ``return_lse=True``.

    Shape:
        ``query``: ``(..., L, d_k)``; ``key``: ``(..., S, d_k)``; ``value``: ``(..., S, d_v)``;
        ``mask``: broadcastable to ``(..., L, S)``; output: ``(..., L, d_v)``; ``lse``:
        ``(..., L)``, e.g. ``(N, H, L)``; ``...`` is the broadcast of the inputs' batch
        dimensions.

    Raises:
        ValueError: if ``block_size < 1``, the shapes of ``query``, ``key`` and ``value`` do not
            match, they or ``mask`` lie on different devices, or ``mask`` does not broadcast.
        TypeError: if ``query``, ``key`` or ``value`` is not a float tensor, ``mask`` is neither
            boolean nor floating point, ``is_causal`` or ``return_lse`` is not a ``bool`` or
            ``block_size`` not an ``int``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(3, 100, 16).unbind(0)
        >>> exact = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        >>> torch.allclose(tiled_attention(q, k, v, block_size=32), exact, atol=1e-6)
        True
        >>> out, lse = tiled_attention(q, k, v, block_size=32, return_lse=True)
        >>> lse.shape
        torch.Size([100])
        >>> torch.allclose(lse, torch.logsumexp(q @ k.T / 4, dim=-1))
        True
    """
    block_size, scale = _check(query, key, value, mask, is_causal, block_size, scale)
    _check_bool("return_lse", return_lse)
    out, m, total = _tiled_forward(query, key, value, mask, is_causal, block_size, scale)
    if not return_lse:
        return out
    return out, _lse(m, total)


def flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    mask: Tensor | None = None,
    is_causal: bool = False,
    block_size: int = 128,
    scale: float | None = None,
    enable_gqa: bool = False,
    return_lse: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Tiled attention with a backward pass by hand that recomputes the weights block by block.

    The forward is :func:`tiled_attention`'s (the same output, bit for bit). Instead of
    every block's scores and weights, it saves only ``Q``, ``K``, ``V``, the output ``O`` and
    the log-sum-exp ``lse`` of each query, ``O(L * d)`` memory (FlashAttention, Dao et al.,
    2022, section 3.1 and algorithm 4). The backward recomputes each block's weights from
    them, with ``s = Q K_b^T * scale`` (masked) and ``dO`` the gradient of the output:

    .. math::

        \\begin{aligned}
        D_i &= \\textstyle\\sum_c dO_{ic}\\, O_{ic}, \\qquad
        P = e^{s - \\operatorname{lse}}, \\\\
        dV_b &\\mathrel{+}= P^\\top dO, \\qquad dP = dO\\, V_b^\\top, \\qquad
        dS = P \\odot (dP - D), \\\\
        dQ &\\mathrel{+}= dS\\, K_b \\cdot \\text{scale}, \\qquad
        dK_b \\mathrel{+}= dS^\\top Q \\cdot \\text{scale}.
        \\end{aligned}

    ``D_i = \\sum_j P_{ij} dP_{ij}`` is the row term of the softmax's derivative,
    ``dS_{ij} = P_{ij} (dP_{ij} - \\sum_k P_{ik} dP_{ik})``, read off the output instead of the
    weights. A gradient of ``lse`` (with ``return_lse=True``) adds ``P`` times it to ``dS``.
    A query with nothing to attend to (``lse = -inf``) has a zero output and gives zero
    gradients, never NaN. Gradients reaching broadcast batch dimensions, or a key head shared
    by a group of query heads (``enable_gqa``), are summed, as autograd sums them. Unlike the
    forward, the backward does not shield a blocked key whose key or value holds ``inf`` or NaN
    (``0 * inf``): its gradients are then NaN.

    Args:
        query, key, value: as :func:`tiled_attention`.
        mask: as :func:`tiled_attention`; boolean, or a floating-point mask that does not
            require a gradient (it is a constant here).
        is_causal: mask keys ``j > i``, as :func:`tiled_attention`; may be combined with
            ``mask``.
        block_size: keys per block, ``>= 1``, in the forward and the backward pass.
        scale: defaults to ``1 / sqrt(d_k)``.
        enable_gqa: grouped keys (grouped-query attention, as
            ``F.scaled_dot_product_attention(enable_gqa=True)``): ``key`` and ``value`` have
            ``G`` heads in dimension ``-3``, shared by the ``H`` heads of ``query`` (``G``
            divides ``H``; query head ``h`` reads key head ``h // (H / G)``).
        return_lse: also return the log-sum-exp of each query's scores, as
            :func:`tiled_attention`.

    Returns:
        The attention output, or ``(output, lse)`` with ``return_lse=True``.

    Shape:
        as :func:`tiled_attention`; with ``enable_gqa``: ``query`` ``(..., H, L, d_k)``,
        ``key`` ``(..., G, S, d_k)``, ``value`` ``(..., G, S, d_v)``, ``mask`` broadcastable to
        ``(..., H, L, S)``, output ``(..., H, L, d_v)``, ``lse`` ``(..., H, L)``.

    Raises:
        ValueError: as :func:`tiled_attention`, or with ``enable_gqa`` if an input has fewer
            than 3 dimensions, ``key`` and ``value`` differ in heads or ``G`` does not divide
            ``H``, or if a floating-point ``mask`` requires a gradient.
        TypeError: as :func:`tiled_attention`, or if ``enable_gqa`` is not a ``bool``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> q, k, v = torch.randn(3, 1, 2, 100, 16).unbind(0)  # (N=1, H=2, L=S=100, D=16)
        >>> _ = q.requires_grad_()
        >>> flash_attention(q, k, v, is_causal=True, block_size=32).sum().backward()
        >>> q2 = q.detach().requires_grad_()
        >>> exact = torch.nn.functional.scaled_dot_product_attention(q2, k, v, is_causal=True)
        >>> exact.sum().backward()
        >>> torch.allclose(q.grad, q2.grad, atol=1e-5)
        True
    """
    _check_bool("enable_gqa", enable_gqa)
    _check_bool("return_lse", return_lse)
    heads = None
    if enable_gqa:
        query, key, value, mask, heads = _grouped(query, key, value, mask)
    block_size, scale = _check(query, key, value, mask, is_causal, block_size, scale)
    if mask is not None and mask.requires_grad:
        raise ValueError(
            "mask must not require a gradient: flash_attention treats it as a constant; "
            "pass mask.detach()"
        )
    out, lse = _FlashAttention.apply(query, key, value, mask, is_causal, block_size, scale)
    if heads is not None:  # (..., G, H/G, L, *) back to (..., H, L, *)
        out = out.flatten(-4, -3)  # (..., H, L, d_v)
        lse = lse.flatten(-3, -2)  # (..., H, L)
    return (out, lse) if return_lse else out


def _check_bool(name: str, flag) -> None:
    if not isinstance(flag, bool):
        raise TypeError(f"{name} must be a bool; got {type(flag).__name__}")


def _check(query, key, value, mask, is_causal, block_size, scale) -> tuple[int, float]:
    """The checks of the public entries; returns ``block_size`` and the scale to use."""
    block_size = check_int("block_size", block_size, low=1, what="an integer >= 1")
    _check_bool("is_causal", is_causal)
    check_qk(query, key)
    check_value(query, key, value)
    scale = None if scale is None else check_real("scale", scale, "a real number or None")
    L, S = query.shape[-2], key.shape[-2]
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    if mask is not None:
        batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
        check_mask(mask, (*batch, L, S), "(..., L, S)", device=query.device)
    return block_size, scale


def _grouped(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None):
    """Checked views for ``enable_gqa``: ``query`` ``(..., G, H/G, L, d_k)``, ``key`` and
    ``value`` ``(..., G, 1, S, *)``, ``mask`` to match; then the usual checks apply."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, t, (3, None))
    H, G = query.shape[-3], key.shape[-3]
    if value.shape[-3] != G:
        raise ValueError(
            f"with enable_gqa, key and value must have the same number of heads G in dimension "
            f"-3; got key {shape_str(key.shape)} and value {shape_str(value.shape)}"
        )
    if G == 0 or H % G:
        raise ValueError(
            f"with enable_gqa, the heads of key (G={G}) must divide the heads of query "
            f"(H={H}); got query {shape_str(query.shape)} and key {shape_str(key.shape)}"
        )
    if mask is not None:
        batch = torch.broadcast_shapes(query.shape[:-3], key.shape[:-3], value.shape[:-3])
        target = (*batch, H, query.shape[-2], key.shape[-2])
        check_mask(mask, target, "(..., H, L, S)", device=query.device)
        if mask.dim() >= 3:  # (..., H or 1, L, S) -> (..., G or 1, H/G or 1, L, S)
            mask = mask.unflatten(-3, (G, H // G)) if mask.shape[-3] == H else mask.unsqueeze(-3)
    query = query.unflatten(-3, (G, H // G))  # (..., G, H/G, L, d_k)
    return query, key.unsqueeze(-3), value.unsqueeze(-3), mask, H  # key: (..., G, 1, S, d_k)


def _lse(m: Tensor, total: Tensor) -> Tensor:
    """``m + log l`` as ``(..., L)``; ``-inf`` where no key was attended (``m = -inf``,
    ``l = 0``)."""
    return (m + torch.log(total)).squeeze(-1)


def _block_scores(q, key, mask, is_causal, start, stop, rows) -> Tensor:
    """The masked scores ``q K[start:stop]^T`` of one block (``q`` already scaled)."""
    s = q @ key[..., start:stop, :].transpose(-2, -1)  # (..., L, B)
    if is_causal:
        cols = torch.arange(start, stop, device=q.device).unsqueeze(0)  # (1, B)
        s = s.masked_fill(cols > rows, -math.inf)
    if mask is not None:
        s = apply_mask(s, mask[..., start:stop] if mask.shape[-1] > 1 else mask)
    return s


def _tiled_forward(query, key, value, mask, is_causal, block_size, scale):
    """The kernel of :func:`tiled_attention` (arguments checked): ``(output, m, l)``, with the
    final running maximum ``m`` and sum ``l`` as ``(..., L, 1)``."""
    L, S = query.shape[-2], key.shape[-2]
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    q = query * scale  # (..., L, d_k)
    m = query.new_full((*batch, L, 1), -math.inf)  # running max of the scores
    total = query.new_zeros((*batch, L, 1))  # running sum of exp(s - m)
    out = query.new_zeros((*batch, L, value.shape[-1]))  # running sum of exp(s - m) v
    rows = torch.arange(L, device=query.device).unsqueeze(1)  # (L, 1)
    for start in range(0, S, block_size):
        if is_causal and start > L - 1:
            break  # every key of this block and after lies in every query's future
        stop = min(start + block_size, S)
        s = _block_scores(q, key, mask, is_causal, start, stop, rows)  # (..., L, B)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., L, 1)
        m_safe = torch.where(m_new == -math.inf, 0.0, m_new)  # rows with no key yet
        p = torch.exp(s - m_safe)  # (..., L, B)
        rescale = torch.exp(m - m_safe)  # (..., L, 1); 0 on the first block
        total = total * rescale + p.sum(dim=-1, keepdim=True)
        v = value[..., start:stop, :]  # (..., B, d_v)
        masked = is_causal or mask is not None  # a zero weight may then meet an inf value
        out = out * rescale + (weighted_sum(p, v) if masked else p @ v)  # (..., L, d_v)
        m = m_new
    return out / torch.where(total == 0, 1.0, total), m, total


class _FlashAttention(torch.autograd.Function):
    """The forward of :func:`tiled_attention`, saving ``Q, K, V, O, lse``; the backward of
    :func:`flash_attention`'s docstring. Inputs are checked (and broadcast-compatible)."""

    @staticmethod
    def forward(ctx, query, key, value, mask, is_causal, block_size, scale):
        out, m, total = _tiled_forward(query, key, value, mask, is_causal, block_size, scale)
        lse = _lse(m, total)  # (..., L)
        ctx.save_for_backward(query, key, value, out, lse, mask)
        ctx.is_causal, ctx.block_size, ctx.scale = is_causal, block_size, scale
        return out, lse

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        query, key, value, out, lse, mask = ctx.saved_tensors
        is_causal, block_size, scale = ctx.is_causal, ctx.block_size, ctx.scale
        L, S = query.shape[-2], key.shape[-2]
        # dS = P (dP - D) + P dlse = P (dP - (D - dlse)): one row term for both outputs
        row = (grad_out * out).sum(dim=-1, keepdim=True) - grad_lse.unsqueeze(-1)  # (..., L, 1)
        lse = torch.where(lse == -math.inf, 0.0, lse).unsqueeze(-1)  # no key: P = e^-inf = 0
        q = query * scale  # (..., L, d_k)
        dq = query.new_zeros((*out.shape[:-1], query.shape[-1]))  # (..., L, d_k), broadcast
        dk, dv = torch.zeros_like(key), torch.zeros_like(value)
        rows = torch.arange(L, device=query.device).unsqueeze(1)  # (L, 1)
        for start in range(0, S, block_size):
            if is_causal and start > L - 1:
                break  # no query sees these keys: their gradients stay 0
            stop = min(start + block_size, S)
            k, v = key[..., start:stop, :], value[..., start:stop, :]  # (..., B, d)
            s = _block_scores(q, key, mask, is_causal, start, stop, rows)  # (..., L, B)
            p = torch.exp(s - lse)  # (..., L, B): the forward's weights, recomputed
            dv[..., start:stop, :] += (p.transpose(-2, -1) @ grad_out).sum_to_size(v.shape)
            dp = grad_out @ v.transpose(-2, -1)  # (..., L, B)
            ds = p * (dp - row)  # (..., L, B)
            dq += ds @ k  # (..., L, d_k)
            dk[..., start:stop, :] += (ds.transpose(-2, -1) @ q).sum_to_size(k.shape)
        return (dq * scale).sum_to_size(query.shape), dk, dv, None, None, None, None
