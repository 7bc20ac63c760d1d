"""Your code: one function (or class) per exercise, in the order of the chapters.

Replace the ``raise NotImplementedError(...)`` of an exercise with your code, then run its
checks: ``make exercises`` (every exercise) or, in a notebook cell,

    from exercises import check
    check("attention")             # this file's attention()
    check("attention", my_attention)  # or a function of your own

Each docstring is the whole specification: what to compute, the shapes, and where the book
teaches it. Use plain PyTorch; the checks compare your results with ``attnlib`` and PyTorch on
random sizes, in float64.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor


def _todo(chapter: int, title: str, section: str):
    """The error of an exercise not written yet, naming where the book teaches it."""
    return NotImplementedError(f'see chapter {chapter}, "{title}", section "{section}"')


# ---------------------------------------------------------------- 1. GloVe


def nearest_neighbours(vector: Tensor, vectors: Tensor, k: int) -> Tensor:
    """The indices of the ``k`` rows of ``vectors`` most similar to ``vector`` by cosine.

    .. math::

        \\cos(u, v_i) = \\frac{u \\cdot v_i}{\\lVert u \\rVert \\, \\lVert v_i \\rVert}

    Args:
        vector: ``u``, the vector whose neighbours we want.
        vectors: one vector per row, such as GloVe's ``(V, E)`` table.
        k: how many neighbours, ``1 <= k <= V``.

    Returns:
        An int64 tensor of ``k`` row indices, the most similar first.

    Shape:
        ``vector``: ``(E,)``; ``vectors``: ``(V, E)``; output: ``(k,)``.
    """
    raise _todo(1, "GloVe: non-contextual embeddings", "Nearest neighbours")


# ---------------------------------------------------------------- 2. Cosine similarity


def cosine_matrix(a: Tensor, b: Tensor) -> Tensor:
    """All the cosines between the rows of ``a`` and the rows of ``b``, with one matrix product.

    ``out[i, j] = a_i . b_j / (|a_i| |b_j|)``: normalise the rows to length 1, then multiply.
    No row is zero in the checks.

    Args:
        a: ``L`` vectors, one per row.
        b: ``S`` vectors of the same size.

    Returns:
        The ``(L, S)`` table of cosines.

    Shape:
        ``a``: ``(L, E)``; ``b``: ``(S, E)``; output: ``(L, S)``.
    """
    raise _todo(
        2, "Cosine similarity and contextual embeddings", "All the cosines with one matrix product"
    )


# ---------------------------------------------------------------- 3. Scaled dot-product attention


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """The softmax along ``dim``, in its stable form: subtract the maximum first.

    .. math::

        \\operatorname{softmax}(x)_i = \\frac{e^{x_i - m}}{\\sum_j e^{x_j - m}},
        \\qquad m = \\max_j x_j

    It must not overflow: ``softmax(torch.tensor([1000.0, 1000.0]))`` is ``[0.5, 0.5]``, not
    NaN. Do not call ``torch.softmax``.

    Args:
        x: the scores.
        dim: the dimension that sums to 1.

    Returns:
        A tensor of the shape of ``x``, positive, summing to 1 along ``dim``.

    Shape:
        ``x``: any; output: the same.
    """
    raise _todo(3, "Scaled dot-product attention", "Softmax")


def attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention with an optional boolean mask (``True`` = may attend).

    .. math::

        A = \\operatorname{softmax}\\Big(\\frac{Q K^\\top}{\\sqrt{d_k}}
            \\text{ with } -\\infty \\text{ where the mask is False}\\Big),
        \\qquad \\text{output} = A V

    In the checks every query row may attend to at least one key.

    Args:
        query: ``Q``.
        key: ``K``.
        value: ``V``.
        mask: ``None`` (every query sees every key), or boolean, ``True`` where query ``i``
            may attend to key ``j``, broadcastable to ``(..., L, S)`` (a causal ``(L, S)``
            mask, a padding mask ``(N, 1, S)``).

    Returns:
        ``(output, weights)``.

    Shape:
        ``query``: ``(..., L, d_k)``; ``key``: ``(..., S, d_k)``; ``value``: ``(..., S, d_v)``;
        output: ``(..., L, d_v)``; weights: ``(..., L, S)``, each row summing to 1.
    """
    raise _todo(3, "Scaled dot-product attention", "Masks")


