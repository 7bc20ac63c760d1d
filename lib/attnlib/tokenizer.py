"""A toy word-level vocabulary (seed 001), made deterministic."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

__all__ = ["BOS", "EOS", "Vocabulary"]

BOS = 0  # index of the beginning-of-sequence token
EOS = 1  # index of the end-of-sequence token


class Vocabulary:
    """Word <-> index tables built from a text, with ``BOS = 0`` and ``EOS = 1``.

    Seed 001 numbered the words in ``set`` order, which changes from one Python process to
    the next (string hashing is randomised); here the words are **sorted**, so the indices
    are the same on every run. Words are split as the seed does: ``text.lower().split(" ")``.

    Args:
        text: a string, or an iterable of strings, whose words make the vocabulary.

    Attributes:
        index2word: ``dict[int, str]``, ``{0: "BOS", 1: "EOS", 2: first word, ...}``.
        word2index: the inverse ``dict[str, int]``.

    Raises:
        TypeError: if ``text`` is not a string or strings. ValueError: if it has no word.

    Example:
        >>> vocab = Vocabulary("How are you doing ?")
        >>> vocab.index2word
        {0: 'BOS', 1: 'EOS', 2: '?', 3: 'are', 4: 'doing', 5: 'how', 6: 'you'}
        >>> ids = vocab.encode("How are you ?")
        >>> ids
        tensor([[5, 3, 6, 2]])
        >>> vocab.decode(ids)
        'How are you ?'
    """

    def __init__(self, text: str | Iterable[str]):
        texts = [text] if isinstance(text, str) else list(text)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("text must be a str or an iterable of str")
        words = sorted({w for t in texts for w in t.lower().split(" ") if w})
        if not words:
            raise ValueError(f"text must contain at least one word; got {text!r}")
        self.index2word: dict[int, str] = {BOS: "BOS", EOS: "EOS"}
        for word in words:
            self.index2word[len(self.index2word)] = word
        self.word2index: dict[str, int] = {w: i for i, w in self.index2word.items()}

    def __len__(self) -> int:
        return len(self.index2word)

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} tokens)"

    def encode(self, sentence: str) -> Tensor:
        """Indices of the words of ``sentence`` as a ``(1, n)`` LongTensor (a batch of one).

        Raises:
            TypeError: if ``sentence`` is not a ``str``. ValueError: if it has no word.
            KeyError: naming every word that is not in the vocabulary.
        """
        if not isinstance(sentence, str):
            raise TypeError(f"sentence must be a str; got {type(sentence).__name__}")
        words = [w for w in sentence.lower().split(" ") if w]
        if not words:
            raise ValueError(f"sentence must contain at least one word; got {sentence!r}")
        missing = [w for w in words if w not in self.word2index]
        if missing:
            raise KeyError(f"words not in the vocabulary: {missing}")
        return torch.tensor([self.word2index[w] for w in words], dtype=torch.long).view(1, -1)

    def decode(self, ids: Tensor) -> str:
        """The sentence of a ``(1, n)`` or ``(n,)`` tensor of indices, capitalised as seed 001.

        Raises:
            ValueError: if ``ids`` has another shape. KeyError: naming unknown indices.
        """
        if (
            not isinstance(ids, Tensor)
            or ids.dim() not in (1, 2)
            or (ids.dim() == 2 and ids.shape[0] != 1)
        ):
            got = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(f"ids must be a tensor of shape (1, n) or (n,); got {got}")
        indices = ids.reshape(-1).tolist()  # (n,)
        missing = [i for i in indices if i not in self.index2word]
        if missing:
            raise KeyError(f"indices not in the vocabulary (0..{len(self) - 1}): {missing}")
        return " ".join(self.index2word[i] for i in indices).capitalize()
