"""Cross-attention: Bahdanau's additive score, a decoder block, and an encoder-decoder model.

Self-attention reads one sequence. *Cross-attention* reads another: the queries come from the
sequence being written (the target), the keys and values from the sequence being read (the
source). Attention was born this way, in the translation model of Bahdanau et al. (2015),
whose score of a decoder state ``q`` and an encoder state ``k`` is *additive*:

.. math::

    e(q, k) = v^\\top \\tanh(W_q q + W_k k)

(:class:`AdditiveAttention`). The Transformer (Vaswani et al., 2017) is an encoder-decoder
too, with the scaled dot product: each :class:`DecoderBlock` attends causally to the target
so far, then across to the encoder's output, then applies its MLP. :class:`EncoderDecoder`
stacks them between embeddings and a read-out, and :meth:`EncoderDecoder.generate` computes
the encoder's keys and values **once** per source, caching the decoder's own keys and values
step by step. :func:`attnlib.convert.decoder_block_from_torch` and
:func:`attnlib.convert.encoder_decoder_to_torch` move the weights to and from
``nn.TransformerDecoderLayer`` and ``nn.Transformer`` (``norm_first=True``, GELU).

Masks follow attnlib: ``True`` = may attend. A *source mask* ``(N, S)`` marks the real tokens
of each source (``False`` = padding), the opposite of PyTorch's ``src_key_padding_mask``. The
padding may sit on either side (or both): a real token's position is the number of real tokens
before it, so a source padded on the left gives the numbers of the same source unpadded.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlib._checks import (
    check_dropout,
    check_ids,
    check_int,
    check_mask,
    check_module_input,
    check_sizes,
    check_tensor,
    shape_str,
    values_unreadable,
)
from attnlib.attention import _attend, _causal_mask
from attnlib.decoding import KVCache
from attnlib.multihead import MultiHeadAttention
from attnlib.positions import sinusoidal_encoding
from attnlib.transformer import TransformerBlock, _check_activation, _check_ratio, _mlp

__all__ = ["AdditiveAttention", "DecoderBlock", "EncoderDecoder"]


class AdditiveAttention(nn.Module):
    """Bahdanau's additive attention: a small network scores each query against each key.

    .. math::

        e_{ij} = v^\\top \\tanh(W_q q_i + W_k k_j), \\qquad
        \\alpha_{ij} = \\operatorname{softmax}_j(e_{ij}), \\qquad
        o_i = \\textstyle\\sum_j \\alpha_{ij} \\, \\text{value}_j

    Queries and keys may have different sizes: each is mapped to ``hidden_dim`` first. The
    score is a sum passed through ``tanh``, not a product, so it needs no scaling (Bahdanau,
    Cho and Bengio, 2015; d2l's ``AdditiveAttention``).

    Args:
        query_dim: ``D_q``, the size of a query.
        key_dim: ``D_k``, the size of a key.
        hidden_dim: ``A``, the width of the scoring network.
        bias: biases in ``W_q`` and ``W_k`` (Bahdanau's have none).

    Attributes:
        q_proj: ``nn.Linear(D_q, A)``.
        k_proj: ``nn.Linear(D_k, A)``.
        v: ``nn.Linear(A, 1, bias=False)``, the vector ``v``.

    Shape:
        - ``query``: ``(N, L, D_q)``; ``key``: ``(N, S, D_k)``; ``value``: ``(N, S, D_v)``.
        - ``mask``: boolean (``True`` = may attend) broadcastable to ``(N, L, S)``, e.g. a
          source mask ``(N, 1, S)``.
        - output: ``(N, L, D_v)``; weights: ``(N, L, S)``, each row summing to 1.

    Raises:
        ValueError: if a size is not a positive integer, the inputs are not 3-D, their sizes
            or batch sizes do not match, or ``mask`` has the wrong shape.
        TypeError: if an input is not a float tensor of the module's dtype, or ``mask`` is not
            boolean.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> attn = AdditiveAttention(6, 8, 5)
        >>> q, k = torch.randn(2, 3, 6), torch.randn(2, 4, 8)
        >>> out, weights = attn(q, k, k)
        >>> out.shape, weights.shape, torch.allclose(weights.sum(-1), torch.ones(2, 3))
        (torch.Size([2, 3, 8]), torch.Size([2, 3, 4]), True)
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int, *, bias: bool = False):
        super().__init__()
        query_dim, key_dim, hidden_dim = check_sizes(
            query_dim=query_dim, key_dim=key_dim, hidden_dim=hidden_dim
        )
        self.q_proj = nn.Linear(query_dim, hidden_dim, bias=bias)
        self.k_proj = nn.Linear(key_dim, hidden_dim, bias=bias)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, *, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """The attention of ``query`` over ``key``; returns ``(output, weights)``."""
        for name, t, size in (
            ("query", query, self.q_proj.in_features),
            ("key", key, self.k_proj.in_features),
            ("value", value, None),
        ):
            check_tensor(name, t, (3,))
            check_module_input(name, t, self.v.weight)
            if size is not None and t.shape[-1] != size:
                raise ValueError(f"{name} must have shape (N, ., {size}); got {shape_str(t.shape)}")
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(
                "query, key and value must have the same batch size N, and key and value the "
                f"same length S; got query {shape_str(query.shape)}, key {shape_str(key.shape)}, "
                f"value {shape_str(value.shape)}"
            )
        N, L, S = query.shape[0], query.shape[1], key.shape[1]
        if mask is not None:
            check_mask(mask, (N, L, S), "(N, L, S) or (N, 1, S)", query.device)
            if mask.dtype != torch.bool:
                raise TypeError(f"mask must be boolean (True = may attend); got {mask.dtype}")
        return self._forward(query, key, value, mask)

    def _forward(self, query, key, value, mask):
        hidden = self.q_proj(query).unsqueeze(2) + self.k_proj(key).unsqueeze(1)  # (N, L, S, A)
        scores = self.v(torch.tanh(hidden)).squeeze(-1)  # (N, L, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)
        weights = torch.softmax(scores, dim=-1)  # (N, L, S)
        return weights @ value, weights  # (N, L, D_v), (N, L, S)


class DecoderBlock(nn.Module):
    """A pre-LayerNorm decoder block: causal self-attention, cross-attention to the encoder's
    output (the *memory*), then an MLP, each added to its input.

    .. math::

        \\begin{aligned}
        x &\\leftarrow x + \\operatorname{MultiHead}(\\operatorname{LN}_1(x))
            \\quad \\text{(self, causal)}, \\\\
        x &\\leftarrow x + \\operatorname{MultiHead}(\\operatorname{LN}_2(x),\\,
            \\text{memory},\\, \\text{memory}) \\quad \\text{(cross)}, \\\\
        x &\\leftarrow x + \\operatorname{MLP}(\\operatorname{LN}_3(x))
        \\end{aligned}

    The same numbers as ``nn.TransformerDecoderLayer(E, H, r*E, activation="gelu",
    batch_first=True, norm_first=True)`` given the same weights
    (:func:`attnlib.convert.decoder_block_from_torch`). In cross-attention the queries are the
    target's positions and the keys and values the source's: its weights are ``(L, S)``, one
    row per target position, one column per source token.

    Args:
        embed_dim: ``E`` (the encoder's output has the same width).
        num_heads: ``H``; must divide ``E``.
        mlp_ratio: the MLP's hidden width over ``E``.
        dropout: on the attention weights and each added term, in training mode only.
        bias: biases in every linear map and LayerNorm.
        norm_eps: the LayerNorms' ``eps``.
        activation: ``"gelu"`` or ``"gelu_tanh"``, as :class:`attnlib.TransformerBlock`.

    Attributes:
        ln1: ``nn.LayerNorm(E)`` before self-attention.
        ln2: ``nn.LayerNorm(E)`` before cross-attention.
        ln3: ``nn.LayerNorm(E)`` before the MLP.
        self_attn: :class:`attnlib.MultiHeadAttention` ``(E, H)``.
        cross_attn: :class:`attnlib.MultiHeadAttention` ``(E, H)``: queries from the target,
            keys and values from the memory.
        mlp: ``nn.Sequential(Linear(E, rE), GELU(), Linear(rE, E))``.

    Shape:
        - ``x``: ``(N, L, E)``; ``memory``: ``(N, S, E)``; output: ``(N, L, E)``.
        - ``mask``: self-attention's, boolean or float, ``(L, L)``, ``(N, L, L)`` or
          ``(N, H, L, L)``; ``None`` means **no** mask (pass :func:`attnlib.causal_mask`).
        - ``memory_mask``: cross-attention's, ``(L, S)``, ``(N, L, S)``, ``(N, H, L, S)``, or
          ``(N, 1, 1, S)`` for a source padding mask.
        - weights: with ``need_weights=True`` a pair ``(self (N, H, L, L), cross (N, H, L,
          S))``, else ``None``.

    Raises:
        ValueError: if a size is not a positive integer, ``E`` is not divisible by ``H``,
            ``x`` or ``memory`` is not 3-D of width ``E`` or their batch sizes differ, or a mask
            has the wrong shape.
        TypeError: if ``x`` or ``memory`` is not a float tensor of the block's dtype, or a mask
            is neither boolean nor float.

    Example:
        >>> from attnlib import causal_mask
        >>> _ = torch.manual_seed(0)
        >>> block = DecoderBlock(12, 3).eval()
        >>> x, memory = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
        >>> y, (self_w, cross_w) = block(x, memory, mask=causal_mask(5), need_weights=True)
        >>> y.shape, self_w.shape, cross_w.shape
        (torch.Size([2, 5, 12]), torch.Size([2, 3, 5, 5]), torch.Size([2, 3, 5, 7]))
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
        activation: str = "gelu",
    ):
        super().__init__()
        embed_dim = check_int("embed_dim", embed_dim, low=1)
        approximate = _check_activation(activation)
        self.activation = activation
        self.mlp_ratio = _check_ratio(mlp_ratio)
        self.dropout = check_dropout("dropout", dropout)
        E = embed_dim
        self.ln1, self.ln2, self.ln3 = (nn.LayerNorm(E, eps=norm_eps, bias=bias) for _ in range(3))
        self.self_attn = MultiHeadAttention(E, num_heads, bias=bias, dropout=dropout)
        self.cross_attn = MultiHeadAttention(E, num_heads, bias=bias, dropout=dropout)
        hidden = round(self.mlp_ratio * E)
        if not hidden:
            raise ValueError(
                f"mlp_ratio must give a hidden width round(mlp_ratio * E) >= 1 (a decoder block "
                f"has an MLP, as nn.TransformerDecoderLayer); got mlp_ratio={mlp_ratio}"
            )
        self.mlp = _mlp(E, hidden, bias=bias, approximate=approximate)
        self.drop = nn.Dropout(self.dropout)

    @property
    def embed_dim(self) -> int:
        """``E``, the width of the target and of the memory."""
        return self.self_attn.embed_dim

    @property
    def num_heads(self) -> int:
        """``H``, the heads of each attention."""
        return self.self_attn.num_heads

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """Self-attention, cross-attention to ``memory``, the MLP; returns ``(x, weights)``.
        The arguments are checked here, once."""
        for name, t in (("x", x), ("memory", memory)):
            check_tensor(name, t, (3,))
            check_module_input(name, t, self.mlp[0].weight)
            if t.shape[-1] != self.embed_dim:
                raise ValueError(
                    f"{name} must have shape (N, ., E={self.embed_dim}); got {shape_str(t.shape)}"
                )
        if memory.shape[0] != x.shape[0]:
            raise ValueError(
                f"memory must have the batch size of x (N={x.shape[0]}); got "
                f"{shape_str(memory.shape)}"
            )
        (N, L, _), S, H = x.shape, memory.shape[1], self.num_heads
        if mask is not None:
            allowed = "(L, L), (N, L, L) or (N, H, L, L)"
            mask = _four_d(mask, (N, H, L, L), allowed, x.device)
        if memory_mask is not None:
            allowed = "(L, S), (N, L, S), (N, H, L, S) or (N, 1, 1, S)"
            memory_mask = _four_d(memory_mask, (N, H, L, S), allowed, x.device)
        memory_kv = self.memory_kv(memory)
        return self._forward(x, memory_kv, mask, memory_mask, None, need_weights)

    def memory_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention's keys and values of ``memory`` ``(N, S, E)``, each ``(N, H, S, D)``:
        what :meth:`EncoderDecoder.generate` computes once per source and reuses at every
        step."""
        attn = self.cross_attn
        k = attn._split_heads(attn.k_proj(memory), attn.num_heads)  # (N, H, S, D)
        v = attn._split_heads(attn.v_proj(memory), attn.num_heads)  # (N, H, S, D)
        return k, v

    def _forward(self, x, memory_kv, mask, memory_mask, cache, need_weights):
        """The block without the checks: ``memory_kv`` from :meth:`memory_kv`, masks 4-D or
        ``None``; with ``cache`` (a :class:`attnlib.decoding.KVCache`) ``x`` holds the new
        positions and self-attention is causal over the cache."""
        y = self.ln1(x)  # (N, L, E)
        attended, self_w = self.self_attn._forward(y, y, y, mask, need_weights, cache)
        x = x + self.drop(attended)  # (N, L, E)
        crossed, cross_w = self._cross(self.ln2(x), memory_kv, memory_mask, need_weights)
        x = x + self.drop(crossed)  # (N, L, E)
        x = x + self.drop(self.mlp(self.ln3(x)))  # (N, L, E)
        return x, ((self_w, cross_w) if need_weights else None)

    def _cross(self, y, memory_kv, memory_mask, need_weights):
        """Cross-attention from the target's ``y`` ``(N, L, E)`` to the memory's keys and
        values ``(N, H, S, D)``."""
        attn = self.cross_attn
        N, L, _ = y.shape
        q = attn._split_heads(attn.q_proj(y), attn.num_heads)  # (N, H, L, D)
        k, v = memory_kv
        dropout_p = attn.dropout if self.training else 0.0
        heads, weights = _attend(q, k, v, memory_mask, dropout_p, need_weights)
        heads = heads.transpose(1, 2).reshape(N, L, attn.num_heads * attn.head_dim)  # (N, L, E)
        return attn.out_proj(heads), weights  # (N, L, E), (N, H, L, S) or None


def _four_d(mask: Tensor, target: tuple[int, int, int, int], allowed: str, device) -> Tensor:
    """``mask`` checked against the scores' shape ``target`` ``(N, H, L, S)`` and made 4-D: a
    3-D mask is ``(N, L, S)``, one per sequence for every head; a smaller one leads with 1s."""
    N, _, L, S = target
    if isinstance(mask, Tensor) and mask.dim() == 3:
        check_mask(mask, (N, L, S), allowed, device)
        return mask.unsqueeze(1)  # (N, 1, L, S)
    check_mask(mask, target, allowed, device)
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # 4-D


class EncoderDecoder(nn.Module):
    """A Transformer encoder-decoder: read a source sequence, write a target sequence.

    .. math::

        \\begin{aligned}
        m &= \\operatorname{LN}_{\\text{enc}}(\\operatorname{Enc}_{\\ell}(\\cdots
            \\operatorname{Enc}_1(E_{\\text{src}}[\\text{src}] + P))), \\\\
        h &= \\operatorname{LN}_{\\text{dec}}(\\operatorname{Dec}_{\\ell}(\\cdots
            \\operatorname{Dec}_1(E_{\\text{tgt}}[\\text{tgt}] + P,\\, m))), \\qquad
        \\text{logits} = h\\, W_U
        \\end{aligned}

    The encoder is a stack of :class:`attnlib.TransformerBlock` in which every source token
    sees every real source token (no causal mask); the decoder a stack of
    :class:`DecoderBlock`, causal over the target and reading the encoder's output ``m``
    through cross-attention. ``P`` is the sinusoidal encoding of the original Transformer
    (:func:`attnlib.positions.sinusoidal_encoding`). With a mask, the position of a real token
    is the number of real tokens before it, ``cumsum(mask) - 1``, not its index: padding on
    the left (or on both sides, or between tokens) moves no real token, and the logits and
    memory of the real tokens are those of the unpadded sequence; a padding token keeps its
    index (nothing reads it). Between the embeddings and the read-out the
    model computes what ``nn.Transformer(E, H, ..., activation="gelu", batch_first=True,
    norm_first=True)`` computes (:func:`attnlib.convert.encoder_decoder_to_torch`).

    Args:
        source_vocab: ``V_s``, the source's token ids ``0 .. V_s - 1``.
        target_vocab: ``V_t``.
        embed_dim: ``E``.
        num_heads: ``H`` in every attention.
        num_encoder_layers, num_decoder_layers: the depths.
        max_len: the longest source and the longest target (the position table's rows).
        mlp_ratio, dropout, bias, norm_eps, activation: as :class:`DecoderBlock`, for every
            block; dropout also on the embeddings.

    Attributes:
        source_embedding: ``nn.Embedding(V_s, E)``.
        target_embedding: ``nn.Embedding(V_t, E)``.
        encoder: ``nn.ModuleList`` of :class:`attnlib.TransformerBlock`.
        encoder_norm: ``nn.LayerNorm(E)`` after the encoder.
        decoder: ``nn.ModuleList`` of :class:`DecoderBlock`.
        decoder_norm: ``nn.LayerNorm(E)`` after the decoder.
        lm_head: ``nn.Linear(E, V_t, bias=False)``.

    Shape:
        - ``source``: ``(N, S)`` ids; ``source_mask``: ``(N, S)`` boolean, ``True`` for the real
          tokens, ``False`` for padding, on either side (default: all real).
        - ``target``: ``(N, L)`` ids, starting with the start token; ``target_mask``: ``(N, L)``
          boolean, ``True`` for real tokens, ``False`` for padding on either side (a padded
          position's logits are not a prediction; the real ones are the unpadded target's).
        - logits: ``(N, L, V_t)``, position ``t`` scoring the target's token ``t + 1``.
        - weights, with ``need_weights=True``: a dict of lists, one tensor per layer:
          ``"encoder"`` ``(N, H, S, S)``, ``"decoder"`` ``(N, H, L, L)``, ``"cross"``
          ``(N, H, L, S)``.

    Raises:
        ValueError: if a size is not a positive integer, an id is out of range, ``source`` or
            ``target`` is longer than ``max_len``, empty, or their batch sizes differ, a mask
            does not have the shape of its ids or hides every token of a sequence.
        TypeError: if ids are not ``int64``/``int32`` tensors or a mask is not boolean.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> model = EncoderDecoder(30, 20, 16, 4, 2, 2, max_len=12).eval()
        >>> source = torch.randint(3, 30, (2, 9))
        >>> target = torch.tensor([[1, 5, 6], [1, 7, 8]])
        >>> logits, weights = model(source, target, need_weights=True)
        >>> logits.shape, weights["cross"][0].shape
        (torch.Size([2, 3, 20]), torch.Size([2, 4, 3, 9]))
        >>> model.generate(source, 4, bos_id=1).shape
        torch.Size([2, 5])
    """

    def __init__(
        self,
        source_vocab: int,
        target_vocab: int,
        embed_dim: int,
        num_heads: int,
        num_encoder_layers: int,
        num_decoder_layers: int,
        *,
        max_len: int,
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        bias: bool = True,
        norm_eps: float = 1e-5,
        activation: str = "gelu",
    ):
        super().__init__()
        (
            source_vocab,
            target_vocab,
            embed_dim,
            num_heads,
            num_encoder_layers,
            num_decoder_layers,
            max_len,
        ) = check_sizes(
            source_vocab=source_vocab,
            target_vocab=target_vocab,
            embed_dim=embed_dim,
            num_heads=num_heads,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            max_len=max_len,
        )
        if embed_dim % 2:
            raise ValueError(
                f"embed_dim must be even (sinusoidal positions pair sines and cosines); got "
                f"{embed_dim}"
            )
        E = embed_dim
        self.source_vocab, self.target_vocab, self.max_len = source_vocab, target_vocab, max_len
        self.source_embedding = nn.Embedding(source_vocab, E)
        self.target_embedding = nn.Embedding(target_vocab, E)
        self.register_buffer("position_encoding", sinusoidal_encoding(max_len, E), persistent=False)
        self.drop = nn.Dropout(check_dropout("dropout", dropout))
        options = dict(
            mlp_ratio=mlp_ratio,
            dropout=dropout,
            bias=bias,
            norm_eps=norm_eps,
            activation=activation,
        )
        self.encoder = nn.ModuleList(
            TransformerBlock(E, num_heads, **options) for _ in range(num_encoder_layers)
        )
        self.encoder_norm = nn.LayerNorm(E, eps=norm_eps, bias=bias)
        self.decoder = nn.ModuleList(
            DecoderBlock(E, num_heads, **options) for _ in range(num_decoder_layers)
        )
        self.decoder_norm = nn.LayerNorm(E, eps=norm_eps, bias=bias)
        self.lm_head = nn.Linear(E, target_vocab, bias=False)

    # ---- checks ------------------------------------------------------------------------
    def _check_ids(self, name: str, ids: Tensor, vocab: int) -> None:
        check_ids(ids, vocab, name=name)
        if ids.dim() != 2:
            raise ValueError(
                f"{name} must have shape (N, {name[0].upper()}); got {shape_str(ids.shape)}"
            )
        if not 1 <= ids.shape[1] <= self.max_len:
            raise ValueError(
                f"{name} must hold 1 to max_len={self.max_len} tokens (the position table's "
                f"rows); got {ids.shape[1]}"
            )

    def _check_mask(self, name: str, mask: Tensor | None, ids: Tensor) -> Tensor | None:
        if mask is None:
            return None
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            raise TypeError(
                f"{name} must be a boolean tensor (True = a real token); got "
                f"{getattr(mask, 'dtype', type(mask).__name__)}"
            )
        if mask.shape != ids.shape:
            raise ValueError(
                f"{name} must have the shape of its ids {shape_str(ids.shape)}; got "
                f"{shape_str(mask.shape)}"
            )
        if values_unreadable(mask):  # the test below reads the values
            return mask
        if not mask.any(dim=1).all():
            rows = (~mask.any(dim=1)).nonzero().flatten().tolist()
            raise ValueError(
                f"{name} must keep at least one token of each sequence; rows {rows} keep none"
            )
        return mask

    def _check_source(self, source, source_mask):
        self._check_ids("source", source, self.source_vocab)
        return self._check_mask("source_mask", source_mask, source)

    # ---- the parts ---------------------------------------------------------------------
    def _positions(self, length: int, mask: Tensor | None, start: int = 0) -> Tensor:
        """The position encodings of ``length`` tokens from position ``start``: rows ``start ..
        start + length - 1`` of the table, ``(L, E)``, without ``mask``; with a mask ``(N, L)``,
        a real token's row is ``start`` plus the number of real tokens before it and a padding
        token's ``start`` plus its index, ``(N, L, E)``."""
        if mask is None:
            return self.position_encoding[start : start + length]  # (L, E)
        index = torch.arange(start, start + length, device=mask.device)  # (L,)
        index = torch.where(mask, start + mask.cumsum(1) - 1, index)  # (N, L)
        return self.position_encoding[index]  # (N, L, E)

    def embed_source(self, source: Tensor, *, source_mask: Tensor | None = None) -> Tensor:
        """The encoder's input: token embeddings plus positions, ``(N, S, E)`` (dropout in
        training mode). With ``source_mask`` the positions count real tokens only (a padding
        token keeps its index), as :meth:`forward` does; not checked here."""
        S = source.shape[1]
        return self.drop(self.source_embedding(source) + self._positions(S, source_mask))

    def embed_target(
        self, target: Tensor, start: int = 0, *, target_mask: Tensor | None = None
    ) -> Tensor:
        """The decoder's input for target positions ``start .. start + L - 1``, ``(N, L, E)``;
        with ``target_mask`` the positions count real tokens only (from ``start``), as
        :meth:`forward` does; not checked here."""
        L = target.shape[1]
        return self.drop(self.target_embedding(target) + self._positions(L, target_mask, start))

    def encode(
        self, source: Tensor, *, source_mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor] | None]:
        """The encoder's output (the *memory*), ``(N, S, E)``, and each layer's weights
        ``(N, H, S, S)`` with ``need_weights=True``. With ``source_mask`` the real tokens'
        rows are those of the source without its padding, on whichever side it sits."""
        source_mask = self._check_source(source, source_mask)
        return self._encode(source, source_mask, need_weights)

    def _encode(self, source, source_mask, need_weights):
        x = self.embed_source(source, source_mask=source_mask)  # (N, S, E)
        mask = None if source_mask is None else source_mask[:, None, None, :]  # (N, 1, 1, S)
        weights = []
        for block in self.encoder:
            x, w = block._forward(x, mask, None, need_weights)  # (N, S, E)
            weights.append(w)
        return self.encoder_norm(x), (weights if need_weights else None)

    def forward(
        self,
        source: Tensor,
        target: Tensor,
        *,
        source_mask: Tensor | None = None,
        target_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, dict[str, list[Tensor]] | None]:
        """Logits for each next target token (teacher forcing); returns ``(logits, weights)``.
        The arguments are checked here, once."""
        source_mask = self._check_source(source, source_mask)
        self._check_ids("target", target, self.target_vocab)
        target_mask = self._check_mask("target_mask", target_mask, target)
        if target.shape[0] != source.shape[0]:
            raise ValueError(
                f"target must have the batch size of source (N={source.shape[0]}); got "
                f"{shape_str(target.shape)}"
            )
        memory, encoder_w = self._encode(source, source_mask, need_weights)
        L = target.shape[1]
        mask = _causal_mask(L, L, target.device).view(1, 1, L, L)  # (1, 1, L, L)
        if target_mask is not None:
            mask = mask & target_mask[:, None, None, :]  # (N, 1, L, L): and no padded key
        memory_mask = None if source_mask is None else source_mask[:, None, None, :]
        x = self.embed_target(target, target_mask=target_mask)  # (N, L, E)
        decoder_w, cross_w = [], []
        for block in self.decoder:
            x, w = block._forward(x, block.memory_kv(memory), mask, memory_mask, None, need_weights)
            if need_weights:
                decoder_w.append(w[0])
                cross_w.append(w[1])
        logits = self.lm_head(self.decoder_norm(x))  # (N, L, V_t)
        if not need_weights:
            return logits, None
        return logits, {"encoder": encoder_w, "decoder": decoder_w, "cross": cross_w}

    @torch.no_grad()
    def generate(
        self,
        source: Tensor,
        max_new_tokens: int,
        *,
        bos_id: int,
        eos_id: int | None = None,
        source_mask: Tensor | None = None,
        use_cache: bool = True,
    ) -> Tensor:
        """Greedy decoding: start from ``bos_id`` and append the most likely token, up to
        ``max_new_tokens`` times (or until every row has written ``eos_id``; a row that has
        ends with ``eos_id`` repeated).

        With ``use_cache=True`` the source is encoded once and each decoder layer's
        cross-attention keys and values are computed once (:meth:`DecoderBlock.memory_kv`);
        the decoder's self-attention keeps a :class:`attnlib.decoding.KVCache` per layer, so a
        step feeds only the newest token. With ``False`` every step recomputes everything.
        Both give the same ids. The model runs in eval mode and is put back afterwards.

        Returns:
            ``(N, 1 + T)`` ids, ``T <= max_new_tokens``, starting with ``bos_id``.

        Raises:
            ValueError: as :meth:`forward` for ``source``; if ``max_new_tokens`` is negative
                or ``1 + max_new_tokens - 1`` target positions exceed ``max_len``, or an id is
                outside the target vocabulary.
            TypeError: if ``max_new_tokens``, ``bos_id`` or ``eos_id`` is not an int.
        """
        source_mask = self._check_source(source, source_mask)
        max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=0)
        target_id = f"a target id in 0 .. {self.target_vocab - 1}"
        bos_id = check_int("bos_id", bos_id, low=0, high=self.target_vocab - 1, what=target_id)
        if eos_id is not None:
            eos_id = check_int("eos_id", eos_id, low=0, high=self.target_vocab - 1, what=target_id)
        if max_new_tokens > self.max_len:  # the last new token is never fed back
            raise ValueError(
                f"max_new_tokens must be at most max_len={self.max_len} (the decoder reads the "
                f"start token and max_new_tokens - 1 more); got {max_new_tokens}"
            )
        was_training = self.training
        self.eval()
        try:
            return self._generate(source, source_mask, max_new_tokens, bos_id, eos_id, use_cache)
        finally:
            self.train(was_training)

    def _generate(self, source, source_mask, max_new_tokens, bos_id, eos_id, use_cache):
        N = source.shape[0]
        ids = torch.full((N, 1), bos_id, dtype=torch.long, device=source.device)  # (N, 1)
        done = torch.zeros(N, dtype=torch.bool, device=source.device)
        memory_mask = None if source_mask is None else source_mask[:, None, None, :]
        if use_cache:
            memory, _ = self._encode(source, source_mask, False)  # once
            memory_kv = [block.memory_kv(memory) for block in self.decoder]  # once per layer
            caches = [KVCache() for _ in self.decoder]
        for _ in range(max_new_tokens):
            if use_cache:
                x = self.embed_target(ids[:, -1:], start=ids.shape[1] - 1)  # (N, 1, E)
                for block, kv, cache in zip(self.decoder, memory_kv, caches):
                    x, _ = block._forward(x, kv, None, memory_mask, cache, False)
                logits = self.lm_head(self.decoder_norm(x))[:, -1]  # (N, V_t)
            else:
                logits = self.forward(source, ids, source_mask=source_mask)[0][:, -1]
            token = logits.argmax(dim=-1)  # (N,)
            if eos_id is not None:
                token = torch.where(done, eos_id, token)
                done |= token == eos_id
            ids = torch.cat([ids, token.unsqueeze(1)], dim=1)  # (N, t + 2)
            if eos_id is not None and bool(done.all()):
                break
        return ids

    def cross_cache_nbytes(self, source: Tensor) -> int:
        """Bytes of the cross-attention keys and values :meth:`generate` keeps for ``source``
        ``(N, S)``: ``2 N S E`` numbers a decoder layer."""
        N, S = source.shape
        element = self.lm_head.weight.element_size()
        return len(self.decoder) * 2 * N * S * self.source_embedding.embedding_dim * element
