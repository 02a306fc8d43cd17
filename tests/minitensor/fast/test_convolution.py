"""The convolution's speed devices (minitensor/fast/convolution.py: conv_products_folded, conv_grads_folded, the
samples folded into one product per group) against their formulas (ops/convolution.py's conv_products, conv_grads,
one product per sample), through F.conv1d/conv2d and alone, to the dtype's tolerance (the sums run in another order)."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.fast import convolution as fast_convolution
from minitensor.ops import convolution
from minitensor.ops.namespace import ARRAYS
from minitensor.testing import OP_RTOL, assert_close
from tests.support.fast_devices import devices_on, formula_and_device_runs  # noqa: F401 (devices_on: in slots)

F = mt.nn.functional
GEOMETRIES = [  # (x shape, weight shape, bias, keyword arguments)
    ((2, 4, 7, 6), (6, 2, 3, 2), True, dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)),
    ((3, 3, 5, 6), (4, 3, 3, 3), False, dict(padding=1)),
    ((2, 6, 9), (6, 1, 3), True, dict(padding=2, dilation=2, groups=6)),
    ((1, 2, 4, 4), (3, 2, 2, 2), True, dict(stride=2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, w_shape, bias, kw", GEOMETRIES)
def test_the_folded_products_equal_the_formulas_through_the_graph(dtype, x_shape, w_shape, bias, kw):
    """conv1d/conv2d forward and backward (x, weight, bias), the devices in their slots against the formulas: groups,
    strides, padding, dilation, no bias."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(dtype) for s in (x_shape, w_shape, (w_shape[0],) if bias else ())[:3]]
    arrays = arrays if bias else arrays[:2]
    conv = F.conv2d if len(x_shape) == 4 else F.conv1d
    plain, quick = formula_and_device_runs(lambda *t: conv(*t, **kw), arrays)
    for i, (p, q) in enumerate(zip(plain, quick)):
        assert p.dtype == q.dtype == dtype and p.shape == q.shape
        assert_close(q, p, OP_RTOL[np.dtype(dtype).name], f"output and gradients [{i}]")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_folded_products_called_alone_and_a_formula_given_their_columns(dtype):
    """The devices alone against the formulas; the formula's backward given the device's columns (speed switched off
    between a forward and its backward) recomputes its own and gives the same gradients."""
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in ((3, 4, 6, 5), (6, 2, 3, 3), (6,)))
    geometry = dict(kernel_size=(3, 3), stride=(1, 2), padding=((1, 1), (2, 0)), dilation=(1, 1))
    rtol = OP_RTOL[np.dtype(dtype).name]
    want, want_cols = convolution.conv_products(x, w, b, geometry, 2)
    got, got_cols = fast_convolution.conv_products_folded(x, w, b, geometry, 2)
    assert got.flags.c_contiguous and got.dtype == dtype
    assert_close(got, want, rtol, "forward")
    g = rng.standard_normal(want.shape).astype(dtype)
    want_grads = convolution.conv_grads(ARRAYS, g, x, w, want_cols, geometry, 2, True, True)
    got_grads = fast_convolution.conv_grads_folded(ARRAYS, g, x, w, got_cols, geometry, 2, True, True)
    mixed = convolution.conv_grads(ARRAYS, g, x, w, got_cols, geometry, 2, True, True)
    for name, a, b_, c in zip(("dx", "dW"), got_grads, want_grads, mixed):
        assert a.shape == b_.shape and a.dtype == dtype and a.flags.c_contiguous, name
        assert_close(a, b_, rtol, name)
        assert_close(c, b_, rtol, f"{name}, the formula given the device's columns")
