"""attnlib.corpus: GloVe-style word tokens, the books of a cleaned text, the word vocabulary,
interpolated Kneser-Ney n-gram models, training batches and strided perplexity.

Hand-computed cases, an exact (Fraction) reference of Kneser-Ney and a window-by-window
reference of the strided perplexity, hypothesis properties, the real Odyssey and Iliad, and
bad input.
"""

import math
import re
from fractions import Fraction

import attnlib
import pytest
import torch
import torch.nn.functional as F
from attnlib.corpus import (
    UNK,
    CorpusVocabulary,
    NGramModel,
    batches,
    perplexity,
    read_books,
    token_log_probs,
    word_tokens,
)
from conftest import ROOT
from hypothesis import given
from hypothesis import strategies as st

ODYSSEY = ROOT / "data" / "odyssey.txt"
ILIAD = ROOT / "data" / "iliad.txt"


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """The tiny language model's operations take microseconds; on a machine whose cores are busy,
    torch's worker threads wait for each other far longer than that (measured: 39 calls in
    3 s with 2 threads, 0.02 s with 1). One thread here, the caller's count restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


ROMAN = (
    "I II III IV V VI VII VIII IX X XI XII XIII XIV XV XVI XVII XVIII XIX XX XXI XXII XXIII XXIV"
)


# ---------------------------------------------------------------- word_tokens

WORD_CASES = [
    pytest.param("ship, crew. Yes; no: why? [so] (so)!",
                 ["ship", ",", "crew", ".", "yes", ";", "no", ":", "why", "?", "[", "so", "]",
                  "(", "so", ")", "!"], id="punctuation-split-off"),
    pytest.param("\u2018Yes,\u2019 said he\u2014\u201cno.\u201d",
                 ["'", "yes", ",", "'", "said", "he", "\u2014", '"', "no", ".", '"'],
                 id="curly-quotes-straightened-em-dash-a-token"),
    pytest.param("don't", ["do", "n't"], id="don't"),
    pytest.param("won\u2019t", ["wo", "n't"], id="won't-curly"),
    pytest.param("can't isn't shan't", ["ca", "n't", "is", "n't", "sha", "n't"], id="n't"),
    pytest.param("DON'T", ["do", "n't"], id="upper-case-n't"),
    # 's is split off whatever the word ends with, as Stanford's tokenizer does
    pytest.param("Ulysses's", ["ulysses", "'s"], id="ulysses's"),
    pytest.param("his father\u2019s murderer", ["his", "father", "'s", "murderer"],
                 id="father's-curly"),
    pytest.param("it's", ["it", "'s"], id="it's"),
    # a bare apostrophe (plural possessive) is a punctuation mark like any other
    pytest.param("Orestes\u2019 praises", ["orestes", "'", "praises"], id="orestes'"),
    pytest.param("Sun-god", ["sun", "-", "god"], id="hyphen"),
    pytest.param("1900 ships, 3 men", ["1900", "ships", ",", "3", "men"], id="numbers-kept"),
    pytest.param("10,000", ["10", ",", "000"], id="comma-in-number-is-punctuation"),
    pytest.param("TELL me, O Muse", ["tell", "me", ",", "o", "muse"], id="lower-case"),
    pytest.param("  a\tb\n\nc  ", ["a", "b", "c"], id="white-space"),
    pytest.param("", [], id="empty"),
    pytest.param(" \n\t", [], id="only-white-space"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "tokens"), WORD_CASES)
def test_word_tokens_by_hand(text, tokens):
    assert word_tokens(text) == tokens


def test_word_tokens_docstring_example():
    text = "Now, however, I must go back to my ship and to my crew, who won\u2019t wait."
    assert word_tokens(text) == [
        "now", ",", "however", ",", "i", "must", "go", "back", "to", "my", "ship", "and", "to",
        "my", "crew", ",", "who", "wo", "n't", "wait", ".",
    ]  # fmt: skip


def test_word_tokens_of_the_running_sentence():
    sentence = "Now, however, I must go back to my ship and to my crew"
    tokens = word_tokens(sentence)
    assert tokens == [
        "now", ",", "however", ",", "i", "must", "go", "back", "to", "my", "ship", "and", "to",
        "my", "crew",
    ]  # fmt: skip
    book_1 = word_tokens(read_books(ODYSSEY)["I"])
    n = len(tokens)
    assert any(book_1[i : i + n] == tokens for i in range(len(book_1) - n + 1))


@pytest.mark.parametrize(
    ("text", "name"), [(b"don't", "bytes"), (None, "NoneType"), (["ship"], "list"), (3, "int")]
)
def test_word_tokens_bad_type(text, name):
    with pytest.raises(TypeError, match=rf"text must be a str; got {name}$"):
        word_tokens(text)


@given(st.text(max_size=40))
def test_word_tokens_property(text):
    """Tokens are lower case, non-empty, free of white space and of curly quotes; joined,
    they are the text without its white space (once lowered and straightened)."""
    tokens = word_tokens(text)
    for t in tokens:
        assert t and t == t.lower() and not any(c.isspace() for c in t)
        assert not set(t) & set("\u2018\u2019\u201c\u201d")
    straight = text.lower().translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\""))
    assert "".join(tokens) == "".join(straight.split())


@pytest.fixture(scope="module")
def odyssey_tokens():
    books = read_books(ODYSSEY)
    return [t for text in books.values() for t in word_tokens(text)]


def test_odyssey_tokens_are_glove_words(odyssey_tokens, glove):
    """GloVe's split: the tokens GloVe lacks are all rare words (Butler's Greek names), never
    punctuation, quotes, n't or 's left glued to a word."""
    missing = [t for t in odyssey_tokens if t not in glove]
    assert all(t.isalpha() for t in missing), sorted({t for t in missing if not t.isalpha()})
    share = 1 - len(missing) / len(odyssey_tokens)
    # measured: 133,540 of 134,440 tokens are GloVe words (99.33 %); the 900 others are 349
    # names and old words ("phaeacians" 55 times, "euryclea" 33, ..., "bethought", "livelong")
    assert len(odyssey_tokens) == pytest.approx(134_440, rel=0.01)
    assert share >= 0.993  # at least 97 %, as the brief of the book's model needs
    for t in ("n't", "'s", "\u2014", '"', "'", ",", ".", "ca", "wo"):
        assert t in glove


# ---------------------------------------------------------------- read_books


def test_read_books_of_the_odyssey():
    books = read_books(ODYSSEY)
    assert list(books) == ROMAN.split()
    assert books["I"].startswith("Tell me, O Muse, of that ingenious hero")
    assert books["XXIV"].endswith("a covenant of peace between the two contending parties.")
    for text in books.values():
        assert text == text.strip() and "BOOK " not in text
    assert list(read_books(str(ILIAD))) == ROMAN.split()  # a str path works too


def test_read_books_of_a_tmp_file(tmp_path):
    path = tmp_path / "two.txt"
    text = (
        "BOOK I\n\nFirst paragraph.\n\nSecond, with BOOK II inside a line.\n\nBOOK II\n\nThe end.\n"
    )
    path.write_text(text, encoding="utf-8")
    assert read_books(path) == {
        "I": "First paragraph.\n\nSecond, with BOOK II inside a line.",
        "II": "The end.",
    }


def test_read_books_without_headings(tmp_path):
    path = tmp_path / "none.txt"
    path.write_text("Book I\n\nBOOK one\n\nBOOK IV.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"none\.txt must contain book headings such as 'BOOK I'"):
        read_books(path)


def test_read_books_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        read_books(tmp_path / "missing.txt")


# ---------------------------------------------------------------- CorpusVocabulary


def test_vocabulary_unk_is_zero():
    vocab = CorpusVocabulary(["the", "ship", ","])
    assert UNK == "<unk>"
    assert vocab.words == ["<unk>", "the", "ship", ","]
    assert vocab.index == {"<unk>": 0, "the": 1, "ship": 2, ",": 3}
    assert len(vocab) == 4 and repr(vocab) == "CorpusVocabulary(4 words with <unk>)"
    ids = vocab.encode(["the", "black", "ship", "<unk>"])
    assert ids.dtype == torch.long and ids.tolist() == [1, 0, 2, 0]
    assert vocab.encode([]).tolist() == []
    assert vocab.decode(torch.tensor([1, 2, 3])) == "the ship,"


def test_vocabulary_decode_joins_like_text():
    text = "Don't go, Ulysses's son! Is it so? Yes; here: (the ship)."
    tokens = word_tokens(text)
    vocab = CorpusVocabulary(sorted(set(tokens)))
    ids = vocab.encode(tokens)
    assert vocab.decode(ids) == "don't go, ulysses's son! is it so? yes; here: ( the ship)."
    assert vocab.decode(ids.tolist()) == vocab.decode(ids.unsqueeze(0)) == vocab.decode(ids)
    assert vocab.decode([vocab.index["ship"], 0]) == "ship <unk>"


def test_from_tokens_order_and_filters():
    tokens = "b a c a b d e e e".split()  # e 3, a 2, b 2, c 1, d 1
    assert CorpusVocabulary.from_tokens(tokens).words == [UNK, "e", "a", "b", "c", "d"]
    assert CorpusVocabulary.from_tokens(tokens, min_count=2).words == [UNK, "e", "a", "b"]
    assert CorpusVocabulary.from_tokens(tokens, max_size=3).words == [UNK, "e", "a", "b"]
    assert CorpusVocabulary.from_tokens(tokens, max_size=0).words == [UNK]
    known = {"b", "c", "d", "zzz"}
    assert CorpusVocabulary.from_tokens(tokens, known=known).words == [UNK, "b", "c", "d"]
    both = CorpusVocabulary.from_tokens(tokens, known=known, max_size=2, min_count=1)
    assert both.words == [UNK, "b", "c"]
    assert CorpusVocabulary.from_tokens(iter(tokens), min_count=4).words == [UNK]


def test_from_tokens_known_glove(glove):
    vocab = CorpusVocabulary.from_tokens(["ship", "euryclea", "ship", "euryclea"], known=glove)
    assert vocab.words == [UNK, "ship"]


def test_from_tokens_known_as_an_iterator():
    vocab = CorpusVocabulary.from_tokens(["a", "a", "b"], known=iter(["b", "a"]))
    assert vocab.words == [UNK, "a", "b"]


def test_from_tokens_sizes_are_checked():
    with pytest.raises(ValueError, match="max_size must be an integer >= 0 or None; got -1"):
        CorpusVocabulary.from_tokens(["a"], max_size=-1)
    with pytest.raises(ValueError, match="min_count must be a positive integer; got 0"):
        CorpusVocabulary.from_tokens(["a"], min_count=0)


def test_decode_refuses_ids_out_of_range():
    with pytest.raises(ValueError, match=r"ids must be in 0..2; got \[-1\]"):
        CorpusVocabulary(["a", "b"]).decode([-1])


def test_ngram_prob_takes_tensors_and_checks_ids():
    lm = NGramModel([1, 2, 1, 2, 1, 3], n=2, vocab_size=4)
    assert lm.prob(torch.tensor(2), torch.tensor([1])) == lm.prob(2, (1,))
    with pytest.raises(ValueError, match=r"word and context must be in 0..3; got 9"):
        lm.prob(9, (1,))


def test_vocabulary_errors():
    with pytest.raises(ValueError, match=r"words must not repeat; got \['a'\]"):
        CorpusVocabulary(["a", "b", "a"])
    with pytest.raises(ValueError, match=r"words must not contain '<unk>': it is index 0"):
        CorpusVocabulary(["a", "<unk>"])
    with pytest.raises(ValueError, match=r"words must not contain '<unk>'"):
        CorpusVocabulary.from_tokens(["<unk>", "a"])


# ---------------------------------------------------------------- NGramModel


def kn_reference(ids, n, V, d, word, context):
    """Interpolated Kneser-Ney straight from the formula, in exact arithmetic: every count
    found by scanning ``ids``, every sum by enumerating the vocabulary."""
    ids = list(ids)
    if n == 1:
        return Fraction(ids.count(word) + 1, len(ids) + V)

    def grams(m):
        return [tuple(ids[i : i + m]) for i in range(len(ids) - m + 1)]

    def count(g):  # occurrences at the highest order, continuation counts below it
        if len(g) == n:
            return grams(n).count(g)
        return len({h for h in grams(len(g) + 1) if h[1:] == g})

    p = Fraction(count((word,)) + 1, sum(count((w,)) for w in range(V)) + V)
    context = tuple(context)[-(n - 1) :]
    for k in range(1, len(context) + 1):
        u = context[-k:]
        c = [count((*u, w)) for w in range(V)]
        total = sum(c)
        if total:
            types = sum(1 for x in c if x)
            p = max(c[word] - d, 0) / Fraction(total) + d * types / Fraction(total) * p
    return p


def test_unigram_by_hand():
    ids = [0, 1, 1, 3, 3, 3]  # T = 6, V = 5: p(w) = (c(w) + 1) / 11
    lm = NGramModel(ids, n=1, vocab_size=5)
    expected = [2 / 11, 3 / 11, 1 / 11, 4 / 11, 1 / 11]
    for w in range(5):
        assert lm.prob(w) == pytest.approx(expected[w], abs=1e-15)
        assert lm.prob(w, (3, 3, 1)) == lm.prob(w)  # a unigram model reads no context
    assert lm.tokens == 6


def test_bigram_kneser_ney_by_hand():
    """The docstring example: [1, 2, 1, 2, 1, 3], n = 2, V = 4, delta = 3/4.

    Bigram counts: c(1 2) = 2, c(2 1) = 2, c(1 3) = 1; so c(1 .) = 3, N1+(1 .) = 2.
    Unigrams are continuation counts, N1+(. w) = how many distinct words w follows:
    N1+(. 1) = 1 (after 2), N1+(. 2) = 1 (after 1), N1+(. 3) = 1 (after 1), N1+(. 0) = 0, and
    N1+(. .) = 3 distinct bigrams; p(w) = (N1+(. w) + 1) / (3 + 4): p(1) = p(2) = p(3) = 2/7,
    p(0) = 1/7 (they sum to 1).
    The back-off weight after 1 is delta N1+(1 .) / c(1 .) = 0.75 * 2 / 3 = 1/2, so
        p(2 | 1) = (2 - 0.75) / 3 + 1/2 * 2/7 = 5/12 + 1/7 = 47/84 = 0.5595...
        p(3 | 1) = (1 - 0.75) / 3 + 1/2 * 2/7 = 1/12 + 1/7 = 19/84 = 0.2262...
        p(1 | 1) = 0 + 1/2 * 2/7 = 1/7,  p(0 | 1) = 1/2 * 1/7 = 1/14  (sum: 84/84)
    After 2: c(2 1) = 2 = c(2 .), N1+(2 .) = 1, weight 0.75 * 1 / 2 = 3/8:
        p(1 | 2) = (2 - 0.75) / 2 + 3/8 * 2/7 = 5/8 + 3/28 = 41/56
    """
    lm = NGramModel([1, 2, 1, 2, 1, 3], n=2, vocab_size=4)
    assert lm.prob(2, (1,)) == pytest.approx(47 / 84, abs=1e-15)
    assert lm.prob(3, (1,)) == pytest.approx(19 / 84, abs=1e-15)
    assert lm.prob(1, (1,)) == pytest.approx(1 / 7, abs=1e-15)
    assert lm.prob(0, (1,)) == pytest.approx(1 / 14, abs=1e-15)
    assert lm.prob(1, (2,)) == pytest.approx(41 / 56, abs=1e-15)
    assert (round(lm.prob(2, (1,)), 3), round(lm.prob(3, (1,)), 3)) == (0.56, 0.226)
    for w, p in enumerate([1 / 7, 2 / 7, 2 / 7, 2 / 7]):
        assert lm.prob(w) == pytest.approx(p, abs=1e-15)  # no context: the unigram level
        assert lm.prob(w, (0,)) == pytest.approx(p, abs=1e-15)  # unseen context: the same
    # perplexity of [1, 2, 1, 3]: p(1) p(2 | 1) p(1 | 2) p(3 | 1) = 2/7 * 47/84 * 41/56 * 19/84
    product = Fraction(2, 7) * Fraction(47, 84) * Fraction(41, 56) * Fraction(19, 84)
    assert perplexity(lm, [1, 2, 1, 3]) == pytest.approx(float(product) ** -0.25, rel=1e-12)
    assert perplexity(lm, torch.tensor([1, 2, 1, 3])) == perplexity(lm, [1, 2, 1, 3])


def test_trigram_matches_the_exact_reference():
    ids = [1, 2, 1, 2, 1, 3, 2, 1, 2, 2]
    lm = NGramModel(ids, n=3, vocab_size=4)
    for context in [(), (1,), (2, 1), (1, 2), (3, 2), (2, 2), (0, 0), (3, 3)]:
        for w in range(4):
            exact = kn_reference(ids, 3, 4, Fraction(3, 4), w, context)
            assert lm.prob(w, context) == pytest.approx(float(exact), abs=1e-14)


ID_LISTS = st.integers(1, 6).flatmap(
    lambda V: st.tuples(st.just(V), st.lists(st.integers(0, V - 1), max_size=20))
)


@given(
    ID_LISTS,
    st.integers(1, 4),
    st.sampled_from([0.1, 0.5, 0.75, 0.9]),
    st.lists(st.integers(0, 5), max_size=5),
)
def test_ngram_is_a_distribution(v_ids, n, discount, context):
    """For every order, context seen or not: the probabilities of the V words sum to 1, and
    match the exact reference."""
    V, ids = v_ids
    context = [c % V for c in context]
    lm = NGramModel(ids, n=n, vocab_size=V, discount=discount)
    contexts = [context, ids[-(n - 1) :] if n > 1 else [], ids[:3]]
    for ctx in contexts:
        probs = [lm.prob(w, ctx) for w in range(V)]
        assert all(p > 0 for p in probs)
        assert math.fsum(probs) == pytest.approx(1, abs=1e-9)
    d = Fraction(discount)
    for w in range(V):
        exact = kn_reference(ids, n, V, d, w, context)
        assert lm.prob(w, context) == pytest.approx(float(exact), abs=1e-12)


@given(ID_LISTS, st.integers(1, 4), st.lists(st.integers(0, 5), min_size=4, max_size=8))
def test_ngram_reads_only_the_last_n_minus_1_tokens(v_ids, n, context):
    V, ids = v_ids
    context = [c % V for c in context]
    lm = NGramModel(ids, n=n, vocab_size=V)
    short = context[len(context) - (n - 1) :] if n > 1 else []
    for w in range(V):
        assert lm.prob(w, context) == lm.prob(w, short)
        assert lm.prob(w, [0, *context]) == lm.prob(w, context)


def test_ngram_perplexity_uniform():
    # every word seen once: (1 + 1) / (4 + 4) = 1/4 each, whatever the test text
    lm = NGramModel([0, 1, 2, 3], n=1, vocab_size=4)
    assert perplexity(lm, [3, 3, 0, 1, 2]) == pytest.approx(4, rel=1e-12)
    # nothing seen: every order backs off to (0 + 1) / (0 + V)
    for n in (1, 2, 3):
        assert perplexity(NGramModel([], n=n, vocab_size=7), [1, 2, 3, 1]) == pytest.approx(7)


@given(ID_LISTS, st.integers(1, 4), st.lists(st.integers(0, 5), min_size=1, max_size=10))
def test_ngram_perplexity_is_exp_mean_nll(v_ids, n, test_ids):
    V, ids = v_ids
    test_ids = [t % V for t in test_ids]
    lm = NGramModel(ids, n=n, vocab_size=V)
    nll = [-math.log(lm.prob(w, test_ids[:t])) for t, w in enumerate(test_ids)]
    assert perplexity(lm, test_ids) == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 0}, r"n must be a positive integer; got 0"),
        ({"n": 2.0}, r"n must be a positive integer; got float 2\.0"),
        ({"vocab_size": 0}, r"vocab_size must be a positive integer; got 0"),
        ({"discount": 0}, r"discount must be a real number in \(0, 1\); got 0"),
        ({"discount": 1}, r"discount must be a real number in \(0, 1\); got 1"),
        ({"discount": float("nan")}, r"discount must be a real number in \(0, 1\); got nan"),
        ({"ids": [0, 4]}, r"ids must be in 0\.\.3; got 0\.\.4"),
        ({"ids": torch.tensor([-1, 2])}, r"ids must be in 0\.\.3; got -1\.\.2"),
    ],
)
def test_ngram_errors(kwargs, message):
    args = {"ids": [0, 1, 2], "n": 2, "vocab_size": 4} | kwargs
    error = TypeError if kwargs == {"n": 2.0} else ValueError  # a wrong type, or a wrong value
    with pytest.raises(error, match=message):
        NGramModel(**args)


def test_ngram_perplexity_of_nothing():
    with pytest.raises(ValueError, match="ids must hold at least one token to score"):
        perplexity(NGramModel([0, 1], n=2, vocab_size=2), [])
    with pytest.raises(ValueError, match="ids must hold at least one token to score"):
        perplexity(NGramModel([0, 1], n=2, vocab_size=2), torch.tensor([], dtype=torch.long))


def test_one_perplexity_entry_for_both_kinds_of_model():
    """perplexity() scores an NGramModel (every token, from its own n - 1 before) and a neural
    model (read in windows); the windows' arguments are refused for the first, required for
    the second, and anything else is refused naming both kinds."""
    counts = NGramModel([1, 2, 1, 2, 1, 3], n=2, vocab_size=4)
    assert perplexity(counts, [1, 2, 1, 3]) == pytest.approx(2.479, abs=5e-4)
    for context, stride in ((4, None), (None, 2)):
        with pytest.raises(
            ValueError,
            match=rf"context and stride must be None for an NGramModel \(it reads the last "
            rf"n - 1 = 1 tokens itself\); got context={context}, stride={stride}",
        ):
            perplexity(counts, [1, 2], context, stride)
    with pytest.raises(TypeError, match=r"context must be given for a neural model: .*; got None"):
        perplexity(tiny_lm(), torch.arange(10))
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module .*, or an NGramModel"):
        perplexity({"not": "a model"}, [1, 2])
    assert not hasattr(NGramModel, "perplexity")  # one entry, not two


@pytest.fixture(scope="module")
def homer(glove):
    """The split of data/README.md: vocabulary and counts from the Odyssey I-XXI and the
    Iliad, test text the Odyssey XXIII-XXIV; the three models counted once."""
    odyssey, iliad = read_books(ODYSSEY), read_books(ILIAD)
    names = list(odyssey)
    train = [t for b in names[:21] for t in word_tokens(odyssey[b])]
    train += [t for text in iliad.values() for t in word_tokens(text)]
    test = [t for b in ("XXIII", "XXIV") for t in word_tokens(odyssey[b])]
    vocab = CorpusVocabulary.from_tokens(train, min_count=2, known=glove)
    train_ids, test_ids = vocab.encode(train), vocab.encode(test)
    models = {n: NGramModel(train_ids, n=n, vocab_size=len(vocab)) for n in (1, 2, 3)}
    return vocab, train_ids, test_ids, models


def test_kneser_ney_on_homer(homer):
    vocab, train_ids, test_ids, models = homer
    # measured: 293,736 training and 10,176 test tokens, 5,629 words with <unk>
    assert len(vocab) == pytest.approx(5629, rel=0.01)
    assert len(train_ids) == pytest.approx(293_736, rel=0.01)
    assert len(test_ids) == pytest.approx(10_176, rel=0.01)
    ppl = {n: perplexity(lm, test_ids) for n, lm in models.items()}
    # measured on the Odyssey XXIII-XXIV: add-one unigram 364.30, Kneser-Ney bigram 99.18,
    # trigram 69.97
    assert ppl[3] < ppl[2] < ppl[1]
    assert ppl[1] == pytest.approx(364.30, rel=0.01)
    assert ppl[2] == pytest.approx(99.18, rel=0.01)
    assert ppl[3] == pytest.approx(69.97, rel=0.01)


# ---------------------------------------------------------------- batches


def test_batches_docstring_example():
    x, y = batches(torch.arange(10), 4, 2, torch.Generator().manual_seed(0))
    assert x.tolist() == [[2, 3, 4, 5], [3, 4, 5, 6]]
    assert y.tolist() == [[3, 4, 5, 6], [4, 5, 6, 7]]


@given(
    st.integers(2, 40).flatmap(lambda T: st.tuples(st.just(T), st.integers(1, T - 1))),
    st.integers(1, 8),
    st.integers(0, 2**31),
)
def test_batches_are_shifted_windows(sizes, batch_size, seed):
    T, L = sizes
    ids = torch.arange(T) * 3 + 100  # a token's value tells its position
    x, y = batches(ids, L, batch_size, torch.Generator().manual_seed(seed))
    assert x.shape == y.shape == (batch_size, L)
    assert x.dtype == y.dtype == torch.long
    assert torch.equal(y[:, :-1], x[:, 1:])
    for row_x, row_y in zip(x, y):
        start = (row_x[0].item() - 100) // 3
        assert 0 <= start <= T - L - 1
        assert torch.equal(row_x, ids[start : start + L])
        assert torch.equal(row_y, ids[start + 1 : start + L + 1])
    x2, y2 = batches(ids, L, batch_size, torch.Generator().manual_seed(seed))
    assert torch.equal(x, x2) and torch.equal(y, y2)


def test_batches_reach_every_start():
    ids = torch.arange(6)
    x, _ = batches(ids, 2, 200, torch.Generator().manual_seed(0))
    assert set(x[:, 0].tolist()) == {0, 1, 2, 3}  # the last window, [3, 4] -> [4, 5], too
    x, y = batches(ids, 5, 3, torch.Generator().manual_seed(0))  # T = L + 1: one window
    assert x.tolist() == [[0, 1, 2, 3, 4]] * 3 and y.tolist() == [[1, 2, 3, 4, 5]] * 3


def test_batches_seed():
    ids = torch.arange(1000)
    a = batches(ids, 8, 4, torch.Generator().manual_seed(1))[0]
    b = batches(ids, 8, 4, torch.Generator().manual_seed(2))[0]
    assert not torch.equal(a, b)


@pytest.mark.parametrize(
    ("ids", "context", "batch_size", "message"),
    [
        (torch.arange(5), 5, 2,
         r"ids must be 1-D with more than context=5 tokens; got shape \(5,\)$"),
        (torch.arange(5), 9, 2, r"ids must be 1-D with more than context=9 tokens"),
        (torch.arange(12).reshape(2, 6), 2, 2,
         r"ids must be 1-D with more than context=2 tokens; got shape \(2, 6\)$"),
        (torch.tensor([], dtype=torch.long), 2, 2,
         r"ids must be 1-D with more than context=2 tokens; got shape \(0,\)$"),
        (torch.arange(5), 0, 2, r"context must be a positive integer; got 0"),
        (torch.arange(5), 2, 0, r"batch_size must be a positive integer; got 0"),
    ],
)  # fmt: skip
def test_batches_errors(ids, context, batch_size, message):
    with pytest.raises(ValueError, match=message):
        batches(ids, context, batch_size, torch.Generator().manual_seed(0))


# ---------------------------------------------------------------- perplexity


def tiny_lm(**kwargs):
    torch.manual_seed(0)
    return attnlib.LanguageModel(50, 12, 3, 1, max_len=16, **kwargs).eval()


def reference_perplexity(model, ids, context, stride):
    """Token t (1 .. T-1) is scored in the first window that reaches it, the one starting at
    k * stride with the least k such that k * stride + context >= t; the model, causal, sees
    ids[k * stride : t] before it."""
    nll = []
    for t in range(1, len(ids)):
        k = max(0, -(-(t - context) // stride))  # ceil((t - context) / stride), at least 0
        start = k * stride
        assert 1 <= t - start <= context
        logits = model(ids[start:t])[0][-1]  # (V,): the prediction of token t
        nll.append(-torch.log_softmax(logits.double(), dim=-1)[ids[t]].item())
    return math.exp(sum(nll) / len(nll))


def test_perplexity_in_one_window():
    model = tiny_lm()
    ids = torch.randint(0, 50, (12,))
    logits = model(ids[:-1])[0]  # (11, 50)
    expected = torch.exp(F.cross_entropy(logits, ids[1:])).item()
    for context in (11, 12, 16):
        assert perplexity(model, ids, context) == pytest.approx(expected, rel=1e-6)
        assert perplexity(model, ids, context, stride=1) == pytest.approx(expected, rel=1e-6)
    # an untrained model is close to uniform over the 50 words
    assert 40 < expected < 60
    model = model.double()
    expected = torch.exp(F.cross_entropy(model(ids[:-1])[0], ids[1:])).item()
    assert perplexity(model, ids, 11) == pytest.approx(expected, rel=1e-12)
    assert perplexity(model, ids[:2], 4) == pytest.approx(
        math.exp(F.cross_entropy(model(ids[:1])[0], ids[1:2]).item()), rel=1e-12
    )


@pytest.mark.parametrize(
    ("T", "context", "stride"),
    [(40, 8, 1), (40, 8, 3), (40, 8, 4), (40, 8, 8), (40, 8, None), (37, 16, 5), (10, 4, 3)],
)
def test_perplexity_scores_each_token_once(T, context, stride):
    model = tiny_lm().double()
    ids = torch.randint(0, 50, (T,))
    expected = reference_perplexity(model, ids, context, context // 2 if stride is None else stride)
    assert perplexity(model, ids, context, stride) == pytest.approx(expected, rel=1e-9)


def test_perplexity_stride_changes_the_context():
    """A smaller stride gives each token more context: a different (here: any) number."""
    model = tiny_lm().double()
    ids = torch.randint(0, 50, (40,))
    assert perplexity(model, ids, 8, 1) != perplexity(model, ids, 8, 8)


@pytest.mark.parametrize(("T", "context", "stride"), [(2, 4, None), (30, 8, 3), (41, 16, 16)])
def test_token_log_probs_are_each_tokens_own(T, context, stride):
    model = tiny_lm()
    ids = torch.randint(0, 50, (T,), generator=torch.Generator().manual_seed(T))
    log_p = token_log_probs(model, ids, context, stride)
    assert log_p.shape == (T - 1,) and log_p.dtype == torch.float64 and log_p.device.type == "cpu"
    assert (log_p < 0).all()
    step = context // 2 if stride is None else stride
    expected = reference_perplexity(model, ids, context, step)
    assert math.exp(-log_p.mean().item()) == pytest.approx(expected, rel=1e-6)  # float32 logits
    assert perplexity(model, ids, context, stride) == math.exp(-log_p.mean().item())
    # token t in the first window: exactly the model's log-softmax at t - 1
    with torch.no_grad():
        first = torch.log_softmax(model(ids[: min(T, context + 1)][:-1])[0].double(), -1)
    n = min(T, context + 1) - 1
    torch.testing.assert_close(log_p[:n], first[torch.arange(n), ids[1 : n + 1]])


def test_token_log_probs_errors():
    model = tiny_lm()
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module .*; got str"):
        token_log_probs("model", torch.tensor([1, 2]), 4)
    with pytest.raises(ValueError, match=r"stride must be .*in 1\.\.context=4"):
        token_log_probs(model, torch.tensor([1, 2, 3]), 4, stride=5)
    with pytest.raises(
        ValueError, match=r"ids must be 1-D with at least 2 tokens; got shape \(1,\)"
    ):
        token_log_probs(model, torch.tensor([1]), 4)


def test_perplexity_restores_the_mode():
    model = tiny_lm(dropout=0.5)
    ids = torch.randint(0, 50, (30,))
    expected = perplexity(model, ids, 8)  # in eval mode
    assert not model.training
    model.train()
    assert perplexity(model, ids, 8) == expected  # scored in eval mode: no dropout
    assert model.training
    with pytest.raises(ValueError, match=r"ids must hold token indices in 0\.\.49"):
        perplexity(model, torch.tensor([1, 60, 2]), 8)  # the model raises inside
    assert model.training


@pytest.mark.parametrize(
    ("ids", "context", "stride", "message"),
    [
        (torch.arange(10), 4, 0, r"stride must be in 1\.\.context=4; got 0"),
        (torch.arange(10), 4, 5, r"stride must be in 1\.\.context=4; got 5"),
        (torch.arange(10), 0, 1, r"context must be a positive integer; got 0"),
        (torch.tensor([3]), 4, 2, r"ids must be 1-D with at least 2 tokens; got shape \(1,\)"),
        (torch.arange(10).reshape(2, 5), 4, 2,
         r"ids must be 1-D with at least 2 tokens; got shape \(2, 5\)"),
    ],
)  # fmt: skip
def test_perplexity_errors(ids, context, stride, message):
    model = tiny_lm()
    model.train()
    with pytest.raises(ValueError, match=message):
        perplexity(model, ids, context, stride)
    assert model.training


def test_perplexity_default_stride_with_context_1():
    model = tiny_lm()
    ids = torch.randint(0, 50, (10,))
    assert perplexity(model, ids, 1) == perplexity(model, ids, 1, stride=1)


# ---------------------------------------------------------------- Unicode words

# The split of the book's Odyssey model (data/odyssey_lm/ was trained on its tokens): the
# pattern word_tokens used before it read Unicode letters. On ASCII text the two must agree.
OLD_ASCII_TOKEN = re.compile(r"[a-z]+(?=n't\b)|n't\b|'s\b|[a-z0-9]+|[^\sa-z0-9]")


def old_word_tokens(text):
    straight = text.lower().translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\""))
    return OLD_ASCII_TOKEN.findall(straight)


UNICODE_CASES = [
    pytest.param("naïve", ["naïve"], id="naive-precomposed"),
    pytest.param("nai\u0308ve", ["nai\u0308ve"], id="naive-combining-diaeresis"),
    pytest.param("Café, Ærø!", ["café", ",", "ærø", "!"], id="latin-letters"),
    pytest.param("Ὀδυσσεύς", ["ὀδυσσεύς"], id="greek"),
    pytest.param("हिन्दी भाषा", ["हिन्दी", "भाषा"], id="devanagari-vowel-signs"),
    pytest.param("l’été", ["l", "'", "été"], id="elided-apostrophe"),
    pytest.param("o'clock", ["o", "'", "clock"], id="o'clock"),
    pytest.param("naïven't", ["naïve", "n't"], id="n't-after-a-unicode-word"),
    pytest.param("Zoë's", ["zoë", "'s"], id="'s-after-a-unicode-word"),
    pytest.param("3rd 1900 x²", ["3rd", "1900", "x²"], id="digits-in-words"),
    pytest.param("snake_case", ["snake", "_", "case"], id="underscore-a-token"),
    pytest.param("a \u0301b", ["a", "\u0301", "b"], id="a-lone-mark-a-token"),
    pytest.param("a\U0001d165b", ["a\U0001d165b"], id="a-mark-beyond-the-bmp"),
]


@pytest.mark.parametrize(("text", "tokens"), UNICODE_CASES)
def test_word_tokens_reads_unicode_letters(text, tokens):
    assert word_tokens(text) == tokens


ASCII_TEXT = st.lists(
    st.sampled_from(
        list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \t\n',.;:!?-_\"()")
        + ["n't", "'s", "N'T", "\u2018", "\u2019", "\u201c", "\u201d", "\u2014"]
    ),
    max_size=40,
).map("".join)


@given(ASCII_TEXT)
def test_word_tokens_of_ascii_text_are_unchanged(text):
    assert word_tokens(text) == old_word_tokens(text)


def test_odyssey_and_iliad_tokens_are_unchanged():
    """The committed model's vocabulary and splits come from these tokens."""
    for path in (ODYSSEY, ILIAD):
        for text in read_books(path).values():
            assert word_tokens(text) == old_word_tokens(text)


