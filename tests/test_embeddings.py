"""attnlib.embeddings: the Embeddings object, the packaged GloVe vectors, a few text files."""

import numpy as np
import pytest
import torch
from attnlib import Embeddings, load_glove, read_glove_text, tokenize
from attnlib.embeddings import UnknownWordError
from conftest import AMAZON_SENTENCE, GLOVE_SUBSET, SHIP_SENTENCE, SHIP_START

# ---------------------------------------------------------------- tokenize


def test_tokenize_is_lower_split():
    assert tokenize(SHIP_SENTENCE) == SHIP_SENTENCE.lower().split()
    assert tokenize("  We  PROCESS\tand\nship ") == ["we", "process", "and", "ship"]


@pytest.mark.parametrize("sentence", ["", "   ", "\n\t"])
def test_bad_tokenize_empty(sentence):
    with pytest.raises(ValueError, match=r"sentence must contain at least one word; got"):
        tokenize(sentence)


def test_bad_tokenize_type():
    with pytest.raises(TypeError, match="sentence must be a str; got list"):
        tokenize(["ship"])


# ---------------------------------------------------------------- Embeddings


def test_embeddings_basics(small_embeddings):
    e = small_embeddings
    assert len(e) == 5 and e.dim == 3 and e.words[1] == "crew"
    assert "sea" in e and "ocean" not in e
    assert torch.equal(e["crew"], torch.tensor([0.8, 0.6, 0.0]))
    assert e["crew"].dtype == torch.float32
    assert repr(e) == "Embeddings(5 words, dim=3)"
    m = e.matrix("Ship sea ship")  # a sentence is tokenized
    assert m.shape == (3, 3)
    assert torch.equal(m, torch.stack([e["ship"], e["sea"], e["ship"]]))
    assert torch.equal(e.matrix(["order", "boat"])[0], torch.tensor([0.0, 1.0, 0.0]))


