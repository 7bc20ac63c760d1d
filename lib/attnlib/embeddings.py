"""Word embeddings: the :class:`Embeddings` object, a vocabulary of words and one vector each.

Where the vectors come from lives next door: :func:`attnlib.load_glove` and
:class:`attnlib.GloVe` (:mod:`attnlib.glove`) give the 400,000 packaged GloVe 6B vectors,
:func:`attnlib.read_glove_text` (:mod:`attnlib.glove_text`) reads any file in GloVe's text
format. Those modules import this one, never the other way round; import every name from
``attnlib`` (see the package's docstring for the rule).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from attnlib._checks import as_matrix, as_words, check_int, check_tensor, shape_str
from attnlib._util import short_repr
from attnlib.tokenizer import tokenize

__all__ = ["Embeddings", "UnknownWordError"]

_SUGGESTION_POOL = 50_000  # close matches are searched among the most frequent words


class UnknownWordError(KeyError):
    """A word, or several, that the embeddings do not contain.

    A ``KeyError`` whose message names every missing word and suggests close matches.
    ``.words`` lists the missing words.
    """

    def __init__(self, message: str, words: Sequence[str]):
        super().__init__(message)
        self.words = list(words)

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])


class Embeddings:
    """A vocabulary of words and one vector per word, looked up by word.

    It behaves like a read-only ``dict`` from words to vectors: ``emb[word]`` is a vector,
    ``word in emb`` and ``len(emb)`` count words, and iterating over it gives the words in
    row order (``list(emb) == emb.words``). A word is a ``str``; for several words at once
    use :meth:`matrix`, for the row ``i`` use ``emb.words[i]`` and ``emb.vectors[i]``.

    Args:
        words: the words (a sequence of ``str``), one per row of ``vectors``, without repeats.
        vectors: a ``(V, D)`` array, tensor or nested list of real numbers (a read-only memory
            map is fine: it is not copied until :attr:`vectors` is first read).

    Attributes:
        words: list of the ``V`` words, in row order.
        dim: ``D``, the size of a vector.

    Shape:
        ``vectors``: ``(V, D)``; ``emb[word]``: ``(D,)``; ``emb.matrix(words)``: ``(n, D)``.

    Raises:
        TypeError: if ``words`` is a single ``str`` or holds something else than ``str``, or
            ``vectors`` does not hold real numbers.
        ValueError: if ``vectors`` is not 2-D or has no column, its number of rows differs from the
            number of ``words``, or a word repeats in ``words``.

    Example:
        >>> emb = Embeddings(["cat", "dog"], torch.tensor([[1.0, 0.0], [0.6, 0.8]]))
        >>> emb["dog"], "cat" in emb, len(emb), emb.dim
        (tensor([0.6000, 0.8000]), True, 2, 2)
        >>> list(emb)
        ['cat', 'dog']
        >>> emb.most_similar("cat", k=1)
        [('dog', 0.6000000238418579)]
    """

    def __init__(self, words: Sequence[str], vectors):
        array = as_matrix("vectors", vectors)
        words = as_words("words", words)
        if len(words) != array.shape[0]:
            raise ValueError(
                f"vectors must have one row per word, ({len(words)}, D); got "
                f"{shape_str(array.shape)}"
            )
        index = dict(zip(words, range(len(words))))
        if len(index) != len(words):
            seen: set[str] = set()
            repeats = [w for w in words if w in seen or seen.add(w)]
            raise ValueError(f"words must not repeat; got repeated {repeats[:5]}")
        self.words = words
        self._index = index
        self._array = array

    @classmethod
    def _from_checked(cls, words: list[str], array: np.ndarray, index: dict[str, int]):
        """An instance from words and an array the readers have already checked (no second
        pass over 400,000 words)."""
        self = cls.__new__(cls)
        self.words, self._array, self._index = words, array, index
        return self

    @property
    def dim(self) -> int:
        """``D``, the number of dimensions of a vector."""
        return int(self._array.shape[1])

    @functools.cached_property
    def vectors(self) -> Tensor:
        """All vectors as a float32 tensor ``(V, D)`` (copied from the array on first use)."""
        return torch.from_numpy(np.array(self._array, dtype=np.float32, order="C"))

    @functools.cached_property
    def _unit_vectors(self) -> Tensor:
        return torch.nn.functional.normalize(self.vectors, dim=1)  # (V, D), rows of norm 1

    def __len__(self) -> int:
        return len(self.words)

    def __iter__(self) -> Iterator[str]:
        return iter(self.words)

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            raise TypeError(
                f"`word in emb` takes one word (a str); got {type(word).__name__}. For several "
                "words: all(w in emb for w in words)"
            )
        return word in self._index

    def __repr__(self) -> str:
        return f"Embeddings({len(self)} words, dim={self.dim})"

    def __getitem__(self, word: str) -> Tensor:
        """The vector of ``word``, a ``(D,)`` float32 tensor; ``UnknownWordError`` if absent."""
        if not isinstance(word, str):
            if isinstance(word, (int, np.integer, slice, Tensor)):
                raise TypeError(
                    f"word must be one word (a str), not a row number; got "
                    f"{type(word).__name__} {short_repr(word)}. Row i is emb.vectors[i], its word "
                    "emb.words[i]"
                )
            raise TypeError(
                f"word must be one word (a str); got {type(word).__name__}. For several words "
                "use emb.matrix(words), an (n, D) tensor"
            )
        return self.matrix([word])[0]

    def _missing(self, words: Iterable[str]) -> UnknownWordError:
        missing = list(dict.fromkeys(w for w in words if w not in self._index))
        pool = self.words[:_SUGGESTION_POOL]
        parts = []
        for w in missing:
            if w.lower() != w and w.lower() in self._index:  # GloVe 6B is all lower case
                parts.append(f"{w!r} (the vocabulary is lower case: use {w.lower()!r})")
                continue
            close = difflib.get_close_matches(w, pool, n=3, cutoff=0.7)
            hint = f" (close matches: {', '.join(close)})" if close else " (no close match)"
            parts.append(f"{w!r}{hint}")
        noun = "word" if len(missing) == 1 else "words"
        return UnknownWordError(
            f"unknown {noun} not in the {len(self)}-word vocabulary: " + "; ".join(parts),
            missing,
        )

    def matrix(self, words: str | Sequence[str]) -> Tensor:
        """Stack the vectors of ``words`` into a matrix, one row per word (seed 000's
        ``embedding_matrix``).

        Args:
            words: a list of words, or a sentence (split with :func:`tokenize`).

        Returns:
            A ``(n, D)`` float32 tensor, row ``i`` the vector of ``words[i]``.

        Raises:
            TypeError: if ``words`` is neither a ``str`` nor a sequence of ``str``.
            ValueError: if ``words`` holds no word.
            UnknownWordError: if a word of ``words`` is not in the vocabulary; a ``KeyError`` naming
                every unknown word with close matches.
        """
        if isinstance(words, str):
            words = tokenize(words)
        elif not isinstance(words, Iterable):
            raise TypeError(
                f"words must be a sentence (str) or a sequence of words (str); got "
                f"{type(words).__name__}"
            )
        words = as_words("words", words)
        if not words:
            raise ValueError("words must contain at least one word; got an empty sequence")
        rows = [self._index.get(w) for w in words]
        if None in rows:
            raise self._missing(words)
        return torch.from_numpy(np.array(self._array[rows], dtype=np.float32, order="C"))  # (n, D)

    def most_similar(self, word_or_vector: str | Tensor, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` words whose vectors have the highest cosine with a word or a vector.

        .. math::

            \\operatorname*{arg\\,top\\text{-}k}_{w} \\cos(\\mathbf{v}, \\mathbf{e}_w)

        Fewer than ``k`` pairs come back if the vocabulary is smaller; a word whose own vector
        is not finite (NaN, inf) is never returned.

        Args:
            word_or_vector: a word (itself excluded from the answer) or a ``(D,)`` vector.
            k: how many neighbours (a positive ``int``, NumPy integers too).

        Returns:
            A list of ``(word, cosine)`` pairs, highest cosine first.

        Raises:
            UnknownWordError: if ``word_or_vector`` is a word that is not in the vocabulary.
            TypeError: if ``word_or_vector`` is a vector that is not a float tensor, or ``k``
                is not an int (``bool`` included).
            ValueError: if ``k < 1``, ``word_or_vector`` is a vector of the wrong size, or the
                vector (``word_or_vector`` or the word's vector) is zero (its cosine is undefined)
                or not finite.
        """
        k = check_int("k", k, low=1)
        exclude = None
        if isinstance(word_or_vector, str):
            vector = self[word_or_vector]
            exclude = self._index[word_or_vector]
            what = f"the vector of {word_or_vector!r}"
        else:
            vector = check_tensor("word_or_vector", word_or_vector, (1,))
            if vector.shape[0] != self.dim:
                raise ValueError(
                    f"word_or_vector must be a word or a vector of shape ({self.dim},); got "
                    f"{shape_str(vector.shape)}"
                )
            what = None
        bad = vector[~torch.isfinite(vector)]
        if bad.numel():
            got = f"{what}, which holds" if what else "a vector holding"
            raise ValueError(f"word_or_vector must be finite; got {got} {float(bad[0])}")
        if not bool(vector.any()):
            raise ValueError(
                "word_or_vector must have a non-zero norm (the cosine with a zero vector is "
                f"undefined); got {what or 'a zero vector'}"
            )
        cosines = self._unit_vectors @ torch.nn.functional.normalize(vector.float(), dim=0)
        cosines = torch.nan_to_num(cosines, nan=-float("inf"))  # else topk ranks NaN first
        if exclude is not None:
            cosines[exclude] = -float("inf")
        top = torch.topk(cosines, min(k, len(self)))
        return [
            (self.words[i], float(c))
            for c, i in zip(top.values, top.indices.tolist())
            if c != -float("inf")
        ]
