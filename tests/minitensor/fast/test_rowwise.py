"""The last-axis speed devices of minitensor/fast/rowwise.py against ops/rowwise.py's formulas. The maximum is
NumPy's exactly: the same values, infinities, NaNs, shapes and dtypes. The sum and mean are NumPy's up to round-off.
For both, a row's result does not depend on the rows around it, on the array's layout, or on how many rows share
the call."""

import numpy as np
import pytest

from minitensor.fast.rowwise import SHORT_ROW, SUM_ROW, last_max, last_mean, last_sum
from minitensor.ops import rowwise
from minitensor.ops.namespace import ARRAYS
from minitensor.ops.rowwise import is_last
from tests.support.fast_devices import devices_on  # noqa: F401 (the devices in their slots)

SHAPES = [(7,), (3, 5), (4, 3, 22), (2, 3, 4, 22), (5, SHORT_ROW), (3, SHORT_ROW + 1), (2, 3, 512), (6, 1), (1, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("keepdims", [True, False])
def test_last_max_is_np_max_exactly(rng, shape, dtype, keepdims):
    a = (rng.standard_normal(shape) * 10).astype(dtype)
    np.testing.assert_array_equal(last_max(a, keepdims), np.max(a, axis=-1, keepdims=keepdims))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_infinities_and_nans_behave_as_numpy(dtype):
    rows = np.array(
        [
            [1.0, np.inf, 2.0],
            [-np.inf, -np.inf, -np.inf],
            [np.inf, -np.inf, 0.0],
            [np.nan, 1.0, 2.0],
            [1.0, 2.0, np.nan],
            [-0.0, -1.0, -2.0],
        ],
        dtype=dtype,
    )
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(last_max(rows), np.max(rows, axis=-1, keepdims=True))


def test_non_contiguous_and_empty_inputs(rng):
    a = rng.standard_normal((6, 8, 10)).astype(np.float32)
    for view in (a[:, ::2], a.transpose(1, 0, 2), a[..., ::3], np.broadcast_to(a[:1], (4, 8, 10))):
        np.testing.assert_array_equal(last_max(view), view.max(axis=-1, keepdims=True))
    empty_rows, empty_axis = np.zeros((0, 5), np.float32), np.zeros((3, 0), np.float32)
    assert last_max(empty_rows).shape == (0, 1)
    np.testing.assert_array_equal(last_max(empty_axis), np.full((3, 1), -np.inf, np.float32))
    ints = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(last_max(ints), ints.max(axis=-1, keepdims=True))


def test_a_rows_maximum_does_not_depend_on_its_neighbours(rng):
    a = rng.standard_normal((1000, 22)).astype(np.float32)
    whole = last_max(a, keepdims=False)
    for rows in (1, 3, 7, 8, 100):
        for s in range(0, 1000 - rows, 97):
            np.testing.assert_array_equal(last_max(a[s : s + rows], keepdims=False), whole[s : s + rows])


def test_is_last():
    assert is_last(-1, 3) and is_last(2, 3) and is_last((2,), 3) and is_last((-1,), 3)
    assert not is_last(0, 3) and not is_last((1, 2), 3) and not is_last(None, 3) and not is_last(0, 0)


# ----------------------------------------------------------------------------- last_sum, last_mean

SUM_SHAPES = [(7,), (3, 5), (4, 3, 22), (2, 3, 4, 22), (5, 128), (3, 512), (2, SUM_ROW), (3, SUM_ROW + 1), (6, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SUM_SHAPES)
@pytest.mark.parametrize("keepdims", [True, False])
def test_last_sum_and_mean_are_numpys_up_to_round_off(rng, shape, dtype, keepdims):
    a = rng.standard_normal(shape).astype(dtype)
    exact = a.astype(np.float64).sum(axis=-1, keepdims=keepdims)
    # the bound of a running float sum, |error| <= n eps sum|a|, not the looser tolerance of a parity check
    bound = shape[-1] * np.finfo(dtype).eps * np.abs(a).astype(np.float64).sum(axis=-1, keepdims=keepdims)
    s, m = last_sum(a, keepdims), last_mean(a, keepdims)
    assert s.shape == exact.shape and s.dtype == dtype and m.shape == exact.shape and m.dtype == dtype
    assert np.all(np.abs(s - exact) <= bound)
    np.testing.assert_allclose(m, np.mean(a, axis=-1, keepdims=keepdims), rtol=0, atol=float(np.max(bound)))


@pytest.mark.parametrize("n", [3, 22, 128, 512, SUM_ROW])
def test_a_rows_sum_does_not_depend_on_its_neighbours_or_layout(rng, n):
    """Attention sums a row in score blocks, and a cached decoder one query at a time: the same bits each way."""
    a = (rng.standard_normal((300, n)) * 10).astype(np.float32)
    whole = last_sum(a, keepdims=False)
    for rows in (1, 3, 8, 100):
        for s in range(0, 300 - rows, 89):
            np.testing.assert_array_equal(last_sum(a[s : s + rows], keepdims=False), whole[s : s + rows])
    np.testing.assert_array_equal(last_sum(a[5]), whole[5:6])  # a 1-D row
    np.testing.assert_array_equal(last_sum(a[::3], keepdims=False), whole[::3])  # a strided view
    wide = np.ascontiguousarray(np.stack([a, a[::-1]], axis=1))  # (300, 2, n): the rows interleaved
    np.testing.assert_array_equal(last_sum(wide, keepdims=False)[:, 0], whole)
    column_major = np.asfortranarray(a)
    np.testing.assert_array_equal(last_sum(column_major, keepdims=False), whole)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_last_sum_infinities_and_nans_behave_as_numpy(dtype):
    rows = np.array(
        [[1.0, np.inf, 2.0], [-np.inf, -np.inf, 0.0], [np.inf, -np.inf, 0.0], [np.nan, 1.0, 2.0], [-0.0, -0.0, -0.0]],
        dtype=dtype,
    )
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(last_sum(rows), np.sum(rows, axis=-1, keepdims=True))
        np.testing.assert_array_equal(last_mean(rows), np.mean(rows, axis=-1, keepdims=True))


def test_last_sum_and_mean_fall_back_to_numpy_where_the_device_does_not_apply():
    ints = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(last_sum(ints), ints.sum(axis=-1, keepdims=True))
    np.testing.assert_array_equal(last_mean(ints), ints.mean(axis=-1, keepdims=True))
    assert last_mean(ints).dtype == np.float64
    assert last_sum(np.zeros((0, 5), np.float32)).shape == (0, 1)
    np.testing.assert_array_equal(last_sum(np.zeros((3, 0), np.float32)), np.zeros((3, 1), np.float32))
    with np.errstate(all="ignore"):  # 0/0: NaN, as PyTorch gives (reductions.mean)
        assert np.isnan(last_mean(np.zeros((3, 0), np.float32))).all()
    half = np.ones((2, 5), np.float16)
    np.testing.assert_array_equal(last_sum(half), half.sum(axis=-1, keepdims=True))


def test_the_backward_namespace_sums_the_last_axis_by_the_device_and_other_axes_by_numpy(rng):
    a = rng.standard_normal((4, 6, 128)).astype(np.float32)
    np.testing.assert_array_equal(ARRAYS.sum(a, axis=-1, keepdims=True), last_sum(a))
    np.testing.assert_array_equal(ARRAYS.mean(a, axis=(2,), keepdims=True), last_mean(a))
    np.testing.assert_array_equal(ARRAYS.sum(a, axis=(0, 1)), np.sum(a, axis=(0, 1)))
    np.testing.assert_array_equal(ARRAYS.mean(a, axis=1), np.mean(a, axis=1))
    assert ARRAYS.sum(a).shape == () and ARRAYS.sum(np.float32(2.0), axis=None) == 2.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (3001, 7), (257, 22), (33, SHORT_ROW), (9, SUM_ROW), (5, SUM_ROW + 3)])
def test_each_device_against_its_registered_formula(rng, dtype, shape):
    """row_max, row_sum, row_mean: the device in the slot against the formula, on rows short enough that the device
    engages and on rows past its limits (where it is the formula), contiguous and strided: the maximum bitwise, the
    sum and mean to round-off."""
    from minitensor import fast
    from minitensor.testing import OP_RTOL, assert_close

    a = (rng.standard_normal((2,) + shape) * 5).astype(dtype)
    for arr in (a[0], a[:, ::2].reshape(-1, shape[-1])[: shape[0]], a[0].T.copy().T):
        assert fast.use.row_max is last_max and fast.use.row_sum is last_sum and fast.use.row_mean is last_mean
        np.testing.assert_array_equal(last_max(arr), rowwise.row_max(arr), strict=True)
        for keepdims in (True, False):
            assert_close(last_sum(arr, keepdims), rowwise.row_sum(arr, keepdims), OP_RTOL[np.dtype(dtype).name], "sum")
            assert_close(
                last_mean(arr, keepdims), rowwise.row_mean(arr, keepdims), OP_RTOL[np.dtype(dtype).name], "mean"
            )
