"""A transformer block and a causal language model built from it.

A pre-LayerNorm block (GPT-2, nanoGPT, ``nn.TransformerEncoderLayer(norm_first=True)``) adds
two things to the input, each computed from a normalised copy of it:

.. math::

    \\begin{aligned}
    x &\\leftarrow x + \\operatorname{MultiHead}(\\operatorname{LN}_1(x)), \\\\
    x &\\leftarrow x + W_2\\, \\operatorname{GELU}(W_1\\, \\operatorname{LN}_2(x) + b_1) + b_2
    \\end{aligned}

Attention moves information *between* positions; the MLP transforms each position on its own;
the residual sums let every layer read what the earlier ones wrote. :class:`LanguageModel`
stacks blocks between a token embedding and a linear read-out that predicts the next token.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlib._checks import (
    check_cache_fits,
    check_dropout,
    check_ids,
    check_int,
    check_mask,
    check_model_cache,
    check_module_input,
    check_real,
    check_sizes,
    check_tensor,
    shape_str,
)
from attnlib.attention import _causal_mask
from attnlib.decoding import Cache, KVCache, _sliding_window_mask
from attnlib.latent import MultiHeadLatentAttention
from attnlib.linear_attention import LinearAttention, StateCache
from attnlib.multihead import MultiHeadAttention, _check_cache
from attnlib.positions import ALiBi, Rotary, _position_scheme, sinusoidal_encoding

__all__ = ["LanguageModel", "ModelCache", "TransformerBlock"]

ADDED = ("learned", "sinusoidal")  # position schemes added to the token vectors


def _check_ratio(mlp_ratio) -> float:
    return check_real("mlp_ratio", mlp_ratio, "a number >= 0", lambda r: r >= 0)


def mlp(embed_dim: int, hidden: int, *, bias: bool, approximate: str = "none") -> nn.Sequential:
    """The blocks' MLP, ``Linear(E, hidden) -> GELU -> Linear(hidden, E)`` (shared by
    :class:`TransformerBlock` and :class:`attnlib.PostNormBlock`; sizes checked by them)."""
    return nn.Sequential(
        nn.Linear(embed_dim, hidden, bias=bias),
        nn.GELU(approximate=approximate),
        nn.Linear(hidden, embed_dim, bias=bias),
    )


ACTIVATIONS = {"gelu": "none", "gelu_tanh": "tanh"}  # activation -> nn.GELU's approximate


def _check_activation(activation) -> str:
    """``nn.GELU``'s ``approximate`` for ``activation``, or a ValueError naming the choices."""
    if not isinstance(activation, str):
        raise TypeError(
            f"activation must be a str, one of {tuple(ACTIVATIONS)}; got "
            f"{type(activation).__name__} {activation!r}"
        )
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {tuple(ACTIVATIONS)}; got {activation!r}")
    return ACTIVATIONS[activation]


