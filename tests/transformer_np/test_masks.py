"""transformer_np/masks.py: shapes, values, and the errors on bad token ids."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from transformer_np.masks import causal_mask, padding_mask, target_mask

TOKENS = np.array([[5, 6, 7, 0, 0], [4, 0, 9, 8, 0]], dtype=np.int64)


def test_padding_mask_shape_and_values():
    m = padding_mask(TOKENS)
    assert isinstance(m, mt.Tensor) and m.dtype == mt.bool
    assert m.shape == (2, 1, 1, 5)
    np.testing.assert_array_equal(m.numpy()[:, 0, 0], TOKENS != 0)
    # a Tensor input and another pad id
    m7 = padding_mask(mt.tensor(TOKENS), pad_id=7)
    np.testing.assert_array_equal(m7.numpy()[:, 0, 0], TOKENS != 7)


@pytest.mark.parametrize("size", [1, 4, 7])
def test_causal_mask_is_lower_triangular(size):
    m = causal_mask(size)
    assert m.shape == (1, 1, size, size) and m.dtype == mt.bool
    np.testing.assert_array_equal(m.numpy()[0, 0], np.tril(np.ones((size, size), dtype=bool)))
    # query i sees exactly the keys j <= i
    for i in range(size):
        assert m.numpy()[0, 0, i].sum() == i + 1


def test_causal_mask_with_offset_matches_the_last_rows_of_the_full_mask():
    full = causal_mask(7).numpy()[0, 0]
    part = causal_mask(3, offset=4).numpy()[0, 0]  # queries 4, 5, 6 against keys 0..6
    assert part.shape == (3, 7)
    np.testing.assert_array_equal(part, full[4:])


def test_target_mask_is_causal_and_padding():
    m = target_mask(TOKENS)
    assert m.shape == (2, 1, 5, 5) and m.dtype == mt.bool
    expected = (padding_mask(TOKENS) & causal_mask(5)).numpy()
    np.testing.assert_array_equal(m.numpy(), expected)
    # row 1: key 1 is PAD, so no query sees it; query 2 sees keys 0 and 2
    np.testing.assert_array_equal(m.numpy()[1, 0, 2], [True, False, True, False, False])


def test_masks_broadcast_to_the_scores_shape():
    B, H, T, S = 2, 3, 5, 5
    for m in (padding_mask(TOKENS), causal_mask(T), target_mask(TOKENS)):
        assert np.broadcast_shapes(m.shape, (B, H, T, S)) == (B, H, T, S)


@pytest.mark.parametrize("fn", [padding_mask, target_mask])
def test_bad_tokens_are_rejected(fn):
    with pytest.raises(TypeError, match="integer"):
        fn(TOKENS.astype(np.float32))
    with pytest.raises(ValueError, match=r"\(B, L\)"):
        fn(TOKENS[0])
    with pytest.raises(TypeError, match="list"):
        fn(TOKENS.tolist())


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_causal_mask_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="size"):
        causal_mask(bad)
    with pytest.raises(ValueError, match="offset"):
        causal_mask(3, offset=-1)
