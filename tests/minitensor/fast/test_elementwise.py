"""GELU's speed device (minitensor/fast/elementwise.py: an elementwise formula a block of entries at a time) against
the formula (ops/elementwise.py's `elementwise`, one call over the whole arrays): bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.fast import elementwise as fast_elementwise
from minitensor.fast import pool
from minitensor.ops import elementwise
from minitensor.ops.namespace import ARRAYS
from tests.support.fast_devices import assert_bitwise, devices_on, formula_and_device_runs  # noqa: F401


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_in_blocks_is_bitwise_the_formula(monkeypatch, dtype, threads, approximate):
    """GELU forward and backward on an odd-sized array past the threshold, the devices against the formulas; the
    blocks engage for float32 at two threads only (float64's erf holds the GIL; at one thread blocks buy nothing)."""
    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    calls, real = [], pool.row_blocks
    monkeypatch.setattr(pool, "row_blocks", lambda *a: calls.append(1) or real(*a))
    x = (np.random.default_rng(0).standard_normal((1031, 1019)) * 3).astype(dtype)
    plain, quick = formula_and_device_runs(lambda t: mt.nn.functional.gelu(t, approximate=approximate), [x])
    assert bool(calls) == (dtype == np.float32 and threads == 2)
    assert_bitwise(quick, plain, f"gelu {approximate}")


def test_the_device_hands_strided_and_small_arrays_to_the_formula(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    calls, real = [], pool.row_blocks
    monkeypatch.setattr(pool, "row_blocks", lambda *a: calls.append(1) or real(*a))
    x = np.random.default_rng(1).standard_normal((1031, 2038)).astype(np.float32)
    for a in (x[:, ::2], x[:5]):
        got = fast_elementwise.elementwise_in_blocks(ARRAYS, lambda xp, t: t * 2, a)
        np.testing.assert_array_equal(got, elementwise.elementwise(ARRAYS, lambda xp, t: t * 2, a))
    assert not calls
    halves = fast_elementwise.elementwise_in_blocks(ARRAYS, lambda xp, t: (t + 1, t - 1), x, outputs=2)
    assert calls
    assert_bitwise(list(halves), [x + 1, x - 1], "two outputs")
