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
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib._checks import (
    check_batch_broadcast,
    check_dim,
    check_dropout,
    check_int,
    check_mask,
    check_module_input,
    check_qk,
    check_real,
    check_sizes,
    check_tensor,
    check_value,
    shape_str,
    values_unreadable,
)
from attnlib._util import repr_options

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
        TypeError: if ``x`` is not a floating-point tensor or ``dim`` not an ``int``.
        ValueError: if ``dim`` is not a dimension of ``x``.

    Example:
        >>> softmax(torch.tensor([1000.0, 1000.0]))
        tensor([0.5000, 0.5000])
        >>> softmax(torch.tensor([-float("inf"), -float("inf")]))
        tensor([0., 0.])
    """
    if not isinstance(x, Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point torch.Tensor; got {got}")
    return _softmax(x, check_dim("x", dim, max(x.dim(), 1)))  # 0-D: as torch, dim 0 or -1


def _softmax(x: Tensor, dim: int) -> Tensor:
    """The kernel of :func:`softmax`, without the checks."""
    if x.dim() == 0:  # a 0-D tensor is its own (one-element) slice, as in torch.softmax
        return torch.where(x == -math.inf, 0.0, torch.ones_like(x))
    if x.shape[dim] == 0:  # nothing to normalise over (no keys): an empty result
        return x.clone()
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(m == -math.inf, torch.zeros_like(m), m)  # all -inf: avoid -inf - -inf
    e = torch.exp(x - m)
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def causal_mask(L: int, S: int | None = None, *, device=None) -> Tensor:
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
        TypeError: if ``L`` or ``S`` is not an ``int``.
        ValueError: if ``L`` or ``S`` is below 1.

    Example:
        >>> causal_mask(3)
        tensor([[ True, False, False],
                [ True,  True, False],
                [ True,  True,  True]])
    """
    S = L if S is None else S
    L, S = check_int("L", L, low=1), check_int("S", S, low=1)
    return _causal_mask(L, S, device)


def _causal_mask(L: int, S: int, device) -> Tensor:
    """The kernel of :func:`causal_mask`, without the checks (``L`` or ``S`` may be 0)."""
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()  # (L, S)


def attention_weights(
    query: Tensor,
    key: Tensor,
    *,
    mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
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
        is_causal: mask keys ``j > i`` (:func:`causal_mask`), as
            ``F.scaled_dot_product_attention(..., is_causal=True)``; not with ``mask``.
        scale: factor applied to ``Q K^T``; defaults to ``1 / sqrt(d_k)``.

    Returns:
        Weights, each row sums to 1 (or is all zeros where the mask leaves nothing).

    Shape:
        ``query``: ``(..., L, d_k)``; ``key``: ``(..., S, d_k)``; ``mask``: ``(L, S)`` or any
        shape broadcastable to ``(..., L, S)``; output: ``(..., L, S)``.

    Raises:
        TypeError: if ``query`` or ``key`` is not a float tensor, they differ in dtype, ``mask``
            is neither boolean nor floating point (an integer mask is ambiguous: convert it),
            ``is_causal`` is not a ``bool`` or ``scale`` not a real number.
        ValueError: if ``query`` or ``key`` has fewer than 2 dimensions, their last dimensions
            ``d_k`` differ, their batch dimensions do not broadcast, they or ``mask`` lie on
            different devices, ``mask`` does not broadcast, or both ``mask`` and ``is_causal``
            are given.

    Example:
        >>> X = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.5, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
        >>> attention_weights(X, X)[0]
        tensor([0.4519, 0.2741, 0.2741])
        >>> attention_weights(X, X, mask=torch.tensor([0.0, 0.0, -float("inf")]))[0]
        tensor([0.6225, 0.3775, 0.0000])
    """
    check_qk(query, key)
    scale = None if scale is None else check_real("scale", scale, "a real number or None")
    mask = _entry_mask(query, key, mask, is_causal)
    return _attention_weights(query, key, mask, scale)


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Scores with ``mask`` applied, as ``F.scaled_dot_product_attention``'s ``attn_mask``:
    a boolean mask sets the blocked scores (``False``) to ``-inf``; a float mask is added
    (cast to the scores' dtype)."""
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, -math.inf)
    mask = mask.to(scores.dtype)
    # -inf must block whatever the score is (a score of +inf or NaN would give NaN)
    return torch.where(mask == -math.inf, -math.inf, scores + mask)