# ---------------------------------------------------------------- 4. Learned projections


def attention_head(
    x: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, causal: bool = False
) -> tuple[Tensor, Tensor]:
    """One self-attention head with learned projections, as ``attnlib.SelfAttention``.

    The matrices are stored as ``nn.Linear`` stores them, ``(out, in)``, so
    ``Q = x W_q^T``, ``K = x W_k^T``, ``V = x W_v^T``; then scaled dot-product attention with
    ``d_k = D``. With ``causal=True``, position ``i`` attends to positions ``j <= i`` only.

    Args:
        x: the input vectors.
        w_q, w_k, w_v: the three projection matrices, ``(D, E)`` each.
        causal: mask the future.

    Returns:
        ``(output, weights)``.

    Shape:
        ``x``: ``(N, L, E)``; output: ``(N, L, D)``; weights: ``(N, L, L)``.
    """
    raise _todo(4, "Learned projections and masks", "Causal attention: a mask buffer and dropout")


# ---------------------------------------------------------------- 5. Multi-head attention


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Cut the last dimension ``E`` into ``H`` heads of ``D = E / H`` and move the heads forward.

    Head ``h`` holds the features ``h*D`` to ``(h+1)*D - 1`` of every position:
    ``out[n, h, l, d] = x[n, l, h*D + d]``.

    Args:
        x: projected queries, keys or values.
        num_heads: ``H``; it divides ``E``.

    Returns:
        The heads, one ``(L, D)`` matrix each.

    Shape:
        ``x``: ``(N, L, E)``; output: ``(N, H, L, D)``.
    """
    raise _todo(
        5, "Multi-head attention, four ways", "Way 3: one fused projection, reshaped into heads"
    )


def merge_heads(x: Tensor) -> Tensor:
    """The inverse of :func:`split_heads`: put the heads side by side again.

    ``out[n, l, h*D + d] = x[n, h, l, d]``, so ``merge_heads(split_heads(x, H))`` is ``x``.

    Args:
        x: the heads' outputs.

    Returns:
        The concatenated heads.

    Shape:
        ``x``: ``(N, H, L, D)``; output: ``(N, L, H*D)``.
    """
    raise _todo(
        5, "Multi-head attention, four ways", "Way 3: one fused projection, reshaped into heads"
    )


# ---------------------------------------------------------------- 6. Training attention


def attention_backward(
    query: Tensor, key: Tensor, value: Tensor, grad_output: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The gradients of scaled dot-product attention, by hand (no autograd).

    With ``S = Q K^T / sqrt(d_k)``, ``A = softmax(S)`` (by rows), ``O = A V`` and
    ``G = dLoss/dO``:

    .. math::

        dV = A^\\top G, \\quad dA = G V^\\top, \\quad
        dS = A \\odot (dA - \\operatorname{rowsum}(dA \\odot A)), \\quad
        dQ = \\frac{dS\\, K}{\\sqrt{d_k}}, \\quad dK = \\frac{dS^\\top Q}{\\sqrt{d_k}}

    Args:
        query, key, value: ``Q``, ``K``, ``V`` (no mask).
        grad_output: ``G``, the gradient of a loss with respect to the output ``O``.

    Returns:
        ``(dQ, dK, dV)``, the gradients of the same loss with respect to ``Q``, ``K``, ``V``.

    Shape:
        ``query``: ``(..., L, d_k)``; ``key``: ``(..., S, d_k)``; ``value``: ``(..., S, d_v)``;
        ``grad_output``: ``(..., L, d_v)``; the gradients: the shapes of their tensors.
    """
    raise _todo(6, "Training attention", "The backward pass of attention")


# ---------------------------------------------------------------- 7. Positions