class TransformerBlock(nn.Module):
    """A pre-LayerNorm transformer block: attention, then an MLP, each added to its input.

    .. math::

        \\begin{aligned}
        x &\\leftarrow x + \\operatorname{Dropout}(\\operatorname{MultiHead}(
            \\operatorname{LN}_1(x))), \\\\
        x &\\leftarrow x + \\operatorname{Dropout}(\\operatorname{MLP}(\\operatorname{LN}_2(x))),
        \\qquad \\operatorname{MLP}(y) = \\operatorname{GELU}(y W_1 + b_1) W_2 + b_2
        \\end{aligned}

    The same numbers as ``nn.TransformerEncoderLayer(E, H, dim_feedforward=r*E,
    activation="gelu", batch_first=True, norm_first=True)`` given the same weights (see
    :func:`attnlib.convert.block_from_torch`). ``mlp_ratio=0`` leaves the MLP (and ``ln2``)
    out: an attention-only block, as in the transformer-circuits papers.

    Args:
        embed_dim: ``E``.
        num_heads: ``H``; must divide ``E``.
        mlp_ratio: ``r``, the MLP's hidden width is ``round(r * E)``; 0 for no MLP.
        dropout: probability of dropping an attention weight and each sum's added term, in
            training mode only (PyTorch's layer also drops inside the MLP; this block does not).
        bias: biases in every linear map and LayerNorm (``nn.TransformerEncoderLayer``'s ``bias``).
        norm_eps: the LayerNorms' ``eps``.
        num_kv_heads: ``G`` key/value heads (grouped-query attention), see
            :class:`attnlib.MultiHeadAttention`.
        positions: ``None``, ``"rope"`` or ``"alibi"`` (or a :class:`attnlib.positions.Rotary`
            or :class:`attnlib.positions.ALiBi`): a relative position scheme inside the
            attention, see :class:`attnlib.MultiHeadAttention`.
        activation: the MLP's GELU, ``"gelu"`` (exact, :math:`y\\,\\Phi(y)`, as
            ``nn.GELU()``) or ``"gelu_tanh"`` (its tanh approximation,
            ``nn.GELU(approximate="tanh")``, which GPT-2 was trained with).
        latent_dim: ``d_c``: multi-head latent attention
            (:class:`attnlib.latent.MultiHeadLatentAttention`) instead of multi-head attention,
            caching ``d_c`` numbers per token; with ``positions="rope"`` its decoupled RoPE key
            has ``D / 2`` features (DeepSeek-V2's ratio, ``D / 2`` must be even). Decoding with a
            cache runs the absorbed form, a pass without one the expanded form. ``None``: MHA.
        qk_norm, softcap, sink, gate: the attention options of 2025 models (QK-norm, a soft
            cap on the logits, a learned sink logit per head, an output gate), passed to
            :class:`attnlib.MultiHeadAttention`; none of them with ``latent_dim``.
        linear: ``"linear"``, ``"delta"`` or ``"gated_delta"``: a
            :class:`attnlib.linear_attention.LinearAttention` layer of that rule instead of
            softmax attention (causal by construction: it takes no mask and gives no weights;
            it decodes with a :class:`attnlib.linear_attention.StateCache`). ``None``: softmax.

    Attributes:
        ln1: ``nn.LayerNorm(E)``, before the attention.
        ln2: ``nn.LayerNorm(E)``, before the MLP (``None`` without an MLP).
        attn: :class:`attnlib.MultiHeadAttention` ``(E, H, bias=bias)``, or a
            :class:`attnlib.latent.MultiHeadLatentAttention` with ``latent_dim``.
        mlp: ``nn.Sequential(Linear(E, rE), GELU(), Linear(rE, E))``, or ``None``.

    Shape:
        - ``x``: ``(L, E)`` or ``(N, L, E)``; output: the same shape.
        - ``mask``: as :class:`attnlib.MultiHeadAttention`'s (``True`` = may attend, or a float
          mask added to the scores), e.g. :func:`attnlib.causal_mask` ``(L, L)``.
        - weights: ``(H, L, S)`` or ``(N, H, L, S)`` with ``need_weights=True``, else ``None``.
        - with ``cache=`` (an :class:`attnlib.decoding.Cache`), ``x`` holds only the new
          positions; the cache applies the causal mask.

    Raises:
        ValueError: if a size is not a positive integer, ``E`` is not divisible by ``H``,
            ``activation`` is not ``"gelu"`` or ``"gelu_tanh"``, ``mlp_ratio`` is negative or so
            small that the MLP would have no hidden unit,
            ``dropout`` is not in ``[0, 1)``, ``latent_dim`` is given with an attention
            option, ``linear`` is not a rule or comes with an option of softmax attention, a
            linear block is given a ``mask``, ``x`` or ``mask`` has the wrong shape, ``cache``
            is combined with ``mask``, or a filled ``cache`` holds keys of other heads, head
            size, batch size or device.
        TypeError: if ``x`` is not a float tensor of the block's dtype, ``cache`` is not an
            :class:`attnlib.decoding.Cache` or holds keys of another dtype.

    Example:
        >>> from attnlib import causal_mask
        >>> _ = torch.manual_seed(0)
        >>> block = TransformerBlock(12, 3).eval()
        >>> x = torch.randn(2, 5, 12)
        >>> y, weights = block(x, mask=causal_mask(5), need_weights=True)
        >>> y.shape, weights.shape
        (torch.Size([2, 5, 12]), torch.Size([2, 3, 5, 5]))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        bias: bool = True,
        norm_eps: float = 1e-5,
        num_kv_heads: int | None = None,
        positions: str | Rotary | ALiBi | None = None,
        activation: str = "gelu",
        latent_dim: int | None = None,
        qk_norm: bool = False,
        softcap: float | None = None,
        sink: bool = False,
        gate: bool = False,
        linear: str | None = None,
    ):
        super().__init__()
        embed_dim = check_int("embed_dim", embed_dim, low=1)
        approximate = _check_activation(activation)
        self.activation = activation
        self.mlp_ratio = _check_ratio(mlp_ratio)
        self.dropout = check_dropout("dropout", dropout)
        self.ln1 = nn.LayerNorm(embed_dim, eps=norm_eps, bias=bias)
        if linear is not None:
            options = {
                "num_kv_heads": num_kv_heads,
                "positions": positions,
                "latent_dim": latent_dim,
                "softcap": softcap,
            }
            given = [f"{k}={v!r}" for k, v in options.items() if v is not None]
            given += [k for k, v in (("qk_norm", qk_norm), ("sink", sink), ("gate", gate)) if v]
            if given:
                raise ValueError(
                    "linear (a linear-attention layer) takes none of num_kv_heads, positions, "
                    "latent_dim, qk_norm, softcap, sink, gate (its convolution and state order "
                    f"the tokens); got {', '.join(given)}"
                )
            self.attn = LinearAttention(embed_dim, num_heads, rule=linear, bias=bias)
        elif latent_dim is None:
            self.attn = MultiHeadAttention(
                embed_dim,
                num_heads,
                bias=bias,
                dropout=dropout,
                num_kv_heads=num_kv_heads,
                positions=positions,
                qk_norm=qk_norm,
                softcap=softcap,
                sink=sink,
                gate=gate,
            )
        else:
            if qk_norm or softcap is not None or sink or gate:
                raise ValueError(
                    "latent_dim (multi-head latent attention) takes none of qk_norm, softcap, "
                    f"sink, gate; got qk_norm={qk_norm}, softcap={softcap}, sink={sink}, "
                    f"gate={gate}"
                )
            self.attn = _latent_attention(
                embed_dim, num_heads, latent_dim, bias, dropout, num_kv_heads, positions
            )
        hidden = round(self.mlp_ratio * embed_dim)
        if self.mlp_ratio and not hidden:
            raise ValueError(
                f"mlp_ratio must be 0 (no MLP) or give a hidden width round(mlp_ratio * E) >= 1; "
                f"got mlp_ratio={mlp_ratio} with embed_dim={embed_dim}"
            )
        if hidden:
            self.ln2 = nn.LayerNorm(embed_dim, eps=norm_eps, bias=bias)
            self.mlp = mlp(embed_dim, hidden, bias=bias, approximate=approximate)
        else:
            self.ln2 = self.mlp = None
        self.drop = nn.Dropout(self.dropout)

    @property
    def embed_dim(self) -> int:
        """``E``, the size of the vectors the block reads and writes."""
        return self.attn.embed_dim

    @property
    def num_heads(self) -> int:
        """``H``, the number of attention heads."""
        return self.attn.num_heads

    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | None = None,
        cache: Cache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention, then the MLP, each added to ``x``; returns ``(x, weights or None)``.

        The arguments are checked here, once; the attention layer inside does not check them
        again.
        """
        check_tensor("x", x, (2, 3))
        check_module_input("x", x, self.attn.out_proj.weight)
        if x.shape[-1] != self.embed_dim:
            n = f"N={x.shape[0]}, " if x.dim() == 3 else ""
            raise ValueError(
                f"x must have shape ({n}L, E={self.embed_dim}); got {shape_str(x.shape)}"
            )
        if isinstance(self.attn, LinearAttention):
            if mask is not None:
                raise ValueError(
                    "mask must be None for a linear-attention block: it is causal by "
                    "construction (each token reads the state of the tokens before it)"
                )
            if cache is not None and not isinstance(cache, StateCache):
                raise TypeError(
                    "cache must be an attnlib.linear_attention.StateCache for a "
                    f"linear-attention block; got {type(cache).__name__}"
                )
        else:
            _check_cache(cache, None, None, mask, self.attn)
        if cache is not None:
            kv_heads, key_dim = _cached_key_shape(self.attn)
            check_cache_fits(
                "cache",
                cache,
                N=x.shape[0] if x.dim() == 3 else 1,
                kv_heads=kv_heads,
                head_dim=key_dim,
                dtype=x.dtype,
                device=x.device,
                hint="a cache belongs to one layer and one batch; start a new KVCache()",
            )
        if mask is not None:
            N, L, H = x.shape[:-2], x.shape[-2], self.num_heads
            if x.dim() == 3 and isinstance(mask, Tensor) and mask.dim() == 3:  # (N, L, S)
                check_mask(mask, (*N, L, L), "(L, S), (N, L, S) or (N, H, L, S)", x.device)
                mask = mask.unsqueeze(1)  # (N, 1, L, S)
            else:
                allowed = "(L, S), (N, L, S) or (N, H, L, S)" if N else "(L, S) or (H, L, S)"
                check_mask(mask, (*N, H, L, L), allowed, x.device)
        return self._forward(x, mask, cache, need_weights)

    def _forward(self, x, mask, cache, need_weights):
        """The block without the checks (:class:`LanguageModel` calls it)."""
        batched = x.dim() == 3
        x = x if batched else x.unsqueeze(0)  # (N, L, E)
        if mask is not None:
            mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # 4-D
        y = self.ln1(x)  # (N, L, E)
        if isinstance(self.attn, LinearAttention):  # causal by construction: no mask
            attended, weights = self.attn._forward(y, cache), None
        elif isinstance(self.attn, MultiHeadLatentAttention):  # absorbed when decoding
            attended, weights = self.attn._forward(y, mask, need_weights, cache, cache is not None)
        else:
            attended, weights = self.attn._forward(y, y, y, mask, need_weights, cache)
        # attended: (N, L, E); weights: (N, H, L, S) or None
        x = x + self.drop(attended)
        if self.mlp is not None:
            x = x + self.drop(self.mlp(self.ln2(x)))  # (N, L, E)
        if not batched:
            x = x.squeeze(0)  # (L, E)
            weights = None if weights is None else weights.squeeze(0)  # (H, L, S)
        return x, weights