def weighted_sum(weights: Tensor, value: Tensor) -> Tensor:
    """``weights @ value``, except that a value row with zero weight never touches the output:
    a blocked key whose value holds ``inf`` or NaN would otherwise give ``0 * inf = NaN``.

    In eager mode the exact path runs only when ``value`` is not all finite (a test of the
    values); under ``torch.compile`` and on the ``meta`` device it always runs, so that nothing
    branches on them (see :func:`values_unreadable`)."""
    if values_unreadable(value) or (value.numel() and not torch.isfinite(value).all()):
        return _exact_weighted_sum(weights, value)
    return weights @ value  # (..., L, d_v)


def _exact_weighted_sum(weights: Tensor, value: Tensor) -> Tensor:
    """``weights @ value`` with the non-finite values of ``value`` counted only where their
    weight is not 0 (weights are >= 0, as a softmax's): the finite part by one product, then
    ``+inf``, ``-inf`` or NaN wherever a weighted non-finite value reaches an output, as IEEE
    addition gives them (``inf + -inf`` and NaN give NaN)."""
    finite = torch.isfinite(value)
    out = weights @ torch.where(finite, value, 0.0)  # (..., L, d_v)
    used = (weights != 0).to(value.dtype)  # (..., L, S)
    pos = (used @ (value == math.inf).to(value.dtype)) > 0  # (..., L, d_v)
    neg = (used @ (value == -math.inf).to(value.dtype)) > 0
    nan = ((used @ value.isnan().to(value.dtype)) > 0) | (pos & neg)
    out = torch.where(pos, math.inf, torch.where(neg, -math.inf, out))
    return torch.where(nan, math.nan, out)


def attends_somewhere(mask: Tensor) -> Tensor:
    """``(..., L, 1)`` boolean: does each query row of ``mask`` leave at least one key?
    (For a float mask: at least one entry that is not ``-inf``.)"""
    allowed = mask if mask.dtype == torch.bool else mask != -math.inf
    return allowed.any(dim=-1, keepdim=True)


def _entry_mask(query: Tensor, key: Tensor, mask, is_causal) -> Tensor | None:
    """The checked mask of a public function: ``mask``, or the causal mask for ``is_causal``."""
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool; got {type(is_causal).__name__}")
    L, S = query.shape[-2], key.shape[-2]
    if is_causal:
        if mask is not None:
            raise ValueError(
                "mask and is_causal must not both be given (as F.scaled_dot_product_attention); "
                "combine them into one mask, e.g. mask & causal_mask(L, S)"
            )
        return torch.ones(L, S, dtype=torch.bool, device=query.device).tril()  # (L, S)
    if mask is None:
        return None
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    return check_mask(mask, (*batch, L, S), "(..., L, S)", device=query.device)


