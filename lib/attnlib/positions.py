"""Positions: telling attention where each token is.

Attention is blind to order: permuting the keys and values permutes nothing in the output,
and permuting the queries permutes the output rows the same way. Three ways to add order:

- :func:`sinusoidal_encoding` (Vaswani et al., 2017): an *absolute* position vector added to
  each input embedding;
- :func:`rotary_embedding` (RoPE, Su et al., 2021): queries and keys rotated by an angle
  proportional to their position, so that ``q_m . k_n`` depends only on ``m - n``;
- :func:`alibi_bias` (ALiBi, Press et al., 2022): a *relative* penalty ``-m_h |i - j|``
  added to the scores, an additive float mask.

The two relative schemes are also objects that an attention layer receives,
``MultiHeadAttention(E, H, positions=Rotary())`` or ``positions=ALiBi()``: the layer calls
``q, k, bias = scheme(q, k, q_pos, k_pos)`` with every head's queries and keys and their
positions, after its key-value cache (:mod:`attnlib.decoding`), which gives the positions.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from attnlib._checks import check_floating_dtype, check_int, check_real, check_tensor, shape_str

__all__ = [
    "ALiBi",
    "PositionScheme",
    "Rotary",
    "alibi_bias",
    "alibi_slopes",
    "rotary_embedding",
    "rotate_half_to_pairs",
    "sinusoidal_encoding",
]


def _check_base(base) -> float:
    return check_real("base", base, "a number > 1", lambda b: b > 1)


def _inverse_frequencies(dim: int, base: float) -> Tensor:
    """``base^(-2i/dim)`` for ``i = 0 .. dim/2 - 1``, in float64: shape ``(dim/2,)``."""
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def sinusoidal_encoding(
    length: int, dim: int, *, base: float = 10000.0, dtype=torch.float32, device=None
) -> Tensor:
    """The sinusoidal position encoding of Vaswani et al. (2017), one row per position.

    .. math::

        PE_{p,\\,2i} = \\sin\\left(\\frac{p}{\\text{base}^{2i/d}}\\right), \\qquad
        PE_{p,\\,2i+1} = \\cos\\left(\\frac{p}{\\text{base}^{2i/d}}\\right)

    for positions ``p = 0 .. length - 1`` and ``i = 0 .. d/2 - 1``. Column pair ``i`` is a
    clock turning at the frequency ``base^(-2i/d)``: fast in the first columns, slow in the
    last. The angles are computed in float64 and the result cast to ``dtype``.

    Args:
        length: number of positions ``L``.
        dim: encoding size ``d`` (the model dimension ``E``); must be even.
        base: the wavelength scale; 10000 in the paper.
        dtype, device: of the result; ``dtype`` floating point (sines and cosines of an
            integer type would be 0 or 1).

    Returns:
        The encoding, to be added to the ``(L, E)`` input embeddings.

    Shape:
        output: ``(length, dim)``.

    Raises:
        TypeError: if ``length`` or ``dim`` is not an ``int``, ``base`` not a number, or ``dtype``
            not a floating-point dtype.
        ValueError: if ``length`` or ``dim`` is below 1, ``dim`` is odd, or ``base`` is not a
            finite number > 1.

    Example:
        >>> pe = sinusoidal_encoding(3, 4)
        >>> pe
        tensor([[ 0.0000,  1.0000,  0.0000,  1.0000],
                [ 0.8415,  0.5403,  0.0100,  0.9999],
                [ 0.9093, -0.4161,  0.0200,  0.9998]])
    """
    length = check_int("length", length, low=1)
    dim = check_int("dim", dim, low=1)
    if dim % 2:
        raise ValueError(f"dim must be even (sin and cos columns come in pairs); got {dim}")
    base = _check_base(base)
    check_floating_dtype("dtype", dtype)
    p = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    angles = p * _inverse_frequencies(dim, base)  # (L, d/2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (L, d/2, 2)
    return pe.reshape(length, dim).to(dtype=dtype, device=device)  # (L, d): sin, cos, ...


def rotary_embedding(
    x: Tensor, positions: Tensor | None = None, *, base: float = 10000.0
) -> Tensor:
    """Rotary position embedding (RoPE, Su et al., 2021): rotate each pair of features.

    The consecutive pair ``(x[..., 2i], x[..., 2i+1])`` of the row at position ``p`` is
    rotated by the angle ``p * theta_i`` with ``theta_i = base^(-2i/D)``:

    .. math::

        \\begin{pmatrix} x'_{2i} \\\\ x'_{2i+1} \\end{pmatrix} =
        \\begin{pmatrix} \\cos p\\theta_i & -\\sin p\\theta_i \\\\
        \\sin p\\theta_i & \\cos p\\theta_i \\end{pmatrix}
        \\begin{pmatrix} x_{2i} \\\\ x_{2i+1} \\end{pmatrix}

    Applied to queries at position ``m`` and keys at position ``n``, a rotation preserves
    lengths and ``R_m^T R_n = R_{n-m}``, so the score ``(R_m q) . (R_n k) = q . R_{n-m} k``
    depends on the positions only through ``n - m``. LLaMA-style code pairs column ``i`` with
    column ``i + D/2`` ("rotate half") instead: the same rotation, with the columns permuted.

    Args:
        x: queries or keys, one row per position (the second-to-last dimension).
        positions: the position of each row; defaults to ``0 .. L-1``. Integer or float.
        base: the wavelength scale; 10000 in the paper.

    Returns:
        The rotated tensor, same shape and dtype as ``x`` (angles computed in float64).

    Shape:
        ``x``: ``(..., L, D)`` with ``D`` even; ``positions``: ``(L,)``; output: ``(..., L, D)``.

    Raises:
        TypeError: if ``x`` is not a floating-point tensor, ``positions`` not a tensor, or ``base``
            not a number.
        ValueError: if ``x`` has fewer than 2 dimensions, ``D`` is odd, ``positions`` is not of
            shape ``(L,)`` or not on the device of ``x``, or ``base`` is not a finite number > 1.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
        >>> rotary_embedding(x, base=100.0)  # (cos p, sin p) for p = 0, 1, 2
        tensor([[ 1.0000,  0.0000],
                [ 0.5403,  0.8415],
                [-0.4161,  0.9093]])
    """
    check_tensor("x", x, (2, None))
    L, D = x.shape[-2], x.shape[-1]
    if D % 2:
        raise ValueError(
            f"x must have an even last dimension D (features are rotated in pairs); "
            f"got shape {shape_str(x.shape)}"
        )
    base = _check_base(base)
    if positions is None:
        positions = torch.arange(L, device=x.device)
    if not isinstance(positions, Tensor):
        raise TypeError(f"positions must be a torch.Tensor of shape (L,); got {type(positions)}")
    if positions.shape != (L,):
        raise ValueError(
            f"positions must have shape (L={L},), one position per row of x {shape_str(x.shape)}; "
            f"got {shape_str(positions.shape)}"
        )
    if positions.device != x.device:
        raise ValueError(
            f"positions must be on the device of x, {x.device}; got {positions.device}"
        )
    return _rotary(x, positions, base)


def _rotary(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """The kernel of :func:`rotary_embedding`: arguments already checked."""
    D = x.shape[-1]
    angles = positions.to(torch.float64).unsqueeze(1) * _inverse_frequencies(D, base).to(
        positions.device
    )  # (L, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (L, D/2) each
    pairs = x.unflatten(-1, (D // 2, 2))  # (..., L, D/2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]  # (..., L, D/2) each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2)  # (..., L, D/2, 2) -> (..., L, D)


def rotate_half_to_pairs(weight: Tensor, heads: int) -> Tensor:
    """The rows of a query or key projection reordered from "rotate half" RoPE to
    :func:`rotary_embedding`'s consecutive pairs.

    LLaMA, Gemma and Hugging Face's code turn feature ``i`` of each head with feature
    ``i + D/2``; attnlib turns ``2i`` with ``2i + 1``. Row ``i`` of each head's block of ``D``
    rows goes to ``2i``, row ``i + D/2`` to ``2i + 1``:

    .. math::

        W'_{hD + 2i} = W_{hD + i}, \\qquad W'_{hD + 2i + 1} = W_{hD + i + D/2}

    Queries and keys permuted alike leave every score unchanged, and the rotation of a
    permuted vector is the permuted rotation, so a model copied with its ``q_proj`` and
    ``k_proj`` rows permuted computes the same numbers (Hugging Face's conversion scripts
    permute the other way). A per-feature vector shared by the heads (a QK-norm scale, ``(D,)``)
    is permuted with ``heads=1``.

    Args:
        weight: ``(heads * D, ...)``: an ``nn.Linear`` weight ``(heads * D, E)``, a bias or a
            scale ``(heads * D,)``.
        heads: the number of heads whose rows ``weight`` stacks.

    Returns:
        A new tensor of the same shape, dtype and device, the rows permuted.

    Raises:
        TypeError: if ``weight`` is not a tensor or ``heads`` not an ``int``.
        ValueError: if ``weight`` is 0-D, ``heads`` is below 1 or does not divide the rows, or
            the head size ``D`` is odd.

    Example:
        >>> rotate_half_to_pairs(torch.arange(8), 2)  # two heads of D = 4
        tensor([0, 2, 1, 3, 4, 6, 5, 7])
        >>> x = torch.randn(5, 4, dtype=torch.float64)  # 5 positions, one head of D = 4
        >>> half = torch.cat([-x[:, 2:], x[:, :2]], dim=-1)  # rotate_half(x)
        >>> angles = torch.arange(5.0).view(5, 1) * 10000.0 ** (-torch.arange(0, 4, 2) / 4)
        >>> cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
        >>> theirs = x * cos + half * sin  # Hugging Face's apply_rotary_pos_emb
        >>> perm = rotate_half_to_pairs(torch.arange(4), 1)
        >>> torch.allclose(rotary_embedding(x[:, perm]), theirs[:, perm])
        True
    """
    if not isinstance(weight, Tensor):
        raise TypeError(f"weight must be a torch.Tensor; got {type(weight).__name__}")
    if weight.dim() == 0:
        raise ValueError("weight must have at least 1 dimension (heads * D rows); got 0-D")
    heads = check_int("heads", heads, low=1)
    rows = weight.shape[0]
    if rows % heads or (rows // heads) % 2:
        raise ValueError(
            f"weight must have heads * D rows with an even D (heads={heads}); got "
            f"{shape_str(weight.shape)}"
        )
    D = rows // heads
    halves = weight.reshape(heads, 2, D // 2, *weight.shape[1:])  # (heads, 2, D/2, ...)
    return halves.transpose(1, 2).reshape(weight.shape)  # (heads, D/2, 2, ...) -> rows


def alibi_slopes(num_heads: int) -> Tensor:
    """ALiBi's head slopes ``m_h`` (Press et al., 2022), a geometric sequence per head.

    For ``H`` a power of two, ``m_h = 2^(-8h/H)`` for ``h = 1 .. H`` (8 heads: 1/2, 1/4, ...,
    1/256). Otherwise the paper's rule: the slopes of the closest smaller power of two
    ``n``, then every other slope of ``2n`` until there are ``H``.

    Args:
        num_heads: ``H``.

    Returns:
        Float32 tensor of the ``H`` slopes in the paper's order: largest first for a power of
        two; otherwise the ``n`` slopes of ``n`` heads, then the interleaved extra ones
        (``alibi_slopes(6)`` is ``2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3``).

    Shape:
        output: ``(H,)``.

    Raises:
        TypeError: if ``num_heads`` is not an ``int``.
        ValueError: if ``num_heads`` is below 1.

    Example:
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
    """
    num_heads = check_int("num_heads", num_heads, low=1)

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    n = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(n) + power_of_two(2 * n)[0::2][: num_heads - n]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(num_heads: int, L: int, S: int | None = None, *, device=None) -> Tensor:
    """ALiBi's additive attention bias: ``-m_h |i - j|`` for head ``h``, query ``i``, key ``j``.

    .. math::

        B_{h,i,j} = -m_h\\, |i - j|, \\qquad m_h = 2^{-8h/H}

    Added to the scores (pass it as a float ``mask``), it penalises far keys linearly, with a
    different slope per head (:func:`alibi_slopes`); nothing is added to the embeddings. For a
    causal model combine it with :func:`attnlib.causal_mask` (set ``-inf`` where ``j > i``).

    Queries sit at positions ``0 .. L-1`` and keys at ``0 .. S-1`` (aligned top-left, like
    :func:`attnlib.causal_mask`). When the ``L`` queries are the *last* ``L`` of ``S``
    positions (decoding with a cache of keys), take the last rows of the square bias,
    ``alibi_bias(H, S)[:, S - L:]``.

    With :class:`attnlib.MultiHeadAttention` on one sequence ``(L, E)`` pass the bias as it
    is; on a batch ``(N, L, E)`` pass ``bias.unsqueeze(0)``, ``(1, H, L, S)``: there a 3-D
    mask means ``(N, L, S)``, one mask per sequence.

    Args:
        num_heads: ``H``.
        L: number of queries. S: number of keys, defaults to ``L``.
        device: where to create the bias.

    Returns:
        Float32 bias, one ``(L, S)`` matrix per head.

    Shape:
        output: ``(H, L, S)``.

    Raises:
        TypeError: if ``num_heads``, ``L`` or ``S`` is not an ``int``.
        ValueError: if ``num_heads``, ``L`` or ``S`` is below 1.

    Example:
        >>> alibi_bias(2, 3)[0]  # slope 2^-4
        tensor([[ 0.0000, -0.0625, -0.1250],
                [-0.0625,  0.0000, -0.0625],
                [-0.1250, -0.0625,  0.0000]])
    """
    S = L if S is None else S
    L = check_int("L", L, low=1)
    S = check_int("S", S, low=1)
    slopes = alibi_slopes(num_heads).to(device)  # (H,)
    i = torch.arange(L, device=device).unsqueeze(1)  # (L, 1)
    j = torch.arange(S, device=device).unsqueeze(0)  # (1, S)
    minus_distance = -(i - j).abs()  # (L, S), integers, so the diagonal is 0 and not -0.0
    return slopes.view(-1, 1, 1) * minus_distance  # (H, 1, 1) * (L, S) -> (H, L, S)


class Rotary:
    """RoPE as an object that an attention layer receives: rotate queries and keys.

    ``MultiHeadAttention(E, H, positions=Rotary())`` rotates each head's queries and keys by
    their positions (:func:`rotary_embedding`) after the projections; the string
    ``positions="rope"`` means ``Rotary()``. The layer calls the object with the queries and
    keys of every head and their positions: ``q, k, bias = scheme(q, k, q_pos, k_pos)``
    (``bias`` is ``None``: RoPE adds nothing to the scores). Equinox's ``process_heads`` and
    Hugging Face's ``position_embeddings`` hand positions to attention the same way.

    Args:
        base: the wavelength scale; 10000 in the paper.

    Shape:
        ``q``: ``(N, H, L, D)``, ``k``: ``(N, G, S, D)``, ``D`` even; ``q_pos``: ``(L,)``;
        ``k_pos``: ``(S,)``. Returns ``q`` and ``k`` rotated, same shapes, and ``None``.

    Raises:
        TypeError: if ``base`` is not a number.
        ValueError: if ``base`` is not a finite number > 1.

    Example:
        >>> rope = Rotary(base=100.0)
        >>> q = k = torch.tensor([[[[1.0, 0.0]]]])  # (1, 1, 1, 2)
        >>> q2, k2, bias = rope(q, k, torch.tensor([1]), torch.tensor([0]))
        >>> q2.flatten(), bias
        (tensor([0.5403, 0.8415]), None)
    """

    name = "rope"

    def __init__(self, base: float = 10000.0):
        self.base = _check_base(base)

    def __call__(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor):
        return _rotary(q, q_pos, self.base), _rotary(k, k_pos, self.base), None

    def check_head_dim(self, head_dim: int) -> None:
        """Raise if heads of size ``head_dim`` cannot be rotated (an odd ``D``)."""
        if head_dim % 2:
            raise ValueError(
                f"positions='rope' needs an even head_dim D (features are rotated in pairs); got "
                f"D={head_dim}: choose num_heads so that embed_dim / num_heads is even, or give "
                "head_dim"
            )

    def __eq__(self, other) -> bool:
        return isinstance(other, Rotary) and other.base == self.base

    def __hash__(self) -> int:
        return hash(("rope", self.base))

    def __repr__(self) -> str:
        return f"Rotary(base={self.base:g})"


class ALiBi:
    """ALiBi as an object that an attention layer receives: a bias ``-m_h |i - j|`` per head.

    ``MultiHeadAttention(E, H, positions=ALiBi())`` adds :func:`alibi_bias`'s penalty for the
    queries' and keys' positions to every head's scores; the string ``positions="alibi"``
    means ``ALiBi()``. Called as ``q, k, bias = scheme(q, k, q_pos, k_pos)``, it leaves ``q``
    and ``k`` as they are and returns the float bias ``(1, H, L, S)``, with ``H = q.shape[1]``
    and the slopes of :func:`alibi_slopes`.

    Raises:
        ValueError: not raised by ``ALiBi()`` itself, which takes no argument; the layer that
            calls it has checked the shapes it passes.

    Example:
        >>> q = k = torch.zeros(1, 2, 3, 4)  # (N, H, L, D)
        >>> _, _, bias = ALiBi()(q, k, torch.arange(3), torch.arange(3))
        >>> torch.equal(bias[0], alibi_bias(2, 3))
        True
    """

    name = "alibi"

    def __call__(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor):
        slopes = alibi_slopes(q.shape[1]).to(q.device)  # (H,)
        distance = (q_pos.unsqueeze(1) - k_pos.unsqueeze(0)).abs()  # (L, S), integers
        return q, k, -slopes.view(1, -1, 1, 1) * distance  # (1, H, L, S)

    def check_head_dim(self, head_dim: int) -> None:
        """ALiBi takes heads of any size."""

    def __eq__(self, other) -> bool:
        return isinstance(other, ALiBi)

    def __hash__(self) -> int:
        return hash("alibi")

    def __repr__(self) -> str:
        return "ALiBi()"


SCHEMES = {"rope": Rotary, "alibi": ALiBi}  # the strings a layer's positions= also takes


@runtime_checkable
class PositionScheme(Protocol):
    """What an attention layer's ``positions=`` takes: any object with these two methods
    (:class:`Rotary` and :class:`ALiBi` are two; a new scheme needs no change to the layers).

    - ``scheme(q, k, q_pos, k_pos) -> (q, k, bias)``: every head's queries ``(N, H, L, D)`` and
      keys ``(N, G, S, D)`` with their positions ``(L,)`` and ``(S,)``, changed or not, and a
      float bias broadcastable to the scores ``(N, H, L, S)``, or ``None``;
    - ``check_head_dim(D)``: raise a ``ValueError`` if heads of size ``D`` cannot be handled.

    Args:
        q, k, q_pos, k_pos: of the call, as above (the layer passes checked tensors).

    Raises:
        ValueError: from ``check_head_dim``, when the layer is made with heads the scheme
            cannot take.

    Example:
        >>> isinstance(Rotary(), PositionScheme), isinstance("rope", PositionScheme)
        (True, False)
    """

    def __call__(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor): ...

    def check_head_dim(self, head_dim: int) -> None:
        """Raise a ``ValueError`` if heads of size ``head_dim`` cannot be handled."""


def _position_scheme(positions, *, rope_base: float = 10000.0):
    """The scheme object for an attention layer's ``positions=``: ``None``, a
    :class:`PositionScheme` as given (a :class:`Rotary`, an :class:`ALiBi` or one of your own),
    or one made from the string ``"rope"`` or ``"alibi"``.

    Raises:
        ValueError: for any other value (a string names the choices).
    """
    if isinstance(positions, str):
        if positions in SCHEMES:
            return Rotary(rope_base) if positions == "rope" else ALiBi()
    elif positions is None or (
        isinstance(positions, PositionScheme) and not isinstance(positions, type)
    ):  # an object, not a class such as Rotary itself
        return positions
    raise ValueError(
        "positions must be None, 'rope', 'alibi', or a position scheme (an object with "
        "scheme(q, k, q_pos, k_pos) -> (q, k, bias) and check_head_dim(D), as "
        f"attnlib.positions.Rotary and ALiBi); got {positions!r}"
    )
