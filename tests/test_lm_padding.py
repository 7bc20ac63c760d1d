"""LanguageModel's attention_mask (a right-padded batch), hidden_states and read_out (issue 49)."""

import pytest
import torch
from attnlib import LanguageModel, RMSNorm


def model(positions="rope", window=None):
    torch.manual_seed(0)
    return LanguageModel(
        37, 12, 3, 2, max_len=16, positions=positions, window=window, norm=RMSNorm
    ).eval()


def batch(lengths, L):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 37, (len(lengths), L), generator=g)
    mask = torch.arange(L)[None] < torch.tensor(lengths)[:, None]  # (N, L): right padding
    return ids, mask


@pytest.mark.parametrize("positions", ["rope", "learned", "alibi", None])
@pytest.mark.parametrize("window", [None, 3, (2, None)])
def test_a_padded_batch_gives_each_sequence_its_own_logits(positions, window):
    lm = model(positions, window)
    ids, mask = batch([7, 4, 1], 7)
    with torch.no_grad():
        logits, _ = lm(ids, attention_mask=mask.long())
        for i, n in enumerate([7, 4, 1]):
            alone, _ = lm(ids[i, :n])
            torch.testing.assert_close(logits[i, :n], alone, atol=1e-6, rtol=1e-6)
        assert logits.isfinite().all()  # padding positions see themselves: no NaN


def test_padding_changes_what_a_padding_key_would_have_given():
    lm = model()
    ids, mask = batch([3, 5], 5)
    with torch.no_grad():
        padded, _ = lm(ids, attention_mask=mask)
        plain, _ = lm(ids)
    # a real position of the short row sees no padding key: its logits are unchanged ...
    torch.testing.assert_close(padded[0, :3], plain[0, :3])
    # ... and all-ones is the same as no mask
    torch.testing.assert_close(padded[1], plain[1])


def test_hidden_states_and_read_out_give_the_logits():
    lm = model(window=(2, None))
    ids, mask = batch([6, 3], 6)
    with torch.no_grad():
        h = lm.hidden_states(ids, attention_mask=mask)
        logits, _ = lm(ids, attention_mask=mask)
    assert len(h) == lm.num_layers + 1 and h[0].shape == (2, 6, 12)
    torch.testing.assert_close(lm.read_out(h[-1]), logits, atol=0, rtol=0)


def test_hidden_states_through_a_cache_equal_one_pass():
    lm = model(window=(3, None))
    ids, _ = batch([9], 9)
    cache = lm.new_cache()
    with torch.no_grad():
        whole = lm.hidden_states(ids)[-1]
        parts = [lm.hidden_states(ids[:, i : i + 4], cache=cache)[-1] for i in range(0, 9, 4)]
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, atol=1e-5, rtol=1e-5)


def test_left_padding_is_refused():
    lm = model()
    ids, _ = batch([4], 4)
    with pytest.raises(ValueError, match=r"attention_mask must pad on the right .* a 0 before a 1"):
        lm(ids, attention_mask=torch.tensor([[0, 1, 1, 1]]))


def test_a_mask_with_a_cache_is_refused():
    lm = model()
    ids, mask = batch([4], 4)
    with pytest.raises(ValueError, match=r"attention_mask must be None with a cache"):
        lm(ids, attention_mask=mask, cache=lm.new_cache())


def test_a_float_mask_is_refused():
    lm = model()
    ids, mask = batch([4], 4)
    with pytest.raises(TypeError, match=r"attention_mask must be an integer or boolean tensor"):
        lm(ids, attention_mask=mask.float())


def test_a_mask_of_another_shape_is_refused():
    lm = model()
    ids, _ = batch([4, 4], 4)
    with pytest.raises(ValueError, match=r"attention_mask must have the shape of ids"):
        lm(ids, attention_mask=torch.ones(2, 3, dtype=torch.long))
