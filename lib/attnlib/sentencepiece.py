"""SentencePiece's byte-pair encoding, by hand: Gemma 3's tokenizer, applied in Python.

GPT-2's BPE (:mod:`attnlib.bpe`) replays a list of merges. SentencePiece's BPE (Kudo and
Richardson, 2018), which Llama 2 and Gemma use, keeps no list: its vocabulary gives every piece a
*score*, and any two neighbouring symbols may merge when their concatenation is a piece. The best
score goes first. A GGUF file calls this tokenizer model ``"llama"``; its vocabulary is three
lists (``tokenizer.ggml.tokens``, ``.scores`` and ``.token_type``), which
:meth:`SentencePieceTokenizer.from_vocab` reads.

1. *Normalise*: every space becomes ``▁`` (U+2581). Gemma adds no space in front of the text and
   applies no Unicode normalisation (no NFKC: ``transformers``' ``GemmaTokenizer`` only replaces
   the spaces too).
2. *Split* into symbols: where a user-defined piece (HTML tags, runs of ``\\n``, ``\\t`` or ``▁``)
   starts, the longest one is a *frozen* symbol that never merges; elsewhere each character is a
   symbol. Control pieces such as ``<start_of_turn>`` are matched the same way when
   ``parse_special`` is on.
3. *Merge*: join the neighbouring pair of unfrozen symbols whose concatenation is the piece of
   highest score; on a tie, the leftmost pair. Repeat until no pair is a piece.
4. *Look up* each symbol's id. A symbol that is no piece (a character the vocabulary lacks) is
   spelled by its UTF-8 bytes, one byte piece ``<0xNN>`` each (*byte fallback*).

The tests check the ids against ``transformers``' tokenizer built from the same GGUF file, on
every paragraph of the *Odyssey* and on hard Unicode cases: equal, except on runs of more than 31
spaces (see :class:`SentencePieceTokenizer`). The ``sentencepiece`` library itself, given these
pieces, scores and types as a ``ModelProto``, gave the same ids as ``parse_special=False`` on the
same texts (checked once while writing this module; the package is not a dependency).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence

from torch import Tensor

from attnlib._checks import as_id_list, check_int, check_real
from attnlib._util import short_repr

__all__ = ["SentencePieceTokenizer"]

# the piece types of SentencePiece's ModelProto, which GGUF's tokenizer.ggml.token_type keeps
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"  # ▁, how SentencePiece writes a space inside a piece


def _check_text(text) -> str:
    """``text`` is a ``str`` that UTF-8 can encode (no lone surrogate such as ``"\\ud800"``)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__} {short_repr(text)}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"text must be encodable as UTF-8; got the lone surrogate U+{ord(text[e.start]):04X} "
            f"at position {e.start}"
        ) from None
    return text


def _check_bool(name: str, flag) -> bool:
    if not isinstance(flag, bool):
        raise TypeError(f"{name} must be a bool; got {type(flag).__name__} {short_repr(flag)}")
    return flag


def _as_list(name: str, items) -> list:
    if isinstance(items, (str, bytes, bytearray, Mapping)) or not isinstance(items, Iterable):
        raise TypeError(f"{name} must be a list; got {type(items).__name__}")
    return list(items)