# ---------------------------------------------------------------- bad arguments


def test_encode_refuses_a_str_and_points_to_word_tokens():
    vocab = CorpusVocabulary(["the", "ship"])
    with pytest.raises(
        TypeError,
        match=r"tokens must be a sequence of str tokens, not one str .*; got 'the ship': "
        r"split it first, vocab\.encode\(word_tokens\(text\)\)",
    ):
        vocab.encode("the ship")
    assert vocab.encode(word_tokens("the ship")).tolist() == [1, 2]
    with pytest.raises(TypeError, match=r"tokens must all be str; got int 1 at position 1"):
        vocab.encode(["the", 1])


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ("the ship", r"words must be a sequence of str, not one str; got 'the ship'"),
        (["the", 2], r"words must all be str; got int 2 at position 1"),
        (None, r"words must be a sequence of str; got NoneType"),
    ],
)
def test_vocabulary_words_of_the_wrong_type(words, message):
    with pytest.raises(TypeError, match=message):
        CorpusVocabulary(words)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_size": 2.5}, TypeError, r"max_size must be an integer >= 0 or None; got float 2\.5"),
        ({"max_size": True}, TypeError, r"max_size must be an integer >= 0 or None; got bool True"),
        ({"max_size": float("nan")}, TypeError, r"max_size must be .*; got float nan"),
        ({"max_size": -1}, ValueError, r"max_size must be an integer >= 0 or None; got -1"),
        ({"min_count": True}, TypeError, r"min_count must be a positive integer; got bool True"),
        ({"min_count": 1.0}, TypeError, r"min_count must be a positive integer; got float 1\.0"),
        ({"known": "the ship"}, TypeError,
         r"known must be a collection of words .*, not one str: 'w in known' would test "
         r"substrings; got 'the ship'"),
        ({"known": 3}, TypeError,
         r"known must be a collection of words \(a set, a dict, Embeddings\) or None; got int"),
        ({"tokens": "the ship"}, TypeError, r"tokens must be a sequence of str, not one str"),
        ({"tokens": ["a", None]}, TypeError, r"tokens must all be str; got NoneType None at "
         r"position 1"),
        ({"tokens": 3}, TypeError, r"tokens must be a sequence of str; got int"),
    ],
)  # fmt: skip
def test_from_tokens_bad_arguments(kwargs, error, message):
    args = {"tokens": ["a", "b", "a"]} | kwargs
    with pytest.raises(error, match=message):
        CorpusVocabulary.from_tokens(**args)


