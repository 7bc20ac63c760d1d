"""Scaled dot-product attention, one head.

.. math::

    \\operatorname{Attention}(Q, K, V) =
    \\operatorname{softmax}\\left(\\frac{Q K^\\top}{\\sqrt{d_k}}\\right) V

A mask is either boolean with ``True`` = *may attend*, as in ``F.scaled_dot_product_attention``
and Keras (``torch.nn.MultiheadAttention``'s boolean ``attn_mask`` is the opposite), or floating
point and *added* to the scores (``0`` = no change, ``-inf`` = blocked, any other value a bias,
such as ALiBi's), exactly as ``F.scaled_dot_product_attention``'s float ``attn_mask``. A query
row with nothing to attend to gets zero weights and a zero output, never NaN.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlib._checks import apply_mask, check_mask, check_tensor, shape_str

__all__ = [
    "SelfAttention",
    "attention_weights",
    "causal_mask",
    "scaled_dot_product_attention",
    "softmax",
]


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Numerically stable softmax along ``dim``; a slice that is all ``-inf`` gives zeros.

    .. math::

        \\operatorname{softmax}(x)_j = \\frac{e^{x_j - m}}{\\sum_i e^{x_i - m}},
        \\qquad m = \\max_i x_i

    Subtracting the maximum ``m`` changes nothing mathematically (it cancels) but keeps every
    exponent ``<= 0``, so ``exp`` cannot overflow. Where every entry is ``-inf`` (a fully
    masked row) the result is all zeros instead of ``0/0 = NaN``.

    Args:
        x: scores, any shape, floating point.
        dim: the dimension that sums to 1.

    Returns:
        Tensor of the same shape as ``x``.

    Shape:
        ``x``: ``(*)``; output: ``(*)``.

    Raises:
        TypeError: if ``x`` is not a floating-point tensor.

    Example:
        >>> softmax(torch.tensor([1000.0, 1000.0]))
        tensor([0.5000, 0.5000])
        >>> softmax(torch.tensor([-float("inf"), -float("inf")]))
        tensor([0., 0.])
    """
    if not isinstance(x, Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point torch.Tensor; got {got}")
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(m == -math.inf, torch.zeros_like(m), m)  # all -inf: avoid -inf - -inf
    e = torch.exp(x - m)
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def causal_mask(L: int, S: int | None = None, device=None) -> Tensor:
    """Boolean causal mask: query ``i`` may attend to keys ``j <= i`` (``True`` = may attend).

    .. math::

        M_{ij} = [\\, j \\le i \\,]

    The mask is aligned top-left, exactly as ``F.scaled_dot_product_attention(...,
    is_causal=True)``: ``causal_mask(L, S) == torch.ones(L, S).tril().bool()``.

    Args:
        L: number of queries.
        S: number of keys; defaults to ``L``.
        device: where to create the mask.

    Returns:
        Boolean tensor of shape ``(L, S)``.

    Shape:
        output: ``(L, S)``, broadcastable against scores ``(..., L, S)``.

    Raises:
        ValueError: if ``L`` or ``S`` is not a positive integer.

    Example:
        >>> causal_mask(3)
        tensor([[ True, False, False],
                [ True,  True, False],
                [ True,  True,  True]])
    """
    S = L if S is None else S
    for name, n in (("L", L), ("S", S)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be a positive integer; got {n!r}")
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()


def _check_qk(query: Tensor, key: Tensor) -> None:
    check_tensor("query", query, tuple(range(2, 9)))
    check_tensor("key", key, tuple(range(2, 9)))
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same last dimension d_k; got query "
            f"{shape_str(query.shape)} (d_k={query.shape[-1]}) and key {shape_str(key.shape)} "
            f"(d_k={key.shape[-1]})"
        )
    try:
        torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"query and key batch dimensions must broadcast; got query {shape_str(query.shape)} "
            f"and key {shape_str(key.shape)}"
        ) from None


