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

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib._checks import (
    _check_attention_mask,
    cache_alone,
    check_dropout,
    check_ids,
    check_input,
    check_int,
    check_model_cache,
    check_module_input,
    check_real,
    check_sizes,
    check_tensor,
    shape_str,
    unbatch,
)
from attnlib._util import repr_options
from attnlib.attention import _causal_mask
from attnlib.decoding import Cache, ModelCache, _sliding_window_mask
from attnlib.layers import SOFTMAX_OPTIONS, make_attention
from attnlib.positions import _position_scheme, sinusoidal_encoding

__all__ = ["GatedMLP", "LanguageModel", "RMSNorm", "TransformerBlock"]

ADDED = ("learned", "sinusoidal")  # position schemes added to the token vectors


def _check_ratio(mlp_ratio) -> float:
    return check_real("mlp_ratio", mlp_ratio, "a number >= 0", lambda r: r >= 0)


def _mlp(embed_dim: int, hidden: int, *, bias: bool, approximate: str = "none") -> nn.Sequential:
    """The blocks' MLP, ``Linear(E, hidden) -> GELU -> Linear(hidden, E)`` (shared by
    :class:`TransformerBlock` and :class:`attnlib.PostNormBlock`; sizes checked by them)."""
    return nn.Sequential(
        nn.Linear(embed_dim, hidden, bias=bias),
        nn.GELU(approximate=approximate),
        nn.Linear(hidden, embed_dim, bias=bias),
    )


ACTIVATIONS = {"gelu": "none", "gelu_tanh": "tanh"}  # activation -> nn.GELU's approximate