FLOAT_BOOL_SMALL = [
    pytest.param(torch.tensor([1.0, 2.0]), r"got dtype torch\.float32 \(a float tensor is "
                 r"refused, not rounded: convert exact ids with ids\.long\(\)\)", id="float"),
    pytest.param(torch.tensor([True, False]), r"got dtype torch\.bool \(a bool tensor is a mask",
                 id="bool"),
    pytest.param(torch.tensor([1, 2], dtype=torch.int8), r"got dtype torch\.int8 \(an 8-bit "
                 r"tensor holds at most 256 distinct ids, so larger ones may have wrapped",
                 id="int8"),
    pytest.param(torch.tensor([1, 2], dtype=torch.uint8), r"got dtype torch\.uint8 \(an 8-bit",
                 id="uint8"),
    pytest.param(torch.tensor([1, 2], dtype=torch.int16), r"got dtype torch\.int16 \(a 16-bit",
                 id="int16"),
]  # fmt: skip
IDS_DTYPE = r"ids must hold token ids as torch\.int64 \(long\) or torch\.int32; "


@pytest.mark.parametrize(("ids", "why"), FLOAT_BOOL_SMALL)
def test_ids_of_another_dtype_are_refused_everywhere(ids, why):
    """Before: decode truncated float ids and read bools as 0/1, NGramModel and perplexity cast
    them silently, batches returned float or uint8 windows that fail inside the model."""
    lm = NGramModel([1, 2, 3], n=2, vocab_size=4)
    calls = {
        "decode": lambda: CorpusVocabulary(["a", "b", "c"]).decode(ids),
        "NGramModel": lambda: NGramModel(ids, n=2, vocab_size=4),
        "perplexity of an NGramModel": lambda: perplexity(lm, ids),
        "NGramModel.prob": lambda: lm.prob(1, ids),
        "batches": lambda: batches(ids, 1, 2, torch.Generator().manual_seed(0)),
        "perplexity": lambda: perplexity(tiny_lm(), ids, 4),
    }
    for name, call in calls.items():
        message = IDS_DTYPE.replace("ids", "context", 1) if name == "NGramModel.prob" else IDS_DTYPE
        with pytest.raises(TypeError, match=message + why):
            call()


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([1.7, 2], r"ids must all be int token ids; got float 1\.7 at position 0 \(a float is "
                   r"refused, not truncated\)"),
        ([1, True], r"ids must all be int token ids; got bool True at position 1"),
        ([1, torch.tensor(2.0)], r"ids must all be int token ids; got Tensor tensor\(2\.\) at "
                                 r"position 1"),
        ("12", r"ids must be a tensor or a sequence of int token ids; got str '12'"),
        (3, r"ids must be a tensor or a sequence of int token ids; got int"),
        (None, r"ids must be a tensor or a sequence of int token ids; got NoneType"),
    ],
)  # fmt: skip
def test_id_sequences_of_the_wrong_type(ids, message):
    """decode([1.7]) gave word 1, NGramModel kept 1.7 as a token of its own, perplexity("12")
    read the digits: now TypeErrors."""
    lm = NGramModel([1, 2, 3], n=2, vocab_size=4)
    with pytest.raises(TypeError, match=message):
        CorpusVocabulary(["a", "b", "c"]).decode(ids)
    with pytest.raises(TypeError, match=message):
        NGramModel(ids, n=2, vocab_size=4)
    with pytest.raises(TypeError, match=message):
        perplexity(lm, ids)


