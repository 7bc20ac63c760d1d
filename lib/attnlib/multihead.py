"""Multi-head attention, fused and naive.

.. math::

    \\begin{aligned}
    \\operatorname{MultiHead}(Q, K, V) &= \\operatorname{Concat}(\\operatorname{head}_1, \\dots,
        \\operatorname{head}_H)\\, W_O, \\\\
    \\operatorname{head}_h &= \\operatorname{Attention}(Q W_Q^{(h)}, K W_K^{(h)}, V W_V^{(h)})
    \\end{aligned}

:class:`MultiHeadAttention` projects once per Q/K/V with ``E x E`` matrices and reshapes to
heads (as ``torch.nn.MultiheadAttention``, nanoGPT and Keras do);
:class:`NaiveMultiHeadAttention` keeps a list of :class:`attnlib.SelfAttention` heads (seed
000). Both hold the same numbers: :func:`attnlib.convert.naive_from_fused` moves weights.

:class:`MultiHeadAttention` also has the options of attention as 2025 models train it, each
off by default: ``qk_norm`` (RMSNorm of each head's queries and keys: OLMo 2, Gemma 3, Qwen3),
``softcap`` (logits ``c tanh(s / c)``: Gemma 2), ``sink`` (a learned sink logit per head:
gpt-oss) and ``gate`` (a sigmoid gate on each head's output: Qwen3-Next).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib._checks import (
    as_heads_mask,
    cache_alone,
    cache_fits,
    check_dropout,
    check_input,
    check_int,
    check_module_input,
    check_real,
    check_tensor,
    shape_str,
    unbatch,
)
from attnlib._util import repr_options
from attnlib.attention import SelfAttention, _attend, _softmax, apply_mask, weighted_sum
from attnlib.decoding import Cache, KVCache
from attnlib.positions import PositionScheme, _position_scheme

__all__ = ["ModernAttention", "MultiHeadAttention", "NaiveMultiHeadAttention"]


def _check_dims(embed_dim: int, num_heads: int, head_dim: int | None) -> int:
    embed_dim = check_int("embed_dim", embed_dim, low=1)
    num_heads = check_int("num_heads", num_heads, low=1)
    if head_dim is not None:
        return check_int("head_dim", head_dim, low=1)
    if embed_dim % num_heads:
        raise ValueError(
            f"embed_dim must be divisible by num_heads; got embed_dim={embed_dim}, "
            f"num_heads={num_heads} (embed_dim % num_heads = {embed_dim % num_heads}); or give "
            "head_dim explicitly"
        )
    return embed_dim // num_heads


def _check_self_attention(module, cache, name: str = "cache") -> None:
    """A ``cache`` needs a self-attention layer: keys and values of the query's width."""
    if cache is not None and (module.kdim, module.vdim) != (module.embed_dim,) * 2:
        raise ValueError(
            f"{name} needs a self-attention layer, kdim = vdim = embed_dim; got kdim="
            f"{module.kdim}, vdim={module.vdim}, embed_dim={module.embed_dim}"
        )


def _check_kv_cache(
    module, cache, x: Tensor, name: str, kv_heads: int, head_dim: int, claim: bool = True
) -> None:
    """The ``check_cache`` of the softmax layers: ``cache`` is ``None`` or a
    :class:`attnlib.decoding.Cache` of a self-attention whose kept keys fit ``kv_heads`` heads
    of ``head_dim``, the batch, dtype and device of ``x`` ``(N, L, E)``, and that serves
    ``module`` alone (:meth:`attnlib.decoding.Cache.claim`; not yet with ``claim=False``)."""
    if cache is None:
        return
    if not isinstance(cache, Cache) or not cache.keeps_keys:
        raise TypeError(
            f"{name} must be an attnlib.decoding.Cache (KVCache, PreallocatedCache, RollingCache, "
            f"SinkCache, PagedCache: one that keeps keys and values); got {type(cache).__name__}"
        )
    _check_self_attention(module, cache, name)
    hint = "a cache belongs to one layer and one batch; start a new KVCache() (for a model: "
    hint += "model.new_cache())"
    cache_fits(name, cache, x.shape[0], kv_heads, head_dim, x.dtype, x.device, hint)
    if claim:
        cache.claim(module, name=name)


