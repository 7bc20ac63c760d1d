"""A bidirectional (BERT-style) encoder: post-LayerNorm blocks over token, position and
segment embeddings, and the sentence embedding read from it.

Where :class:`attnlib.LanguageModel` lets position ``t`` see tokens ``0 .. t`` only, an encoder
lets every position see every real token of its sentence: the only mask hides the padding
that makes sentences of different lengths one batch. BERT (Devlin et al., 2019) normalises
*after* each residual sum (post-LayerNorm, as the original transformer of Vaswani et al.):

.. math::

    \\begin{aligned}
    x &\\leftarrow \\operatorname{LN}_1(x + \\operatorname{MultiHead}(x)), \\\\
    x &\\leftarrow \\operatorname{LN}_2(x + \\operatorname{MLP}(x))
    \\end{aligned}

:func:`sentence_embedding` turns the last layer's vectors into one unit vector per sentence
(mean pooling over the real tokens, then L2 normalisation, as sentence-transformers'
all-MiniLM-L6-v2). Real weights come from :mod:`attnlib.pretrained`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib._checks import (
    _check_attention_mask,
    _check_indices,
    check_dropout,
    check_int,
    check_real,
    check_sizes,
    check_tensor,
    unbatch,
)
from attnlib.decoding import Cache
from attnlib.multihead import MultiHeadAttention
from attnlib.transformer import _check_block_input, _mlp

__all__ = ["Encoder", "PostNormBlock", "sentence_embedding"]


class PostNormBlock(nn.Module):
    """A post-LayerNorm transformer block (BERT): each sum of a residual and its update is
    normalised.

    .. math::

        \\begin{aligned}
        x &\\leftarrow \\operatorname{LN}_1(x + \\operatorname{Dropout}(
            \\operatorname{MultiHead}(x))), \\\\
        x &\\leftarrow \\operatorname{LN}_2(x + \\operatorname{Dropout}(\\operatorname{MLP}(x))),
        \\qquad \\operatorname{MLP}(y) = \\operatorname{GELU}(y W_1 + b_1) W_2 + b_2
        \\end{aligned}

    The same parts as :class:`attnlib.TransformerBlock` (a
    :class:`attnlib.MultiHeadAttention`, the same ``Linear -> GELU -> Linear`` MLP, two
    LayerNorms, the same attribute names), put together in the other order. It is a sibling
    class and not a ``norm_first`` option of :class:`attnlib.TransformerBlock` because the two
    orders are two different computations, each a short ``forward`` that reads as its formula:
    an option would put a branch in every line of the pre-LN block that the book's chapters
    show, and the KV cache of a causal pre-LN decoder has no use in a bidirectional encoder.
    The same numbers as ``nn.TransformerEncoderLayer(E, H, dim_feedforward=r*E,
    activation="gelu", batch_first=True, norm_first=False)`` given the same weights.

    Args:
        embed_dim: ``E``.
        num_heads: ``H``; must divide ``E``.
        mlp_ratio: ``r``, the MLP's hidden width is ``round(r * E)`` (BERT: 4); must give at
            least one hidden unit.
        dropout: probability of dropping an attention weight and each update, in training mode
            only.
        bias: biases in every linear map and LayerNorm.
        norm_eps: the LayerNorms' ``eps`` (BERT: ``1e-12``; PyTorch's default ``1e-5``).

    Attributes:
        attn: :class:`attnlib.MultiHeadAttention` ``(E, H, bias=bias)``.
        ln1: ``nn.LayerNorm(E)``, after the attention's sum.
        mlp: ``nn.Sequential(Linear(E, rE), GELU(), Linear(rE, E))``.
        ln2: ``nn.LayerNorm(E)``, after the MLP's sum.

    Shape:
        - ``x``: ``(L, E)`` or ``(N, L, E)``; output: the same shape.
        - ``mask``: boolean (``True`` = may attend) or float (added to the scores),
          broadcastable to ``(N, H, L, L)``: ``(L, L)``, ``(N, 1, L)`` (a key-padding mask),
          ``(N, L, L)`` or ``(N, H, L, L)``; unbatched ``(L, L)`` or ``(H, L, L)``.
        - weights: ``(H, L, L)`` or ``(N, H, L, L)`` with ``need_weights=True``, else ``None``.

    Raises:
        ValueError: if a size is not a positive integer, ``E`` is not divisible by ``H``,
            ``mlp_ratio`` gives no hidden unit, ``dropout`` is not in ``[0, 1)``, or ``x`` or
            ``mask`` has the wrong shape.
        TypeError: if ``x`` is not a float tensor of the block's dtype or ``mask`` is neither
            boolean nor floating point.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> block = PostNormBlock(12, 3).eval()
        >>> x = torch.randn(2, 5, 12)
        >>> y, weights = block(x, need_weights=True)
        >>> y.shape, weights.shape
        (torch.Size([2, 5, 12]), torch.Size([2, 3, 5, 5]))
        >>> y.mean(-1).abs().max() < 1e-6  # every vector leaves a LayerNorm
        tensor(True)
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
    ):
        super().__init__()
        embed_dim = check_int("embed_dim", embed_dim, low=1)
        self.mlp_ratio = check_real("mlp_ratio", mlp_ratio, "a number > 0", lambda r: r > 0)
        self.dropout = check_dropout("dropout", dropout)
        hidden = round(self.mlp_ratio * embed_dim)
        if not hidden:
            raise ValueError(
                f"mlp_ratio must give a hidden width round(mlp_ratio * E) >= 1; got "
                f"mlp_ratio={mlp_ratio} with embed_dim={embed_dim}"
            )
        self.attn = MultiHeadAttention(embed_dim, num_heads, bias=bias, dropout=dropout)
        self.ln1 = nn.LayerNorm(embed_dim, eps=norm_eps, bias=bias)
        self.mlp = _mlp(embed_dim, hidden, bias=bias)
        self.ln2 = nn.LayerNorm(embed_dim, eps=norm_eps, bias=bias)
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
        """Attention, then the MLP, each added to ``x`` and normalised; returns
        ``(x, weights or None)``. The arguments are checked here, once.

        With ``cache=`` (from ``block.attn.new_cache()``), ``x`` holds only the new positions
        of a causal decoder and the cache applies the causal mask, as
        :class:`attnlib.TransformerBlock`'s: a post-LN block is a layer of an
        :class:`attnlib.LanguageModel` as well (``LanguageModel(..., block=...)``).
        """
        x, mask, batched = _check_block_input(self, x, mask, cache)
        x, weights = self._forward(x, mask, cache, need_weights)
        return unbatch(batched, x, weights)  # (L, E) or (N, L, E); (H, L, L) or ...

    def _forward(self, x: Tensor, mask: Tensor | None, cache, need_weights: bool):
        """The block without the checks: ``x`` ``(N, L, E)``, ``mask`` ``None`` or 4-D, a
        checked ``cache`` or ``None`` (the interface of :class:`attnlib.TransformerBlock`'s,
        which :class:`attnlib.LanguageModel` and :class:`Encoder` call)."""
        attended, weights = self.attn._self_attention(x, mask, need_weights, cache)
        # attended: (N, L, E); weights: (N, H, L, S) or None
        x = self.ln1(x + self.drop(attended))  # (N, L, E)
        x = self.ln2(x + self.drop(self.mlp(x)))  # (N, L, E)
        return x, weights