class ModelCache:
    """One key-value cache per layer of a :class:`LanguageModel`.

    Made by :meth:`LanguageModel.new_cache`; pass it to :meth:`LanguageModel.forward` as
    ``cache=`` with the new tokens only. It holds ``2 * layers * N * G * S * D`` numbers:
    :attr:`nbytes`.

    Args:
        layers: the number of layers, each given a :class:`attnlib.decoding.KVCache`, or the
            list of per-layer caches (any :class:`attnlib.decoding.Cache`: a
            ``PreallocatedCache``, a ``RollingCache`` for a local layer, ...).
        window: with a number of layers, keep only the last ``window`` positions in every
            layer (sliding-window attention); ``None`` keeps all.

    Attributes:
        layers: the list of per-layer caches.

    A model takes only a cache made for it (:meth:`LanguageModel.forward` raises otherwise):
    as many layers as it has blocks, each cache with the window of its layer (a layer
    without a window also takes a :class:`attnlib.decoding.SinkCache`, StreamingLLM's
    approximation chosen on purpose), and, once filled, keys of its heads, head size, dtype
    and device for the same batch of sequences.

    Raises:
        TypeError: if ``layers`` is neither an ``int`` nor a list of caches.
        ValueError: if ``layers`` or ``window`` is not a positive integer, the list is empty,
            or ``window`` is given with a list.

    Example:
        >>> cache = ModelCache(2)
        >>> cache.length, cache.nbytes, len(cache.layers)
        (0, 0, 2)
        >>> from attnlib.decoding import PreallocatedCache, RollingCache
        >>> ModelCache([RollingCache(16), PreallocatedCache(64)]).windows
        (16, None)
    """

    def __init__(self, layers: int | list[Cache], *, window: int | None = None):
        if isinstance(layers, (list, tuple)):
            if window is not None:
                raise ValueError(
                    "window must be None when layers is a list of caches (each cache has its "
                    f"own window); got window={window!r}"
                )
            if not layers or not all(isinstance(c, Cache) for c in layers):
                raise TypeError(
                    "layers must be a number of layers or a non-empty list of "
                    "attnlib.decoding.Cache objects; got "
                    f"[{', '.join(type(c).__name__ for c in layers)}]"
                )
            self.layers = list(layers)
        else:
            layers = check_int("layers", layers, low=1)
            self.layers = [KVCache(window=window) for _ in range(layers)]

    @property
    def length(self) -> int:
        """The number of tokens seen so far, which is the position of the next token."""
        return self.layers[0].length

    @property
    def window(self) -> int | None:
        """The window of the first layer (``None``: all positions); see :attr:`windows`."""
        return self.layers[0].window

    @property
    def windows(self) -> tuple[int | None, ...]:
        """Each layer's window (``None``: all positions)."""
        return tuple(layer.window for layer in self.layers)

    @property
    def nbytes(self) -> int:
        """Bytes held by the caches of every layer."""
        return sum(layer.nbytes for layer in self.layers)

    def __repr__(self) -> str:
        return f"ModelCache(layers={len(self.layers)}, length={self.length}, nbytes={self.nbytes})"