def _prepare(module, query, key, value, mask):
    """Check the inputs of a multi-head forward (once: a tensor passed as query and key is
    checked once) and give them a batch dimension.

    Returns ``(query, key, value, mask, batched)`` with ``query (N, L, E)``, ``key``
    ``(N, S, kdim)``, ``value (N, S, vdim)`` and ``mask`` ``None`` or 4-D, broadcastable to
    ``(N, H, L, S)``.
    """
    key = query if key is None else key
    value = key if value is None else value
    weight = module.out_proj.weight
    x, _, batched = check_input(
        query, None, weight=weight, width=module.embed_dim, heads=1, name="query"
    )
    widths = {
        "key": ("E" if module.kdim == module.embed_dim else "kdim", module.kdim),
        "value": ("E" if module.vdim == module.embed_dim else "vdim", module.vdim),
    }
    checked = [query]  # a tensor passed twice (self-attention) has its type checked once
    for name, t in (("key", key), ("value", value)):
        if not any(t is u for u in checked):
            checked.append(t)
            check_tensor(name, t, (query.dim(),))
            check_module_input(name, t, weight)
        letter, width = widths[name]
        n = f"N={query.shape[0]}, " if batched else ""
        if t.shape[-1] != width or (batched and t.shape[0] != query.shape[0]):
            raise ValueError(
                f"{name} must have shape ({n}S, {letter}={width}); got {shape_str(t.shape)}"
            )
    if value.shape[-2] != key.shape[-2]:
        raise ValueError(
            f"value must have one row per key, S={key.shape[-2]}; got value "
            f"{shape_str(value.shape)} and key {shape_str(key.shape)}"
        )
    if not batched:
        key, value = key.unsqueeze(0), value.unsqueeze(0)  # (1, S, kdim), (1, S, vdim)
    N, L, S = x.shape[0], x.shape[1], key.shape[1]
    mask = as_heads_mask(mask, batched, (N, module.num_heads, L, S), x.device)
    return x, key, value, mask, batched