class Encoder(nn.Module):
    """A BERT-style encoder: token, position and segment embeddings, then ``num_layers``
    :class:`PostNormBlock`, every position seeing every real token.

    .. math::

        \\begin{aligned}
        h_0 &= \\operatorname{LN}_{\\text{emb}}(E_{\\text{tok}}[\\text{ids}] + P[0 .. L-1]
            + E_{\\text{seg}}[\\text{token\\_type\\_ids}]), \\\\
        h_\\ell &= \\operatorname{Block}_\\ell(h_{\\ell-1};\\ \\text{mask}_{ij} =
            \\text{attention\\_mask}_j)
        \\end{aligned}

    The mask lets a query attend to key ``j`` where ``attention_mask[j] = 1`` (the real
    tokens) and hides the padding. Padding positions still get vectors (they attend to the
    real tokens), which :func:`sentence_embedding` leaves out. A sequence whose
    ``attention_mask`` is all 0 has nothing to attend to: its attention gives zero weights and
    zero outputs (attnlib's rule), not NaN.

    Args:
        vocab_size: ``V``.
        embed_dim: ``E``.
        num_heads: ``H`` heads in every layer; must divide ``E``.
        num_layers: how many :class:`PostNormBlock`.
        max_len: rows of the learned position table, the longest sequence (BERT: 512).
        type_vocab_size: rows of the segment table (BERT: 2, sentence A and sentence B).
        mlp_ratio, dropout, bias: as :class:`PostNormBlock`.
        norm_eps: every LayerNorm's ``eps``, default BERT's ``1e-12``.

    Attributes:
        token_embedding: ``nn.Embedding(V, E)``.
        position_embedding: ``nn.Embedding(max_len, E)``.
        segment_embedding: ``nn.Embedding(type_vocab_size, E)``.
        embedding_norm: ``nn.LayerNorm(E)`` on the sum of the three.
        blocks: ``nn.ModuleList`` of the blocks.

    Shape:
        - ``ids``: ``(L,)`` or ``(N, L)`` integers in ``0 .. V-1``.
        - ``attention_mask``, ``token_type_ids``: the shape of ``ids``; default all ones and
          all zeros.
        - output: ``(L, E)`` or ``(N, L, E)``, the last layer's vectors.
        - weights: with ``need_weights=True`` a list, one ``(H, L, L)`` or ``(N, H, L, L)``
          tensor per layer, else ``None``.

    Raises:
        ValueError: if a size is not a positive integer, ``E`` is not divisible by ``H``,
            ``ids`` holds an index outside ``0 .. V-1``, a sequence is longer than
            ``max_len``, ``attention_mask`` or ``token_type_ids`` has another shape than
            ``ids``, or holds a value other than 0/1 (``attention_mask``) or outside
            ``0 .. type_vocab_size - 1`` (``token_type_ids``).
        TypeError: if ``ids`` or ``token_type_ids`` is not an integer tensor, or
            ``attention_mask`` is neither an integer nor a boolean tensor.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> encoder = Encoder(100, 12, 3, 2, max_len=16).eval()
        >>> ids = torch.tensor([[5, 17, 42, 0], [7, 8, 0, 0]])  # 0 = padding
        >>> attention_mask = (ids != 0).long()  # (N, L)
        >>> hidden, weights = encoder(ids, attention_mask=attention_mask, need_weights=True)
        >>> hidden.shape, len(weights), weights[0].shape
        (torch.Size([2, 4, 12]), 2, torch.Size([2, 3, 4, 4]))
        >>> weights[0][1, :, :, 2:].abs().max().item()  # nothing reaches the padding
        0.0
        >>> sentence_embedding(hidden, attention_mask).norm(dim=-1)
        tensor([1.0000, 1.0000], grad_fn=<LinalgVectorNormBackward0>)
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        num_heads: int,
        num_layers: int,
        *,
        max_len: int = 512,
        type_vocab_size: int = 2,
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        bias: bool = True,
        norm_eps: float = 1e-12,
    ):
        super().__init__()
        vocab_size, embed_dim, num_heads, num_layers, max_len, type_vocab_size = check_sizes(
            vocab_size=vocab_size,
            embed_dim=embed_dim,
            num_heads=num_heads,
            num_layers=num_layers,
            max_len=max_len,
            type_vocab_size=type_vocab_size,
        )
        self.vocab_size, self.max_len, self.type_vocab_size = vocab_size, max_len, type_vocab_size
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(max_len, embed_dim)
        self.segment_embedding = nn.Embedding(type_vocab_size, embed_dim)
        self.embedding_norm = nn.LayerNorm(embed_dim, eps=norm_eps, bias=bias)
        self.drop = nn.Dropout(check_dropout("dropout", dropout))
        self.blocks = nn.ModuleList(
            PostNormBlock(
                embed_dim,
                num_heads,
                mlp_ratio=mlp_ratio,
                dropout=dropout,
                bias=bias,
                norm_eps=norm_eps,
            )
            for _ in range(num_layers)
        )
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """BERT's initialisation: normal, std 0.02, zero biases (LayerNorm: ones, zeros)."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

    @property
    def embed_dim(self) -> int:
        """``E``, the size of every token vector."""
        return self.token_embedding.embedding_dim

    @property
    def num_layers(self) -> int:
        """The number of blocks."""
        return len(self.blocks)

    def _check(self, ids, attention_mask, token_type_ids):
        _check_indices("ids", ids, self.vocab_size, f"token indices (vocab_size={self.vocab_size})")
        if ids.device != self.token_embedding.weight.device:
            raise ValueError(
                f"ids is on {ids.device} but the model's weights are on "
                f"{self.token_embedding.weight.device}; move ids (ids.to(...)) or the model"
            )
        if ids.shape[-1] > self.max_len:
            raise ValueError(
                f"ids must be at most max_len={self.max_len} tokens long (the position table "
                f"has max_len rows); got L={ids.shape[-1]}"
            )
        if attention_mask is not None:
            _check_attention_mask(attention_mask, ids)
        if token_type_ids is not None:
            _check_indices(
                "token_type_ids",
                token_type_ids,
                self.type_vocab_size,
                f"segment indices (type_vocab_size={self.type_vocab_size})",
                ids,
            )

    def forward(
        self,
        ids: Tensor,
        *,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor] | None]:
        """The last layer's vector of every position; returns ``(output, weights or None)``.

        ``attention_mask`` (1 = a real token, 0 = padding) hides the padded keys in every
        layer; ``need_weights=True`` also returns every layer's attention weights.
        """
        self._check(ids, attention_mask, token_type_ids)
        states, weights = self._forward(ids, attention_mask, token_type_ids, need_weights, False)
        return states[-1], weights

    def hidden_states(
        self,
        ids: Tensor,
        *,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> list[Tensor]:
        """The vectors after the embeddings and after every layer, ``num_layers + 1`` tensors
        of the output's shape (``transformers``' ``output_hidden_states``); the arguments as
        :meth:`forward`'s."""
        self._check(ids, attention_mask, token_type_ids)
        return self._forward(ids, attention_mask, token_type_ids, False, True)[0]

    def _forward(self, ids, attention_mask, token_type_ids, need_weights, keep_all):
        batched = ids.dim() == 2
        ids = ids if batched else ids.unsqueeze(0)  # (N, L)
        L = ids.shape[1]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)  # (N, L): every token in sentence A
        token_type_ids = token_type_ids.reshape(ids.shape)  # (N, L)
        positions = torch.arange(L, device=ids.device)  # (L,)
        x = (
            self.token_embedding(ids)
            + self.position_embedding(positions)
            + self.segment_embedding(token_type_ids)
        )  # (N, L, E)
        x = self.drop(self.embedding_norm(x))  # (N, L, E)
        mask = None
        if attention_mask is not None:
            mask = attention_mask.reshape(ids.shape[0], 1, 1, L).bool()  # (N, 1, 1, S): keys
        states, weights = [x], []
        for block in self.blocks:
            x, w = block._forward(x, mask, None, need_weights)  # (N, L, E), (N, H, L, L) or None
            states.append(x)
            weights.append(w)
        states = [unbatch(batched, s) for s in states]  # (L, E) or (N, L, E) each
        weights = [unbatch(batched, w) for w in weights] if need_weights else None  # (H, L, L)
        if not keep_all:
            states = states[-1:]
        return states, (weights if need_weights else None)