def rope(x: Tensor, base: float = 10000.0) -> Tensor:
    """Rotary position embedding: rotate each consecutive pair of features by its angle.

    The pair ``(x[..., p, 2i], x[..., p, 2i+1])`` of the row at position ``p = 0 .. L-1``
    turns by the angle ``p * theta_i``, with ``theta_i = base^(-2i/D)``:

    .. math::

        x'_{2i} = x_{2i} \\cos p\\theta_i - x_{2i+1} \\sin p\\theta_i, \\qquad
        x'_{2i+1} = x_{2i} \\sin p\\theta_i + x_{2i+1} \\cos p\\theta_i

    (the interleaved layout of the paper and of ``attnlib.positions.rotary_embedding``, not
    "rotate half").

    Args:
        x: queries or keys, one row per position.
        base: the wavelength scale.

    Returns:
        The rotated tensor.

    Shape:
        ``x``: ``(..., L, D)`` with ``D`` even; output: the same.
    """
    raise _todo(7, "Positions", "Rotary position embedding (RoPE)")


# ---------------------------------------------------------------- 8. A language model


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """LayerNorm over the last dimension, as ``nn.LayerNorm``: no ``F.layer_norm``.

    .. math::

        y = \\frac{x - \\mu}{\\sqrt{\\sigma^2 + \\varepsilon}} \\odot w + b

    with ``mu`` and ``sigma^2`` the mean and the *biased* variance (divided by ``E``, not
    ``E - 1``) of each row.

    Args:
        x: the vectors.
        weight: ``w``, the gain of each feature.
        bias: ``b``, the shift of each feature.
        eps: ``epsilon``, added to the variance.

    Returns:
        The normalised vectors.

    Shape:
        ``x``: ``(..., E)``; ``weight``, ``bias``: ``(E,)``; output: ``(..., E)``.
    """
    raise _todo(8, "A language model on the Odyssey", "The transformer block")


def block_mlp(
    x: Tensor,
    ln_weight: Tensor,
    ln_bias: Tensor,
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
    eps: float = 1e-5,
) -> Tensor:
    """The second half of a pre-LN transformer block: ``x`` plus the MLP of its LayerNorm.

    .. math::

        x + \\operatorname{GELU}(\\operatorname{LN}(x) W_1^\\top + b_1)\\, W_2^\\top + b_2

    with the exact GELU, ``y * Phi(y)`` (``Phi`` the standard normal CDF,
    ``0.5 * (1 + erf(y / sqrt(2)))``), and the matrices stored as ``nn.Linear`` stores them.
    With the weights of an ``attnlib.TransformerBlock`` (``block.ln2``, ``block.mlp[0]``,
    ``block.mlp[2]``) it computes what the block adds after its attention. Write the
    LayerNorm yourself (:func:`layer_norm`).

    Args:
        x: the block's vectors after attention.
        ln_weight, ln_bias: the LayerNorm's ``(E,)`` weight and bias.
        w1, b1: the first linear map, ``(F, E)`` and ``(F,)``.
        w2, b2: the second, ``(E, F)`` and ``(E,)``.
        eps: the LayerNorm's ``epsilon``.

    Returns:
        The block's output.

    Shape:
        ``x``: ``(N, L, E)``; output: ``(N, L, E)``.
    """
    raise _todo(8, "A language model on the Odyssey", "The transformer block")


def kneser_ney(ids: Sequence[int], prev: int, word: int, vocab_size: int, discount=0.75) -> float:
    """The interpolated Kneser-Ney bigram probability ``p(word | prev)``.

    .. math::

        p(w \\mid u) = \\frac{\\max(c(u\\,w) - \\delta, 0)}{c(u\\,\\bullet)}
            + \\frac{\\delta\\, N_{1+}(u\\,\\bullet)}{c(u\\,\\bullet)}\\, p(w),
        \\qquad p(w) = \\frac{N_{1+}(\\bullet\\,w) + 1}{N_{1+}(\\bullet\\,\\bullet) + V}

    ``c(u w)`` counts the bigram ``u w`` in ``ids``; ``c(u •)`` the bigrams that start with
    ``u``; ``N_{1+}(u •)`` the distinct words seen after ``u``; ``N_{1+}(• w)`` the distinct
    words seen before ``w`` (a continuation count); ``N_{1+}(• •)`` the distinct bigrams.
    If ``u`` starts no bigram, ``p(w | u) = p(w)``. As ``attnlib.corpus.NGramModel(ids, 2, V)``.

    Args:
        ids: the training tokens, ints in ``0 .. V-1``.
        prev: ``u``, the previous token.
        word: ``w``, the token whose probability we want.
        vocab_size: ``V``.
        discount: ``delta`` in ``(0, 1)``.

    Returns:
        The probability, a float.
    """
    raise _todo(8, "A language model on the Odyssey", "Counting words: the baselines")


