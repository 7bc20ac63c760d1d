"""attnlib.GloVe: torchtext's GloVe interface on the packaged 6B vectors."""

import attnlib
import pytest
import torch
from attnlib.glove import GloVe


@pytest.fixture(scope="module")
def glove():
    return GloVe(name="6B", dim=50)


def test_exported():
    assert attnlib.GloVe is GloVe
    assert "GloVe" in attnlib.__all__


def test_torchtext_attributes(glove):
    assert glove.vectors.shape == (400_000, 50)
    assert glove.vectors.dtype == torch.float32
    assert glove.dim == 50
    assert len(glove) == 400_000
    assert isinstance(glove.itos, list) and isinstance(glove.stoi, dict)
    assert len(glove.itos) == len(glove.stoi) == 400_000
    assert glove.itos[:3] == ["the", ",", "."]
    for word in ["the", "ship", "crew", "street"]:
        assert glove.itos[glove.stoi[word]] == word


def test_same_vectors_as_load_glove(glove):
    emb = attnlib.load_glove()
    assert glove.itos == emb.words
    torch.testing.assert_close(glove.vectors, emb.vectors, rtol=0, atol=0)
    torch.testing.assert_close(glove["ship"], emb["ship"], rtol=0, atol=0)
    assert glove["ship"][:4].tolist() == pytest.approx([1.5213, 0.10522, 0.38162, -0.50801])


def test_vectors_are_a_copy(glove):
    # editing GloVe.vectors (as torchtext code may) must not change load_glove()'s
    assert glove.vectors.data_ptr() != attnlib.load_glove().vectors.data_ptr()


def test_default_arguments_are_6B_50():
    assert GloVe().dim == 50
    assert GloVe(name="6B", dim="50").dim == 50  # torchtext's aliases pass dim as a string


def test_unknown_token_is_zeros_not_an_error(glove):
    for token in ["Ship", "qwzxv", ""]:
        vector = glove[token]
        assert vector.shape == (50,)
        assert torch.equal(vector, torch.zeros(50))
    assert "Ship" not in glove and "ship" in glove
    with pytest.raises(attnlib.UnknownWordError, match="Ship"):
        attnlib.load_glove()["Ship"]  # Embeddings says so instead


def test_unknown_zeros_are_fresh(glove):
    vector = glove["qwzxv"]
    vector += 1
    assert torch.equal(glove["qwzxv"], torch.zeros(50))


def test_unk_init():
    glove = GloVe(unk_init=lambda v: v.fill_(0.5))
    assert torch.equal(glove["qwzxv"], torch.full((50,), 0.5))
    assert torch.equal(glove.get_vecs_by_tokens(["qwzxv"]), torch.full((1, 50), 0.5))


def test_get_vecs_by_tokens(glove):
    tokens = ["the", "cat", "walks", "on", "the", "street"]
    vectors = glove.get_vecs_by_tokens(tokens)
    assert vectors.shape == (6, 50)
    torch.testing.assert_close(vectors, torch.stack([glove[t] for t in tokens]))
    single = glove.get_vecs_by_tokens("cat")
    assert single.shape == (50,)
    torch.testing.assert_close(single, glove["cat"])
    assert glove.get_vecs_by_tokens(("the", "cat")).shape == (2, 50)
    assert glove.get_vecs_by_tokens([]).shape == (0, 50)


def test_lower_case_backup(glove):
    mixed = ["Ship", "crew", "QWZXV"]
    as_written = glove.get_vecs_by_tokens(mixed)
    assert torch.equal(as_written[0], torch.zeros(50))  # default False: "Ship" unknown
    backed = glove.get_vecs_by_tokens(mixed, lower_case_backup=True)
    torch.testing.assert_close(backed[0], glove["ship"])
    torch.testing.assert_close(backed[1], glove["crew"])
    assert torch.equal(backed[2], torch.zeros(50))  # unknown in lower case too


def test_lower_case_backup_prefers_the_written_case(glove):
    # a token known as written is never lower-cased (torchtext's rule)
    known = [w for w in glove.itos[:5000] if w != w.lower()][:1]
    if known:
        torch.testing.assert_close(
            glove.get_vecs_by_tokens(known, lower_case_backup=True)[0], glove[known[0]]
        )


@pytest.mark.parametrize("name", ["840B", "42B", "twitter.27B", "6b", None])
def test_other_name_is_a_value_error(name):
    with pytest.raises(ValueError, match=r"name must be '6B'.*read_glove_text"):
        GloVe(name=name, dim=50)


@pytest.mark.parametrize("dim", [100, 200, 300, "300", 50.5, True])
def test_other_dim_is_a_value_error(dim):
    with pytest.raises(ValueError, match=r"dim must be 50.*got .*read_glove_text"):
        GloVe(name="6B", dim=dim)


def test_error_names_what_is_available():
    with pytest.raises(ValueError, match=r"name='6B', dim=50"):
        GloVe(name="840B", dim=300)


def test_unk_init_must_be_callable():
    with pytest.raises(TypeError, match="unk_init must be a function.*got int"):
        GloVe(unk_init=0)


@pytest.mark.parametrize("token", [3, None, ["the"]])
def test_getitem_needs_a_str(glove, token):
    with pytest.raises(TypeError, match="token must be a str"):
        glove[token]


@pytest.mark.parametrize(
    ("tokens", "got"),
    [(3, "got int"), (["the", 3], "got list holding int"), (None, "got NoneType")],
)
def test_get_vecs_by_tokens_needs_str(glove, tokens, got):
    with pytest.raises(TypeError, match=f"tokens must be a str or a list of str; {got}"):
        glove.get_vecs_by_tokens(tokens)


@pytest.mark.parametrize(
    ("unk_init", "got"),
    [
        (lambda v: None, "got NoneType"),
        (lambda v: v[:3], r"got \(3,\)"),
        (lambda v: 1.0, "got float"),
    ],
)
def test_unk_init_must_return_the_vector(unk_init, got):
    glove = GloVe(unk_init=unk_init)
    with pytest.raises(TypeError, match=rf"unk_init must return the \(D=50,\) vector .*{got}"):
        glove["qqzzx"]
    with pytest.raises(TypeError, match="unk_init must return"):
        glove.get_vecs_by_tokens(["ship", "qqzzx"])