def test_embeddings_from_numpy_float64_gives_float32():
    e = Embeddings(["a", "b"], np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert e.vectors.dtype == torch.float32 and e.vectors.shape == (2, 2)
    assert e["b"].dtype == torch.float32


def test_most_similar_small(small_embeddings):
    result = small_embeddings.most_similar("ship", k=2)
    # cos(ship, boat) = .9 / |(.9, .1, .1)|, cos(ship, crew) = .8
    assert [w for w, _ in result] == ["boat", "crew"]
    assert result[0][1] == pytest.approx(0.9 / np.sqrt(0.83), abs=1e-6)
    assert result[1][1] == pytest.approx(0.8, abs=1e-6)
    everything = small_embeddings.most_similar("ship", k=100)
    assert len(everything) == 4 and "ship" not in [w for w, _ in everything]
    by_vector = small_embeddings.most_similar(torch.tensor([0.0, 0.0, 2.0]), k=1)
    assert by_vector[0][0] == "sea" and by_vector[0][1] == pytest.approx(1.0)


def test_bad_unknown_words_small(small_embeddings):
    with pytest.raises(UnknownWordError) as info:
        small_embeddings.matrix(["shipp", "sea", "crewe", "shipp", "xyzzy"])
    message = str(info.value)
    assert message.startswith("unknown words not in the 5-word vocabulary")
    assert "'shipp' (close matches: ship)" in message
    assert "'crewe' (close matches: crew)" in message
    assert "'xyzzy' (no close match)" in message
    assert info.value.words == ["shipp", "crewe", "xyzzy"]  # each once, in order
    assert isinstance(info.value, KeyError)
    with pytest.raises(
        KeyError,
        match=r"unknown word not in the 5-word vocabulary: 'shipp' \(close matches: ship\)",
    ):
        small_embeddings["shipp"]
    with pytest.raises(KeyError, match=r"'crewe' \(close matches: crew\)"):
        small_embeddings.most_similar("crewe")


def test_bad_unknown_words_glove(glove):
    # 'shipp' and 'crewe' are GloVe words (a surname, a town): misspell harder
    with pytest.raises(
        KeyError,
        match=r"unknown words not in the 400000-word vocabulary: "
        r"'shhip' \(close matches: ship.*\); 'crrew' \(close matches: crew",
    ):
        glove.matrix("I must go back to my shhip and to my crrew")


def test_bad_empty_words(small_embeddings):
    with pytest.raises(ValueError, match="sentence must contain at least one word; got ''"):
        small_embeddings.matrix("")
    with pytest.raises(
        ValueError, match="words must contain at least one word; got an empty sequence"
    ):
        small_embeddings.matrix([])


@pytest.mark.parametrize(
    ("k", "error", "got"),
    [
        (0, ValueError, "0"),
        (-1, ValueError, "-1"),
        (2.5, TypeError, "float 2.5"),
        (True, TypeError, "bool True"),
    ],
)
def test_bad_most_similar_k(small_embeddings, k, error, got):
    with pytest.raises(error, match=rf"k must be a positive integer; got {got}$"):
        small_embeddings.most_similar("ship", k=k)


def test_bad_most_similar_vector(small_embeddings):
    with pytest.raises(
        ValueError, match=r"word_or_vector must be a word or a vector of shape \(3,\); got \(4,\)"
    ):
        small_embeddings.most_similar(torch.ones(4))


def test_bad_embeddings_construction():
    with pytest.raises(
        ValueError, match=r"vectors must have one row per word, \(3, D\); got \(2, 4\)"
    ):
        Embeddings(["a", "b", "c"], torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"words must not repeat; got repeated \['a'\]"):
        Embeddings(["a", "b", "a"], torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"vectors must be a 2-D array \(V, D\); got \(4,\)"):
        Embeddings(["a"], torch.zeros(4))


# ---------------------------------------------------------------- load_glove


def test_load_glove_ship(glove):
    assert len(glove) == 400_000 and glove.dim == 50
    ship = glove["ship"]
    assert ship.shape == (50,) and ship.dtype == torch.float32
    torch.testing.assert_close(ship[:4], torch.tensor(SHIP_START), atol=0, rtol=0)
    assert glove.words[:3] == ["the", ",", "."]  # the original file order


def test_load_glove_sentence_matrices(glove):
    assert glove.matrix(SHIP_SENTENCE).shape == (11, 50)
    assert glove.matrix(AMAZON_SENTENCE).shape == (6, 50)
    assert torch.equal(glove.matrix(SHIP_SENTENCE)[6], glove["ship"])


def test_most_similar_ship(glove):
    neighbours = glove.most_similar("ship")
    words = [w for w, _ in neighbours]
    assert len(neighbours) == 10
    assert "vessel" in words and "ships" in words and "ship" not in words
    cosines = [c for _, c in neighbours]
    assert cosines == sorted(cosines, reverse=True) and all(-1 <= c <= 1 for c in cosines)
    assert words[0] == "vessel" and cosines[0] == pytest.approx(0.9362, abs=1e-4)
    assert glove.most_similar(glove["ship"], k=1)[0][0] == "ship"  # a vector is not excluded


def test_bad_load_glove_dim():
    with pytest.raises(ValueError, match="dim must be the int 50 .*; got 100"):
        load_glove(100)


@pytest.mark.parametrize(
    ("dim", "got"), [(50.0, "float 50.0"), ("50", "str '50'"), (True, "bool True")]
)
def test_load_glove_dim_of_the_wrong_type(dim, got):
    """Before: 50.0 loaded the vectors, "50" and True were ValueErrors."""
    with pytest.raises(
        TypeError, match=rf"dim must be the int 50 \(the packaged GloVe 6B vectors\); got {got}"
    ):
        load_glove(dim)


# ---------------------------------------------------------------- GloVe text format


def test_read_glove_subset_equals_packaged_vectors(glove):
    subset = read_glove_text(GLOVE_SUBSET)
    assert subset.dim == 50 and len(subset) > 500
    assert subset.words[:3] == ["the", ",", "."]
    for word in tokenize(SHIP_SENTENCE) + tokenize(AMAZON_SENTENCE) + ["vessel", "ships"]:
        assert word in subset
    assert np.array_equal(subset.vectors.numpy(), glove.matrix(subset.words).numpy())
    torch.testing.assert_close(subset["ship"][:4], torch.tensor(SHIP_START), atol=0, rtol=0)
    # the file keeps the original text: 'ship 1.5213 0.10522 0.38162 -0.50801 ...'
    text = GLOVE_SUBSET.read_text(encoding="utf-8")
    assert "\nship 1.5213 0.10522 0.38162 -0.50801 " in text


def test_read_glove_tolerates_trailing_blank_lines_and_spaces(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("cat 1 2.5  -3\ndog 4 5 6 \n\n", encoding="utf-8")
    e = read_glove_text(path)
    assert e.words == ["cat", "dog"]
    assert torch.equal(e.vectors, torch.tensor([[1.0, 2.5, -3.0], [4.0, 5.0, 6.0]]))


def test_bad_glove_missing_file(tmp_path):
    with pytest.raises(
        FileNotFoundError, match=r"GloVe file not found: '.*nope\.txt' \(no such file\)"
    ):
        read_glove_text(tmp_path / "nope.txt")


def test_bad_glove_wrong_count(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("cat 1 2 3 4\ndog 1 2 3 4\nship 1 2 3\n", encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=r"bad\.txt, line 3: expected a word and 4 numbers; got 3 values after 'ship'",
    ):
        read_glove_text(path)


def test_bad_glove_short_line_hidden_by_a_long_one(tmp_path):
    """3 + 2 + 4 numbers = 3 lines x 3: the total alone would not notice."""
    path = tmp_path / "shifted.txt"
    path.write_text("cat 1 2 3\ndog 1 2\nship 1 2 3 4\n", encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=r"shifted\.txt, line 2: expected a word and 3 numbers; got 2 values after 'dog'",
    ):
        read_glove_text(path)


def test_bad_glove_not_a_number(tmp_path):
    path = tmp_path / "nan.txt"
    path.write_text("cat 1 2 3\ndog 1 two 3\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"nan\.txt, line 2: value 'two' after 'dog' is not a number"
    ):
        read_glove_text(path)


def test_bad_glove_empty_file(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty\.txt: empty GloVe file"):
        read_glove_text(path)


def test_bad_glove_words_without_numbers(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("cat\ndog\n", encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=r"words\.txt, line 1: expected a word and some numbers; got 0 values after 'cat'",
    ):
        read_glove_text(path)


# ---------------------------------------------------------------- Embeddings: edges


def test_embeddings_iterate_over_words(small_embeddings):
    """Iteration gives the words, in row order, like a dict's keys: ``in`` and ``len`` agree."""
    assert (
        list(small_embeddings) == small_embeddings.words == ["ship", "crew", "boat", "sea", "order"]
    )
    assert [w for w in small_embeddings if w in small_embeddings] == small_embeddings.words
    assert len(list(small_embeddings)) == len(small_embeddings)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (["ship", "crew"], r"word must be one word \(a str\); got list\. For several words use "
         r"emb\.matrix\(words\), an \(n, D\) tensor"),
        (("ship",), r"word must be one word \(a str\); got tuple\. For several words use "
         r"emb\.matrix\(words\)"),
        (0, r"word must be one word \(a str\), not a row number; got int 0\. Row i is "
         r"emb\.vectors\[i\], its word emb\.words\[i\]"),
        (torch.tensor(1), r"word must be one word \(a str\), not a row number; got Tensor"),
        (slice(0, 2), r"word must be one word \(a str\), not a row number; got slice"),
        (None, r"word must be one word \(a str\); got NoneType"),
    ],
)  # fmt: skip
def test_bad_getitem(small_embeddings, key, message):
    with pytest.raises(TypeError, match=message):
        small_embeddings[key]


@pytest.mark.parametrize("key", [["ship"], 0, None])
def test_bad_contains(small_embeddings, key):
    with pytest.raises(
        TypeError,
        match=rf"`word in emb` takes one word \(a str\); got {type(key).__name__}\. For several "
        r"words: all\(w in emb for w in words\)",
    ):
        key in small_embeddings  # noqa: B015


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (None, r"words must be a sentence \(str\) or a sequence of words \(str\); got NoneType"),
        (3, r"words must be a sentence \(str\) or a sequence of words \(str\); got int"),
        ([1], r"words must all be str; got int 1 at position 0"),
        (["ship", ["crew"]], r"words must all be str; got list \['crew'\] at position 1"),
    ],
)
def test_bad_matrix_words(small_embeddings, words, message):
    with pytest.raises(TypeError, match=message):
        small_embeddings.matrix(words)


def test_embeddings_accepts_lists_and_other_dtypes():
    e = Embeddings(("a", "b"), [[1, 2], [3, 4]])  # a tuple of words, a nested list of ints
    assert e.words == ["a", "b"] and e.vectors.dtype == torch.float32
    assert torch.equal(e["b"], torch.tensor([3.0, 4.0]))
    half = Embeddings(["a"], torch.tensor([[1.5, 2.0]], dtype=torch.bfloat16))
    assert torch.equal(half["a"], torch.tensor([1.5, 2.0]))
    assert Embeddings(np.array(["a", "b"]), np.eye(2)).words == ["a", "b"]  # NumPy strings


@pytest.mark.parametrize(
    ("words", "vectors", "exc", "message"),
    [
        ("ab", np.eye(2), TypeError, r"words must be a sequence of str, not one str; got 'ab'"),
        ([1, 2], np.eye(2), TypeError, r"words must all be str; got int 1 at position 0"),
        (None, np.eye(2), TypeError, r"words must be a sequence of str; got NoneType"),
        (["a"], [["x", "y"]], TypeError, r"vectors must hold real numbers; got dtype <U1"),
        (["a"], torch.tensor([[1j, 2]]), TypeError,
         r"vectors must hold real numbers; got dtype torch\.complex64"),
        (["a"], torch.tensor([[True]]), TypeError,
         r"vectors must hold real numbers; got dtype torch\.bool"),
        (["a", "b"], [[1.0], [2.0, 3.0]], ValueError,
         r"vectors must be a 2-D array \(V, D\); got a ragged nested list"),
        (["a"], np.zeros((1, 0)), ValueError,
         r"vectors must have at least one column, \(V, D\) with D >= 1; got \(1, 0\)"),
        (["a"], "1 2", ValueError, r"vectors must be a 2-D array \(V, D\); got str"),
    ],
)  # fmt: skip
def test_bad_embeddings_arguments(words, vectors, exc, message):
    with pytest.raises(exc, match=message):
        Embeddings(words, vectors)


def test_bad_most_similar_degenerate_vectors():
    e = Embeddings(["a", "b", "zero", "bad"], [[1.0, 0.0], [0.6, 0.8], [0.0, 0.0], [np.nan, 1.0]])
    with pytest.raises(
        ValueError,
        match=r"word_or_vector must have a non-zero norm \(the cosine with a zero vector is "
        r"undefined\); got the vector of 'zero'",
    ):
        e.most_similar("zero")
    with pytest.raises(ValueError, match=r"word_or_vector must have a non-zero norm.*; got a zero"):
        e.most_similar(torch.zeros(2))
    with pytest.raises(
        ValueError, match=r"word_or_vector must be finite; got the vector of 'bad', which holds nan"
    ):
        e.most_similar("bad")
    with pytest.raises(
        ValueError, match=r"word_or_vector must be finite; got a vector holding inf"
    ):
        e.most_similar(torch.tensor([float("inf"), 0.0]))
    # a word whose vector holds NaN is never a neighbour (torch.topk would rank NaN first)
    assert [w for w, _ in e.most_similar("a", k=10)] == ["b", "zero"]
    assert e.most_similar("a", k=np.int64(1)) == e.most_similar("a", k=1)  # NumPy integers


def test_unknown_capitalised_word_suggests_its_lower_case():
    emb = load_glove()
    with pytest.raises(
        KeyError, match=r"'Cat' \(the vocabulary is lower case: use 'cat'\); 'Shhip' \(close"
    ):
        emb.matrix(["Cat", "Shhip"])