def test_id_sequences_that_are_accepted():
    import numpy as np

    vocab = CorpusVocabulary(["a", "b", "c"])
    for ids in ([1, 2], (1, 2), np.array([1, 2]), [np.int64(1), torch.tensor(2)],
                torch.tensor([1, 2], dtype=torch.int32), torch.tensor([[1, 2]])):  # fmt: skip
        assert vocab.decode(ids) == "a b"
    lm = NGramModel(np.array([1, 2, 1]), n=2, vocab_size=4)
    assert lm.counts == NGramModel(torch.tensor([1, 2, 1], dtype=torch.int32), 2, 4).counts
    assert lm.prob(np.int64(2), torch.tensor([1])) == lm.prob(2, [1])


def test_tensor_ids_must_be_1d_for_the_count_model():
    lm = NGramModel([1, 2, 3], n=2, vocab_size=4)
    with pytest.raises(ValueError, match=r"ids must be 1-D, \(T,\); got shape \(1, 3\)"):
        NGramModel(torch.tensor([[1, 2, 3]]), n=2, vocab_size=4)
    with pytest.raises(ValueError, match=r"ids must be 1-D, \(T,\); got shape \(1, 2\)"):
        perplexity(lm, torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"context must be 1-D, \(T,\); got shape \(1, 2\)"):
        lm.prob(2, torch.tensor([[1, 2]]))