def bpe_merge(
    words: dict[tuple[str, ...], int],
) -> tuple[tuple[str, str], dict[tuple[str, ...], int]]:
    """One step of BPE training: find the most frequent pair of neighbours and merge it.

    ``words`` maps each word, split into its current tokens, to how often it occurs. A pair's
    count is the number of times its two tokens stand side by side, summed over the words
    weighted by their counts. Take the pair with the highest count (a tie goes to the
    smallest pair in Python's order, ``min`` of the tuples), then replace every ``a b`` by
    ``ab`` in every word, from the left (``a a a`` with the pair ``(a, a)`` gives ``aa a``).
    At least one word has two tokens.

    Args:
        words: ``{("l", "o", "w"): 5, ...}``.

    Returns:
        ``(pair, merged)``: the pair ``(a, b)`` and the words after the merge, with the same
        counts (``{("lo", "w"): 5, ...}``).
    """
    raise _todo(8, "A language model on the Odyssey", "Subword tokens: byte-level BPE")


# ---------------------------------------------------------------- 9. A real encoder


def wordpiece(word: str, vocab: set[str]) -> list[str]:
    """Cut one lowercase word into WordPiece tokens: the longest piece first, from the left.

    Take the longest prefix of ``word`` that is in ``vocab``; then the longest next piece
    whose continuation form ``"##" + piece`` is in ``vocab``; and so on to the end. If at some
    point no piece fits, the whole word is ``["[UNK]"]``.

    Args:
        word: a word of lowercase letters.
        vocab: the pieces, continuations written with ``##``.

    Returns:
        The pieces, such as ``["un", "##aff", "##able"]``.
    """
    raise _todo(9, "A real encoder", "Word pieces")


# ---------------------------------------------------------------- 10. Induction heads


def induction_score(weights: Tensor, T: int) -> Tensor:
    """The induction score of attention weights on a sequence that repeats.

    The sequence is a start token at position 0, ``T`` tokens at positions ``1 .. T``, and
    the same ``T`` tokens again at ``T+1 .. 2T``. The score is the mean weight that each
    position ``t`` of the second copy puts on the token after the earlier occurrence of its
    token, position ``t - T + 1``:

    .. math::

        \\frac{1}{T} \\sum_{t=T+1}^{2T} A_{t,\\,t-T+1}

    Args:
        weights: ``A``, attention weights (rows are queries).
        T: the length of one copy.

    Returns:
        One score per head (and batch element).

    Shape:
        ``weights``: ``(..., 2T+1, 2T+1)``; output: ``(...)``.
    """
    raise _todo(10, "What a head computes: induction heads", "Finding the heads")


# ---------------------------------------------------------------- 11. Inference


