"""fast/selection.py: the selections with a zero branch taken as a product by the mask equal np.where, their formula.

Equal values, not bits: a zero selected from a negative value is -0.0 by the product, 0.0 by np.where (the
devices' docstring); assert_array_equal compares values, and a signbit check proves the product ran.
"""

import numpy as np
import pytest

import minitensor as mt
from minitensor import fast
from minitensor.fast.selection import select_by_product, zero_where_by_product
from minitensor.ops.namespace import zero_where
from minitensor.ops.selection import select

DTYPES = ["float32", "float64"]


def _branches(rng, dtype):
    """A contiguous branch, a transposed (non-contiguous) one, and the same with inf and with NaN in it."""
    b = rng.standard_normal((3, 4, 5)).astype(dtype)
    t = np.swapaxes(rng.standard_normal((3, 5, 4)).astype(dtype), 1, 2)
    return b, t, np.where(b > 1, np.inf, b), np.where(b > 1, np.nan, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_select_by_product_is_np_where(dtype):
    """Either branch the 0-d zero, masks broadcast or not, a non-bool condition, mixed dtypes: np.where's values,
    dtype and shape."""
    rng = np.random.default_rng(0)
    zero = np.zeros((), dtype)
    conds = (rng.random((3, 4, 5)) < 0.5, rng.random((4, 1)) < 0.5, rng.random((2, 3, 4, 5)) < 0.5)
    for cond in conds:
        for x in _branches(rng, dtype):
            for args in ((cond, zero, x), (cond, x, zero), (cond.astype(np.int8), zero, x), (cond, x, np.float16(0))):
                with np.errstate(all="ignore"):  # as forwards run: 0 * inf quietly, then np.where
                    got, want = select_by_product(*args), select(*args)
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_where_by_product_is_np_where(dtype):
    rng = np.random.default_rng(1)
    for drop in (rng.random((3, 4, 5)) < 0.5, rng.random((4, 1)) < 0.5):
        for g in _branches(rng, dtype):
            with np.errstate(all="ignore"):
                got, want = zero_where_by_product(drop, g), zero_where(drop, g)
            assert got.dtype == want.dtype == g.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


def test_the_devices_engage_on_finite_host_arrays():
    """The product ran: a dropped negative is -0.0 (np.where gives +0.0)."""
    g = -np.ones((2, 3), np.float32)
    drop = np.array([[True, False, True], [False, True, False]])
    assert np.signbit(zero_where_by_product(drop, g)[drop]).all()
    assert not np.signbit(zero_where(drop, g)[drop]).any()
    assert np.signbit(select_by_product(~drop, g, np.float32(0))[drop]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_and_where_forward_backward_and_second_order_equal_with_speed_on_and_off(dtype):
    """relu's backward (zero_where) and Where under create_graph (select with a 0-d zero branch), both ways."""
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((6, 7)).astype(dtype)[:, ::2]  # non-contiguous
    g0, v0 = rng.standard_normal(x0.shape).astype(dtype), rng.standard_normal(x0.shape).astype(dtype)

    def run():
        x = mt.tensor(np.ascontiguousarray(x0), requires_grad=True)
        y = mt.where(x > 0, x * x, mt.zeros_like(x)).relu() + x.relu() * 3
        (gx,) = mt.autograd.grad(y, x, mt.tensor(g0), create_graph=True)
        (gxx,) = mt.autograd.grad(gx, x, mt.tensor(v0))
        return y._data, gx._data, gxx._data

    with fast.speed(True):
        on = run()
    with fast.speed(False):
        off = run()
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)