@pytest.mark.parametrize(
    ("word", "context", "error", "message"),
    [
        (2.7, (1,), TypeError, r"word must be an int token id; got float 2\.7"),
        (True, (1,), TypeError, r"word must be an int token id; got bool True"),
        (torch.tensor(2.5), (), TypeError, r"word must be an int token id; got Tensor"),
        (None, (), TypeError, r"word must be an int token id; got NoneType None"),
        (2, (1.9,), TypeError, r"context must all be int token ids; got float 1\.9 at position 0"),
        (2, "1", TypeError, r"context must be a tensor or a sequence of int token ids; got str"),
        (2, 1, TypeError, r"context must be a tensor or a sequence of int token ids; got int"),
        (2, (1, 7), ValueError, r"word and context must be in 0\.\.3; got 2, \(1, 7\)"),
    ],
)  # fmt: skip
def test_prob_bad_arguments(word, context, error, message):
    lm = NGramModel([1, 2, 1, 2, 1, 3], n=2, vocab_size=4)
    with pytest.raises(error, match=message):
        lm.prob(word, context)


@pytest.mark.parametrize(
    ("discount", "error", "message"),
    [
        ("0.5", TypeError, r"discount must be a real number in \(0, 1\); got str '0\.5'"),
        (True, TypeError, r"discount must be a real number in \(0, 1\); got bool True"),
        (None, TypeError, r"discount must be a real number in \(0, 1\); got None"),
        (torch.tensor([0.5]), TypeError, r"discount must be a real number in \(0, 1\); got Tensor"),
        (-0.5, ValueError, r"discount must be a real number in \(0, 1\); got -0\.5"),
        (float("inf"), ValueError, r"discount must be a real number in \(0, 1\); got inf"),
    ],
)
def test_ngram_bad_discount(discount, error, message):
    """A str or None gave "'<' not supported between instances", True a ValueError."""
    with pytest.raises(error, match=message):
        NGramModel([1, 2], n=2, vocab_size=4, discount=discount)


