"""Multi-head attention, fused and naive.

.. math::

    \\operatorname{MultiHead}(Q, K, V) = \\operatorname{Concat}(\\operatorname{head}_1, \\dots,
    \\operatorname{head}_H)\\, W_O, \\qquad \\operatorname{head}_h = \\operatorname{Attention}
    (Q W_Q^{(h)}, K W_K^{(h)}, V W_V^{(h)})

:class:`MultiHeadAttention` projects once per Q/K/V with ``E x E`` matrices and reshapes to
heads (as ``torch.nn.MultiheadAttention``, nanoGPT and Keras do);
:class:`NaiveMultiHeadAttention` keeps a list of :class:`attnlib.SelfAttention` heads (seed
000). Both hold the same numbers: :func:`attnlib.convert.naive_from_fused` moves weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib._checks import attends_somewhere, check_mask, check_tensor, shape_str
from attnlib.attention import SelfAttention, scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "NaiveMultiHeadAttention"]


def _check_dims(embed_dim: int, num_heads: int) -> int:
    for name, n in (("embed_dim", embed_dim), ("num_heads", num_heads)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be a positive integer; got {n!r}")
    if embed_dim % num_heads:
        raise ValueError(
            f"embed_dim must be divisible by num_heads; got embed_dim={embed_dim}, "
            f"num_heads={num_heads} (embed_dim % num_heads = {embed_dim % num_heads})"
        )
    return embed_dim // num_heads


def _prepare(query, key, value, mask, embed_dim: int, num_heads: int):
    """Check the inputs of a multi-head forward and give them a batch dimension.

    Returns ``(query, key, value, mask, batched)`` with ``query (N, L, E)``, ``key`` and
    ``value (N, S, E)`` and ``mask`` ``None`` or broadcastable to ``(N, H, L, S)``.
    """
    key = query if key is None else key
    value = key if value is None else value
    check_tensor("query", query, (2, 3))
    batched = query.dim() == 3
    legend = {"query": "L", "key": "S", "value": "S"}
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, t, (query.dim(),))
        n = f"N={query.shape[0]}, " if batched else ""
        if t.shape[-1] != embed_dim or (batched and t.shape[0] != query.shape[0]):
            raise ValueError(
                f"{name} must have shape ({n}{legend[name]}, E={embed_dim}); "
                f"got {shape_str(t.shape)}"
            )
    if value.shape[-2] != key.shape[-2]:
        raise ValueError(
            f"value must have one row per key, S={key.shape[-2]}; got value "
            f"{shape_str(value.shape)} and key {shape_str(key.shape)}"
        )
    if not batched:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)  # (1, ., E)
    N, L, S = query.shape[0], query.shape[1], key.shape[1]
    if mask is not None:
        if batched:
            allowed = "(L, S), (N, L, S) or (N, H, L, S)"
            if isinstance(mask, Tensor) and mask.dim() == 3:  # (N, L, S): check before
                check_mask(mask, (N, L, S), allowed)  # aligning it with (N, H, L, S)
                mask = mask.unsqueeze(1)  # (N, 1, L, S): the same mask for every head
            else:
                check_mask(mask, (N, num_heads, L, S), allowed)
        else:
            check_mask(mask, (num_heads, L, S), "(L, S) or (H, L, S)")
        mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # 4-D, for F.sdpa
    return query, key, value, mask, batched


class MultiHeadAttention(nn.Module):
    """Fused multi-head attention: one ``E x E`` projection each for Q, K, V, split into heads.

    .. math::

        \\operatorname{MultiHead}(X_q, X_k, X_v) = \\operatorname{Concat}_h\\left(
        \\operatorname{softmax}\\left(\\frac{Q_h K_h^\\top}{\\sqrt{D}}\\right) V_h\\right) W_O,
        \\quad Q = X_q W_Q,\\; K = X_k W_K,\\; V = X_v W_V

    where ``Q_h`` is columns ``h*D:(h+1)*D`` of ``Q``. Same numbers as
    ``torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True)`` given the same weights
    (see :func:`attnlib.convert.from_torch`), but returns per-head weights and uses boolean
    masks with ``True`` = may attend (a float mask is added to the scores, as PyTorch's).

    Args:
        embed_dim: ``E``.
        num_heads: ``H``; must divide ``E``. Each head has ``D = E / H`` dimensions.
        bias: add learned biases to the four projections.

    Attributes:
        q_proj, k_proj, v_proj, out_proj: ``nn.Linear(E, E)``.

    Shape:
        - ``query``: ``(L, E)`` or ``(N, L, E)``; ``key``, ``value``: ``(S, E)`` or
          ``(N, S, E)`` (default to ``query``; ``S`` may differ from ``L``).
        - ``mask``: boolean, ``True`` = may attend, or floating point, added to the scores
          (``-inf`` = blocked; e.g. :func:`attnlib.positions.alibi_bias`); ``(L, S)``,
          ``(N, L, S)`` or ``(N, H, L, S)`` (unbatched: ``(L, S)`` or ``(H, L, S)``).
        - output: ``(L, E)`` or ``(N, L, E)``; weights: ``(H, L, S)`` or ``(N, H, L, S)``,
          or ``None`` with ``need_weights=False``.

    Raises:
        ValueError: if ``E`` is not divisible by ``H``, an input has the wrong rank or size,
        or ``mask`` the wrong shape. TypeError: non-float input, or a mask neither boolean
        nor floating point.

    Example:
        >>> torch.manual_seed(0)
        <torch._C.Generator object at ...>
        >>> mha = MultiHeadAttention(12, 3)
        >>> output, weights = mha(torch.randn(2, 5, 12), torch.randn(2, 7, 12))
        >>> output.shape, weights.shape
        (torch.Size([2, 5, 12]), torch.Size([2, 3, 5, 7]))
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = False):
        super().__init__()
        self.head_dim = _check_dims(embed_dim, num_heads)
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.bias = bias
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def _split_heads(self, x: Tensor) -> Tensor:
        N, T, _ = x.shape
        return x.view(N, T, self.num_heads, self.head_dim).transpose(1, 2)  # (N, H, T, D)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``; returns ``(output, weights)``.

        With ``need_weights=False`` the heads go through ``F.scaled_dot_product_attention``
        (a fused kernel that never returns the weights) and ``weights`` is ``None``.
        """
        query, key, value, mask, batched = _prepare(
            query, key, value, mask, self.embed_dim, self.num_heads
        )
        N, L, E = query.shape
        q = self._split_heads(self.q_proj(query))  # (N, H, L, D)
        k = self._split_heads(self.k_proj(key))  # (N, H, S, D)
        v = self._split_heads(self.v_proj(value))  # (N, H, S, D)
        if need_weights:
            heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)  # (N, H, L, D)
        else:
            if mask is not None and mask.dtype != torch.bool:
                mask = mask.to(q.dtype)  # F.sdpa wants a float mask of the query's dtype
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (N, H, L, D)
            if mask is not None:  # a row with nothing to attend to: zeros, not NaN
                heads = torch.where(attends_somewhere(mask), heads, 0.0)
            weights = None
        heads = heads.transpose(1, 2).reshape(N, L, E)  # (N, L, H*D) = (N, L, E)
        output = self.out_proj(heads)  # (N, L, E)
        if not batched:
            output = output.squeeze(0)  # (L, E)
            weights = None if weights is None else weights.squeeze(0)  # (H, L, S)
        return output, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, bias={self.bias}"


class NaiveMultiHeadAttention(nn.Module):
    """Multi-head attention as a list of heads (seed 000): ``H`` independent
    :class:`attnlib.SelfAttention` heads of size ``D = E / H``, concatenated, then ``W_O``.

    .. math::

        \\operatorname{MultiHead}(X) = \\operatorname{Concat}(\\operatorname{head}_1(X),
        \\dots, \\operatorname{head}_H(X))\\, W_O

    Slower than :class:`MultiHeadAttention` (one small matrix product per head) but each head
    is visible as a module. Same arguments, shapes and errors as :class:`MultiHeadAttention`;
    ``need_weights=False`` only drops the weights.

    Args:
        embed_dim: ``E``.
        num_heads: ``H``; must divide ``E``. Each head has ``D = E / H`` dimensions.
        bias: add learned biases to the projections of every head and to ``out_proj``.

    Attributes:
        heads: ``nn.ModuleList`` of ``H`` ``SelfAttention(E, D, bias)``.
        out_proj: ``nn.Linear(E, E)``.

    Shape:
        As :class:`MultiHeadAttention`: ``query`` ``(L, E)`` or ``(N, L, E)``; ``key``,
        ``value`` ``(S, E)`` or ``(N, S, E)``; ``mask`` (boolean or float) ``(L, S)``,
        ``(N, L, S)`` or ``(N, H, L, S)``; output ``(L, E)`` or ``(N, L, E)``; weights
        ``(H, L, S)`` or ``(N, H, L, S)``.

    Raises:
        ValueError: if ``E`` is not divisible by ``H``, an input has the wrong rank or size,
        or ``mask`` the wrong shape. TypeError: non-float input, or a mask neither boolean
        nor floating point.

    Example:
        >>> torch.manual_seed(0)
        <torch._C.Generator object at ...>
        >>> mha = NaiveMultiHeadAttention(12, 4)
        >>> output, weights = mha(torch.randn(5, 12))
        >>> output.shape, weights.shape
        (torch.Size([5, 12]), torch.Size([4, 5, 5]))
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = False):
        super().__init__()
        self.head_dim = _check_dims(embed_dim, num_heads)
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.bias = bias
        self.heads = nn.ModuleList(
            SelfAttention(embed_dim, self.head_dim, bias=bias) for _ in range(num_heads)
        )
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Run every head, concatenate, project; returns ``(output, weights)``."""
        query, key, value, mask, batched = _prepare(
            query, key, value, mask, self.embed_dim, self.num_heads
        )
        if mask is not None:
            mask = mask.expand(query.shape[0], self.num_heads, query.shape[1], key.shape[1])
        outputs, weights = [], []
        for h, head in enumerate(self.heads):
            head_mask = None if mask is None else mask[:, h]  # (N, L, S)
            out, w = head(query, head_mask, key=key, value=value)  # (N, L, D), (N, L, S)
            outputs.append(out)
            weights.append(w)
        output = self.out_proj(torch.cat(outputs, dim=-1))  # (N, L, H*D) -> (N, L, E)
        stacked = torch.stack(weights, dim=1)  # (N, H, L, S)
        if not batched:
            output, stacked = output.squeeze(0), stacked.squeeze(0)  # (L, E), (H, L, S)
        return output, (stacked if need_weights else None)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, bias={self.bias}"