class SentencePieceTokenizer:
    """SentencePiece's BPE tokenizer for a vocabulary of pieces, scores and types: text to ids.

    :meth:`encode` normalises the text (each space becomes ``▁``), splits it into symbols (a
    user-defined piece, frozen, or one character), then merges, again and again, the neighbouring
    pair of unfrozen symbols whose concatenation is a piece of the highest score (the leftmost
    pair on a tie), as SentencePiece's ``bpe_model.cc`` does. A heap of candidate pairs finds the
    best one, so a paragraph of ``n`` characters takes ``O(n log n)`` steps, not ``O(n^2)``. A
    symbol that is no piece becomes the byte pieces ``<0xNN>`` of its UTF-8 bytes, or the
    unknown piece if the vocabulary has no byte pieces.

    Which concatenations count: normal, user-defined and unused pieces, as in SentencePiece
    (control, unknown and byte pieces never come from a merge). An unused piece may be made by a
    merge, but the output spells it as the two symbols it was made of, recursively.

    A GGUF file written by llama.cpp spells Gemma's whitespace pieces with real spaces (``"  "``),
    because llama.cpp matches them before it replaces the spaces; the pieces made only of spaces
    are respelled with ``▁`` here, as ``transformers`` does, so that they match the normalised
    text.

    **Text that spells a control token.** ``parse_special=True`` (the default) reads
    ``"<start_of_turn>"`` in the text as that one control token, as ``transformers`` and
    llama.cpp's chat do, so a prompt written with Gemma's chat template encodes as the model was
    trained. SentencePiece itself never does: its ``encode`` reads text as text, which
    ``parse_special=False`` gives (``"<bos>"`` becomes ``<``, ``bos``, ``>``, and no user can
    forge a control token). User-defined pieces are matched either way.

    **Where** ``transformers`` **differs.** It rebuilds Gemma's tokenizer as ``tokenizers``'
    ``BPE`` model, a list of merges ranked by the pieces' order in the file (for Gemma's normal
    pieces, the order of the scores, so the same pairs merge), and leaves the whitespace pieces
    ``▁▁`` .. ``▁▁▁…`` (2 to 31 spaces) to those merges instead of freezing them. Both give one
    piece for up to 31 spaces; a longer run is cut differently: 40 spaces are 31 + 9 here, as in
    SentencePiece and llama.cpp (the longest user-defined piece first), and 16 + 24 in
    ``transformers``. The ids are equal on every other text the tests try.

    Args:
        pieces: the pieces, ``pieces[id]`` (a list of non-empty, distinct ``str``).
        scores: the score of each piece (a list of real numbers, higher merges first).
        types: the type of each piece: 1 normal, 2 unknown, 3 control, 4 user-defined,
            5 unused, 6 byte (``<0x00>`` .. ``<0xFF>``; all 256 or none).
        bos_id: the id :meth:`encode` puts first (``None``: no BOS token).
        eos_id: the end-of-sequence id, kept for the caller (``None``: none).
        unk_id: the id of a symbol that is no piece when the vocabulary has no byte pieces
            (``None``: the piece of type 2, if any).
        pad_id: the padding id, kept for the caller (``None``: none).

    Attributes:
        vocab: the pieces, ``vocab[id]`` (whitespace pieces respelled with ``▁``).
        scores: the scores, ``scores[id]``.
        types: the types, ``types[id]``.
        bos_id: the id of ``<bos>`` (``int`` or ``None``); ``eos_id``, ``unk_id`` and ``pad_id``
            likewise.

    Raises:
        TypeError: if ``pieces``, ``scores`` or ``types`` is not a list, or an item has the wrong
            type (naming its index), or a special id is not an ``int``.
        ValueError: if the three lists differ in length or are empty, a piece is empty or
            repeated, a type is outside 1..6, the byte pieces are not all 256, or a special id
            is outside the vocabulary.

    Example:
        >>> tok = SentencePieceTokenizer(
        ...     ["<unk>", "<s>", "▁", "a", "b", "ab", "▁ab", "\\n"],
        ...     [0, 0, -1, -2, -3, -4, -5, 0],
        ...     [2, 3, 1, 1, 1, 1, 1, 4],
        ...     bos_id=1,
        ... )
        >>> tok
        SentencePieceTokenizer(8 pieces, no byte fallback)
        >>> tok.pieces(" ab\\nba"), tok.encode(" ab\\nba")
        (['▁ab', '\\n', 'b', 'a'], [1, 6, 7, 4, 3])
        >>> tok.decode([1, 6, 7, 4, 3])
        ' ab\\nba'
    """

    def __init__(
        self,
        pieces: Sequence[str],
        scores: Sequence[float],
        types: Sequence[int],
        *,
        bos_id: int | None = None,
        eos_id: int | None = None,
        unk_id: int | None = None,
        pad_id: int | None = None,
    ):
        pieces, scores, types = (
            _as_list(n, x) for n, x in [("pieces", pieces), ("scores", scores), ("types", types)]
        )
        if not len(pieces) == len(scores) == len(types):
            raise ValueError(
                f"pieces, scores and types must have the same length; got {len(pieces)}, "
                f"{len(scores)} and {len(types)}"
            )
        if not pieces:
            raise ValueError("pieces must hold at least one piece; got an empty list")
        self.vocab = [_check_piece(i, p) for i, p in enumerate(pieces)]
        self.scores = [
            s if type(s) is float else check_real(f"scores[{i}]", s) for i, s in enumerate(scores)
        ]
        self.types = [
            t if type(t) is int and 1 <= t <= 6 else check_int(f"types[{i}]", t, low=1, high=6)
            for i, t in enumerate(types)
        ]
        self._ids = {p: i for i, p in enumerate(self.vocab)}  # piece -> id
        if len(self._ids) != len(self.vocab):
            twice = next(p for i, p in enumerate(self.vocab) if self._ids[p] != i)
            raise ValueError(
                f"pieces must be distinct; {twice!r} is pieces[{self.vocab.index(twice)}] and "
                f"pieces[{self._ids[twice]}]"
            )
        size = len(self.vocab)
        if unk_id is None:
            unk_id = next((i for i, t in enumerate(self.types) if t == UNKNOWN), None)
        self.bos_id, self.eos_id, self.unk_id, self.pad_id = (
            None if i is None else check_int(name, i, low=0, high=size - 1)
            for name, i in [
                ("bos_id", bos_id),
                ("eos_id", eos_id),
                ("unk_id", unk_id),
                ("pad_id", pad_id),
            ]
        )
        # what a merge may make (SentencePiece's pieces_): piece -> score
        self._mergeable = {
            p: s
            for p, s, t in zip(self.vocab, self.scores, self.types)
            if t in (NORMAL, USER_DEFINED, UNUSED)
        }
        self._unused = {p for p, t in zip(self.vocab, self.types) if t == UNUSED}
        self._byte_ids = _byte_ids(self.vocab, self.types)  # byte -> id, or None
        # the frozen symbols, without and with the control pieces, by their first character
        user = [p for p, t in zip(self.vocab, self.types) if t == USER_DEFINED]
        control = [p for p, t in zip(self.vocab, self.types) if t == CONTROL]
        self._frozen = {False: _frozen_pattern(user), True: _frozen_pattern(user + control)}

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        fallback = "byte fallback" if self._byte_ids else "no byte fallback"
        return f"SentencePieceTokenizer({len(self)} pieces, {fallback})"

    @classmethod
    def from_vocab(cls, vocab: Mapping) -> SentencePieceTokenizer:
        """A tokenizer from a vocabulary dict as read from a GGUF file.

        Args:
            vocab: a mapping with the keys ``tokens``, ``scores`` and ``types`` (the lists of
                :class:`SentencePieceTokenizer`'s ``pieces``, ``scores`` and ``types``) and
                optionally ``bos_id``, ``eos_id``, ``unk_id`` and ``pad_id``.

        Returns:
            A :class:`SentencePieceTokenizer`.

        Raises:
            TypeError: if ``vocab`` is not a mapping, or as :class:`SentencePieceTokenizer`.
            ValueError: if a key is missing, or as :class:`SentencePieceTokenizer`.

        Example:
            >>> vocab = {"tokens": ["<unk>", "a"], "scores": [0.0, 0.0], "types": [2, 1]}
            >>> SentencePieceTokenizer.from_vocab(vocab).encode("aa", add_bos=False)
            [1, 1]
        """
        if not isinstance(vocab, Mapping):
            raise TypeError(
                f"vocab must be a dict with the keys 'tokens', 'scores' and 'types'; got "
                f"{type(vocab).__name__}"
            )
        missing = [k for k in ("tokens", "scores", "types") if k not in vocab]
        if missing:
            raise ValueError(
                f"vocab must have the keys 'tokens', 'scores' and 'types'; it lacks "
                f"{', '.join(map(repr, missing))} (it has {', '.join(map(repr, vocab))})"
            )
        ids = {k: vocab.get(k) for k in ("bos_id", "eos_id", "unk_id", "pad_id")}
        return cls(vocab["tokens"], vocab["scores"], vocab["types"], **ids)

    def _symbols(self, text: str, parse_special: bool) -> list[str]:
        """The pieces of normalised ``text``: SentencePiece's BPE (``bpe_model.cc``)."""
        # split: where a frozen piece starts, the longest one (a regular expression finds them),
        # else one symbol per character
        frozen_pieces, pattern = self._frozen[parse_special]
        symbols, start = [], 0
        for match in pattern.finditer(text):
            symbols += text[start : match.start()]
            symbols.append(match.group())
            start = match.end()
        symbols += text[start:]
        frozen = [s in frozen_pieces for s in symbols]
        # a doubly linked list: the neighbours of symbol i; a merged-away symbol becomes ""
        prev = list(range(-1, len(symbols) - 1))
        next_ = list(range(1, len(symbols) + 1))
        next_[-1:] = [-1]
        # the candidate merges, best first: (-score, left, right, merged piece); on equal
        # scores the smaller left index, the leftmost pair, comes first
        mergeable = self._mergeable
        heap = [
            (-mergeable[a + b], i, i + 1, a + b)
            for i, (a, b) in enumerate(zip(symbols, symbols[1:]))
            if a + b in mergeable and not (frozen[i] or frozen[i + 1])
        ]
        heapq.heapify(heap)

        def push(left: int, right: int) -> None:  # the pair left, right, if it makes a piece
            if left >= 0 and right >= 0 and not (frozen[left] or frozen[right]):
                piece = symbols[left] + symbols[right]
                if piece in mergeable:
                    heapq.heappush(heap, (-mergeable[piece], left, right, piece))

        made_of: dict[str, tuple[str, str]] = {}  # unused piece -> the two symbols it joined
        while heap:
            _, left, right, piece = heapq.heappop(heap)
            if not symbols[left] or not symbols[right] or symbols[left] + symbols[right] != piece:
                continue  # stale: one of the two has changed since the pair was pushed
            if piece in self._unused:
                made_of[piece] = (symbols[left], symbols[right])
            symbols[left], symbols[right] = piece, ""
            next_[left] = next_[right]
            if next_[right] >= 0:
                prev[next_[right]] = left
            push(prev[left], left)
            push(left, next_[left])

        def resegment(piece: str) -> list[str]:  # an unused piece as the symbols it joined
            if piece not in made_of:
                return [piece]
            return resegment(made_of[piece][0]) + resegment(made_of[piece][1])

        return [p for s in symbols if s for p in resegment(s)]

    def _encode(self, text, add_bos, parse_special) -> tuple[list[str], list[int]]:
        """The pieces and ids of ``text`` (checked here), BOS included if ``add_bos``."""
        text = _check_text(text)
        add_bos = _check_bool("add_bos", add_bos)
        parse_special = _check_bool("parse_special", parse_special)
        if add_bos and self.bos_id is None:
            raise ValueError("add_bos=True needs a bos_id; this tokenizer has none")
        pieces, ids = [], []
        if add_bos:
            pieces.append(self.vocab[self.bos_id])
            ids.append(self.bos_id)
        for symbol in self._symbols(text.replace(" ", SPACE), parse_special):
            i = self._ids.get(symbol)
            if i is not None:
                pieces.append(symbol)
                ids.append(i)
            elif self._byte_ids:  # byte fallback: one piece per UTF-8 byte
                for b in symbol.encode("utf-8"):
                    pieces.append(self.vocab[self._byte_ids[b]])
                    ids.append(self._byte_ids[b])
            elif self.unk_id is None:
                raise ValueError(
                    f"text holds {symbol!r}, which is no piece, and the vocabulary has neither "
                    f"byte pieces nor an unknown piece (unk_id) to write it with"
                )
            elif not ids or ids[-1] != self.unk_id:  # a run of unknowns is one <unk>
                pieces.append(self.vocab[self.unk_id])
                ids.append(self.unk_id)
        return pieces, ids

    def pieces(self, text: str, *, parse_special: bool = True) -> list[str]:
        """The pieces of ``text``, as :meth:`encode` finds them (without BOS).

        Args:
            text: the text.
            parse_special: read a control token spelled in the text (``"<start_of_turn>"``)
                as that token, as ``transformers`` does (``False``: as text, as SentencePiece).

        Returns:
            The pieces (``▁`` for a space, ``<0xNN>`` for a byte of a character the
            vocabulary lacks); empty for an empty text.

        Raises:
            TypeError: if ``text`` is not a ``str`` or ``parse_special`` not a ``bool``.
            ValueError: if ``text`` holds a lone surrogate (``"\\ud800"``), which UTF-8 cannot
                encode.

        Example:
            >>> tok = SentencePieceTokenizer(
            ...     ["<unk>", "▁", "s", "h", "i", "p", "hi", "▁s", "hip"],
            ...     [0, -1, -1, -1, -1, -1, -2, -3, -4],
            ...     [2, 1, 1, 1, 1, 1, 1, 1, 1],
            ... )
            >>> tok.pieces(" ship"), tok.pieces(" shipé")  # no "é", no byte pieces: <unk>
            (['▁s', 'hip'], ['▁s', 'hip', '<unk>'])
        """
        return self._encode(text, False, parse_special)[0]

    def encode(self, text: str, add_bos: bool = True, *, parse_special: bool = True) -> list[int]:
        """The token ids of ``text``, ``<bos>`` first (as Gemma's GGUF asks: ``add_bos_token``).

        Args:
            text: the text (any ``str`` UTF-8 can encode).
            add_bos: put ``bos_id`` first.
            parse_special: read a control token spelled in the text (``"<start_of_turn>"``)
                as that token, as ``transformers`` does (``False``: as text, as SentencePiece;
                see the class).

        Returns:
            The ids, a list of ``int`` (just ``[bos_id]`` for an empty text).

        Raises:
            TypeError: if ``text`` is not a ``str``, or ``add_bos`` or ``parse_special`` not a
                ``bool``.
            ValueError: if ``text`` holds a lone surrogate (``"\\ud800"``), if ``add_bos`` is
                set but there is no ``bos_id``, or if a symbol is no piece and the vocabulary
                has neither byte pieces nor an unknown piece.

        Example:
            >>> tok = SentencePieceTokenizer(
            ...     ["<unk>", "<bos>", "▁", "a", "▁a", *(f"<0x{b:02X}>" for b in range(256))],
            ...     [0, 0, -1, -2, -3, *[0] * 256],
            ...     [2, 3, 1, 1, 1, *[6] * 256],
            ...     bos_id=1,
            ... )
            >>> tok.encode(" a<bos>é")  # é is the bytes 0xC3 0xA9
            [1, 4, 1, 200, 174]
            >>> tok.encode(" a<bos>", add_bos=False, parse_special=False)[:3]
            [4, 65, 103]
        """
        return self._encode(text, add_bos, parse_special)[1]

    def decode(self, ids: Tensor | Iterable[int], *, keep_special: bool = False) -> str:
        """The text of token ids: pieces joined, ``▁`` read as a space, byte pieces as UTF-8.

        The ids :meth:`encode` made give its text back, except that a ``▁`` in the text comes
        back as a space (both are one symbol to the tokenizer). A run of byte pieces that is
        not valid UTF-8 becomes one ``�`` (U+FFFD) per byte, as ``transformers`` decodes.

        Args:
            ids: token ids, a 1-D int64 or int32 tensor or a sequence of ``int``.
            keep_special: write control (and unknown) pieces such as ``<bos>`` as their text;
                by default they are dropped (``transformers``' ``skip_special_tokens=True``).

        Returns:
            The text.

        Raises:
            TypeError: if ``ids`` is not a tensor or sequence of integers, or ``keep_special``
                not a ``bool``.
            ValueError: if ``ids`` is a tensor that is not 1-D, or an id is outside
                ``0 .. len(self) - 1`` (naming the first such id and its position).

        Example:
            >>> tok = SentencePieceTokenizer(
            ...     ["<unk>", "<bos>", "▁a", *(f"<0x{b:02X}>" for b in range(256))],
            ...     [0, 0, -1, *[0] * 256],
            ...     [2, 3, 1, *[6] * 256],
            ... )
            >>> tok.decode([1, 2, 198, 172]), tok.decode([1, 2, 198], keep_special=True)
            (' aé', '<bos> a�')
        """
        ids = as_id_list("ids", ids)
        keep_special = _check_bool("keep_special", keep_special)
        for pos, i in enumerate(ids):
            if not 0 <= i < len(self.vocab):
                raise ValueError(
                    f"ids must be in 0..{len(self.vocab) - 1}; got {i} at position {pos}"
                )
        parts: list[str] = []
        run = bytearray()  # the bytes of the byte pieces read so far in a row
        for i in ids + [None]:
            kind = None if i is None else self.types[i]
            if kind == BYTE:
                run.append(int(self.vocab[i][3:5], 16))
                continue
            if run:
                try:
                    parts.append(run.decode("utf-8"))
                except UnicodeDecodeError:
                    parts.append("\ufffd" * len(run))
                run.clear()
            if i is None or (kind in (CONTROL, UNKNOWN) and not keep_special):
                continue
            parts.append(self.vocab[i].replace(SPACE, " "))
        return "".join(parts)