def test_ngram_perplexity_checks_the_ids_once():
    lm = NGramModel([1, 2, 1, 3], n=2, vocab_size=4)
    with pytest.raises(ValueError, match=r"ids must be in 0\.\.3; got 1\.\.9$"):
        perplexity(lm, [1, 9, 2])
    with pytest.raises(ValueError, match=r"ids must be in 0\.\.3; got -1\.\.2$"):
        perplexity(lm, torch.tensor([2, -1]))


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([0, 1, 2, 3, 4], r"ids must be a torch\.Tensor of token ids \(int64\); got list "
                          r"\(convert with torch\.tensor\(ids\)\)"),
        (None, r"ids must be a torch\.Tensor of token ids \(int64\); got NoneType"),
    ],
)  # fmt: skip
def test_batches_and_perplexity_want_a_tensor(ids, message):
    """Before: AttributeError: 'list' object has no attribute 'dim'."""
    with pytest.raises(TypeError, match=message):
        batches(ids, 2, 2, torch.Generator().manual_seed(0))
    with pytest.raises(TypeError, match=message):
        perplexity(tiny_lm(), ids, 4)


def test_batches_of_int32_ids_are_long():
    """F.cross_entropy refuses int32 targets: the windows are int64, as documented."""
    ids = torch.arange(20, dtype=torch.int32)
    x, y = batches(ids, 4, 3, torch.Generator().manual_seed(0))
    expected = batches(ids.long(), 4, 3, torch.Generator().manual_seed(0))
    assert x.dtype == y.dtype == torch.long
    assert torch.equal(x, expected[0]) and torch.equal(y, expected[1])


