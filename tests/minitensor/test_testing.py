"""minitensor/testing.py's measures: the ULP distance and the finite-difference round-off."""

from __future__ import annotations

import numpy as np
import pytest

from minitensor.testing import fd_roundoff, ulp_distance


def _steps(x, k: int, toward):
    for _ in range(k):
        x = np.nextafter(x, toward)
    return x


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ulp_distance_counts_the_representable_values_between(dtype):
    one, big = dtype(1), dtype(2)
    assert ulp_distance(one, one) == 0
    assert ulp_distance(_steps(one, 5, big), one) == 5 == ulp_distance(one, _steps(one, 5, big))
    assert ulp_distance(dtype(-0.0), dtype(0.0)) == 0
    tiny = np.nextafter(dtype(0), big)  # the smallest subnormal, either side of zero: two steps apart
    assert ulp_distance(tiny, -tiny) == 2
    # across zero: the two distances to zero add up (1.0's bit pattern, counted from zero, on each side)
    assert ulp_distance(one, -one) == 2 * int(np.array(one).view({2: np.int16, 4: np.int32, 8: np.int64}[one.itemsize]))
    assert ulp_distance(np.array([1, 2], dtype), np.array([1, _steps(big, 3, dtype(3))], dtype)) == 3


def test_ulp_distance_of_non_finite_values():
    assert ulp_distance(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])) == 0
    assert ulp_distance(np.array([np.inf]), np.array([np.inf])) == 0
    assert ulp_distance(np.array([1.0]), np.array([np.inf])) == np.inf
    assert ulp_distance(np.array([np.nan]), np.array([1.0])) == np.inf
    with pytest.raises(ValueError, match="shape mismatch"):
        ulp_distance(np.zeros(2), np.zeros(3))


def test_fd_roundoff_scales_with_the_value_and_the_step():
    assert fd_roundoff(2.0, 1e-6) == pytest.approx(2 * fd_roundoff(1.0, 1e-6))
    assert fd_roundoff(1.0, 1e-7) == pytest.approx(10 * fd_roundoff(1.0, 1e-6))
    assert fd_roundoff(-3.0) == fd_roundoff(3.0)
