"""The last-axis maximum of minitensor/ops/rowwise.py is NumPy's exactly: the same values, infinities,
NaNs, shapes and dtypes, and a row's maximum does not depend on the rows around it."""

import numpy as np
import pytest

from minitensor.ops.rowwise import SHORT_ROW, is_last, last_max

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