def _check_piece(i: int, piece) -> str:
    """``piece`` is a non-empty ``str``; one made only of spaces is respelled with ``▁``."""
    if not isinstance(piece, str):
        raise TypeError(
            f"pieces[{i}] must be a str; got {type(piece).__name__} {short_repr(piece)}"
        )
    if not piece:
        raise ValueError(f"pieces[{i}] must not be empty")
    return SPACE * len(piece) if piece.strip(" ") == "" else piece


def _byte_ids(vocab: list[str], types: list[int]) -> list[int] | None:
    """``ids[b]``, the id of the byte piece ``<0xNN>`` of each byte ``b``, or ``None`` if the
    vocabulary has no byte piece; a ValueError unless it has all 256, each spelled right."""
    ids: list[int | None] = [None] * 256
    for i, (piece, t) in enumerate(zip(vocab, types)):
        if t != BYTE:
            continue
        hex_digits = piece[3:5]
        if not (
            len(piece) == 6
            and piece[:3] == "<0x"
            and piece[5] == ">"
            and all(c in "0123456789ABCDEFabcdef" for c in hex_digits)
        ):
            raise ValueError(
                f"pieces[{i}] is a byte piece (type 6) and must be '<0xNN>'; got {piece!r}"
            )
        ids[int(hex_digits, 16)] = i
    missing = [f"<0x{b:02X}>" for b, i in enumerate(ids) if i is None]
    if len(missing) == 256:
        return None
    if missing:
        raise ValueError(
            f"the byte pieces must be all 256 or none; missing {', '.join(missing[:4])}"
            + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        )
    return ids


def _frozen_pattern(pieces: list[str]) -> tuple[set[str], re.Pattern]:
    """The pieces, and a regular expression that finds the longest of them where one starts.

    ``re`` tries the alternatives in order, so they go longest first; they are grouped by their
    first character (``<(?:start_of_turn>|bos>|...)``), so that a position where no piece starts
    costs one test per group, not one per piece.
    """
    rests: dict[str, list[str]] = {}  # first character -> the rest of each piece
    for piece in sorted(pieces, key=len, reverse=True):
        rests.setdefault(piece[0], []).append(re.escape(piece[1:]))
    groups = [f"{re.escape(first)}(?:{'|'.join(r)})" for first, r in rests.items()]
    return set(pieces), re.compile("|".join(groups) or "(?!)")