def cached_attention_step(
    cache_k: Tensor | None, cache_v: Tensor | None, q: Tensor, k: Tensor, v: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """One decoding step of causal attention with a key-value cache.

    Append the new token's key and value to the cache (along the sequence axis), then let
    its query attend to every cached position, itself included, without a mask. Run step by
    step over a sequence, the outputs equal causal attention over the whole sequence.

    Args:
        cache_k, cache_v: the keys and values of the earlier tokens, or ``None`` at the first
            step.
        q, k, v: the new token's query, key and value.

    Returns:
        ``(output, cache_k, cache_v)``: the new token's output and the grown cache.

    Shape:
        ``cache_k``: ``(N, H, t, D)``; ``cache_v``: ``(N, H, t, D_v)``; ``q``, ``k``:
        ``(N, H, 1, D)``; ``v``: ``(N, H, 1, D_v)``; output: ``(N, H, 1, D_v)``; the caches
        returned: ``(N, H, t+1, D)`` and ``(N, H, t+1, D_v)``.
    """
    raise _todo(11, "Attention at inference", "With a cache written by hand")


# ---------------------------------------------------------------- 12. torch.nn.MultiheadAttention


def torch_mha_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    in_proj_weight: Tensor,
    in_proj_bias: Tensor,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor,
    num_heads: int,
) -> tuple[Tensor, Tensor]:
    """The forward pass of ``nn.MultiheadAttention(E, H, batch_first=True)``, by hand.

    ``in_proj_weight`` stacks ``W_q``, ``W_k``, ``W_v`` (rows ``0:E``, ``E:2E``, ``2E:3E``),
    each stored as ``nn.Linear`` stores it; ``in_proj_bias`` their biases. Project, split into
    ``H`` heads of ``D = E / H``, attend in each head (scale ``1/sqrt(D)``), concatenate the
    heads and apply the output projection ``out_proj``.

    Args:
        query, key, value: the inputs (``key`` and ``value`` may differ from ``query``).
        in_proj_weight, in_proj_bias: ``(3E, E)`` and ``(3E,)``.
        out_proj_weight, out_proj_bias: ``(E, E)`` and ``(E,)``.
        num_heads: ``H``.

    Returns:
        ``(output, weights)``, the weights averaged over the heads (PyTorch's default).

    Shape:
        ``query``: ``(N, L, E)``; ``key``, ``value``: ``(N, S, E)``; output: ``(N, L, E)``;
        weights: ``(N, L, S)``.
    """
    raise _todo(
        12,
        "Inside `torch.nn.MultiheadAttention`",
        "Step by step through `F.multi_head_attention_forward`",
    )


# ---------------------------------------------------------------- 13. Keras MultiHeadAttention


def keras_kernels(w_q: Tensor, w_o: Tensor, num_heads: int) -> tuple[Tensor, Tensor]:
    """Keras' query and output kernels from PyTorch's ``(out, in)`` matrices.

    Keras keeps the head as an axis. Its query kernel ``K_q`` is ``(E, H, D)`` and projects
    with ``einsum("nle,ehd->nlhd", x, K_q)``; that must equal ``x W_q^T`` cut into ``H``
    heads of ``D``. Its output kernel ``K_o`` is ``(H, D, E)`` and projects the heads with
    ``einsum("nlhd,hde->nle", heads, K_o)``; that must equal the concatenated heads times
    ``W_o^T``.

    Args:
        w_q: PyTorch's query matrix, ``(E, E)`` (out, in).
        w_o: PyTorch's output matrix, ``(E, E)`` (out, in).
        num_heads: ``H``; ``D = E / H``.

    Returns:
        ``(K_q, K_o)``.

    Shape:
        ``K_q``: ``(E, H, D)``; ``K_o``: ``(H, D, E)``.
    """
    raise _todo(
        13,
        "Keras `MultiHeadAttention` on the PyTorch backend",
        "How PyTorch's matrices become Keras kernels",
    )


# ---------------------------------------------------------------- 14. Cross-attention


def additive_attention(
    query: Tensor, key: Tensor, value: Tensor, w_q: Tensor, w_k: Tensor, v: Tensor
) -> tuple[Tensor, Tensor]:
    """Bahdanau's additive attention: a small network scores each query against each key.

    .. math::

        e_{ij} = v^\\top \\tanh(W_q q_i + W_k k_j), \\qquad
        \\alpha_{ij} = \\operatorname{softmax}_j(e_{ij}), \\qquad
        o_i = \\textstyle\\sum_j \\alpha_{ij}\\, \\text{value}_j

    As ``attnlib.seq2seq.AdditiveAttention`` (no biases): ``w_q`` and ``w_k`` are stored
    ``(out, in)`` as in ``nn.Linear``. No scaling.

    Args:
        query: the decoder's states.
        key: the encoder's states.
        value: what is averaged (often the keys).
        w_q: ``(A, D_q)``.
        w_k: ``(A, D_k)``.
        v: ``(A,)``.

    Returns:
        ``(output, weights)``.

    Shape:
        ``query``: ``(N, L, D_q)``; ``key``: ``(N, S, D_k)``; ``value``: ``(N, S, D_v)``;
        output: ``(N, L, D_v)``; weights: ``(N, L, S)``.
    """
    raise _todo(14, "Cross-attention", "Two scores: Bahdanau's and the dot product")


