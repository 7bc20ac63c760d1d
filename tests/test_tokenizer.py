"""attnlib.tokenizer: the one splitting rule, and seed 001's toy vocabulary made
deterministic."""

import attnlib
import pytest
import torch
from attnlib.embeddings import Embeddings
from attnlib.tokenizer import BOS, EOS, SentenceVocabulary, tokenize
from hypothesis import given
from hypothesis import strategies as st

SEED_001_TEXT = "How are you doing ? I am good and you ? I am fine, thank you ."


def test_vocabulary_of_seed_001_is_sorted():
    vocab = SentenceVocabulary(SEED_001_TEXT)
    assert vocab.index2word == {
        0: "BOS",
        1: "EOS",
        2: ".",
        3: "?",
        4: "am",
        5: "and",
        6: "are",
        7: "doing",
        8: "fine,",
        9: "good",
        10: "how",
        11: "i",
        12: "thank",
        13: "you",
    }
    assert BOS == 0 and EOS == 1
    assert vocab.word2index == {w: i for i, w in vocab.index2word.items()}
    assert len(vocab) == 14 and repr(vocab) == "SentenceVocabulary(14 tokens)"


def test_vocabulary_is_deterministic():
    a = SentenceVocabulary(SEED_001_TEXT)
    b = SentenceVocabulary(" ".join(reversed(SEED_001_TEXT.split(" "))))  # same words, other order
    c = SentenceVocabulary(["How are you doing ?", "I am good and you ?", "I am fine, thank you ."])
    assert a.index2word == b.index2word == c.index2word


def test_encode_decode_round_trip():
    vocab = SentenceVocabulary(SEED_001_TEXT)
    ids = vocab.encode("How are you doing ?")
    assert ids.shape == (1, 5) and ids.dtype == torch.long
    assert ids.tolist() == [[10, 6, 13, 7, 3]]
    assert vocab.decode(ids) == "How are you doing ?"
    assert vocab.decode(ids[0]) == "How are you doing ?"  # (n,) works too
    assert vocab.decode(torch.tensor([11, 4, 8, 12, 13, 2])) == "I am fine, thank you ."


def test_bad_unknown_word():
    vocab = SentenceVocabulary(SEED_001_TEXT)
    with pytest.raises(KeyError, match=r"words not in the vocabulary: \['hello', 'there'\]"):
        vocab.encode("Hello you there")


def test_bad_decode():
    vocab = SentenceVocabulary(SEED_001_TEXT)
    with pytest.raises(KeyError, match=r"indices not in the vocabulary \(0..13\): \[14, 99\]"):
        vocab.decode(torch.tensor([[2, 14, 99]]))
    with pytest.raises(
        ValueError, match=r"ids must be a tensor of shape \(1, n\) or \(n,\); got \(2, 2\)"
    ):
        vocab.decode(torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(
        TypeError, match=r"ids must be a torch\.Tensor of shape \(1, n\) or \(n,\); got list"
    ):
        vocab.decode([2, 3])


def test_bad_vocabulary_text():
    with pytest.raises(ValueError, match="text must contain at least one word; got ''"):
        SentenceVocabulary("")
    with pytest.raises(TypeError, match="text must be a str or an iterable of str"):
        SentenceVocabulary(["ok", 3])
    with pytest.raises(ValueError, match="sentence must contain at least one word; got ' '"):
        SentenceVocabulary(SEED_001_TEXT).encode(" ")
    with pytest.raises(TypeError, match="sentence must be a str; got list"):
        SentenceVocabulary(SEED_001_TEXT).encode(["how", "are"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (123, r"text must be a str or an iterable of str; got int"),
        (None, r"text must be a str or an iterable of str; got NoneType"),
        (b"how are you", r"text must be a str or an iterable of str; got bytes \(decode it "
         r"first: text\.decode\('utf-8'\)\)"),
        (["ok", 3], r"text must be a str or an iterable of str; got int 3 at position 1"),
    ],
)  # fmt: skip
def test_bad_vocabulary_text_types(text, message):
    with pytest.raises(TypeError, match=message):
        SentenceVocabulary(text)


def test_vocabulary_splits_at_any_white_space():
    """A tab or a line break separates words too (seed 001 splits at ' ' only, which would
    make 'you\\ni' one word); on the seed's one-line text both agree."""
    vocab = SentenceVocabulary("How are\tyou ?\nI am\r\nfine")
    assert list(vocab.word2index)[2:] == ["?", "am", "are", "fine", "how", "i", "you"]
    assert vocab.encode("how\tare  you\n").tolist() == [[6, 4, 8]]


@pytest.mark.parametrize(
    ("ids", "exc", "message"),
    [
        (torch.tensor([2.0, 3.0]), TypeError,
         r"ids must be an integer tensor \(token indices\); got dtype torch\.float32"),
        (torch.tensor([True]), TypeError,
         r"ids must be an integer tensor \(token indices\); got dtype torch\.bool"),
        ([2, 3], TypeError, r"ids must be a torch\.Tensor of shape \(1, n\) or \(n,\); got list"),
        (torch.zeros(2, 2, dtype=torch.long), ValueError,
         r"ids must be a tensor of shape \(1, n\) or \(n,\); got \(2, 2\)"),
    ],
)  # fmt: skip
def test_bad_decode_types(ids, exc, message):
    with pytest.raises(exc, match=message):
        SentenceVocabulary(SEED_001_TEXT).decode(ids)


# ---------------------------------------------------------------- one rule for all

TRICKY = [
    pytest.param("Ship. crew, ORDER!", ["ship.", "crew,", "order!"], id="punctuation-stays"),
    pytest.param("  We\tPROCESS\nand\r\nship  ", ["we", "process", "and", "ship"], id="ascii"),
    pytest.param("a\u00a0b\u2028c\u3000d\x85e", ["a", "b", "c", "d", "e"], id="unicode-space"),
    pytest.param("a\u200bb", ["a\u200bb"], id="zero-width-space-is-a-character"),
    pytest.param("ÉCOLE Straße İ ΟΔΟΣ", ["école", "straße", "i̇", "οδος"], id="unicode-case"),
    pytest.param("don't stop\u2014now", ["don't", "stop\u2014now"], id="apostrophe-dash"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "words"), TRICKY)
def test_tokenize_tricky_input(text, words):
    assert tokenize(text) == words == text.lower().split()


def words_of(vocab: SentenceVocabulary, text: str) -> list[str]:
    """The words SentenceVocabulary sees in ``text``: encoded, then looked up one by one."""
    return [vocab.index2word[i] for i in vocab.encode(text)[0].tolist()]


@pytest.mark.parametrize(("text", "words"), TRICKY)
def test_vocabulary_and_embeddings_split_as_tokenize(text, words):
    vocab = SentenceVocabulary(text)
    assert set(vocab.word2index) == {"BOS", "EOS", *words}
    assert words_of(vocab, text) == words
    emb = Embeddings(sorted(set(words)), torch.eye(len(set(words))))
    rows = emb.matrix(text).argmax(dim=1).tolist()  # (n,): the row of each word
    assert [emb.words[r] for r in rows] == words


@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30))
def test_one_rule_on_any_text(text):
    """``attnlib.tokenize`` and SentenceVocabulary are one rule."""
    assert attnlib.tokenize is tokenize
    words = text.lower().split()
    if not words:
        with pytest.raises(ValueError, match="sentence must contain at least one word"):
            tokenize(text)
        return
    assert tokenize(text) == words
    assert words_of(SentenceVocabulary(text), text) == words