def _attention_weights(query: Tensor, key: Tensor, mask: Tensor | None, scale) -> Tensor:
    """The kernel of :func:`attention_weights`: arguments already checked."""
    if scale is None:
        scale = query.shape[-1] ** -0.5
    # Scale before the product: Q K^T can overflow float16 (65504) where (Q s) K^T does not.
    scores = (query * scale) @ key.transpose(-2, -1)  # (..., L, S)
    if mask is None:
        return torch.softmax(scores, dim=-1)
    return _softmax(apply_mask(scores, mask), dim=-1)  # blocked scores are -inf


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention (Vaswani et al., 2017), returning output and weights.

    .. math::

        \\operatorname{Attention}(Q, K, V) = \\operatorname{softmax}
        \\left(\\frac{Q K^\\top}{\\sqrt{d_k}}\\right) V

    Equal to ``F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
    dropout_p=dropout_p, is_causal=is_causal, scale=scale)`` (the same keyword arguments,
    ``mask`` for ``attn_mask``), which does not return the weights. A query with nothing to
    attend to (every key masked, or ``S = 0``) gives zeros, and a masked key never touches the
    output, even if its value holds ``inf`` or NaN.

    Args:
        query: ``Q``; key: ``K``; value: ``V`` (one row per key).
        mask: optional; boolean (``True`` = may attend) or float (added to the scores).
        is_causal: mask keys ``j > i``, as :func:`attention_weights`; not with ``mask``.
        scale: defaults to ``1 / sqrt(d_k)``.
        dropout_p: probability of zeroing each weight after the softmax (the others are
            scaled by ``1 / (1 - p)``), as ``F.scaled_dot_product_attention``: applied whenever
            it is above 0; a module passes 0 in eval mode. The returned weights are the
            dropped ones, those that made the output (as ``nn.MultiheadAttention``).

    Returns:
        ``(output, weights)``.

    Shape:
        ``query``: ``(..., L, d_k)``; ``key``: ``(..., S, d_k)``; ``value``: ``(..., S, d_v)``;
        ``mask``: broadcastable to ``(..., L, S)``; output: ``(..., L, d_v)``; weights:
        ``(..., L, S)``.

    Raises:
        TypeError: as :func:`attention_weights` (for ``query``, ``key`` and ``mask``), or if
            ``value`` has another dtype.
        ValueError: as :func:`attention_weights` (for ``query``, ``key`` and ``mask``), or if
            ``value`` has not one row per key, its batch dimensions do not broadcast, it lies on
            another device, or ``dropout_p`` is not in ``[0, 1)``.

    Example:
        >>> X = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.5, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
        >>> output, weights = scaled_dot_product_attention(X, X, X)
        >>> output[0]
        tensor([0.4519, 0.6852, 0.5481, 1.0000])
    """
    check_qk(query, key)
    check_value(query, key, value)
    dropout_p = check_dropout("dropout_p", dropout_p)
    scale = None if scale is None else check_real("scale", scale, "a real number or None")
    mask = _entry_mask(query, key, mask, is_causal)
    return _attention(query, key, value, mask, scale, dropout_p)


def _attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, scale, dropout_p: float
) -> tuple[Tensor, Tensor]:
    """The kernel of :func:`scaled_dot_product_attention`: arguments already checked."""
    weights = _attention_weights(query, key, mask, scale)  # (..., L, S)
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p)
    output = weights @ value if mask is None else weighted_sum(weights, value)  # (..., L, d_v)
    return output, weights


class SelfAttention(nn.Module):
    """One attention head with learned projections ``W_Q``, ``W_K``, ``W_V`` (seeds 000, 001).

    .. math::

        \\begin{aligned}
        Q &= X_q W_Q,\\; K = X_k W_K,\\; V = X_v W_V, \\\\
        \\operatorname{head}(X_q, X_k, X_v) &=
            \\operatorname{softmax}\\left(\\frac{Q K^\\top}{\\sqrt{D}}\\right) V
        \\end{aligned}

    with ``X_k = X_v = X_q`` (self-attention) unless ``key``/``value`` are given
    (cross-attention). There is no output projection: this is one head of multi-head attention
    (the heads of :class:`attnlib.NaiveMultiHeadAttention` are instances of it). Called as
    ``head(query, key=None, value=None, *, mask=None, need_weights=True)``, the signature of
    :class:`attnlib.MultiHeadAttention`. Everything after ``embed_dim`` is keyword-only.

    Args:
        embed_dim: ``E``, the size of an input (query) vector.
        head_dim: ``D``, the size of ``q``, ``k``, ``v``; defaults to ``embed_dim``.
        bias: add a learned bias to the three projections.
        kdim, vdim: the sizes of a key and of a value vector (cross-attention onto another
            width, as ``nn.MultiheadAttention``); default ``embed_dim``.
        dropout: probability of dropping an attention weight, in training mode only.

    Attributes:
        q_proj: ``nn.Linear(E, D)``, ``y = x W^T + b`` (PyTorch stores ``W`` as ``(D, E)``).
        k_proj: ``nn.Linear(kdim, D)``.
        v_proj: ``nn.Linear(vdim, D)``.

    Shape:
        ``query``: ``(L, E)`` or ``(N, L, E)``; ``key``/``value``: ``(S, kdim)`` /
        ``(S, vdim)``, or with a batch dimension ``N`` (``key`` defaults to ``query``,
        ``value`` to ``key``); ``mask`` (boolean, ``True`` = may attend, or float, added to the
        scores): ``(L, S)`` or broadcastable to ``(N, L, S)``; output: ``(L, D)`` or
        ``(N, L, D)``; weights: ``(L, S)`` or ``(N, L, S)``, or ``None`` with
        ``need_weights=False``.

    Raises:
        ValueError: if a dimension (``embed_dim``, or ``head_dim``, ``kdim`` or ``vdim`` when given)
            is below 1, ``dropout`` is not in ``[0, 1)``, the rank or last dimension of ``query``,
            ``key`` or ``value`` is wrong, their batch dimensions do not broadcast, ``value`` has
            not one row per key, an input or ``mask`` is not on the module's device, or ``mask``
            does not broadcast.
        TypeError: if a dimension is not an ``int``, ``dropout`` not a number, the dtype of
            ``query``, ``key`` or ``value`` differs from the module's (convert one of them with
            ``.to``), or ``mask`` is neither boolean nor floating point.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> head = SelfAttention(50, head_dim=10)
        >>> x = torch.randn(11, 50)
        >>> output, weights = head(x)
        >>> output.shape, weights.shape
        (torch.Size([11, 10]), torch.Size([11, 11]))
        >>> fast, none = head(x, mask=causal_mask(11), need_weights=False)
        >>> fast.shape, none
        (torch.Size([11, 10]), None)
    """

    def __init__(
        self,
        embed_dim: int,
        *,
        head_dim: int | None = None,
        bias: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        head_dim = embed_dim if head_dim is None else head_dim
        kdim = embed_dim if kdim is None else kdim
        vdim = embed_dim if vdim is None else vdim
        embed_dim, head_dim, kdim, vdim = check_sizes(
            embed_dim=embed_dim, head_dim=head_dim, kdim=kdim, vdim=vdim
        )
        self.embed_dim, self.head_dim, self.kdim, self.vdim = embed_dim, head_dim, kdim, vdim
        self.bias = bias
        self.dropout = check_dropout("dropout", dropout)
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim, head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim, head_dim, bias=bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to itself, or to ``key``/``value`` (cross-attention).

        Returns ``(output, weights)``; see the class docstring for shapes. With
        ``need_weights=False`` the head goes through ``F.scaled_dot_product_attention`` (a
        fused kernel that never forms the weights) and ``weights`` is ``None``.
        """
        key = query if key is None else key
        value = key if value is None else value
        widths = {"query": self.embed_dim, "key": self.kdim, "value": self.vdim}
        checked = {}  # a tensor passed twice (self-attention) has its type checked once
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not any(t is u for u in checked.values()):
                checked[name] = t
                check_tensor(name, t, (2, 3))
                check_module_input(name, t, self.q_proj.weight)
            if t.shape[-1] != widths[name]:
                length, width = ("L", "E") if name == "query" else ("S", name[0] + "dim")
                size = f"{width}={widths[name]}"
                raise ValueError(
                    f"{name} must have shape (N, {length}, {size}) or ({length}, {size}); "
                    f"got {shape_str(t.shape)}"
                )
        if value.shape[-2] != key.shape[-2]:
            raise ValueError(
                f"value must have one row per key, S={key.shape[-2]}; got value "
                f"{shape_str(value.shape)} and key {shape_str(key.shape)}"
            )
        if len(checked) > 1:
            check_batch_broadcast(**checked)
        if mask is not None:
            batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
            target = (*batch, query.shape[-2], key.shape[-2])
            check_mask(mask, target, "(L, S) or (N, L, S)", device=query.device)
        return self._forward(query, key, value, mask, need_weights)

    def _forward(self, query, key, value, mask, need_weights):
        """The head without the checks (:class:`attnlib.NaiveMultiHeadAttention` calls it)."""
        q = self.q_proj(query)  # (..., L, D)
        k = self.k_proj(key)  # (..., S, D)
        v = self.v_proj(value)  # (..., S, D)
        dropout_p = self.dropout if self.training else 0.0
        return _attend(q, k, v, mask, dropout_p, need_weights)

    def extra_repr(self) -> str:
        extra = repr_options(
            ("kdim", self.kdim, self.embed_dim),
            ("vdim", self.vdim, self.embed_dim),
            ("dropout", self.dropout, 0.0),
        )
        return f"embed_dim={self.embed_dim}, head_dim={self.head_dim}, bias={self.bias}{extra}"