# ---------------------------------------------------------------- 15. Making attention fast


def tiled_attention(query: Tensor, key: Tensor, value: Tensor, block_size: int) -> Tensor:
    """Exact attention one block of ``block_size`` keys at a time, with the online softmax.

    Keep for each query a running maximum ``m``, a running sum ``l`` and an unnormalised
    output ``o``. For each block ``b`` of keys, with scores ``s = q K_b^T / sqrt(d_k)``:

    .. math::

        m' = \\max(m, \\max_j s_j), \\quad
        l' = e^{m - m'} l + \\sum_j e^{s_j - m'}, \\quad
        o' = e^{m - m'} o + \\sum_j e^{s_j - m'} v_j

    and return ``o / l`` at the end. Never build the ``(L, S)`` matrix of scores: only an
    ``(L, block_size)`` block at a time. ``S`` need not be a multiple of ``block_size``.

    Args:
        query, key, value: as :func:`attention` (no mask).
        block_size: keys per block, ``>= 1``.

    Returns:
        The attention output, equal to ``softmax(Q K^T / sqrt(d_k)) V``.

    Shape:
        ``query``: ``(..., L, d_k)``; ``key``: ``(..., S, d_k)``; ``value``: ``(..., S, d_v)``;
        output: ``(..., L, d_v)``.
    """
    raise _todo(15, "Making attention fast", "Tiled attention by hand")


# ---------------------------------------------------------------- 16. Attention's memory


class PreallocatedCache:
    """A key-value cache that allocates its whole length once and writes each step in place.

    The first :meth:`update` allocates two buffers of ``max_len`` positions, shaped as the
    step's keys and values but for the sequence axis, with their dtype and device. Each step
    writes its ``L_new`` keys and values at positions ``length .. length + L_new - 1`` and
    returns *views* of the buffers' first ``length + L_new`` positions: nothing is copied but
    the new tokens (``torch.cat`` would copy the whole cache). As
    ``attnlib.decoding.PreallocatedCache``.

    Args:
        max_len: how many positions the buffers hold.

    Attributes:
        length: the number of positions written so far (0 at the start).
        max_len: the buffers' length.

    Shape:
        a step's ``key``: ``(N, G, L_new, D)``; ``value``: ``(N, G, L_new, D_v)``; the views
        returned: ``(N, G, length, D)`` and ``(N, G, length, D_v)``.
    """

    def __init__(self, max_len: int):
        raise _todo(16, "Attention's memory", "Preallocated: write in place")

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Write a step's keys and values; return the views of every position written.

        Raises:
            ValueError: if the step does not fit: ``length + L_new > max_len``.
        """
        raise _todo(16, "Attention's memory", "Preallocated: write in place")


# ---------------------------------------------------------------- 17. Today's attention


def delta_rule_step(
    state: Tensor, q: Tensor, k: Tensor, v: Tensor, beta: Tensor, alpha: Tensor
) -> tuple[Tensor, Tensor]:
    """One token of Gated DeltaNet, recurrent form: fade the state, write, then read.

    With row vectors and the state ``S`` mapping keys to values, ``(D, D_v)``:

    .. math::

        S_t = \\alpha_t S_{t-1} + \\beta_t\\, k_t^\\top (v_t - k_t\\, \\alpha_t S_{t-1}),
        \\qquad o_t = q_t S_t

    ``k_t`` has length 1 (the checks pass unit keys; do not normalise again). ``alpha_t`` in
    ``(0, 1]`` fades the state; ``beta_t`` in ``(0, 1)`` is the writing strength.

    Args:
        state: ``S_{t-1}``.
        q, k: the token's query and key.
        v: its value.
        beta, alpha: one number per batch element and head.

    Returns:
        ``(output, state)``: ``o_t`` and ``S_t``.

    Shape:
        ``state``: ``(..., D, D_v)``; ``q``, ``k``: ``(..., D)``; ``v``: ``(..., D_v)``;
        ``beta``, ``alpha``: ``(...)``; output: ``(..., D_v)``; state: ``(..., D, D_v)``.
    """
    raise _todo(17, "Attention in today's models", "Linear attention and DeltaNet")
