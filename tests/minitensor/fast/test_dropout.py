"""fast/dropout.py: the keep mask compared a byte at a time is the formula's mask, bit for bit, from the same draws."""

import numpy as np
import pytest

import minitensor as mt
from minitensor import fast
from minitensor.fast.dropout import keep_mask_by_bytes
from minitensor.nn.functional import keep_mask
from minitensor.random import generator


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1 / 3, 0.999, 1 - 2**-34, 1.0])
@pytest.mark.parametrize("shape", [(100_003,), (1001, 999), (0, 3), ()])
def test_keep_mask_by_bytes_is_the_formula_bit_for_bit(p, shape):
    """The same mask and the generator left at the same point (the next draws equal); p within 2^-33 of 1 rounds
    the threshold to 2^32 (nothing kept)."""
    masks, after = [], []
    for fn in (keep_mask, keep_mask_by_bytes):
        mt.manual_seed(5)
        masks.append(fn(shape, p))
        after.append(generator().bit_generator.random_raw(3))
    assert masks[0].shape == masks[1].shape == shape and masks[1].dtype == np.bool_
    np.testing.assert_array_equal(masks[1], masks[0])
    np.testing.assert_array_equal(after[1], after[0])
    if p >= 1 - 2**-34 and masks[0].size:
        assert not masks[0].any()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout_forward_and_backward_equal_with_speed_on_and_off(dtype):
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((64, 130)).astype(dtype)[:, ::2]  # non-contiguous
    g0 = rng.standard_normal(x0.shape).astype(dtype)

    def run():
        mt.manual_seed(11)
        x = mt.tensor(x0, requires_grad=True)
        y = mt.nn.functional.dropout(x, p=0.3)
        y.backward(mt.tensor(g0))
        return y._data, x.grad._data

    with fast.speed(True):
        on = run()
    with fast.speed(False):
        off = run()
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)
    assert 0 < (on[0] == 0).mean() < 0.5  # dropout did drop