def _extra_repr(m) -> str:
    extra = repr_options(
        ("kdim", m.kdim, m.embed_dim),
        ("vdim", m.vdim, m.embed_dim),
        ("head_dim", m.head_dim, m.embed_dim // m.num_heads),
        ("dropout", m.dropout, 0.0),
        ("num_kv_heads", getattr(m, "num_kv_heads", m.num_heads), m.num_heads),
        ("positions", getattr(m, "positions", None), None),
    )
    return f"embed_dim={m.embed_dim}, num_heads={m.num_heads}, bias={m.bias}{extra}"


class MultiHeadAttention(nn.Module):
    """Fused multi-head attention: one ``E x E`` projection each for Q, K, V, split into heads.

    .. math::

        \\begin{aligned}
        \\operatorname{MultiHead}(X_q, X_k, X_v) &= \\operatorname{Concat}_h\\left(
            \\operatorname{softmax}\\left(\\frac{Q_h K_h^\\top}{\\sqrt{D}}\\right) V_h\\right) W_O,
            \\\\
        Q &= X_q W_Q,\\; K = X_k W_K,\\; V = X_v W_V
        \\end{aligned}

    where ``Q_h`` is columns ``h*D:(h+1)*D`` of ``Q``. Same numbers as
    ``torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True)`` given the same weights
    (see :func:`attnlib.convert.from_torch`), but returns per-head weights and uses boolean
    masks with ``True`` = may attend (a float mask is added to the scores, as PyTorch's).
    The options of attention as 2025 models train it (QK-norm, soft-capping, a sink logit, an
    output gate) are a subclass over the same kernel, :class:`ModernAttention`.

    Everything after ``num_heads`` is keyword-only, and so is everything after ``value`` in
    ``forward(query, key=None, value=None, *, mask=None, need_weights=True, cache=None)``.

    Every self-attention layer of the package (this one, :class:`ModernAttention`,
    :class:`attnlib.latent.MultiHeadLatentAttention`,
    :class:`attnlib.linear_attention.LinearAttention`) has the interface a block calls:
    ``_self_attention(x, mask, need_weights, cache) -> (output, weights or None)`` on a
    checked ``x`` ``(N, L, E)`` and a 4-D ``mask``, :meth:`new_cache`, :meth:`check_cache`
    and ``takes_mask``.

    Args:
        embed_dim: ``E``, the size of a query vector and of an output vector.
        num_heads: ``H``; must divide ``E`` unless ``head_dim`` is given.
        bias: add learned biases to the four projections.
        kdim, vdim: the sizes of a key and of a value vector, default ``E`` (as
            ``nn.MultiheadAttention``'s: cross-attention onto inputs of another width).
        head_dim: ``D``, the size of each head's queries, keys and values; default ``E / H``.
            Any ``D`` works (Keras' ``key_dim``); the heads then concatenate to ``H * D``.
        dropout: probability of dropping an attention weight, in training mode only (as
            ``nn.MultiheadAttention``'s ``dropout``).
        num_kv_heads: ``G``, the number of key/value heads (grouped-query attention): query
            head ``h`` uses key/value head ``h // (H / G)``. ``G = H`` (the default) is
            multi-head attention, ``G = 1`` multi-query attention. ``G`` must divide ``H``.
        positions: a relative position scheme applied inside the attention, an object the
            layer calls with every head's queries and keys and their positions
            (:class:`attnlib.positions.PositionScheme`: any object with
            ``scheme(q, k, q_pos, k_pos) -> (q, k, bias or None)`` and
            ``check_head_dim(D)``): :class:`attnlib.positions.Rotary` (or ``"rope"``) rotates
            them (:func:`attnlib.positions.rotary_embedding`, ``D`` must be even),
            :class:`attnlib.positions.ALiBi` (or ``"alibi"``) adds ``-m_h |i - j|`` to head
            ``h``'s scores (:func:`attnlib.positions.alibi_bias`); ``None`` (the default) adds
            nothing. Queries sit at positions ``0 .. L-1`` and keys at ``0 .. S-1``; with a
            ``cache`` at the positions it gives (:meth:`attnlib.decoding.Cache.position_ids`).
            Stored as the object, in :attr:`positions`.
        rope_base: the wavelength scale of ``"rope"``; 10000 in the paper.

    Attributes:
        q_proj: ``nn.Linear(E, H*D)``.
        k_proj: ``nn.Linear(kdim, G*D)``.
        v_proj: ``nn.Linear(vdim, G*D)``.
        out_proj: ``nn.Linear(H*D, E)``. With the defaults all four are ``(E, E)``.
        takes_mask: ``True``: the layer takes a mask (a linear-attention layer does not).

    Shape:
        - ``query``: ``(L, E)`` or ``(N, L, E)``; ``key``: ``(S, kdim)`` or ``(N, S, kdim)``;
          ``value``: ``(S, vdim)`` or ``(N, S, vdim)`` (``key`` defaults to ``query``,
          ``value`` to ``key``; ``S`` may differ from ``L``, and may be 0).
        - ``mask``: boolean, ``True`` = may attend, or floating point, added to the scores
          (``-inf`` = blocked; e.g. :func:`attnlib.positions.alibi_bias`); ``(L, S)``,
          ``(N, L, S)`` or ``(N, H, L, S)`` (unbatched: ``(L, S)`` or ``(H, L, S)``).
        - output: ``(L, E)`` or ``(N, L, E)``; weights: ``(H, L, S)`` or ``(N, H, L, S)``,
          or ``None`` with ``need_weights=False``.
        - with ``cache=`` (an :class:`attnlib.decoding.Cache`: ``KVCache``,
          ``PreallocatedCache``, ``RollingCache``, ...): ``query`` holds only the new tokens
          ``(N, L_new, E)``; ``S`` is the number of positions the cache keeps plus ``L_new``;
          no ``key``, ``value`` or ``mask`` (the cache applies the causal mask).

    Raises:
        ValueError: if ``embed_dim`` (``E``) is not divisible by ``num_heads`` (``H``) and no
            ``head_dim`` is given, ``num_kv_heads`` (``G``) does not divide ``H``, a size is below
            1, ``dropout`` is not in ``[0, 1)``, ``query``, ``key`` or ``value`` has the wrong rank
            or size, an input or ``mask`` is not on the module's device (a module on the ``meta``
            device has no values), ``mask`` has the wrong shape, ``cache`` is combined with
            ``key``, ``value`` or ``mask``, a filled ``cache`` holds keys of other key/value heads,
            head size, batch size or device, or ``cache`` serves another layer (a cache belongs
            to one layer and one batch), ``positions`` is neither ``None``, ``"rope"``,
            ``"alibi"`` nor a position scheme, or the scheme refuses ``D`` (``"rope"`` with an
            odd ``D``).
        TypeError: if a size is not an ``int``, ``dropout`` not a number, ``query``, ``key`` or
            ``value`` is not a float tensor or its dtype is not the module's, ``mask`` is neither
            boolean nor floating point, or ``cache`` is not an
            :class:`attnlib.decoding.Cache` or holds keys of another dtype.

    An empty batch (``N = 0``) or sequence (``L = 0``, or ``S = 0``: zeros) gives an empty
    result of the shapes above, with a ``cache`` too (an empty step leaves it as it was).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mha = MultiHeadAttention(12, 3)
        >>> output, weights = mha(torch.randn(2, 5, 12), torch.randn(2, 7, 12))
        >>> output.shape, weights.shape
        (torch.Size([2, 5, 12]), torch.Size([2, 3, 5, 7]))
    """

    takes_mask = True

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        bias: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        head_dim: int | None = None,
        dropout: float = 0.0,
        num_kv_heads: int | None = None,
        positions: str | PositionScheme | None = None,
        rope_base: float = 10000.0,
    ):
        super().__init__()
        _init_sizes(self, embed_dim, num_heads, bias, kdim, vdim, head_dim, dropout)
        self.positions = _position_scheme(positions, rope_base=rope_base)
        if self.positions is not None:
            self.positions.check_head_dim(self.head_dim)
        G = num_heads if num_kv_heads is None else check_int("num_kv_heads", num_kv_heads, low=1)
        if num_heads % G:
            raise ValueError(
                f"num_kv_heads must divide num_heads; got num_heads={num_heads}, "
                f"num_kv_heads={G} (num_heads % num_kv_heads = {num_heads % G})"
            )
        self.num_kv_heads = G
        inner = self.num_heads * self.head_dim  # H*D, E by default
        self.q_proj = nn.Linear(embed_dim, inner, bias=bias)
        self.k_proj = nn.Linear(self.kdim, G * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(self.vdim, G * self.head_dim, bias=bias)
        self._add_parts(inner)  # a subclass's own parts, before out_proj: seeded draws in order
        self.out_proj = nn.Linear(inner, embed_dim, bias=bias)

    def _add_parts(self, inner: int) -> None:
        """Where a subclass registers its own modules (:class:`ModernAttention`'s norms and
        gate), between ``v_proj`` and ``out_proj``; this layer has none."""

    def _split_heads(self, x: Tensor, heads: int) -> Tensor:
        N, T, _ = x.shape
        return x.view(N, T, heads, self.head_dim).transpose(1, 2)  # (N, heads, T, D)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        need_weights: bool = True,
        cache: Cache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``; returns ``(output, weights)``.

        With ``need_weights=False`` the heads go through ``F.scaled_dot_product_attention``
        (a fused kernel that never returns the weights) and ``weights`` is ``None``. With
        ``cache=`` (an :class:`attnlib.decoding.Cache`) ``query`` holds the new tokens of a
        causal self-attention; their keys and values go into the cache, and they attend to
        every position the cache keeps.
        """
        cache_alone(cache, mask, key, value)
        _check_self_attention(self, cache)  # before the widths of key and value are checked
        query, key, value, mask, batched = _prepare(self, query, key, value, mask)
        self.check_cache(cache, query)
        output, weights = self._forward(query, key, value, mask, need_weights, cache)
        return unbatch(batched, output, weights)  # (L, E) or (N, L, E); (H, L, S) or ...

    def new_cache(self, *, window: int | None = None) -> KVCache:
        """An empty :class:`attnlib.decoding.KVCache` for this layer (keeping the last
        ``window`` positions if given), which serves this layer alone."""
        cache = KVCache(window=window)
        cache.claim(self)
        return cache

    def check_cache(self, cache: Cache | None, x: Tensor, *, name: str = "cache") -> None:
        """Raise unless ``cache`` is ``None`` or a :class:`attnlib.decoding.Cache` that can take
        a step of ``x`` ``(N, L, E)`` in this layer: a self-attention; kept keys (if any) of
        its ``G`` key/value heads of size ``D``, ``x``'s batch, dtype and device; and no other
        layer's (the first layer to use a cache owns it:
        :meth:`attnlib.decoding.Cache.claim`). ``name`` names the cache in the message."""
        _check_kv_cache(self, cache, x, name, self.num_kv_heads, self.head_dim)

    def _self_attention(self, x, mask, need_weights, cache):
        """The interface a block calls: self-attention on a checked ``x`` ``(N, L, E)``, a 4-D
        ``mask`` or ``None``, a checked ``cache`` or ``None``."""
        return self._forward(x, x, x, mask, need_weights, cache)

    def scores(self, query: Tensor, key: Tensor | None = None) -> Tensor:
        """The logits of every head, ``s_ij = q^_i . k^_j / sqrt(D)``, before the mask.

        ``q^`` and ``k^`` are the projected queries and keys as the forward pass forms them
        (after RoPE, and after :class:`ModernAttention`'s QK-norm); ALiBi's bias, a mask (and
        :class:`ModernAttention`'s soft cap) come after. The largest of these logits is what
        QK-norm and soft-capping keep in check (Dehghani et al., 2023; Wortsman et al., 2023).

        Shape:
            - ``query``: ``(L, E)`` or ``(N, L, E)``; ``key``: ``(S, kdim)`` or ``(N, S, kdim)``
              (default: ``query``).
            - output: ``(H, L, S)`` or ``(N, H, L, S)``.

        Raises:
            ValueError, TypeError: as :meth:`forward` for ``query`` and ``key``.

        Example:
            >>> _ = torch.manual_seed(0)
            >>> mha = MultiHeadAttention(12, 3).eval()
            >>> x = torch.randn(5, 12)
            >>> s = mha.scores(x)
            >>> s.shape
            torch.Size([3, 5, 5])
            >>> _, w = mha(x)
            >>> torch.allclose(w, s.softmax(-1), atol=1e-6)
            True
        """
        key = query if key is None else key
        check_tensor("key", key, (2, 3))
        values = key.new_empty(*key.shape[:-1], self.vdim)  # (N, S, vdim): only its shape is read
        query, key, _, _, batched = _prepare(self, query, key, values, None)
        N, L, _ = query.shape
        q = self._split_heads(self.q_proj(query), self.num_heads)  # (N, H, L, D)
        k = self._split_heads(self.k_proj(key), self.num_kv_heads)  # (N, G, S, D)
        q, k = self._normalize(q, k)
        if self.positions is not None:
            q_pos, k_pos = _position_ids(None, L, k.shape[2], q.device)
            q, k, _ = self.positions(q, k, q_pos, k_pos)  # RoPE rotates; ALiBi's bias left out
        k = k.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)  # (N, H, S, D)
        s = (q * self.head_dim**-0.5) @ k.transpose(-2, -1)  # (N, H, L, S), as the forward
        return unbatch(batched, s)  # (N, H, L, S) or (H, L, S)

    def _forward(self, query, key, value, mask, need_weights, cache):
        """The layer without the checks, on checked inputs with a batch dimension: ``query``
        ``(N, L, E)``, ``key``/``value`` ``(N, S, .)``, ``mask`` ``None`` or 4-D."""
        N, L, _ = query.shape
        G = self.num_kv_heads
        q = self._split_heads(self.q_proj(query), self.num_heads)  # (N, H, L, D)
        k = self._split_heads(self.k_proj(key), G)  # (N, G, S, D)
        v = self._split_heads(self.v_proj(value), G)  # (N, G, S, D)
        q, k = self._normalize(q, k)  # before the cache and RoPE (a subclass's QK-norm)
        if cache is not None:
            k, v = cache.update(k, v)  # (N, G, S, D) each: kept and new, as the cache keeps them
            mask = cache.mask(L).view(1, 1, L, k.shape[2])  # (1, 1, L, S): causal (+ window)
        if self.positions is not None:  # positions enter after the cache: a cache keeps
            q_pos, k_pos = _position_ids(cache, L, k.shape[2], q.device)  # keys unrotated
            q, k, bias = self.positions(q, k, q_pos, k_pos)  # RoPE rotates; ALiBi gives a bias
            if bias is not None:
                mask = _add_bias(bias, mask)  # (N or 1, H, L, S), float
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = self._weigh(q, k, v, mask, dropout_p, need_weights)
        # heads: (N, H, L, D); weights: (N, H, L, S) or None
        inner = self.num_heads * self.head_dim  # (not -1: an empty batch has no size to infer)
        heads = heads.transpose(1, 2).reshape(N, L, inner)  # (N, L, H, D) -> (N, L, H*D)
        heads = self._gate(heads, query)  # (N, L, H*D)
        return self.out_proj(heads), weights  # (N, L, E), (N, H, L, S) or None

    def _normalize(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """The projected queries ``(N, H, L, D)`` and keys ``(N, G, S, D)`` before the cache
        and the positions: as they are (:class:`ModernAttention` normalises them)."""
        return q, k

    def _weigh(self, q, k, v, mask, dropout_p, need_weights):
        """The heads ``(N, H, L, D)`` and weights of the projected ``q``, ``k``, ``v``:
        softmax attention (``F.scaled_dot_product_attention`` without the weights)."""
        G = k.shape[1]
        return _attend(q, k, v, mask, dropout_p, need_weights, enable_gqa=G != self.num_heads)

    def _gate(self, heads: Tensor, query: Tensor) -> Tensor:
        """The concatenated heads ``(N, L, H*D)`` before ``out_proj``: as they are
        (:class:`ModernAttention` gates them)."""
        return heads

    def extra_repr(self) -> str:
        return _extra_repr(self)


class ModernAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` with the options of attention as 2025 models train it:
    QK-norm, soft-capped logits, a sink logit and an output gate, each off by default.

    .. math::

        \\operatorname{head}_h = \\sigma(X_q W_G^{(h)}) \\odot \\sum_j
            \\frac{e^{s_{ij}}}{e^{b_h} + \\sum_{j'} e^{s_{ij'}}}\\, v_j, \\qquad
        s_{ij} = c \\tanh\\left(\\frac{\\hat q_i \\cdot \\hat k_j}{c \\sqrt{D}}\\right) + B_{ij}

    with ``q^ = RMSNorm(q)`` (``qk_norm``), the cap ``c`` (``softcap``), the sink logit
    ``b_h`` (``sink``) and the gate ``W_G`` (``gate``); an option that is off drops its part
    (no ``e^{b_h}``, no ``tanh``, no gate, ``q^ = q``). The same kernel as
    :class:`MultiHeadAttention` (a subclass, as Hugging Face gives each model family its class):
    with every option off, the same numbers. Converters (:mod:`attnlib.convert`) refuse it.

    Args:
        embed_dim, num_heads: as :class:`MultiHeadAttention`.
        qk_norm: QK-norm (Henry et al., 2020; Dehghani et al., 2023; OLMo 2, Gemma 3,
            Qwen3): an RMSNorm over ``D`` of every head's queries and keys, with a learned scale
            per feature shared by the heads, ``q <- w_q * q / sqrt(mean_d q_d^2 + 1e-6)``
            (``q_norm``), the same for ``k`` (``k_norm``). Each score is then at most
            ``sqrt(D) max|w_q| max|w_k|``: the logits cannot grow unless the scales do. Applied
            right after the projections, before the ``cache`` (it keeps normalised keys) and
            before ``positions`` (RoPE rotates normalised vectors), as Qwen3 and Gemma 3 do.
            Per head as Qwen3 and Gemma 3; OLMo 2 normalises the whole ``H*D`` projection
            before the split, and Gemma 3 scales by ``1 + w`` (same family, other numbers).
        softcap: logit soft-capping (Gemma 2, with ``c = 50``): each score
            ``s = q . k / sqrt(D)`` becomes ``c tanh(s / c)``, in ``(-c, c)`` and close to ``s``
            for ``|s| << c``, before the mask and the softmax; a float mask (and ALiBi's bias) is
            added after the cap, as Gemma 2 adds its mask. ``None`` (the default): no cap.
            ``F.scaled_dot_product_attention`` has no cap: the layer forms the weights
            explicitly, with ``need_weights=False`` too.
        sink: a learned sink logit ``b_h`` per head (gpt-oss; the attention sinks of Xiao et
            al., 2024): each query's softmax runs over its keys and one more entry, ``b_h``,
            which has no value, so a head's weights sum to less than 1 and a head can attend
            to (almost) nothing. The same as one more key whose score is ``b_h`` (not capped)
            and whose value is zero; a query whose keys are all masked gets the output 0.
            ``sink_logits`` starts at 0: Miller's (2023) ``softmax_1``. The weights returned
            are those of the real keys. Formed explicitly, as ``softcap``.
        gate: an output gate (Qiu et al., 2025, "Gated Attention for Large Language Models";
            Qwen3-Next): each head's output is multiplied element by element by
            ``sigmoid(x W_G + b_G)``, ``x`` the query input, before ``out_proj``
            (``gate_proj``).
        scale: the factor of the scores, ``s = scale * q . k`` in place of ``q . k / sqrt(D)``;
            ``None`` (the default): ``D^-1/2``. Gemma 2 and 3 scale by
            ``query_pre_attn_scalar^-1/2`` (equal to ``D^-1/2`` in Gemma 3 270M, not in every
            Gemma). The queries are multiplied by ``scale * sqrt(D)`` after the QK-norm (RoPE is
            a rotation: it commutes), so the fused kernel and the explicit path both apply it,
            and so does :meth:`scores`.
        **options: the other arguments of :class:`MultiHeadAttention` (``bias``,
            ``num_kv_heads``, ``positions``, ...).

    Attributes:
        q_norm: ``nn.RMSNorm(D, eps=1e-6)`` with ``qk_norm``, else ``None``.
        k_norm: the same, for the keys.
        sink_logits: ``nn.Parameter`` of shape ``(H,)``, zeros at first, with ``sink``, else
            ``None``.
        gate_proj: ``nn.Linear(E, H*D)`` (with a bias if ``bias``) with ``gate``, else
            ``None``.
        qk_norm: the option, as given; and ``softcap``, ``sink``, ``gate``, ``scale``.

    Shape:
        As :class:`MultiHeadAttention`.

    Raises:
        ValueError: as :class:`MultiHeadAttention`, and if ``softcap`` or ``scale`` is not
            ``None`` or a finite number > 0.
        TypeError: as :class:`MultiHeadAttention`, and if ``softcap`` or ``scale`` is not a
            number or ``qk_norm``, ``sink`` or ``gate`` not a ``bool``.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mha = ModernAttention(12, 3, qk_norm=True, softcap=50.0, sink=True, gate=True)
        >>> mha
        ModernAttention(
          embed_dim=12, num_heads=3, bias=False, qk_norm=True, softcap=50.0, sink=True, gate=True
          ...
        >>> _, weights = mha(torch.randn(5, 12))
        >>> bool((weights.sum(-1) < 1).all())  # the sink takes the rest
        True
        >>> gemma = ModernAttention(12, 3, head_dim=8, scale=16**-0.5)  # query_pre_attn_scalar 16
        >>> x = torch.randn(5, 12)
        >>> q, k = gemma.q_proj(x).view(5, 3, 8), gemma.k_proj(x).view(5, 3, 8)
        >>> torch.allclose(gemma.scores(x), torch.einsum("lhd,shd->hls", q, k) / 4, atol=1e-6)
        True
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        qk_norm: bool = False,
        softcap: float | None = None,
        sink: bool = False,
        gate: bool = False,
        scale: float | None = None,
        **options,
    ):
        for name, flag in (("qk_norm", qk_norm), ("sink", sink), ("gate", gate)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool; got {type(flag).__name__} {flag!r}")
        if softcap is not None:
            softcap = check_real("softcap", softcap, "None or a number > 0", lambda c: c > 0)
        if scale is not None:
            scale = check_real("scale", scale, "None or a number > 0", lambda c: c > 0)
        # set before the base class builds the parts (_add_parts reads them)
        self.qk_norm, self.softcap, self.sink, self.gate = qk_norm, softcap, sink, gate
        self.scale = scale
        super().__init__(embed_dim, num_heads, **options)
        # the queries' factor that turns the kernel's D^-1/2 into scale (None: none)
        factor = None if scale is None else scale * self.head_dim**0.5
        self._q_factor = None if factor is None or abs(factor - 1.0) < 1e-12 else factor

    def _add_parts(self, inner: int) -> None:
        # registered only when on, so that an option that is off adds no parameter
        self.q_norm = nn.RMSNorm(self.head_dim, eps=1e-6) if self.qk_norm else None
        self.k_norm = nn.RMSNorm(self.head_dim, eps=1e-6) if self.qk_norm else None
        self.gate_proj = nn.Linear(self.embed_dim, inner, bias=self.bias) if self.gate else None
        self.sink_logits = nn.Parameter(torch.zeros(self.num_heads)) if self.sink else None

    def _normalize(self, q, k):
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)  # (N, H, L, D), (N, G, S, D): RMS 1 over D
        if self._q_factor is not None:
            q = q * self._q_factor  # (N, H, L, D): the kernel's D^-1/2 times this is scale
        return q, k

    def _weigh(self, q, k, v, mask, dropout_p, need_weights):
        if self.softcap is None and not self.sink:
            return super()._weigh(q, k, v, mask, dropout_p, need_weights)
        # F.sdpa has neither a cap nor a sink: the weights are formed explicitly
        return _attend_explicit(
            q, k, v, mask, dropout_p, need_weights, self.softcap, self.sink_logits
        )  # (N, H, L, D), (N, H, L, S) or None

    def _gate(self, heads, query):
        if not self.gate:
            return heads
        return heads * torch.sigmoid(self.gate_proj(query))  # (N, L, H*D), per feature

    def extra_repr(self) -> str:
        extra = repr_options(
            ("qk_norm", self.qk_norm, False),
            ("softcap", self.softcap, None),
            ("sink", self.sink, False),
            ("gate", self.gate, False),
            ("scale", self.scale, None),
        )
        return _extra_repr(self) + extra


class NaiveMultiHeadAttention(nn.Module):
    """Multi-head attention as a list of heads (seed 000): ``H`` independent
    :class:`attnlib.SelfAttention` heads of size ``D = E / H``, concatenated, then ``W_O``.

    .. math::

        \\operatorname{MultiHead}(X) = \\operatorname{Concat}(\\operatorname{head}_1(X),
        \\dots, \\operatorname{head}_H(X))\\, W_O

    Slower than :class:`MultiHeadAttention` (one small matrix product per head) but each head
    is visible as a module. Same arguments, shapes and errors as :class:`MultiHeadAttention`;
    with ``need_weights=False`` each head takes ``F.scaled_dot_product_attention``'s fast path.

    Args:
        embed_dim, num_heads, bias, kdim, vdim, head_dim, dropout: as
            :class:`MultiHeadAttention` (everything after ``num_heads`` keyword-only).

    Attributes:
        heads: ``nn.ModuleList`` of ``H`` ``SelfAttention(E, head_dim=D, bias=bias, kdim=kdim,
            vdim=vdim, dropout=dropout)``.
        out_proj: ``nn.Linear(H*D, E)``.

    Shape:
        As :class:`MultiHeadAttention`: ``query`` ``(L, E)`` or ``(N, L, E)``; ``key``
        ``(S, kdim)``, ``value`` ``(S, vdim)``, or with a batch dimension ``N``; ``mask``
        (boolean or float) ``(L, S)``, ``(N, L, S)`` or ``(N, H, L, S)``; output ``(L, E)``
        or ``(N, L, E)``; weights ``(H, L, S)`` or ``(N, H, L, S)``. With ``cache=`` (a
        :class:`attnlib.decoding.Cache`, ``G = H``), as :class:`MultiHeadAttention`.

    Raises:
        ValueError: as :class:`MultiHeadAttention`.
        TypeError: as :class:`MultiHeadAttention`.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mha = NaiveMultiHeadAttention(12, 4)
        >>> output, weights = mha(torch.randn(5, 12))
        >>> output.shape, weights.shape
        (torch.Size([5, 12]), torch.Size([4, 5, 5]))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        bias: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        head_dim: int | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        _init_sizes(self, embed_dim, num_heads, bias, kdim, vdim, head_dim, dropout)
        self.heads = nn.ModuleList(
            SelfAttention(
                embed_dim,
                head_dim=self.head_dim,
                bias=bias,
                kdim=self.kdim,
                vdim=self.vdim,
                dropout=self.dropout,
            )
            for _ in range(num_heads)
        )
        self.out_proj = nn.Linear(num_heads * self.head_dim, embed_dim, bias=bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        need_weights: bool = True,
        cache: Cache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Run every head, concatenate, project; returns ``(output, weights)``.

        With ``need_weights=False`` every head goes through ``F.scaled_dot_product_attention``
        and ``weights`` is ``None``; ``cache=`` decodes step by step: both as in
        :meth:`MultiHeadAttention.forward`. The heads' own checks are skipped (the inputs
        were checked here, once).
        """
        cache_alone(cache, mask, key, value)
        _check_self_attention(self, cache)  # before the widths of key and value are checked
        query, key, value, mask, batched = _prepare(self, query, key, value, mask)
        _check_kv_cache(self, cache, query, "cache", self.num_heads, self.head_dim)
        if cache is not None:
            return unbatch(batched, *self._forward_cached(query, cache, need_weights))
        if mask is not None:
            mask = mask.expand(query.shape[0], self.num_heads, query.shape[1], key.shape[1])
        outputs, weights = [], []
        for h, head in enumerate(self.heads):
            head_mask = None if mask is None else mask[:, h]  # (N, L, S)
            out, w = head._forward(query, key, value, head_mask, need_weights)
            outputs.append(out)  # (N, L, D)
            weights.append(w)  # (N, L, S) or None
        output = self.out_proj(torch.cat(outputs, dim=-1))  # (N, L, H*D) -> (N, L, E)
        stacked = torch.stack(weights, dim=1) if need_weights else None  # (N, H, L, S)
        return unbatch(batched, output, stacked)  # (L, E) or (N, L, E); (H, L, S) or ...

    def _forward_cached(self, query, cache, need_weights):
        """One decoding step: every head's new keys and values go into one cache, as
        ``(N, H, L_new, D)``, and each head attends to its own slice of it."""
        L = query.shape[1]
        k = torch.stack([head.k_proj(query) for head in self.heads], dim=1)  # (N, H, L, D)
        v = torch.stack([head.v_proj(query) for head in self.heads], dim=1)  # (N, H, L, D)
        k, v = cache.update(k, v)  # (N, H, S, D) each
        mask = cache.mask(L)  # (L, S): causal (+ window)
        dropout_p = self.dropout if self.training else 0.0
        outputs, weights = [], []
        for h, head in enumerate(self.heads):
            q = head.q_proj(query)  # (N, L, D)
            out, w = _attend(q, k[:, h], v[:, h], mask, dropout_p, need_weights)
            outputs.append(out)  # (N, L, D)
            weights.append(w)  # (N, L, S) or None
        output = self.out_proj(torch.cat(outputs, dim=-1))  # (N, L, E)
        stacked = torch.stack(weights, dim=1) if need_weights else None  # (N, H, L, S)
        return output, stacked

    def extra_repr(self) -> str:
        return _extra_repr(self)


def _attend_explicit(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    dropout_p: float,
    need_weights: bool,
    softcap: float | None,
    sink_logits: Tensor | None,
) -> tuple[Tensor, Tensor | None]:
    """Attention of projected heads with the weights formed explicitly, for a soft cap and a
    sink (``F.scaled_dot_product_attention`` has neither): scores, ``c tanh(s / c)``, the
    mask, the softmax over the keys and the sink, dropout, the weighted sum of the values.
    ``k`` and ``v`` may hold ``G`` heads shared by the ``H`` heads of ``q``."""
    H, D = q.shape[1], q.shape[3]
    if k.shape[1] != H:  # query head h reads key/value head h // (H / G)
        k = k.repeat_interleave(H // k.shape[1], dim=1)  # (N, H, S, D)
        v = v.repeat_interleave(H // v.shape[1], dim=1)  # (N, H, S, D)
    scores = (q * D**-0.5) @ k.transpose(-2, -1)  # (N, H, L, S), scaled before the product
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)  # in (-c, c)
    scores = apply_mask(scores, mask)  # -inf where blocked; a float mask added after the cap
    if sink_logits is None:
        weights = _softmax(scores, dim=-1)  # (N, H, L, S)
    else:  # one more entry per row, b_h, never masked, that has no value
        N, _, L, S = scores.shape
        sink = sink_logits.view(1, H, 1, 1).expand(N, H, L, 1)  # (N, H, L, 1)
        weights = _softmax(torch.cat([scores, sink], dim=-1), dim=-1)  # (N, H, L, S + 1)
        weights = weights[..., :S]  # (N, H, L, S): the real keys' weights, summing to < 1
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p)
    output = weights @ v if mask is None else weighted_sum(weights, v)  # (N, H, L, D)
    return output, (weights if need_weights else None)


def _position_ids(cache: Cache | None, L: int, S: int, device) -> tuple[Tensor, Tensor]:
    """The positions of the queries ``(L,)`` and keys ``(S,)`` for a position scheme: the
    cache's (:meth:`attnlib.decoding.Cache.position_ids`), else ``0 .. L-1`` and ``0 .. S-1``."""
    if cache is not None:
        return cache.position_ids(L)
    return torch.arange(L, device=device), torch.arange(S, device=device)


def _add_bias(bias: Tensor, mask: Tensor | None) -> Tensor:
    """A float ``bias`` (ALiBi's) with ``mask`` applied: ``-inf`` where a boolean mask blocks,
    a float mask added."""
    if mask is None:
        return bias
    if mask.dtype == torch.bool:
        return bias.masked_fill(~mask, float("-inf"))  # (N or 1, H, L, S)
    return bias + mask  # -inf stays -inf


def _init_sizes(m, embed_dim, num_heads, bias, kdim, vdim, head_dim, dropout) -> None:
    """Check and store the sizes shared by both classes."""
    m.head_dim = _check_dims(embed_dim, num_heads, head_dim)
    m.embed_dim, m.num_heads, m.bias = embed_dim, num_heads, bias
    m.kdim = embed_dim if kdim is None else check_int("kdim", kdim, low=1)
    m.vdim = embed_dim if vdim is None else check_int("vdim", vdim, low=1)
    m.dropout = check_dropout("dropout", dropout)