def _check_activation(activation, choices: dict = ACTIVATIONS):
    """``choices[activation]`` (by default ``nn.GELU``'s ``approximate``), or a TypeError or
    ValueError naming the choices."""
    if not isinstance(activation, str):
        raise TypeError(
            f"activation must be a str, one of {tuple(choices)}; got "
            f"{type(activation).__name__} {activation!r}"
        )
    if activation not in choices:
        raise ValueError(f"activation must be one of {tuple(choices)}; got {activation!r}")
    return choices[activation]


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Zhang and Sennrich, 2019): rescale each vector to RMS 1.

    .. math::

        y = \\frac{x}{\\sqrt{\\tfrac{1}{d} \\sum_i x_i^2 + \\epsilon}} \\odot (o + w)

    over the last dimension ``d``: no mean is subtracted and there is no bias, unlike
    ``nn.LayerNorm``. LLaMA, Qwen and ``torch.nn.RMSNorm`` store the scale itself (``o = 0``,
    ``w`` starts at 1); Gemma stores ``1 + w`` (``o = 1``, ``w`` starts at 0), so that its
    weights copy as they are with ``offset=1``. Either way the module starts as the plain
    normalisation. The sum runs in float32 at least (a ``float16`` or ``bfloat16`` input is
    normalised and scaled in float32, then cast back, as Gemma 3 does; float64 stays float64).

    Args:
        dim: ``d``, the size of the last dimension.
        eps: ``epsilon``, added to the mean square, ``>= 0``; LLaMA and Gemma use ``1e-6``
            (``1e-5`` in some LLaMA checkpoints: read it from the configuration).
        offset: ``o``, added to the learned weight; 0 (LLaMA) or 1 (Gemma).

    Attributes:
        weight: ``nn.Parameter`` of shape ``(d,)``, initialised to ``1 - offset``.

    Shape:
        - ``x``: ``(..., d)``; output: the same shape and dtype.

    Raises:
        TypeError: if ``dim`` is not an ``int``, ``eps`` or ``offset`` not a number, ``x`` not a
            floating-point tensor or of another dtype than ``weight``.
        ValueError: if ``dim`` is below 1, ``eps`` negative, ``offset`` not finite, ``x`` is 0-D
            or its last dimension is not ``d``, or ``x`` is on another device than ``weight``.

    Example:
        >>> norm = RMSNorm(4)
        >>> norm(torch.tensor([[3.0, -3.0, 3.0, -3.0], [1.0, 2.0, 3.0, 4.0]])).detach()
        tensor([[ 1.0000, -1.0000,  1.0000, -1.0000],
                [ 0.3651,  0.7303,  1.0954,  1.4606]])
        >>> gemma = RMSNorm(4, offset=1.0)  # stores 1 + w: starts at w = 0
        >>> gemma.weight
        Parameter containing:
        tensor([0., 0., 0., 0.], requires_grad=True)
    """

    def __init__(self, dim: int, *, eps: float = 1e-6, offset: float = 0.0):
        super().__init__()
        self.dim = check_int("dim", dim, low=1)
        self.eps = check_real("eps", eps, "a number >= 0", lambda e: e >= 0)
        self.offset = check_real("offset", offset, "a finite number")
        self.weight = nn.Parameter(torch.full((self.dim,), 1.0 - self.offset))

    def forward(self, x: Tensor) -> Tensor:
        """``x`` divided by its root mean square over the last dimension, times ``offset +
        weight``."""
        check_tensor("x", x, (1, None))
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (..., d={self.dim}); got {shape_str(x.shape)}")
        check_module_input("x", x, self.weight)
        return self._norm(x)

    def _norm(self, x: Tensor) -> Tensor:
        """The normalisation, on a checked ``x``."""
        dtype = torch.promote_types(x.dtype, torch.float32)  # float32 at least
        y = x.to(dtype)  # (..., d)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., d), RMS ~ 1
        return (y * (self.offset + self.weight.to(dtype))).to(x.dtype)  # (..., d)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps:g}" + repr_options(("offset", self.offset, 0.0))


GATES = {  # a gated MLP's activation -> its function
    "silu": F.silu,
    "gelu_tanh": functools.partial(F.gelu, approximate="tanh"),
    "gelu": F.gelu,
}


class GatedMLP(nn.Module):
    """A gated MLP (Shazeer, 2020): one projection, activated, gates another, element by element.

    .. math::

        \\operatorname{GatedMLP}(x) = \\bigl(\\phi(x W_{\\text{gate}}) \\odot x W_{\\text{up}}
        \\bigr)\\, W_{\\text{down}}

    With ``phi`` = SiLU it is SwiGLU (LLaMA, Qwen, Mistral); with the tanh approximation of GELU
    it is GeGLU as Gemma runs it (the exact GELU moves Gemma 3's logits by 0.01 to 0.04). The
    parts are named as in Hugging Face's ``LlamaMLP`` and ``Gemma3MLP`` (``gate_proj``,
    ``up_proj``, ``down_proj``), so that their ``state_dict`` copies by name. Three matrices
    instead of two: a model with a gated MLP takes ``hidden`` about ``8/3 E`` rather than
    ``4 E`` for the same number of parameters.

    Args:
        dim: ``E``, the size of the input and output vectors.
        hidden: the hidden width (Hugging Face's ``intermediate_size``).
        activation: ``phi``: ``"silu"`` (``x sigmoid(x)``, SwiGLU), ``"gelu_tanh"`` (GELU's
            tanh approximation, Gemma's GeGLU) or ``"gelu"`` (the exact GELU).
        bias: biases in the three projections (none in LLaMA and Gemma).

    Attributes:
        gate_proj: ``nn.Linear(E, hidden)``, activated.
        up_proj: ``nn.Linear(E, hidden)``, the gated values.
        down_proj: ``nn.Linear(hidden, E)``.

    Shape:
        - ``x``: ``(..., E)``; output: ``(..., E)``.

    Raises:
        TypeError: if ``dim`` or ``hidden`` is not an ``int``, ``activation`` not a string,
            ``bias`` not a ``bool``, ``x`` not a floating-point tensor or of another dtype than
            the weights.
        ValueError: if ``dim`` or ``hidden`` is below 1, ``activation`` is not one of the three,
            ``x`` is 0-D, its last dimension is not ``E``, or it is on another device.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> mlp = GatedMLP(8, 20)  # SwiGLU
        >>> mlp
        GatedMLP(
          8, 20, activation='silu'
          (gate_proj): Linear(in_features=8, out_features=20, bias=False)
          (up_proj): Linear(in_features=8, out_features=20, bias=False)
          (down_proj): Linear(in_features=20, out_features=8, bias=False)
        )
        >>> x = torch.randn(2, 3, 8)
        >>> by_hand = (F.silu(x @ mlp.gate_proj.weight.T) * (x @ mlp.up_proj.weight.T)) @ (
        ...     mlp.down_proj.weight.T)
        >>> torch.allclose(mlp(x), by_hand, atol=1e-6)
        True
    """

    def __init__(self, dim: int, hidden: int, *, activation: str = "silu", bias: bool = False):
        super().__init__()
        dim = check_int("dim", dim, low=1)
        hidden = check_int("hidden", hidden, low=1)
        act = _check_activation(activation, GATES)
        if not isinstance(bias, bool):
            raise TypeError(f"bias must be a bool; got {type(bias).__name__} {bias!r}")
        self.dim, self.hidden, self.activation = dim, hidden, activation
        self._act = act
        self.gate_proj = nn.Linear(dim, hidden, bias=bias)  # Hugging Face's order of creation
        self.up_proj = nn.Linear(dim, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, dim, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """``down_proj(phi(gate_proj(x)) * up_proj(x))``."""
        check_tensor("x", x, (1, None))
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (..., E={self.dim}); got {shape_str(x.shape)}")
        check_module_input("x", x, self.down_proj.weight)
        return self._gated(x)

    def _gated(self, x: Tensor) -> Tensor:
        """The MLP, on a checked ``x``."""
        gated = self._act(self.gate_proj(x)) * self.up_proj(x)  # (..., hidden)
        return self.down_proj(gated)  # (..., E)

    def extra_repr(self) -> str:
        return f"{self.dim}, {self.hidden}, activation={self.activation!r}" + repr_options(
            ("bias", self.down_proj.bias is not None, False)
        )


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

    The block is composed of modules: two norms, an MLP and the attention module
    ``attn``, any self-attention layer with the package's interface (``_self_attention``,
    ``new_cache``, ``check_cache``, ``takes_mask``: see :class:`attnlib.MultiHeadAttention`).
    Give it as ``attn=``, or let the block make it from keyword options
    (:func:`attnlib.layers.make_attention`: ``positions="rope"``, ``linear="delta"``,
    ``latent_dim=``, ``qk_norm=True``, ...). The norms and the MLP are LayerNorms and a GELU
    MLP unless given: ``norm=attnlib.RMSNorm`` and ``mlp=attnlib.GatedMLP(E, hidden)`` make a
    LLaMA block. ``post_norm=`` normalises each sublayer's output too, before the sum
    (Gemma 2 and 3's "sandwich"):

    .. math::

        x \\leftarrow x + \\operatorname{Norm}_{\\text{post}}(\\operatorname{Sublayer}(
            \\operatorname{Norm}_{\\text{pre}}(x)))

    Args:
        embed_dim: ``E``.
        num_heads: ``H``; must divide ``E``. Not with ``attn``.
        attn: the attention module (its ``embed_dim`` must be ``E``); default: made from
            ``num_heads``, ``bias``, ``dropout`` and ``**attention``.
        mlp: the MLP module, ``(..., E) -> (..., E)``, e.g. :class:`attnlib.GatedMLP` (its
            ``dim``, if it has one, must be ``E``); default: made from ``mlp_ratio``,
            ``activation`` and ``bias``.
        norm: a callable that makes each pre-norm from ``E``, ``norm(E) -> nn.Module``:
            :class:`attnlib.RMSNorm`, or ``lambda E: RMSNorm(E, eps=1e-5, offset=1.0)``;
            default: ``nn.LayerNorm(E, eps=norm_eps, bias=bias)``.
        post_norm: a callable as ``norm`` that makes a norm of each sublayer's output
            (``post_attn_norm``, ``post_mlp_norm``); default ``None``: none.
        mlp_ratio: ``r``, the MLP's hidden width is ``round(r * E)``; 0 for no MLP.
        dropout: probability of dropping an attention weight and each sum's added term, in
            training mode only (PyTorch's layer also drops inside the MLP; this block does not).
        bias: biases in every linear map and LayerNorm (``nn.TransformerEncoderLayer``'s ``bias``).
        norm_eps: the LayerNorms' ``eps``.
        activation: the MLP's GELU, ``"gelu"`` (exact, :math:`y\\,\\Phi(y)`, as
            ``nn.GELU()``) or ``"gelu_tanh"`` (its tanh approximation,
            ``nn.GELU(approximate="tanh")``, which GPT-2 was trained with).
        **attention: the options :func:`attnlib.layers.make_attention` maps onto a module:
            ``num_kv_heads``, ``positions`` (``"rope"``, ``"alibi"`` or a position scheme) for
            :class:`attnlib.MultiHeadAttention`; ``qk_norm``, ``softcap``, ``sink``, ``gate``
            for :class:`attnlib.ModernAttention`; ``latent_dim`` for
            :class:`attnlib.latent.MultiHeadLatentAttention` (decoding with a cache runs the
            absorbed form, a pass without one the expanded form); ``linear`` (``"linear"``,
            ``"delta"``, ``"gated_delta"``) for
            :class:`attnlib.linear_attention.LinearAttention` (causal by construction: it takes
            no mask and gives no weights; it decodes with a
            :class:`attnlib.linear_attention.StateCache`). Not with ``attn``.

    Attributes:
        ln1: ``nn.LayerNorm(E)`` (or ``norm(E)``), before the attention.
        ln2: ``nn.LayerNorm(E)`` (or ``norm(E)``), before the MLP (``None`` without an MLP).
        attn: the attention module.
        mlp: ``nn.Sequential(Linear(E, rE), GELU(), Linear(rE, E))``, the given ``mlp``, or
            ``None``.
        post_attn_norm: ``post_norm(E)``, after the attention, or ``None``.
        post_mlp_norm: ``post_norm(E)``, after the MLP, or ``None``.

    Shape:
        - ``x``: ``(L, E)`` or ``(N, L, E)``; output: the same shape.
        - ``mask``: as :class:`attnlib.MultiHeadAttention`'s (``True`` = may attend, or a float
          mask added to the scores), e.g. :func:`attnlib.causal_mask` ``(L, L)``.
        - weights: ``(H, L, S)`` or ``(N, H, L, S)`` with ``need_weights=True``, else ``None``.
        - with ``cache=`` (from ``block.attn.new_cache()``), ``x`` holds only the new
          positions; the cache applies the causal mask.

    Raises:
        ValueError: if a size is not a positive integer, ``E`` is not divisible by ``H``,
            ``activation`` is not ``"gelu"`` or ``"gelu_tanh"``, ``mlp_ratio`` is negative or so
            small that the MLP would have no hidden unit, ``dropout`` is not in ``[0, 1)``,
            ``attn`` comes with ``num_heads`` or options or has another ``embed_dim``, ``mlp``
            comes with ``mlp_ratio`` or ``activation`` or has another ``dim``, ``norm`` comes
            with ``norm_eps``, the
            options do not map onto a module (:func:`attnlib.layers.make_attention`), a
            linear block is given a ``mask``, ``x`` or ``mask`` has the wrong shape, ``cache``
            is combined with ``mask``, a filled ``cache`` does not fit the layer and the batch,
            or ``cache`` serves another layer.
        TypeError: if ``x`` is not a float tensor of the block's dtype, ``cache`` is not a
            cache of the attention's kind or holds keys of another dtype, ``mlp`` is not a
            module, ``norm`` or ``post_norm`` is not a callable (a module is refused: the block
            makes one per sublayer) or does not make a module.

    Example:
        >>> from attnlib import causal_mask
        >>> _ = torch.manual_seed(0)
        >>> block = TransformerBlock(12, 3).eval()
        >>> x = torch.randn(2, 5, 12)
        >>> y, weights = block(x, mask=causal_mask(5), need_weights=True)
        >>> y.shape, weights.shape
        (torch.Size([2, 5, 12]), torch.Size([2, 3, 5, 5]))
        >>> from attnlib import ModernAttention
        >>> TransformerBlock(12, attn=ModernAttention(12, 3, qk_norm=True)).attn.q_norm
        RMSNorm((4,), eps=1e-06, elementwise_affine=True)
        >>> from attnlib import GatedMLP, MultiHeadAttention, RMSNorm
        >>> llama = TransformerBlock(  # LLaMA: RMSNorm, grouped keys, RoPE, SwiGLU
        ...     12,
        ...     attn=MultiHeadAttention(12, 3, num_kv_heads=1, positions="rope"),
        ...     mlp=GatedMLP(12, 32),
        ...     norm=RMSNorm,
        ... )
        >>> llama(x, mask=causal_mask(5))[0].shape
        torch.Size([2, 5, 12])
        >>> sandwich = TransformerBlock(12, 3, norm=RMSNorm, post_norm=RMSNorm)  # Gemma 3's
        >>> sandwich.post_attn_norm, sandwich.post_mlp_norm
        (RMSNorm(12, eps=1e-06), RMSNorm(12, eps=1e-06))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int | None = None,
        *,
        attn: nn.Module | None = None,
        mlp: nn.Module | None = None,
        norm: Callable[[int], nn.Module] | None = None,
        post_norm: Callable[[int], nn.Module] | None = None,
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        bias: bool = True,
        norm_eps: float = 1e-5,
        activation: str = "gelu",
        **attention,
    ):
        super().__init__()
        embed_dim = check_int("embed_dim", embed_dim, low=1)
        approximate = _check_activation(activation)
        _check_parts(embed_dim, mlp, norm, mlp_ratio, norm_eps, activation)
        self.activation = activation
        self.mlp_ratio = _check_ratio(mlp_ratio)
        self.dropout = check_dropout("dropout", dropout)
        if norm is None:

            def norm(E: int) -> nn.Module:
                return nn.LayerNorm(E, eps=norm_eps, bias=bias)

        self.ln1 = _make_norm("norm", norm, embed_dim)
        if attn is None:
            attn = make_attention(embed_dim, num_heads, bias=bias, dropout=dropout, **attention)
        elif num_heads is not None or attention or getattr(attn, "embed_dim", None) != embed_dim:
            raise ValueError(
                f"attn must come alone (no num_heads, no attention options) and have the block's "
                f"embed_dim={embed_dim}; got num_heads={num_heads!r}, options "
                f"{sorted(attention)}, attn.embed_dim={getattr(attn, 'embed_dim', None)!r}"
            )
        self.attn = attn
        hidden = round(self.mlp_ratio * embed_dim)
        if self.mlp_ratio and not hidden:
            raise ValueError(
                f"mlp_ratio must be 0 (no MLP) or give a hidden width round(mlp_ratio * E) >= 1; "
                f"got mlp_ratio={mlp_ratio} with embed_dim={embed_dim}"
            )
        if mlp is not None:
            self.ln2, self.mlp = _make_norm("norm", norm, embed_dim), mlp
        elif hidden:
            self.ln2 = _make_norm("norm", norm, embed_dim)
            self.mlp = _mlp(embed_dim, hidden, bias=bias, approximate=approximate)
        else:
            self.ln2 = self.mlp = None
        self.post_attn_norm = self.post_mlp_norm = None  # no parameters, no state_dict keys
        if post_norm is not None:
            self.post_attn_norm = _make_norm("post_norm", post_norm, embed_dim)
            if self.mlp is not None:
                self.post_mlp_norm = _make_norm("post_norm", post_norm, embed_dim)
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
        x, mask, batched = _check_block_input(self, x, mask, cache)
        x, weights = self._forward(x, mask, cache, need_weights)
        return unbatch(batched, x, weights)  # (L, E) or (N, L, E); (H, L, S) or ...

    def _forward(self, x, mask, cache, need_weights):
        """The block without the checks, on ``x`` ``(N, L, E)`` and a 4-D ``mask`` or ``None``
        (:class:`LanguageModel` calls it)."""
        attended, weights = self.attn._self_attention(self.ln1(x), mask, need_weights, cache)
        # attended: (N, L, E); weights: (N, H, L, S) or None
        if self.post_attn_norm is not None:
            attended = self.post_attn_norm(attended)  # (N, L, E): Gemma 3's sandwich
        x = x + self.drop(attended)
        if self.mlp is not None:
            transformed = self.mlp(self.ln2(x))  # (N, L, E)
            if self.post_mlp_norm is not None:
                transformed = self.post_mlp_norm(transformed)  # (N, L, E)
            x = x + self.drop(transformed)  # (N, L, E)
        return x, weights


def _make_norm(name: str, norm: Callable[[int], nn.Module], embed_dim: int) -> nn.Module:
    """``norm(E)``, which must be an ``nn.Module``."""
    if not callable(norm) or isinstance(norm, nn.Module):
        raise TypeError(
            f"{name} must be a callable that makes a norm module from E (e.g. "
            f"attnlib.RMSNorm, or lambda E: attnlib.RMSNorm(E, offset=1.0)), not a module "
            f"(one is made per use) or None; got {type(norm).__name__}"
        )
    made = norm(embed_dim)
    if not isinstance(made, nn.Module):
        raise TypeError(
            f"{name} must be a callable that makes a norm module from E ({name}(E) -> "
            f"nn.Module, e.g. attnlib.RMSNorm or nn.LayerNorm); {name}({embed_dim}) gave "
            f"{type(made).__name__}"
        )
    return made


def _check_parts(embed_dim, mlp, norm, mlp_ratio, norm_eps, activation) -> None:
    """A block's given parts: ``mlp`` a module (then no ``mlp_ratio``, no ``activation``);
    ``norm`` without ``norm_eps`` (:func:`_make_norm` checks ``norm`` and ``post_norm``)."""
    if mlp is not None:
        if not isinstance(mlp, nn.Module):
            raise TypeError(
                f"mlp must be an nn.Module (e.g. attnlib.GatedMLP(E, hidden)) or None; got "
                f"{type(mlp).__name__}"
            )
        if mlp_ratio != 4.0 or activation != "gelu":
            raise ValueError(
                "mlp must come alone (no mlp_ratio, no activation: they make the default MLP); "
                f"got mlp_ratio={mlp_ratio!r}, activation={activation!r}"
            )
        width = getattr(mlp, "dim", embed_dim)
        if width != embed_dim:
            raise ValueError(f"mlp must have the block's dim E={embed_dim}; got mlp.dim={width}")
    if norm is not None and norm_eps != 1e-5:
        raise ValueError(
            "norm_eps sets the default LayerNorms' eps: give the eps to norm instead (e.g. "
            f"lambda E: attnlib.RMSNorm(E, eps={norm_eps!r})); got norm and norm_eps={norm_eps!r}"
        )


def _check_block_input(block, x, mask, cache):
    """The checks of a block's ``forward`` (:class:`TransformerBlock`,
    :class:`attnlib.PostNormBlock`): ``x`` and ``mask`` (:func:`attnlib._checks.check_input`),
    a mask the attention takes, and the cache (``block.attn.check_cache``). Returns ``x``
    ``(N, L, E)``, the 4-D mask and whether ``x`` was batched."""
    attn = block.attn
    if mask is not None and not attn.takes_mask:
        raise ValueError(
            f"mask must be None for a block of {type(attn).__name__} (takes_mask is False): it "
            "is causal by construction (each token reads the state of the tokens before it)"
        )
    cache_alone(cache, mask)
    weight = getattr(block.ln1, "weight", None)  # the dtype and device of the block
    if not isinstance(weight, Tensor):  # a norm without a scale
        weight = next(attn.parameters())
    x, mask, batched = check_input(
        x, mask, weight=weight, width=attn.embed_dim, heads=attn.num_heads
    )
    attn.check_cache(cache, x)
    return x, mask, batched


def _check_positions(positions):
    """The scheme object for the attention of a model's ``positions`` (not added ones)."""
    try:
        return _position_scheme(positions)
    except ValueError:
        raise ValueError(
            "positions must be one of 'learned', 'sinusoidal', 'rope', 'alibi', None, or an "
            f"attnlib.positions.Rotary or ALiBi object; got {positions!r}"
        ) from None


def _layer_options(options: dict, i: int, rules: tuple[str | None, ...]) -> dict:
    """Layer ``i``'s keywords from a model's ``options``: an option given as a list or tuple
    gives one value per layer; a linear-attention layer (``rules[i]``) gets its rule and none
    of softmax attention's options."""
    for name, value in options.items():
        if isinstance(value, (list, tuple)) and len(value) != len(rules):
            raise ValueError(
                f"{name} must give one value per layer ({len(rules)}) when it is a list; got "
                f"{len(value)}: {value!r}"
            )
    mine = {k: v[i] if isinstance(v, (list, tuple)) else v for k, v in options.items()}
    if rules[i] is None:
        return mine
    return {**{k: v for k, v in mine.items() if k not in SOFTMAX_OPTIONS}, "linear": rules[i]}


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
        block: the per-layer spec: a callable, ``block(i)`` is layer ``i``, any module with
            :class:`TransformerBlock`'s private ``_forward(x, mask, cache, need_weights)`` and an
            ``attn`` with the attention interface (:class:`TransformerBlock`,
            :class:`attnlib.PostNormBlock`, a block of your own). Default: a
            :class:`TransformerBlock` of ``E``, ``H`` and ``**options``.
        embed_scale: a factor ``s`` of the token vectors, ``h_0 = s E_tok[ids] + P``, applied
            in the model's dtype (``s`` rounded to it first); ``None`` (the default): none.
            Gemma scales by ``sqrt(E)`` (its embeddings are also its tied read-out, of small
            norm). Not stored in the ``state_dict``.
        **options: the default blocks' keywords (:class:`TransformerBlock`): ``mlp_ratio`` (0 for
            attention-only blocks), ``dropout`` (also on the embeddings; in training mode only),
            ``bias`` and ``norm_eps`` (also of ``ln_f``), ``norm`` (also makes ``ln_f``, with
            ``block=`` too: ``norm=attnlib.RMSNorm``), ``post_norm``, ``activation`` (not ``mlp``: a
            module would serve every layer; give ``block=``), and the attention options
            (``positions`` inside attention comes from ``positions``; ``num_kv_heads``,
            ``latent_dim``, ``qk_norm``, ``softcap``, ``sink``, ``gate``, ``linear``;
            :func:`attnlib.layers.make_attention`). An option given as a list or tuple gives one
            value per layer: ``linear`` as a rule (``"linear"``, ``"delta"``, ``"gated_delta"``) or
            ``None`` (softmax attention) per layer makes a hybrid, as Qwen3-Next's three Gated
            DeltaNet layers to one of attention, ``linear=("gated_delta",) * 3 + (None,)``. The
            options of softmax attention go to its softmax layers only; a linear layer gives
            ``None`` for its weights and decodes with a fixed-size
            :class:`attnlib.linear_attention.StateCache`.

    Attributes:
        token_embedding: ``nn.Embedding(V, E)``.
        position_embedding: ``nn.Embedding(max_len, E)`` with ``"learned"``, else ``None``.
        blocks: ``nn.ModuleList`` of the blocks.
        ln_f: the final ``nn.LayerNorm(E)``, or ``norm(E)``.
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
            ``mlp`` is given as an option, ``embeddings`` is not ``(V, E)``, ``ids`` holds an index
            outside ``0 .. V-1``, a sequence is longer than ``max_len`` with ``"learned"`` or
            ``"sinusoidal"`` positions, or ``cache`` was not made for this model and these ids:
            another number of layers, another ``window`` (``ModelCache(num_layers)`` for a model
            with a window), layers that saw different numbers of tokens, or kept keys of other
            heads, head size, batch size or device (make it with :meth:`new_cache`).
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
        window: int | None | list[int | None] | tuple[int | None, ...] = None,
        embeddings: Tensor | None = None,
        freeze_embeddings: bool = False,
        tie_weights: bool = True,
        block: Callable[[int], nn.Module] | None = None,
        embed_scale: float | None = None,
        **options,
    ):
        super().__init__()
        if embed_scale is not None:
            embed_scale = check_real(
                "embed_scale", embed_scale, "None or a finite number > 0", lambda s: s > 0
            )
        self.embed_scale = embed_scale  # a float, no buffer: the state_dict keys stay
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
        self.linear = _check_linear(options.pop("linear", None), num_layers)
        if "mlp" in options:
            raise ValueError(
                "mlp must not be a model option (one module would serve every layer, its weights "
                "shared); give each layer its own with block=lambda i: TransformerBlock(E, ..., "
                f"mlp=attnlib.GatedMLP(E, hidden)); got mlp={type(options['mlp']).__name__}"
            )
        for i, (rule, w) in enumerate(zip(self.linear, self.windows)):
            if rule is not None and w is not None:
                raise ValueError(
                    f"window must be None for a linear-attention layer (its state is its "
                    f"memory); got window={w} and linear={rule!r} in layer {i}"
                )
        dropout = options.get("dropout", 0.0)
        bias, norm_eps = options.get("bias", True), options.get("norm_eps", 1e-5)
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
        if block is None:
            options = {"positions": inside, **options}

            def block(i: int) -> TransformerBlock:
                layer = _layer_options(options, i, self.linear)
                return TransformerBlock(embed_dim, num_heads, **layer)

        self.blocks = nn.ModuleList(block(i) for i in range(num_layers))
        norm = options.get("norm")
        if norm is None:
            self.ln_f = nn.LayerNorm(embed_dim, eps=norm_eps, bias=bias)
        else:
            self.ln_f = _make_norm("norm", norm, embed_dim)  # (RMSNorm: LLaMA, Gemma)
        self.lm_head = nn.Linear(embed_dim, vocab_size, bias=False)
        self.apply(self._init_weights)
        for module in self.modules():  # a part whose start _init_weights must not keep
            if hasattr(module, "_after_init"):  # (LinearAttention's decay bias)
                module._after_init()
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
        """An empty :class:`ModelCache` for this model: each layer's own cache
        (``block.attn.new_cache()``: a :class:`attnlib.decoding.KVCache`, keeping the layer's
        ``window`` positions if it has a window, or a linear layer's
        :class:`attnlib.linear_attention.StateCache`), each serving its layer alone. For
        another kind of cache pass ``ModelCache([...])``, one cache per layer."""
        return ModelCache(
            [block.attn.new_cache(window=w) for block, w in zip(self.blocks, self.windows)]
        )

    def _check_length(self, total: int, what: str) -> None:
        if self.positions in ADDED and total > self.max_len:
            raise ValueError(
                f"{what} must be at most max_len={self.max_len} tokens with "
                f"positions={self.positions!r} (the position table has max_len rows); got {total}"
            )

    def forward(
        self,
        ids: Tensor,
        *,
        cache: ModelCache | None = None,
        need_weights: bool = False,
        attention_mask: Tensor | None = None,
    ) -> tuple[Tensor, list[Tensor] | None]:
        """Logits for the token after each position; returns ``(logits, weights or None)``.

        With ``cache=`` (from :meth:`new_cache`), ``ids`` holds only the new tokens: their keys
        and values are appended to the cache and they attend to everything it keeps. The
        arguments are checked here, once (see the class docstring for the errors); the blocks
        do not check them again.

        ``attention_mask`` ``(N, L)`` (as ``ids``; 1 or ``True`` for a real token, 0 for
        padding) runs a batch of sequences of different lengths, each padded *on the right*:
        no position attends to a padding key, so a sequence's logits are those it has alone
        (a padding position sees only itself; its logits mean nothing). Padding on the left
        would shift the positions of RoPE and of learned positions, and is refused. Not with a
        cache.
        """
        self._check(ids, cache, attention_mask)
        x, weights, _ = self._forward(ids, cache, need_weights, attention_mask)
        return self.read_out(x), weights  # (L, V) or (N, L, V)

    def hidden_states(
        self, ids: Tensor, *, cache: ModelCache | None = None, attention_mask: Tensor | None = None
    ) -> list[Tensor]:
        """The residual stream before the first block and after each: ``num_layers + 1``
        tensors ``h_0 .. h_n`` of ``(L, E)`` or ``(N, L, E)`` (``h_n`` before ``ln_f``).

        ``model.read_out(h[-1])`` gives :meth:`forward`'s logits. A model of a large vocabulary
        (Gemma's 262,144 pieces) need not hold every position's logits: read out only the
        positions needed, or a few at a time. ``ids``, ``cache`` and ``attention_mask`` as in
        :meth:`forward` (a long text read in pieces through a cache needs no logits until the
        end).

        Example:
            >>> _ = torch.manual_seed(0)
            >>> lm = LanguageModel(100, 12, 3, 2, max_len=16).eval()
            >>> ids = torch.tensor([[5, 17, 42]])
            >>> h = lm.hidden_states(ids)
            >>> len(h), h[-1].shape
            (3, torch.Size([1, 3, 12]))
            >>> torch.equal(lm.read_out(h[-1]), lm(ids)[0])
            True
        """
        self._check(ids, cache, attention_mask)
        return self._forward(ids, cache, False, attention_mask, keep=True)[2]

    def read_out(self, h: Tensor) -> Tensor:
        """The logits of residual-stream vectors ``h`` ``(..., E)``: ``ln_f(h) W_U``, shape
        ``(..., V)`` (no checks: the model's last step, for :meth:`hidden_states`)."""
        return self.lm_head(self.ln_f(h))  # (..., V)

    def _check(self, ids, cache, attention_mask) -> None:
        check_ids(ids, self.vocab_size)
        if cache is not None:
            if attention_mask is not None:
                raise ValueError(
                    "attention_mask must be None with a cache (decode each sequence with its "
                    "own cache); got both"
                )
            check_model_cache(cache, ModelCache, num_layers=self.num_layers, windows=self.windows)
            N, E = (ids.shape[0] if ids.dim() == 2 else 1), self.token_embedding.embedding_dim
            like = self.lm_head.weight.new_empty(N, 0, E)  # (N, 0, E): the blocks' batch, dtype
            for i, (block, layer) in enumerate(zip(self.blocks, cache.layers)):
                block.attn.check_cache(layer, like, name=f"cache (layer {i})")  # each its own
        if attention_mask is not None:
            real = _check_attention_mask(attention_mask, ids).bool()  # (L,) or (N, L)
            if (real[..., 1:] & ~real[..., :-1]).any():
                raise ValueError(
                    "attention_mask must pad on the right (1s, then 0s, in every row: a token "
                    "after padding would get the wrong position); got a 0 before a 1"
                )
        start = 0 if cache is None else cache.length
        self._check_length(start + ids.shape[-1], "the sequence (ids plus the cached tokens)")

    def _forward(self, ids, cache, need_weights, attention_mask=None, keep=False):
        """The model without the checks (:meth:`generate` calls it at every step); the blocks'
        private ``_forward`` does not check again. Returns the last residual stream ``(L, E)``
        or ``(N, L, E)``, the weights, and (``keep``) every residual stream."""
        batched = ids.dim() == 2
        ids = ids if batched else ids.unsqueeze(0)  # (N, L)
        L = ids.shape[1]
        start = 0 if cache is None else cache.length
        x = self.token_embedding(ids)  # (N, L, E)
        if self.embed_scale is not None:  # Gemma: sqrt(E), rounded to the model's dtype
            x = x * x.new_tensor(self.embed_scale)  # (N, L, E)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(start, start + L, device=ids.device))
        elif self.positions == "sinusoidal":
            x = x + self.position_encoding[start : start + L].to(x.dtype)  # (L, E)
        x = self.drop(x)
        masks = {}  # window -> (1 or N, 1, L, L) mask; with a cache, the cache masks
        if cache is None:
            for window in set(self.windows):
                if window is None:
                    mask = _causal_mask(L, L, ids.device)  # (L, L); L may be 0
                else:
                    mask = _sliding_window_mask(L, window, L, ids.device)  # (L, L)
                masks[window] = mask.view(1, 1, L, L)  # (1, 1, L, L): the blocks' 4-D mask
            if attention_mask is not None:
                real = attention_mask.bool().view(-1, 1, 1, L)  # (N, 1, 1, L): real keys
                self_ = torch.eye(L, dtype=torch.bool, device=ids.device)  # (L, L)
                masks = {w: (m & real) | self_ for w, m in masks.items()}  # (N, 1, L, L)
        layer_caches = [None] * self.num_layers if cache is None else cache.layers
        weights, hidden = [], [x] if keep else None
        for block, window, layer_cache in zip(self.blocks, self.windows, layer_caches):
            mask = masks.get(window) if cache is None else None
            x, w = block._forward(x, mask, layer_cache, need_weights)  # (N, L, E)
            weights.append(w)  # (N, H, L, S) or None
            if keep:
                hidden.append(x)
        weights = [unbatch(batched, w) for w in weights] if need_weights else None  # (H, L, S)
        if keep:
            hidden = [unbatch(batched, h) for h in hidden]  # (L, E) or (N, L, E) each
        return unbatch(batched, x), weights, hidden  # (L, E) or (N, L, E)

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
            x, _, _ = self._forward(step_input if use_cache else ids, cache, False)
            last = self.read_out(x[:, -1])  # (N, V): the last position's logits only
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