def attention_weights(
    query: Tensor, key: Tensor, mask: Tensor | None = None, scale: float | None = None
) -> Tensor:
    """Attention weights: the softmax of the scaled dot products of queries and keys.

    .. math::

        A = \\operatorname{softmax}\\left(\\frac{Q K^\\top}{\\sqrt{d_k}} + B\\right),
        \\qquad B_{ij} = \\begin{cases} 0 & M_{ij} = \\text{True} \\\\
        -\\infty & M_{ij} = \\text{False} \\end{cases}

    for a boolean mask ``M``; a float mask is ``B`` itself, added to the scaled scores.

    Args:
        query: ``Q``, one row per query.
        key: ``K``, one row per key; same last dimension ``d_k`` as ``query``.
        mask: optional, broadcastable to ``(..., L, S)``: boolean, ``True`` = may attend, or
            floating point, added to the scaled scores (``-inf`` = blocked).
        scale: factor applied to ``Q K^T``; defaults to ``1 / sqrt(d_k)``.

    Returns:
        Weights, each row sums to 1 (or is all zeros where the mask leaves nothing).

    Shape:
        ``query``: ``(..., L, d_k)``; ``key``: ``(..., S, d_k)``; ``mask``: ``(L, S)`` or any
        shape broadcastable to ``(..., L, S)``; output: ``(..., L, S)``.

    Raises:
        TypeError: if an input is not a float tensor, or ``mask`` is neither boolean nor
        floating point (an integer mask is ambiguous: convert it).
        ValueError: if a rank is below 2, ``d_k`` differs, or ``mask`` does not broadcast.

    Example:
        >>> X = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.5, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
        >>> attention_weights(X, X)[0]
        tensor([0.4519, 0.2741, 0.2741])
        >>> attention_weights(X, X, mask=torch.tensor([0.0, 0.0, -float("inf")]))[0]
        tensor([0.6225, 0.3775, 0.0000])
    """
    _check_qk(query, key)
    if scale is None:
        scale = query.shape[-1] ** -0.5
    scores = (query @ key.transpose(-2, -1)).mul_(scale)  # (..., L, S), scaled in place
    if mask is None:
        return torch.softmax(scores, dim=-1)
    check_mask(mask, tuple(scores.shape), "(..., L, S)")
    return softmax(apply_mask(scores, mask), dim=-1)  # blocked scores are -inf


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention (Vaswani et al., 2017), returning output and weights.

    .. math::

        \\operatorname{Attention}(Q, K, V) = \\operatorname{softmax}
        \\left(\\frac{Q K^\\top}{\\sqrt{d_k}}\\right) V

    Equal to ``F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
    scale=scale)``, which does not return the weights, except that a query with nothing to
    attend to gives zeros here.

    Args:
        query: ``Q``; key: ``K``; value: ``V`` (one row per key).
        mask: optional; boolean (``True`` = may attend) or float (added to the scores).
        scale: defaults to ``1 / sqrt(d_k)``.

    Returns:
        ``(output, weights)``.

    Shape:
        ``query``: ``(..., L, d_k)``; ``key``: ``(..., S, d_k)``; ``value``: ``(..., S, d_v)``;
        ``mask``: broadcastable to ``(..., L, S)``; output: ``(..., L, d_v)``; weights:
        ``(..., L, S)``.

    Raises:
        TypeError, ValueError: as :func:`attention_weights`; ValueError if ``value`` has not
        one row per key.

    Example:
        >>> X = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.5, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
        >>> output, weights = scaled_dot_product_attention(X, X, X)
        >>> output[0]
        tensor([0.4519, 0.6852, 0.5481, 1.0000])
    """
    check_tensor("value", value, tuple(range(2, 9)))
    if isinstance(key, Tensor) and value.shape[-2] != key.shape[-2]:
        raise ValueError(
            f"value must have one row per key, shape (..., S={key.shape[-2]}, d_v); "
            f"got {shape_str(value.shape)}"
        )
    weights = attention_weights(query, key, mask=mask, scale=scale)  # (..., L, S)
    return weights @ value, weights


class SelfAttention(nn.Module):
    """One attention head with learned projections ``W_Q``, ``W_K``, ``W_V`` (seeds 000, 001).

    .. math::

        Q = X W_Q,\\; K = X W_K,\\; V = X W_V,\\qquad
        \\operatorname{head}(X) =
        \\operatorname{softmax}\\left(\\frac{Q K^\\top}{\\sqrt{D}}\\right) V

    There is no output projection: this is one head of multi-head attention (the heads of
    :class:`attnlib.NaiveMultiHeadAttention` are instances of it).

    Args:
        embed_dim: ``E``, the size of an input vector.
        head_dim: ``D``, the size of ``q``, ``k``, ``v``; defaults to ``embed_dim``.
        bias: add a learned bias to the three projections.

    Attributes:
        q_proj, k_proj, v_proj: ``nn.Linear(E, D)``; ``y = x W^T + b`` (PyTorch stores ``W``
        as ``(D, E)``).

    Shape:
        ``x``: ``(L, E)`` or ``(N, L, E)``; ``key``/``value`` (cross-attention): ``(S, E)``
        or ``(N, S, E)``; ``mask`` (boolean, ``True`` = may attend, or float, added to the
        scores): ``(L, S)`` or broadcastable to ``(N, L, S)``;
        output: ``(L, D)`` or ``(N, L, D)``; weights: ``(L, S)`` or ``(N, L, S)``.

    Raises:
        ValueError: if a dimension is not a positive integer, or an input's rank or last
        dimension is wrong.

    Example:
        >>> torch.manual_seed(0)
        <torch._C.Generator object at ...>
        >>> head = SelfAttention(50, 10)
        >>> output, weights = head(torch.randn(11, 50))
        >>> output.shape, weights.shape
        (torch.Size([11, 10]), torch.Size([11, 11]))
    """

    def __init__(self, embed_dim: int, head_dim: int | None = None, bias: bool = False):
        super().__init__()
        head_dim = embed_dim if head_dim is None else head_dim
        for name, n in (("embed_dim", embed_dim), ("head_dim", head_dim)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"{name} must be a positive integer; got {n!r}")
        self.embed_dim = embed_dim
        self.head_dim = head_dim
        self.bias = bias
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, head_dim, bias=bias)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        key: Tensor | None = None,
        value: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``x`` to itself, or to ``key``/``value`` (cross-attention).

        Returns ``(output, weights)``; see the class docstring for shapes.
        """
        key = x if key is None else key
        value = key if value is None else value
        for name, t in (("x", x), ("key", key), ("value", value)):
            check_tensor(name, t, (2, 3))
            if t.shape[-1] != self.embed_dim:
                raise ValueError(
                    f"{name} must have shape (N, L, E={self.embed_dim}) or (L, E={self.embed_dim})"
                    f"; got {shape_str(t.shape)}"
                )
        q = self.q_proj(x)  # (..., L, D)
        k = self.k_proj(key)  # (..., S, D)
        v = self.v_proj(value)  # (..., S, D)
        return scaled_dot_product_attention(q, k, v, mask=mask)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, head_dim={self.head_dim}, bias={self.bias}"