class CudaGenerator(torch.Generator):
    """A generator that says it is on a GPU (where there is none, torch makes no such one)."""

    device = torch.device("cuda")


@pytest.mark.parametrize(
    ("generator", "error", "message"),
    [
        (0, TypeError, r"generator must be a torch\.Generator or None; got int 0 \(make one "
                       r"with torch\.Generator\(\)\.manual_seed\(seed\)\)"),
        (CudaGenerator(), ValueError,
         r"generator must be on the CPU \(the window starts are drawn there\); got one on cuda"),
    ],
)  # fmt: skip
def test_batches_bad_generator(generator, error, message):
    with pytest.raises(error, match=message):
        batches(torch.arange(10), 2, 2, generator)


def test_batches_without_a_generator_use_the_global_one():
    torch.manual_seed(3)
    a = batches(torch.arange(100), 4, 2, None)
    torch.manual_seed(3)
    assert torch.equal(a[0], batches(torch.arange(100), 4, 2, None)[0])


@pytest.mark.parametrize(
    ("context", "batch_size", "message"),
    [
        (True, 2, r"context must be a positive integer; got bool True"),
        (2.0, 2, r"context must be a positive integer; got float 2\.0"),
        (2, False, r"batch_size must be a positive integer; got bool False"),
        (2, float("nan"), r"batch_size must be a positive integer; got float nan"),
    ],
)
def test_batches_sizes_of_the_wrong_type(context, batch_size, message):
    with pytest.raises(TypeError, match=message):
        batches(torch.arange(10), context, batch_size, torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    ("context", "stride", "message"),
    [
        (8, 2.5, r"stride must be in 1\.\.context=8; got float 2\.5"),
        (8, True, r"stride must be in 1\.\.context=8; got bool True"),
        (8, float("nan"), r"stride must be in 1\.\.context=8; got float nan"),
        (True, 1, r"context must be a positive integer; got bool True"),
        (8.0, 1, r"context must be a positive integer; got float 8\.0"),
    ],
)
def test_perplexity_sizes_of_the_wrong_type(context, stride, message):
    """stride=2.5 gave "slice indices must be integers", stride=True read as 1."""
    with pytest.raises(TypeError, match=message):
        perplexity(tiny_lm(), torch.arange(20), context, stride)