def sentence_embedding(
    hidden: Tensor, attention_mask: Tensor | None = None, *, normalize: bool = True
) -> Tensor:
    """One vector per sentence: the mean of its real tokens' vectors, scaled to length 1.

    .. math::

        u = \\frac{\\sum_{t} m_t\\, h_t}{\\max(\\sum_t m_t,\\ 10^{-9})}, \\qquad
        \\text{embedding} = \\frac{u}{\\max(\\lVert u \\rVert_2,\\ 10^{-12})}

    with ``m_t`` the attention mask (1 = a real token). This is what sentence-transformers'
    all-MiniLM-L6-v2 computes after the encoder (its ``1_Pooling/config.json`` says
    ``pooling_mode_mean_tokens``, its ``modules.json`` adds ``Normalize``); the cosine of two
    sentences is then the dot product of their embeddings.

    Args:
        hidden: the encoder's output.
        attention_mask: 1 for a real token, 0 for padding (integer or boolean); default all
            ones.
        normalize: divide by the L2 norm (``False``: the mean only).

    Returns:
        ``(E,)`` or ``(N, E)`` embeddings.

    Shape:
        - ``hidden``: ``(L, E)`` or ``(N, L, E)``.
        - ``attention_mask``: ``(L,)`` or ``(N, L)``.
        - output: ``(E,)`` or ``(N, E)``.

    Raises:
        TypeError: if ``hidden`` is not a float tensor or ``attention_mask`` neither an
            integer nor a boolean tensor.
        ValueError: if ``hidden`` is not 2-D or 3-D, or ``attention_mask`` is not shaped
            ``hidden.shape[:-1]`` or holds a value other than 0/1.

    Example:
        >>> hidden = torch.tensor([[[3.0, 0.0], [0.0, 4.0], [9.0, 9.0]]])  # (1, 3, 2)
        >>> sentence_embedding(hidden, torch.tensor([[1, 1, 0]]))  # mean (1.5, 2), length 2.5
        tensor([[0.6000, 0.8000]])
    """
    check_tensor("hidden", hidden, (2, 3))
    if attention_mask is None:
        attention_mask = torch.ones(hidden.shape[:-1], dtype=torch.long, device=hidden.device)
    _check_attention_mask(attention_mask, hidden[..., 0], "hidden without its last axis")
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (N, L, 1) or (L, 1)
    summed = (hidden * m).sum(dim=-2)  # (N, E) or (E,)
    counts = m.sum(dim=-2).clamp(min=1e-9)  # (N, 1) or (1,)
    pooled = summed / counts  # (N, E) or (E,)
    return F.normalize(pooled, p=2.0, dim=-1) if normalize else pooled