def _latent_attention(E, H, latent_dim, bias, dropout, num_kv_heads, positions):
    """The block's :class:`MultiHeadLatentAttention`, its RoPE key ``D / 2`` wide with RoPE."""
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


def _cached_key_shape(attn) -> tuple[int, int]:
    """``(G, D)`` of the keys a layer's cache holds: the key/value heads and their size, or
    one shared RoPE key of ``rope_dim`` for latent attention."""
    if isinstance(attn, MultiHeadLatentAttention):
        return 1, attn.rope_dim
    if isinstance(attn, LinearAttention):  # a StateCache's "key" is the state (N, H, D, D)
        return attn.num_heads, attn.head_dim
    return attn.num_kv_heads, attn.head_dim


def _check_positions(positions):
    """The scheme object for the attention of a model's ``positions`` (not added ones)."""
    try:
        return _position_scheme(positions)
    except ValueError:
        raise ValueError(
            "positions must be one of 'learned', 'sinusoidal', 'rope', 'alibi', None, or an "
            f"attnlib.positions.Rotary or ALiBi object; got {positions!r}"
        ) from None


def _check_linear(linear, num_layers: int) -> tuple[str | None, ...]:
    """Each layer's linear-attention rule (``None``: softmax) from ``linear``."""
    rules = ("linear", "delta", "gated_delta")
    per_layer = list(linear) if isinstance(linear, (list, tuple)) else [linear] * num_layers
    if len(per_layer) != num_layers or any(r is not None and r not in rules for r in per_layer):
        raise ValueError(
            f"linear must be None, one of {', '.join(map(repr, rules))}, or a list of one of "
            f"them or None per layer ({num_layers}); got {linear!r}"
        )
    return tuple(per_layer)