def test_perplexity_needs_a_module_that_returns_logits():
    ids = torch.arange(20)
    with pytest.raises(
        TypeError,
        match=r"model must be a torch\.nn\.Module called as model\("
        r"ids \(1, L\)\) -> \(logits \(1, L, V\), \.\.\.\), .*; got function",
    ):
        perplexity(lambda x: (torch.zeros(1, x.shape[1], 50),), ids, 8)

    class Bare(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(1, x.shape[1], 50)

    class Flat(torch.nn.Module):
        def forward(self, x):
            return (torch.zeros(x.shape[1], 50),)

    with pytest.raises(
        TypeError,
        match=r"model must return a tuple \(logits \(1, L, V\), "
        r"\.\.\.\), as attnlib\.LanguageModel does; got Tensor",
    ):
        perplexity(Bare(), ids, 8)
    with pytest.raises(
        ValueError,
        match=r"model must return logits of shape \(1, L=8, V\), "
        r"floating point; got \(8, 50\) torch\.float32",
    ):
        perplexity(Flat(), ids, 8)


def test_perplexity_of_int32_ids():
    model = tiny_lm()
    ids = torch.randint(0, 50, (30,))
    assert perplexity(model, ids.int(), 8) == perplexity(model, ids, 8)


def test_read_books_of_a_directory(tmp_path):
    (tmp_path / "odyssey.txt").write_text("BOOK I\n\nText.\n", encoding="utf-8")
    with pytest.raises(
        IsADirectoryError,
        match=r"path must be a text with 'BOOK I', 'BOOK "
        r"II', \.\.\. headings; got the directory .*, which holds odyssey\.txt",
    ):
        read_books(tmp_path)


def test_read_books_not_utf8(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("BOOK I\n\nUlysses\n\nCaf\u00e9\n".encode("latin-1"))
    with pytest.raises(
        ValueError,
        match=r"latin1\.txt, line 5: not UTF-8 \(byte 0xe9 at "
        r"offset 20\)",
    ):
        read_books(path)


def test_read_books_with_a_repeated_heading(tmp_path):
    """Before: the second BOOK II silently replaced the first one's text."""
    path = tmp_path / "twice.txt"
    path.write_text("BOOK I\n\nOne.\n\nBOOK II\n\nTwo.\n\nBOOK II\n\nThree.\n", encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=r"twice\.txt, line 9: a second heading 'BOOK II' \(the "
        r"first is on line 5\); each book must have one heading",
    ):
        read_books(path)


def test_read_books_line_ends(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"BOOK I\r\n\r\nOne.\r\n\r\nBOOK II\r\rTwo.\r\n")
    assert read_books(path) == {"I": "One.", "II": "Two."}


def test_with_discount_equals_a_model_counted_with_it():
    ids = torch.randint(0, 9, (300,), generator=torch.Generator().manual_seed(4))
    test = torch.randint(0, 9, (60,), generator=torch.Generator().manual_seed(5))
    base = NGramModel(ids, 3, 9)
    for delta in (0.1, 0.5, 0.9):
        tuned = base.with_discount(delta)
        assert perplexity(tuned, test) == perplexity(NGramModel(ids, 3, 9, discount=delta), test)
    assert base.discount == 0.75 and perplexity(base.with_discount(0.5), test) != perplexity(
        base, test
    )
    with pytest.raises(ValueError, match=r"discount must be a real number in \(0, 1\); got 1"):
        base.with_discount(1)
    with pytest.raises(TypeError, match=r"discount must be a real number in \(0, 1\)"):
        base.with_discount(True)
