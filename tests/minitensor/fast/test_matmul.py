"""The matmul right-hand gradient's speed device (minitensor/fast/matmul.py: a batch folded into one GEMM) against
its formula (ops/matmul.py's rhs_grad, a^T @ g per batch, summed back by the graph walk), to the dtype's tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.fast import matmul as fast_matmul
from minitensor.ops import matmul
from minitensor.ops.namespace import ARRAYS
from minitensor.testing import OP_RTOL, assert_close
from tests.support.fast_devices import devices_on, formula_and_device_runs  # noqa: F401 (devices_on: in slots)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((3, 7, 5), (5, 9)), ((2, 3, 11, 13), (13, 1)), ((4, 1, 6), (6, 3)), ((3, 7), (7, 5)), ((2, 3, 4), (2, 4, 5))],
)
def test_the_folded_gradient_equals_the_formula_through_the_graph(dtype, a_shape, b_shape):
    """a @ b forward and backward, the device in its slot against the formula: a weight shared by a batch (the
    device folds it), a 2-D left operand and a batched right one (the device hands over to the formula)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(dtype) for s in (a_shape, b_shape))
    plain, quick = formula_and_device_runs(lambda x, y: x @ y, [a, b])
    for i, (p, q) in enumerate(zip(plain, quick)):
        assert p.dtype == q.dtype == dtype and p.shape == q.shape
        assert_close(q, p, OP_RTOL[np.dtype(dtype).name], f"output and gradients [{i}]")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_folded_gradient_on_a_strided_batch_and_empty_dims(dtype):
    """Called alone: a non-contiguous batched operand, and K or N of 0 (a sum of nothing, zeros)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 2 * 33, 17)).astype(dtype)[:, ::2]
    g = rng.standard_normal((5, 33, 9)).astype(dtype)
    want = matmul.rhs_grad(ARRAYS, a, g, 2).sum(axis=0)
    assert_close(fast_matmul.rhs_grad_folded(ARRAYS, a, g, 2), want, OP_RTOL[np.dtype(dtype).name], "strided")
    for k, n in [(0, 4), (4, 0)]:
        a0, g0 = np.ones((2, 3, k), dtype), np.ones((2, 3, n), dtype)
        assert fast_matmul.rhs_grad_folded(ARRAYS, a0, g0, 2).shape == (k, n)
    x = mt.tensor(np.ones((2, 3, 0), dtype), requires_grad=True)
    w = mt.tensor(np.ones((0, 4), dtype), requires_grad=True)
    (x @ w).sum().backward()
    assert w.grad.shape == (0, 4)
