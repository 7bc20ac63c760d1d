"""Multi-head latent attention (MLA; DeepSeek-V2, arXiv 2405.04434, section 2.1): cache one
small latent vector per token instead of every head's key and value.

.. math::

    \\begin{aligned}
    c^{KV} &= X W_{DKV}, \\qquad K^C_h = c^{KV} W_{UK,h}, \\qquad V_h = c^{KV} W_{UV,h}, \\\\
    k^R &= \\operatorname{RoPE}(X W_{KR}), \\qquad
    q^C_h = X W_{Q,h}, \\qquad q^R_h = \\operatorname{RoPE}(X W_{QR,h}), \\\\
    \\operatorname{head}_h &= \\operatorname{softmax}\\left(
        \\frac{q^C_h {K^C_h}^\\top + q^R_h {k^R}^\\top}{\\sqrt{D + d_R}}\\right) V_h, \\qquad
    \\operatorname{MLA}(X) = \\operatorname{Concat}_h(\\operatorname{head}_h)\\, W_O
    \\end{aligned}

Every head's keys and values are computed from the same latent ``c^{KV}`` of ``d_c`` numbers
per token, so a decoder caches ``c^{KV}`` (and the one RoPE key ``k^R`` of ``d_R`` numbers that
all heads share): ``d_c + d_R`` numbers per token and layer, where multi-head attention caches
``2 H D`` (:func:`kv_bytes_per_token` compares them). RoPE is *decoupled*: a rotation between
``W_{UK}`` and the query would stop the two from being multiplied together once
(:class:`MultiHeadLatentAttention`'s ``absorb=True``), so the rotated part lives in extra
``d_R`` columns of its own.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlib._checks import cache_alone, check_dropout, check_input, check_int, shape_str, unbatch
from attnlib._util import repr_options
from attnlib.attention import _attend
from attnlib.decoding import Cache, KVCache
from attnlib.multihead import _check_dims, _check_kv_cache, _position_ids
from attnlib.positions import Rotary

__all__ = ["MultiHeadLatentAttention", "kv_bytes_per_token"]


def _check_latent_dim(name: str, n, embed_dim: int) -> int:
    """A latent size: an ``int`` in ``1 .. embed_dim``."""
    n = check_int(name, n, low=1)
    if n > embed_dim:
        raise ValueError(
            f"{name} must be at most embed_dim={embed_dim}; got {n}: the latent is x W_down, "
            f"of rank at most embed_dim, so a latent larger than the input compresses nothing "
            f"(caching x itself would be smaller)"
        )
    return n


def _check_rope_dim(rope_dim) -> int:
    """``d_R``: an even ``int >= 0`` (RoPE rotates pairs of features)."""
    rope_dim = check_int("rope_dim", rope_dim, low=0, what="an even integer >= 0")
    if rope_dim % 2:
        raise ValueError(
            f"rope_dim must be an even integer >= 0 (RoPE rotates features in pairs); "
            f"got {rope_dim}"
        )
    return rope_dim


class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2): keys and values expanded from a cached
    latent of ``d_c`` numbers per token, plus one RoPE key shared by all heads.

    .. math::

        \\begin{aligned}
        c^{KV} &= X W_{DKV}, \\qquad k^R = \\operatorname{RoPE}(X W_{KR}), \\\\
        \\operatorname{head}_h &= \\operatorname{softmax}\\left(
            \\frac{q^C_h (c^{KV} W_{UK,h})^\\top + q^R_h {k^R}^\\top}{\\sqrt{D + d_R}}
            \\right) c^{KV} W_{UV,h}, \\\\
        \\operatorname{output} &= \\operatorname{Concat}_h(\\operatorname{head}_h)\\, W_O
        \\end{aligned}

    with ``q^C_h = X W_{Q,h}`` and ``q^R_h = RoPE(X W_{QR,h})`` (or, with ``q_latent_dim``,
    both from a query latent ``c^Q = X W_{DQ}``, as DeepSeek does). ``W_{UK,h}`` and
    ``W_{UV,h}`` are ``d_c x D``: head ``h``'s rows of ``k_up`` and ``v_up``. With
    ``latent_dim = E``, ``W_{DKV} = I`` and ``rope_dim = 0`` this is
    :class:`attnlib.MultiHeadAttention` with ``W_K = W_{UK}`` and ``W_V = W_{UV}``; with any
    ``W_{DKV}`` it is an MHA whose ``W_K = W_{DKV} W_{UK}`` has rank at most ``d_c``.
    DeepSeek also normalises the latents (RMSNorm) before the up-projections; that is left out.

    **The cache.** With ``cache=`` (any :class:`attnlib.decoding.Cache`: ``KVCache()``,
    ``PreallocatedCache(n)``, ``RollingCache(w)``, ...), a step calls
    ``cache.update(k_rope, c_kv)`` with the *unrotated* RoPE keys ``(N, 1, L, d_R)`` as the
    cache's keys and the latents ``(N, 1, L, d_c)`` as its values: one "head", ``d_c + d_R``
    numbers per token (its ``nbytes`` is ``N * S * (d_c + d_R) * bytes``). The returned keys are
    rotated afterwards at the cache's :meth:`~attnlib.decoding.Cache.position_ids`, as
    :class:`attnlib.MultiHeadAttention` does (a ``SinkCache`` renumbers). With ``rope_dim = 0``
    the keys are an empty ``(N, 1, L, 0)`` tensor, so that every cache class works unchanged
    (its ``update`` wants a key and a value of the same ``(N, G, L_new)``) and holds nothing
    but the latents.

    **Two forms of one computation**, chosen by ``forward(..., absorb=...)``:

    - ``absorb=False`` (the default, the formula as written): expand ``K^C`` and ``V`` from the
      latent for every key, ``(N, H, S, D)`` each, and attend as multi-head attention does;
    - ``absorb=True`` (weight absorption): ``q^C_h (c^{KV} W_{UK,h})^T =
      (q^C_h W_{UK,h}^T) (c^{KV})^T``, so each head's query is folded to ``d_c`` numbers and
      scored directly against the cached latents (with ``q^R`` against ``k^R``); the weights
      then average the latents, and ``W_{UV,h}`` and ``W_O`` are applied once per query. ``K``
      and ``V`` are never formed: all heads read the same ``(N, 1, S, d_c + d_R)`` keys, as in
      multi-query attention. A bias of ``k_up`` adds ``q^C_h . b_{K,h}`` to every score of a
      query, the same for every key: the softmax cancels it, and it is dropped (its gradient
      is 0 in both forms, as that of ``MultiHeadAttention``'s key bias). A bias of
      ``v_up`` adds ``b_{V,h}`` times the sum of the weights (1, or 0 for a query with nothing
      to attend to, or other after dropout): the latents are extended by a column of ones whose
      average is that sum. Both forms give the same numbers up to rounding.

    ``absorb`` is an argument of ``forward``, not of the layer: the two forms share every
    weight and differ only in the order of the products (like ``need_weights``), so one layer
    can run both and a test can compare them; a server picks one per call (the absorbed form
    for decoding, where ``S`` is long and ``L`` is 1; the expanded one for a long prefill).

    The layer is a self-attention (keys and values come from the latent of ``query``):
    ``forward(query, key=None, value=None, *, mask=None, need_weights=True, cache=None,
    absorb=False)`` has :class:`attnlib.MultiHeadAttention`'s signature, and ``key`` and
    ``value`` may only be ``None`` or ``query`` itself. A causal mask comes from ``mask`` or
    from the cache. Everything after ``num_heads`` is keyword-only.

    Args:
        embed_dim: ``E``, the size of an input and of an output vector.
        num_heads: ``H``; must divide ``E`` unless ``head_dim`` is given.
        latent_dim: ``d_c``, the size of the cached latent ``c^{KV}``; ``1 .. E`` (a latent
            wider than ``E`` has rank at most ``E`` and compresses nothing: refused).
        head_dim: ``D``, the size of each head's (non-rotated) queries, keys and values;
            default ``E / H``.
        rope_dim: ``d_R``, the size of each head's rotated query and of the shared RoPE key;
            even, 0 (the default) for no position information.
        q_latent_dim: ``d_cq``: compress the queries too, ``c^Q = X W_{DQ}`` then
            ``q^C = c^Q W_{UQ}`` and ``q^R = RoPE(c^Q W_{QR})`` (DeepSeek's ``q_lora_rank``);
            ``1 .. E``. ``None`` (the default): one projection ``q_proj``.
        bias: add learned biases to every projection (DeepSeek has none).
        rope_base: the wavelength scale of RoPE; 10000 in the paper.
        dropout: probability of dropping an attention weight, in training mode only.

    Attributes:
        kv_down: ``nn.Linear(E, d_c)``, ``W_{DKV}``: the latent ``c^{KV}``, what is cached.
        k_up: ``nn.Linear(d_c, H*D)``, ``W_{UK}``: the keys of every head from the latent.
        v_up: ``nn.Linear(d_c, H*D)``, ``W_{UV}``: the values of every head from the latent.
        q_proj: ``nn.Linear(E, H*D)``, ``W_Q``; ``None`` with ``q_latent_dim``.
        q_down: ``nn.Linear(E, d_cq)``, ``W_{DQ}``; ``None`` without ``q_latent_dim``.
        q_up: ``nn.Linear(d_cq, H*D)``, ``W_{UQ}``; ``None`` without ``q_latent_dim``.
        q_rope: ``nn.Linear(E or d_cq, H*d_R)``, ``W_{QR}``; ``None`` if ``rope_dim = 0``.
        k_rope: ``nn.Linear(E, d_R)``, ``W_{KR}``: one RoPE key per token, shared by all heads;
            ``None`` if ``rope_dim = 0``.
        out_proj: ``nn.Linear(H*D, E)``, ``W_O``.
        rope: the :class:`attnlib.positions.Rotary` that rotates ``q^R`` and ``k^R``, or ``None``.
        kdim: ``E`` (a self-attention, as :class:`attnlib.MultiHeadAttention`'s).
        vdim: ``E``.

    Shape:
        - ``query``: ``(L, E)`` or ``(N, L, E)``; ``key``, ``value``: ``None`` or ``query``.
        - ``mask``: boolean, ``True`` = may attend, or floating point, added to the scores;
          ``(L, S)``, ``(N, L, S)`` or ``(N, H, L, S)`` (unbatched: ``(L, S)`` or
          ``(H, L, S)``), with ``S = L``.
        - output: ``(L, E)`` or ``(N, L, E)``; weights: ``(H, L, S)`` or ``(N, H, L, S)``, or
          ``None`` with ``need_weights=False``.
        - with ``cache=``: ``query`` holds the new tokens ``(N, L_new, E)``; ``S`` is the number
          of positions the cache keeps plus ``L_new``; no ``mask`` (the cache applies the
          causal mask). The cache's keys are ``(N, 1, S, d_R)``, its values ``(N, 1, S, d_c)``.

    Raises:
        ValueError: if a size is below 1 (``rope_dim`` below 0), ``latent_dim`` or
            ``q_latent_dim`` is above ``embed_dim``, ``rope_dim`` is odd, ``embed_dim`` is not
            divisible by ``num_heads`` and no ``head_dim`` is given, ``dropout`` is not in
            ``[0, 1)``, ``rope_base`` is not a finite number > 1, ``query`` has the wrong rank or
            size, ``key`` or ``value`` is another tensor than ``query``, an input or ``mask`` is
            not on the module's device, ``mask`` has the wrong shape, ``cache`` is combined with
            ``mask``, or a filled ``cache`` holds keys or latents of other sizes, another batch
            size or device (it belongs to one layer and one batch).
        TypeError: if a size is not an ``int``, ``dropout`` or ``rope_base`` not a number,
            ``query`` is not a float tensor or its dtype is not the module's, ``mask`` is neither
            boolean nor floating point, ``cache`` is not an :class:`attnlib.decoding.Cache` or
            holds another dtype, or ``absorb`` is not a ``bool``.

    An empty batch (``N = 0``) or sequence (``L = 0``) gives an empty result of the shapes
    above, with a ``cache`` too (an empty step leaves it as it was).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mla = MultiHeadLatentAttention(24, 3, latent_dim=8, rope_dim=4)
        >>> x = torch.randn(2, 6, 24)
        >>> causal = torch.ones(6, 6).tril().bool()
        >>> out, weights = mla(x, mask=causal)
        >>> absorbed, _ = mla(x, mask=causal, absorb=True)
        >>> out.shape, weights.shape, torch.allclose(absorbed, out, atol=1e-6)
        (torch.Size([2, 6, 24]), torch.Size([2, 3, 6, 6]), True)
        >>> from attnlib.decoding import KVCache
        >>> cache = KVCache()
        >>> steps = [mla(x[:, t : t + 1], cache=cache, absorb=True)[0] for t in range(6)]
        >>> torch.allclose(torch.cat(steps, dim=1), out, atol=1e-6)
        True
        >>> tuple(cache.key.shape), tuple(cache.value.shape), cache.nbytes  # 2 * 6 * (4 + 8) * 4
        ((2, 1, 6, 4), (2, 1, 6, 8), 576)
    """

    takes_mask = True

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        latent_dim: int,
        head_dim: int | None = None,
        rope_dim: int = 0,
        q_latent_dim: int | None = None,
        bias: bool = False,
        rope_base: float = 10000.0,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.head_dim = _check_dims(embed_dim, num_heads, head_dim)
        self.embed_dim, self.num_heads, self.bias = embed_dim, num_heads, bias
        self.kdim = self.vdim = embed_dim  # a self-attention: keys and values come from query
        self.latent_dim = _check_latent_dim("latent_dim", latent_dim, embed_dim)
        self.rope_dim = _check_rope_dim(rope_dim)
        self.q_latent_dim = (
            None
            if q_latent_dim is None
            else _check_latent_dim("q_latent_dim", q_latent_dim, embed_dim)
        )
        self.dropout = check_dropout("dropout", dropout)
        rope = Rotary(rope_base)  # checks rope_base whether or not it is used
        self.rope = rope if self.rope_dim else None
        E, H, D, C, R = embed_dim, num_heads, self.head_dim, self.latent_dim, self.rope_dim
        self.kv_down = nn.Linear(E, C, bias=bias)  # W_DKV
        self.k_up = nn.Linear(C, H * D, bias=bias)  # W_UK
        self.v_up = nn.Linear(C, H * D, bias=bias)  # W_UV
        if self.q_latent_dim is None:
            self.q_proj, self.q_down, self.q_up = nn.Linear(E, H * D, bias=bias), None, None
            q_source = E
        else:
            self.q_proj = None
            self.q_down = nn.Linear(E, self.q_latent_dim, bias=bias)  # W_DQ
            self.q_up = nn.Linear(self.q_latent_dim, H * D, bias=bias)  # W_UQ
            q_source = self.q_latent_dim
        self.q_rope = nn.Linear(q_source, H * R, bias=bias) if R else None  # W_QR
        self.k_rope = nn.Linear(E, R, bias=bias) if R else None  # W_KR: one key, all heads
        self.out_proj = nn.Linear(H * D, E, bias=bias)  # W_O

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        need_weights: bool = True,
        cache: Cache | None = None,
        absorb: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to itself; returns ``(output, weights)``.

        ``absorb=False`` expands every head's keys and values from the latents;
        ``absorb=True`` scores the folded queries against the latents themselves (see the class
        docstring): the same numbers up to rounding. With ``need_weights=False`` the heads go
        through ``F.scaled_dot_product_attention`` and ``weights`` is ``None``. With ``cache=``
        ``query`` holds the new tokens of a causal self-attention; their RoPE keys and latents
        go into the cache, and they attend to every position the cache keeps.
        """
        for name, t in (("key", key), ("value", value)):
            if t is not None and t is not query:
                got = shape_str(t.shape) if isinstance(t, Tensor) else type(t).__name__
                raise ValueError(
                    f"{name} must be None or query itself: MultiHeadLatentAttention is a "
                    f"self-attention (keys and values come from the latent of query); got "
                    f"another {name}, {got}"
                )
        if not isinstance(absorb, bool):
            raise TypeError(f"absorb must be a bool; got {type(absorb).__name__} {absorb!r}")
        cache_alone(cache, mask)
        weight = self.out_proj.weight
        x, mask, batched = check_input(
            query, mask, weight=weight, width=self.embed_dim, heads=self.num_heads, name="query"
        )
        self.check_cache(cache, x)
        output, weights = self._forward(x, mask, need_weights, cache, absorb)
        return unbatch(batched, output, weights)  # (L, E) or (N, L, E); (H, L, S) or ...

    def new_cache(self, *, window: int | None = None) -> KVCache:
        """An empty :class:`attnlib.decoding.KVCache` for this layer (keeping the last
        ``window`` positions if given), which serves this layer alone; it will hold the RoPE
        keys ``(N, 1, S, d_R)`` and the latents ``(N, 1, S, d_c)``."""
        cache = KVCache(window=window)
        cache.claim(self)
        return cache

    def check_cache(self, cache: Cache | None, x: Tensor, *, name: str = "cache") -> None:
        """Raise unless ``cache`` is ``None`` or a :class:`attnlib.decoding.Cache` that can take
        a step of ``x`` ``(N, L, E)`` in this layer: kept RoPE keys ``(N, 1, S, d_R)`` and
        latents ``(N, 1, S, d_c)`` of this layer's sizes, ``x``'s batch, dtype and device, and
        no other layer's (:meth:`attnlib.decoding.Cache.claim`)."""
        _check_kv_cache(self, cache, x, name, 1, self.rope_dim, claim=False)
        value = None if cache is None else cache.value
        if value is not None and value.shape[-1] != self.latent_dim:
            raise ValueError(
                f"{name} holds latents of shape {shape_str(value.shape)}; this layer's latent_dim "
                f"is {self.latent_dim}: a MultiHeadLatentAttention cache holds the RoPE keys "
                "(N, 1, S, rope_dim) and the latents (N, 1, S, latent_dim) of one layer and one "
                "batch; start a new KVCache()"
            )
        if cache is not None:
            cache.claim(self, name=name)

    def _self_attention(self, x, mask, need_weights, cache):
        """The interface a block calls (see :class:`attnlib.MultiHeadAttention`): the absorbed
        form when decoding with a cache, the expanded one on a whole sequence."""
        return self._forward(x, mask, need_weights, cache, cache is not None)

    def _queries(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        """Every head's queries: the plain part ``q^C`` and the (unrotated) RoPE part ``q^R``."""
        N, L, _ = x.shape
        H, D, R = self.num_heads, self.head_dim, self.rope_dim
        if self.q_latent_dim is None:
            source, q_c = x, self.q_proj(x)  # (N, L, E), (N, L, H*D)
        else:
            source = self.q_down(x)  # (N, L, d_cq): c^Q
            q_c = self.q_up(source)  # (N, L, H*D)
        q_c = q_c.view(N, L, H, D).transpose(1, 2)  # (N, H, L, D)
        if not R:
            return q_c, None
        q_r = self.q_rope(source).view(N, L, H, R).transpose(1, 2)  # (N, H, L, d_R)
        return q_c, q_r

    def _forward(self, query, mask, need_weights, cache, absorb):
        """The layer without the checks, on a checked ``query (N, L, E)`` and a 4-D ``mask``
        or ``None``."""
        N, L, _ = query.shape
        H, D, C, R = self.num_heads, self.head_dim, self.latent_dim, self.rope_dim
        q_c, q_r = self._queries(query)  # (N, H, L, D), (N, H, L, d_R) or None
        c_kv = self.kv_down(query).view(N, 1, L, C)  # (N, 1, L, d_c): the latent, one "head"
        if R:
            k_r = self.k_rope(query).view(N, 1, L, R)  # (N, 1, L, d_R): shared by all heads
        else:
            k_r = query.new_zeros(N, 1, L, 0)  # (N, 1, L, 0): the cache's empty keys
        if cache is not None:
            k_r, c_kv = cache.update(k_r, c_kv)  # (N, 1, S, d_R), (N, 1, S, d_c): kept and new
            mask = cache.mask(L).view(1, 1, L, c_kv.shape[2])  # (1, 1, L, S): causal (+ window)
        S = c_kv.shape[2]
        if R:  # rotated after the cache, which keeps the keys unrotated
            q_pos, k_pos = _position_ids(cache, L, S, query.device)  # (L,), (S,)
            q_r, k_r, _ = self.rope(q_r, k_r, q_pos, k_pos)  # same shapes, rotated
        dropout_p = self.dropout if self.training else 0.0
        if absorb:
            heads, weights = self._absorbed(q_c, q_r, c_kv, k_r, mask, dropout_p, need_weights)
        else:
            heads, weights = self._expanded(q_c, q_r, c_kv, k_r, mask, dropout_p, need_weights)
        heads = heads.transpose(1, 2).reshape(N, L, H * D)  # (N, L, H, D) -> (N, L, H*D)
        return self.out_proj(heads), weights  # (N, L, E), (N, H, L, S) or None

    def _expanded(self, q_c, q_r, c_kv, k_r, mask, dropout_p, need_weights):
        """``absorb=False``: every head's keys and values from the latents, then attention.
        Returns the heads ``(N, H, L, D)`` and the weights."""
        N, _, S, _ = c_kv.shape
        H, D, R = self.num_heads, self.head_dim, self.rope_dim
        latent = c_kv.squeeze(1)  # (N, S, d_c)
        k = self.k_up(latent).view(N, S, H, D).transpose(1, 2)  # (N, H, S, D): K^C
        v = self.v_up(latent).view(N, S, H, D).transpose(1, 2)  # (N, H, S, D): V
        q = q_c
        if R:
            q = torch.cat([q_c, q_r], dim=-1)  # (N, H, L, D + d_R)
            k = torch.cat([k, k_r.expand(N, H, S, R)], dim=-1)  # (N, H, S, D + d_R)
        return _attend(q, k, v, mask, dropout_p, need_weights)  # scale 1/sqrt(D + d_R)

    def _absorbed(self, q_c, q_r, c_kv, k_r, mask, dropout_p, need_weights):
        """``absorb=True``: the queries folded into the latent space, scored against the
        latents; ``W_UV`` applied after the weights. Returns the heads ``(N, H, L, D)`` and the
        weights."""
        H, D, C, R = self.num_heads, self.head_dim, self.latent_dim, self.rope_dim
        w_uk = self.k_up.weight.view(H, D, C)  # W_UK,h^T for each head (k_h = c W_UK,h)
        q = q_c @ w_uk  # (N, H, L, D) @ (H, D, d_c) -> (N, H, L, d_c): q^C_h W_UK,h^T
        # (k_up's bias adds q^C_h . b_K,h to every score of a query: the softmax cancels it)
        k = c_kv  # (N, 1, S, d_c): every head scores the latents themselves
        if R:
            q = torch.cat([q, q_r], dim=-1)  # (N, H, L, d_c + d_R)
            k = torch.cat([c_kv, k_r], dim=-1)  # (N, 1, S, d_c + d_R)
        # _attend scales by 1/sqrt(d_c + d_R); the scores of the layer are by 1/sqrt(D + d_R)
        q = q * ((C + R) / (D + R)) ** 0.5  # (N, H, L, d_c + d_R)
        v = c_kv  # (N, 1, S, d_c)
        if self.v_up.bias is not None:  # a column of ones: its average is the weights' sum
            v = torch.cat([c_kv, c_kv.new_ones(c_kv.shape[:3] + (1,))], dim=-1)  # (N, 1, S, d_c+1)
        out, weights = _attend(q, k, v, mask, dropout_p, need_weights, enable_gqa=True)
        # out: (N, H, L, d_c [+ 1]), the weighted average of the latents per head
        w_uv = self.v_up.weight.view(H, D, C).transpose(1, 2)  # (H, d_c, D): W_UV,h
        heads = out[..., :C] @ w_uv  # (N, H, L, d_c) @ (H, d_c, D) -> (N, H, L, D)
        if self.v_up.bias is not None:
            heads = heads + out[..., C:] * self.v_up.bias.view(H, 1, D)  # (N, H, L, D)
        return heads, weights

    def extra_repr(self) -> str:
        extra = repr_options(
            ("head_dim", self.head_dim, self.embed_dim // self.num_heads),
            ("rope_dim", self.rope_dim, 0),
            ("q_latent_dim", self.q_latent_dim, None),
            ("dropout", self.dropout, 0.0),
        )
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
            f"latent_dim={self.latent_dim}, bias={self.bias}{extra}"
        )


def kv_bytes_per_token(
    *,
    num_layers: int,
    num_heads: int,
    head_dim: int,
    num_kv_heads: int | None = None,
    latent_dim: int | None = None,
    rope_dim: int = 0,
    bytes_per_number: int = 2,
) -> int:
    """The bytes a decoder's cache holds per token, over all layers: MHA, GQA, MQA or MLA.

    =========  ============================  =================================================
    attention  numbers per token and layer   DeepSeek-V3's sizes, bytes per token
    =========  ============================  =================================================
    MHA        ``H ((D + d_R) + D)``         ``61 * 128 * (192 + 128) * 2 = 4,997,120``
    GQA        ``G ((D + d_R) + D)``         ``G = 8``: ``61 * 8 * (192 + 128) * 2 = 312,320``
    MQA        ``(D + d_R) + D``, ``G = 1``  ``61 * (192 + 128) * 2 = 39,040``
    MLA        ``d_c + d_R``                 ``61 * (512 + 64) * 2 = 70,272``
    =========  ============================  =================================================

    times ``num_layers * bytes_per_number``. Without ``latent_dim`` each of the ``G`` key/value
    heads caches a key of ``head_dim + rope_dim`` numbers and a value of ``head_dim``: with
    ``rope_dim = 0`` that is the textbook ``2 L G D b`` (``G = H``: MHA, ``G = 1``: MQA); with
    ``rope_dim`` it is an MLA layer's keys and values expanded per head. With ``latent_dim``
    (MLA) the cache holds ``latent_dim + rope_dim`` numbers per layer whatever ``num_heads``
    and ``head_dim`` are. DeepSeek-V3 (61 layers, 128 heads, ``qk_nope_head_dim = 128``,
    ``qk_rope_head_dim = 64``, ``v_head_dim = 128``, ``kv_lora_rank = 512``, BF16): 70,272
    bytes per token with MLA, 71 times less than the same heads with keys of 192 and values of
    128 numbers, and 57 times less than plain MHA of ``D = 128`` (3,997,696 bytes): as much as
    GQA with 2.25 groups of ``D = 128`` (DeepSeek-V2's comparison, ``d_c + d_R = 4.5 D``).

    Args:
        num_layers: the number of attention layers.
        num_heads: ``H``, the query heads.
        head_dim: ``D``, the size of a head's value and of its key's non-rotated part.
        num_kv_heads: ``G``, the key/value heads (grouped-query attention); must divide ``H``;
            default ``H``. Not with ``latent_dim``.
        latent_dim: ``d_c``: multi-head latent attention, caching ``d_c + d_R`` numbers.
        rope_dim: ``d_R``, the rotated part of a key (per head, or the one shared key of MLA).
        bytes_per_number: 2 for bfloat16 and float16, 4 for float32, 1 for float8.

    Returns:
        The number of bytes per token, an ``int``.

    Raises:
        TypeError: if an argument is not an ``int``.
        ValueError: if a size is below 1 (``rope_dim`` below 0), ``num_kv_heads`` does not
            divide ``num_heads``, or both ``num_kv_heads`` and ``latent_dim`` are given.

    Example:
        >>> v3 = dict(num_layers=61, num_heads=128, head_dim=128, rope_dim=64)
        >>> kv_bytes_per_token(**v3, latent_dim=512)
        70272
        >>> kv_bytes_per_token(**v3), kv_bytes_per_token(**v3, num_kv_heads=1)
        (4997120, 39040)
    """
    num_layers = check_int("num_layers", num_layers, low=1)
    num_heads = check_int("num_heads", num_heads, low=1)
    head_dim = check_int("head_dim", head_dim, low=1)
    rope_dim = check_int("rope_dim", rope_dim, low=0)
    bytes_per_number = check_int("bytes_per_number", bytes_per_number, low=1)
    if latent_dim is not None:
        latent_dim = check_int("latent_dim", latent_dim, low=1)
        if num_kv_heads is not None:
            raise ValueError(
                f"num_kv_heads and latent_dim must not both be given: multi-head latent "
                f"attention caches one latent per token, shared by all heads; got "
                f"num_kv_heads={num_kv_heads}, latent_dim={latent_dim}"
            )
        return num_layers * (latent_dim + rope_dim) * bytes_per_number
    G = num_heads if num_kv_heads is None else check_int("num_kv_heads", num_kv_heads, low=1)
    if num_heads % G:
        raise ValueError(
            f"num_kv_heads must divide num_heads; got num_heads={num_heads}, num_kv_heads={G}"
        )
    return num_layers * G * ((head_dim + rope_dim) + head_dim) * bytes_per_number