def _check_windows(window, num_layers: int):
    """``window`` as given (an int or ``None``, or a tuple) and one window per layer."""
    if isinstance(window, (list, tuple)):
        if len(window) != num_layers:
            raise ValueError(
                f"window must give one window per layer ({num_layers}) when it is a list; got "
                f"{len(window)}: {window!r}"
            )
        windows = tuple(None if w is None else check_int("window", w, low=1) for w in window)
        return windows, windows
    window = None if window is None else check_int("window", window, low=1)
    return window, (window,) * num_layers


def _temper(logits: Tensor, temperature: float) -> Tensor:
    """``logits / temperature``; where a tiny temperature makes that overflow (``inf``, then
    NaN probabilities), each logit's distance to the largest is divided instead, in float64:
    the same softmax, with every value ``<= 0`` whatever the temperature (a temperature near 0
    then leaves all the probability on the largest logits, as greedy decoding does)."""
    scaled = logits / temperature  # (N, V)
    if bool(torch.isfinite(scaled).all()) or not bool(torch.isfinite(logits).all()):
        return scaled
    logits = logits.double()
    return (logits - logits.amax(dim=-1, keepdim=True)) / temperature  # (N, V), <= 0


class LanguageModel(nn.Module):
    """A causal (GPT-style) language model: embed, ``num_layers`` blocks, predict the next token.

    .. math::

        \\begin{aligned}
        h_0 &= E_{\\text{tok}}[\\text{ids}] + P, \\qquad
        h_\\ell = \\operatorname{Block}_\\ell(h_{\\ell-1}) \\;\\; (\\text{causal}), \\\\
        \\text{logits} &= \\operatorname{LN}_f(h_{\\text{layers}})\\, W_U, \\qquad
        W_U = E_{\\text{tok}}^\\top \\text{ when the weights are tied}
        \\end{aligned}

    Position ``t``'s logits score every word of the vocabulary as the token at ``t + 1``, from
    tokens ``0 .. t`` only (a causal mask in every layer).

    Args:
        vocab_size: ``V``.
        embed_dim: ``E``, the size of every token vector.
        num_heads: ``H`` heads in every layer.
        num_layers: how many :class:`TransformerBlock`.
        max_len: the longest sequence for ``"learned"`` and ``"sinusoidal"`` positions (their
            tables have ``max_len`` rows); other schemes take any length.
        positions: how the model knows where a token is: ``"learned"`` (a trained vector per
            position, added to the token vectors, GPT-2), ``"sinusoidal"``
            (:func:`attnlib.positions.sinusoidal_encoding`, added), ``"rope"`` or ``"alibi"``
            (inside every attention, see :class:`attnlib.MultiHeadAttention`), or ``None`` (no
            position information beyond the causal mask).
        mlp_ratio: the blocks' MLP width over ``E``; 0 for attention-only blocks.
        dropout: dropout on the embeddings and in every block, in training mode only.
        window: sliding-window attention: position ``t`` sees tokens ``t - window + 1 .. t``
            only (:func:`attnlib.decoding.sliding_window_mask`); ``None``: all tokens before
            it. ``window=1`` leaves attention nothing to mix: each position sees only itself.
            A list or tuple gives each layer its own window: local and global layers, as
            Gemma 3's five local layers to one global, ``(w, w, w, w, w, None) * k``, or
            gpt-oss' alternation ``(w, None) * k``.
        embeddings: a ``(V, E)`` tensor that initialises the token embeddings (for example the
            GloVe vectors of the vocabulary's words); default: a normal draw, std 0.02.
        freeze_embeddings: keep the token embeddings fixed (``requires_grad=False``).
        tie_weights: read the logits out with the token embeddings, ``W_U = E_tok^T``
            (Press and Wolf, 2017); otherwise a separate ``Linear(E, V)`` without bias.
        bias, norm_eps, activation, latent_dim, qk_norm, softcap, sink, gate: as
            :class:`TransformerBlock`.
        linear: a rule (``"linear"``, ``"delta"``, ``"gated_delta"``) for linear-attention
            layers (:class:`attnlib.linear_attention.LinearAttention`), or a list with a rule or
            ``None`` (softmax attention) per layer: a hybrid, as Qwen3-Next's three Gated
            DeltaNet layers to one of attention, ``("gated_delta",) * 3 + (None,)``. The
            options of softmax attention (positions inside attention, ``latent_dim``,
            ``qk_norm``, ...) go to its softmax layers only; a linear layer gives ``None``
            for its weights and decodes with a fixed-size
            :class:`attnlib.linear_attention.StateCache`.

    Attributes:
        token_embedding: ``nn.Embedding(V, E)``.
        position_embedding: ``nn.Embedding(max_len, E)`` with ``"learned"``, else ``None``.
        blocks: ``nn.ModuleList`` of the blocks.
        ln_f: the final ``nn.LayerNorm(E)``.
        lm_head: ``nn.Linear(E, V, bias=False)``; its weight *is* ``token_embedding.weight``
            when tied.

    Shape:
        - ``ids``: ``(L,)`` or ``(N, L)`` integers in ``0 .. V-1``, ``int64`` or ``int32``.
        - logits: ``(L, V)`` or ``(N, L, V)``.
        - weights: with ``need_weights=True`` a list, one ``(H, L, S)`` or ``(N, H, L, S)``
          tensor per layer (``None`` for a linear-attention layer), else ``None``. ``S = L``
          without a cache.

    Raises:
        ValueError: if a size is not a positive integer, ``positions`` is not one of the five,
            ``embeddings`` is not ``(V, E)``, ``ids`` holds an index outside ``0 .. V-1``, a
            sequence is longer than ``max_len`` with ``"learned"`` or ``"sinusoidal"`` positions,
            or ``cache`` was not made for this model and these ids: another number of layers,
            another ``window`` (``ModelCache(num_layers)`` for a model with a window), layers
            that saw different numbers of tokens, or kept keys of other heads, head size, batch
            size or device (make it with :meth:`new_cache`).
        TypeError: if ``ids`` is not an ``int64`` or ``int32`` tensor (``uint8`` and ``bool``
            index tensors are masks in PyTorch; ``int8``, ``int16`` are refused too),
            ``embeddings`` not a float tensor, ``cache`` not a :class:`ModelCache`, or its kept
            keys have another dtype than the model.

    ``ids`` with no token, ``(N, 0)``, give empty logits ``(N, 0, V)`` (with a cache: an empty
    step that leaves it as it was). The model checks its arguments once and runs its blocks'
    private forward, so a forward hook registered on a block itself does not run (hooks on the
    model and on a block's parts, ``ln1``, ``mlp``, ... do).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> lm = LanguageModel(100, 12, 3, 2, max_len=16).eval()
        >>> ids = torch.tensor([[5, 17, 42]])
        >>> logits, weights = lm(ids, need_weights=True)
        >>> logits.shape, len(weights), weights[0].shape
        (torch.Size([1, 3, 100]), 2, torch.Size([1, 3, 3, 3]))
        >>> lm.generate(ids, 4, temperature=0).shape
        torch.Size([1, 7])
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        num_heads: int,
        num_layers: int,
        *,
        max_len: int,
        positions: str | None = "learned",
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        window: int | None | list[int | None] | tuple[int | None, ...] = None,
        embeddings: Tensor | None = None,
        freeze_embeddings: bool = False,
        tie_weights: bool = True,
        bias: bool = True,
        norm_eps: float = 1e-5,
        activation: str = "gelu",
        latent_dim: int | None = None,
        qk_norm: bool = False,
        softcap: float | None = None,
        sink: bool = False,
        gate: bool = False,
        linear: str | None | list[str | None] | tuple[str | None, ...] = None,
    ):
        super().__init__()
        vocab_size, embed_dim, num_heads, num_layers, max_len = check_sizes(
            vocab_size=vocab_size,
            embed_dim=embed_dim,
            num_heads=num_heads,
            num_layers=num_layers,
            max_len=max_len,
        )
        inside = None if positions in ADDED else _check_positions(positions)
        self.vocab_size, self.max_len, self.positions = vocab_size, max_len, positions
        self.tie_weights = tie_weights
        self.window, self.windows = _check_windows(window, num_layers)
        self.linear = _check_linear(linear, num_layers)
        for i, (rule, w) in enumerate(zip(self.linear, self.windows)):
            if rule is not None and w is not None:
                raise ValueError(
                    f"window must be None for a linear-attention layer (its state is its "
                    f"memory); got window={w} and linear={rule!r} in layer {i}"
                )
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = None
        if positions == "learned":
            self.position_embedding = nn.Embedding(max_len, embed_dim)
        elif positions == "sinusoidal":
            if embed_dim % 2:
                raise ValueError(
                    f"positions='sinusoidal' needs an even embed_dim; got embed_dim={embed_dim}"
                )
            table = sinusoidal_encoding(max_len, embed_dim)  # (max_len, E)
            self.register_buffer("position_encoding", table, persistent=False)
        self.drop = nn.Dropout(check_dropout("dropout", dropout))
        self.blocks = nn.ModuleList(
            TransformerBlock(
                embed_dim,
                num_heads,
                mlp_ratio=mlp_ratio,
                dropout=dropout,
                bias=bias,
                norm_eps=norm_eps,
                activation=activation,
                # a linear layer takes no option of softmax attention (the block refuses them)
                **(
                    {"linear": rule}
                    if rule is not None
                    else {
                        "positions": inside,
                        "latent_dim": latent_dim,
                        "qk_norm": qk_norm,
                        "softcap": softcap,
                        "sink": sink,
                        "gate": gate,
                    }
                ),
            )
            for rule in self.linear
        )
        self.ln_f = nn.LayerNorm(embed_dim, eps=norm_eps, bias=bias)
        self.lm_head = nn.Linear(embed_dim, vocab_size, bias=False)
        self.apply(self._init_weights)
        for block in self.blocks:  # _init_weights zeroed the decay's bias: alpha near 0.95 again
            if isinstance(block.attn, LinearAttention) and block.attn.decay_proj is not None:
                nn.init.constant_(block.attn.decay_proj.bias, 3.0)
        if embeddings is not None:
            if not isinstance(embeddings, Tensor) or not embeddings.is_floating_point():
                raise TypeError(
                    "embeddings must be a float torch.Tensor of shape (V, E); got "
                    f"{getattr(embeddings, 'dtype', type(embeddings).__name__)}"
                )
            if embeddings.shape != (vocab_size, embed_dim):
                raise ValueError(
                    f"embeddings must have shape (V={vocab_size}, E={embed_dim}); got "
                    f"{shape_str(embeddings.shape)}"
                )
            with torch.no_grad():
                self.token_embedding.weight.copy_(embeddings)
        if tie_weights:
            self.lm_head.weight = self.token_embedding.weight  # (V, E), one tensor
        self.token_embedding.weight.requires_grad_(not freeze_embeddings)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """GPT-2's initialisation: normal, std 0.02, zero biases (LayerNorm: ones, zeros)."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

    @property
    def num_layers(self) -> int:
        """The number of blocks."""
        return len(self.blocks)

    def new_cache(self) -> ModelCache:
        """An empty :class:`ModelCache` for this model: a :class:`attnlib.decoding.KVCache`
        per layer, keeping the layer's ``window`` positions if it has a window. For another
        kind of cache pass ``ModelCache([...])``, one cache per layer."""
        return ModelCache(
            [
                StateCache() if rule is not None else KVCache(window=w)
                for rule, w in zip(self.linear, self.windows)
            ]
        )

    def _check_length(self, total: int, what: str) -> None:
        if self.positions in ADDED and total > self.max_len:
            raise ValueError(
                f"{what} must be at most max_len={self.max_len} tokens with "
                f"positions={self.positions!r} (the position table has max_len rows); got {total}"
            )

    def forward(
        self, ids: Tensor, *, cache: ModelCache | None = None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor] | None]:
        """Logits for the token after each position; returns ``(logits, weights or None)``.

        With ``cache=`` (from :meth:`new_cache`), ``ids`` holds only the new tokens: their keys
        and values are appended to the cache and they attend to everything it keeps. The
        arguments are checked here, once (see the class docstring for the errors); the blocks
        do not check them again.
        """
        check_ids(ids, self.vocab_size)
        if cache is not None:
            attn = self.blocks[0].attn
            kv_heads, key_dim = _cached_key_shape(attn)
            check_model_cache(
                cache,
                ModelCache,
                num_layers=self.num_layers,
                windows=self.windows,
                N=ids.shape[0] if ids.dim() == 2 else 1,
                kv_heads=kv_heads,
                head_dim=key_dim,
                dtype=attn.out_proj.weight.dtype,
                device=attn.out_proj.weight.device,
            )
            for i, (layer, rule) in enumerate(zip(cache.layers, self.linear)):
                if isinstance(layer, StateCache) != (rule is not None):
                    what = f"linear={rule!r}" if rule else "softmax attention"
                    raise TypeError(
                        f"cache must hold a StateCache for each linear-attention layer and a "
                        f"key-value cache for each softmax layer; got {type(layer).__name__} "
                        f"in layer {i} ({what}): start a new one with model.new_cache()"
                    )
        start = 0 if cache is None else cache.length
        self._check_length(start + ids.shape[-1], "the sequence (ids plus the cached tokens)")
        return self._forward(ids, cache, need_weights)

    def _forward(self, ids, cache, need_weights):
        """The model without the checks (:meth:`generate` calls it at every step); the blocks'
        private ``_forward`` does not check again."""
        batched = ids.dim() == 2
        ids = ids if batched else ids.unsqueeze(0)  # (N, L)
        L = ids.shape[1]
        start = 0 if cache is None else cache.length
        x = self.token_embedding(ids)  # (N, L, E)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(start, start + L, device=ids.device))
        elif self.positions == "sinusoidal":
            x = x + self.position_encoding[start : start + L].to(x.dtype)  # (L, E)
        x = self.drop(x)
        masks = {}  # window -> (1, 1, L, L) mask; with a cache, the cache masks
        if cache is None:
            for window in set(self.windows):
                if window is None:
                    mask = _causal_mask(L, L, ids.device)  # (L, L); L may be 0
                else:
                    mask = _sliding_window_mask(L, window, L, ids.device)  # (L, L)
                masks[window] = mask.view(1, 1, L, L)  # (1, 1, L, L): the blocks' 4-D mask
        layer_caches = [None] * self.num_layers if cache is None else cache.layers
        weights = []
        for block, window, layer_cache in zip(self.blocks, self.windows, layer_caches):
            mask = masks.get(window) if cache is None else None
            x, w = block._forward(x, mask, layer_cache, need_weights)  # (N, L, E)
            weights.append(w)  # (N, H, L, S) or None
        logits = self.lm_head(self.ln_f(x))  # (N, L, V)
        if not batched:
            logits = logits.squeeze(0)  # (L, V)
            if need_weights:  # a linear layer gives None
                weights = [None if w is None else w.squeeze(0) for w in weights]  # (H, L, S)
        return logits, (weights if need_weights else None)

    @torch.no_grad()
    def generate(
        self,
        ids: Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
        use_cache: bool = True,
    ) -> Tensor:
        """Append ``max_new_tokens`` tokens to ``ids``, one at a time; returns all the ids.

        Each step turns the last position's logits into probabilities,
        ``softmax(logits / temperature)``, keeps the ``top_k`` most likely tokens (if given)
        and draws one with ``torch.multinomial`` (``generator`` makes it repeatable).
        ``temperature=0`` is greedy: the most likely token, no draw. With ``use_cache=True``
        the prompt goes through once and every later step feeds only the newest token
        (a :class:`ModelCache`); with ``False`` every step recomputes the whole sequence. Both
        give the same tokens. The model runs in eval mode (no dropout) and is put back in
        its mode afterwards.

        Args:
            ids: the prompt, ``(L,)`` or ``(N, L)``, at least one token.
            max_new_tokens: how many tokens to append, ``>= 0``.
            temperature: ``>= 0``; below 1 sharpens the distribution, above 1 flattens it.
                Any positive float works: where ``logits / temperature`` would overflow (a
                temperature such as ``1e-38``), the differences to the largest logit are
                divided instead, which gives the same probabilities without ``inf``.
            top_k: sample among the ``k`` most likely tokens only (``k >= 1``); ``None``: all.
            generator: a ``torch.Generator`` for the draws.
            use_cache: decode with a key-value cache.

        Returns:
            ``(L + max_new_tokens,)`` or ``(N, L + max_new_tokens)`` ids.

        Raises:
            ValueError: if ``ids`` is empty or holds an index outside ``0 .. V-1``,
                ``max_new_tokens`` is negative, ``temperature`` negative, ``top_k < 1``, or the
                model would have to read more than ``max_len`` tokens (``L + max_new_tokens -
                1``) with ``"learned"``/``"sinusoidal"`` positions.
            TypeError: if ``ids`` is not an ``int64`` or ``int32`` tensor, or ``temperature`` or
                ``top_k`` has the wrong type.
        """
        check_ids(ids, self.vocab_size)
        if ids.shape[-1] == 0:
            raise ValueError("ids must hold at least one token to continue; got an empty prompt")
        max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=0)
        temperature = check_real(
            "temperature",
            temperature,
            "a finite number >= 0 (0 = greedy)",
            lambda t: t >= 0 and math.isfinite(t),
        )
        if top_k is not None:
            top_k = check_int("top_k", top_k, low=1, what="an int >= 1 (or None for all tokens)")
        # the last new token is never fed back: the model reads at most L + max_new_tokens - 1
        self._check_length(
            max(ids.shape[-1], ids.shape[-1] + max_new_tokens - 1), "ids plus max_new_tokens - 1"
        )
        was_training = self.training
        self.eval()
        try:
            return self._generate(ids, max_new_tokens, temperature, top_k, generator, use_cache)
        finally:
            self.train(was_training)

    def _generate(self, ids, max_new_tokens, temperature, top_k, generator, use_cache):
        batched = ids.dim() == 2
        ids = ids if batched else ids.unsqueeze(0)  # (N, L)
        cache = self.new_cache() if use_cache else None
        step_input = ids
        for _ in range(max_new_tokens):
            logits, _ = self._forward(step_input if use_cache else ids, cache, False)
            last = logits[:, -1]  # (N, V)
            if temperature == 0:
                token = last.argmax(dim=-1, keepdim=True)  # (N, 1)
            else:
                last = _temper(last, temperature)  # (N, V), finite where the logits are
                if top_k is not None and top_k < last.shape[-1]:
                    kth = last.topk(top_k, dim=-1).values[:, -1:]  # (N, 1)
                    last = last.masked_fill(last < kth, -math.inf)
                probs = torch.softmax(last.double(), dim=-1)  # (N, V), float64: exact draws
                token = torch.multinomial(probs, 1, generator=generator)  # (N, 1)
            ids = torch.cat([ids, token], dim=1)  # (N, L + t + 1)
            step_input = token
        return ids if batched else ids.squeeze(0)