def _attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    dropout_p: float,
    need_weights: bool,
    enable_gqa: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """The attention of projected heads, for the modules' ``forward`` (inputs and ``mask``
    checked there): ``(output, weights)`` through the kernel of
    :func:`scaled_dot_product_attention`, or ``(output, None)`` through
    ``F.scaled_dot_product_attention`` when the weights are not needed. ``enable_gqa``:
    ``k`` and ``v`` hold ``G`` heads shared by the ``H`` heads of ``q`` (``G`` divides ``H``).
    """
    # F.sdpa lets a blocked key's inf or NaN value reach the output (0 * inf): such a value
    # takes the exact path, whose weighted_sum leaves it out. Testing the values is a branch
    # on data, which torch.compile cannot trace and a meta tensor cannot answer: there a
    # masked call always takes that path.
    fast = not need_weights and (
        mask is None or (not values_unreadable(v) and bool(torch.isfinite(v).all()))
    )
    if not fast:
        if enable_gqa:  # query head h reads key/value head h // (H / G)
            k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)  # (..., H, S, D)
            v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)  # (..., H, S, D)
        output, weights = _attention(q, k, v, mask, None, dropout_p)
        return output, (weights if need_weights else None)
    if mask is not None:
        if mask.dtype != torch.bool:
            mask = mask.to(q.dtype)  # F.sdpa wants a float mask of the query's dtype
    output = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, enable_gqa=enable_gqa
    )  # (..., L, D)
    # A row with nothing to attend to gives zeros: torch 2.13 gives them on the CPU, older
    # versions and some GPU kernels gave NaN; the guard keeps zeros whatever the kernel.
    if mask is not None:
        output = torch.where(attends_somewhere(mask), output, 0.0)
    return output, None
