"""The scatter-add devices (minitensor/fast/indexing.py) against ops/indexing.py's add_rows_at: on the host
bitwise np.add.at (occurrence passes and row runs); on a device the tree of rows that repeat often against the
occurrence passes, to round-off."""

from __future__ import annotations

import numpy as np
import pytest

from minitensor import fakecuda, fast
from minitensor.fast.indexing import RUN_MIN, add_rows_at_fast
from minitensor.ops import indexing
from minitensor.ops.indexing import index_put
from minitensor.testing import sum_roundoff_limit
from tests.support.fast_devices import devices_on  # noqa: F401 (the devices in their slots)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_scatter_add_is_bitwise_np_add_at(dtype):
    """index_put's row device (the embedding's backward) against np.add.at, the formula on the host: repeated rows
    (up to all the same), signed zeros, an empty index; negative rows take np.add.at itself."""
    assert fast.use.add_rows_at is add_rows_at_fast
    rng = np.random.default_rng(1)
    cases = [(rng.integers(1, 30), rng.integers(1, 6), rng.integers(0, 60)) for _ in range(100)]
    for V, D, N in cases + [(5, 3, 40), (7, 2, 0)]:
        ids = rng.integers(0, V, N) if V != 5 else np.full(N, 2)
        g = rng.standard_normal((N, D)).astype(dtype)
        g[rng.random(g.shape) < 0.1] = -0.0
        ref = np.zeros((V, D), dtype)
        np.add.at(ref, ids, g)
        out = index_put((V, D), ids, g, True)
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(ref))
    ids = np.array([-1, 4, 4, -1])
    g = rng.standard_normal((4, 2)).astype(dtype)
    ref = np.zeros((5, 2), dtype)
    np.add.at(ref, ids, g)
    np.testing.assert_array_equal(index_put((5, 2), ids, g, True), ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_row_runs_are_bitwise_np_add_at(dtype):
    """The device's runs (add_row_runs: a row repeated more than RUN_MIN times summed by np.add.reduce over axis 0)
    against the formula (np.add.at on the host): a small vocabulary's embedding (most rows heavy), heavy and light
    rows mixed, a nonzero `out` (its value comes first), rows of one number (D = 1: the passes), float16 (the
    passes), a strided `values`."""
    rng = np.random.default_rng(2)
    for V, D, N in [(20, 128, 704), (100, 128, 320), (3, 1, 200), (50, 7, 400), (1, 2, 1000)]:
        ids = rng.integers(0, V, N)
        ids[: N // 3] = 0  # a padding-like row far beyond RUN_MIN
        assert np.bincount(ids).max() > RUN_MIN
        wide = (rng.standard_normal((N, 2 * D)) * 10.0 ** rng.integers(-3, 4, (N, 1))).astype(dtype)
        for g in (wide[:, :D].copy(), wide[:, ::2]):
            g[rng.random(g.shape) < 0.1] = -0.0
            for start in (np.zeros((V, D), dtype), rng.standard_normal((V, D)).astype(dtype)):
                ref = start.copy()
                indexing.add_rows_at(ref, ids, g)  # the formula
                out = start.copy()
                add_rows_at_fast(out, ids, g)
                np.testing.assert_array_equal(out, ref)
                np.testing.assert_array_equal(np.signbit(out), np.signbit(ref))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_tree_on_a_device_is_the_occurrence_passes_to_round_off(dtype):
    """On a device the formula adds a pass per repeat (bitwise np.add.at); the device sums rows that repeat more than
    RUN_MIN times as a tree: each row within the round-off of its terms, the same bits on every call."""
    rng = np.random.default_rng(3)
    rows = np.concatenate([np.full(301, 3), rng.integers(0, 9, 157), [8]])
    values = (rng.standard_normal((rows.size, 5)) * 10.0 ** rng.integers(-3, 4, (rows.size, 1))).astype(dtype)
    expected = np.zeros((9, 5), dtype)
    np.add.at(expected, rows, values)
    plain = fakecuda.zeros((9, 5), dtype=dtype)
    indexing.add_rows_at(plain, fakecuda.asarray(rows), fakecuda.asarray(values))
    np.testing.assert_array_equal(fakecuda.asnumpy(plain), expected, strict=True)
    runs = []
    for _ in range(2):
        out = fakecuda.zeros((9, 5), dtype=dtype)
        add_rows_at_fast(out, fakecuda.asarray(rows), fakecuda.asarray(values))
        runs.append(fakecuda.asnumpy(out))
    np.testing.assert_array_equal(runs[0], runs[1], strict=True)
    for r in range(9):
        limit = sum_roundoff_limit(values[rows == r], dtype) if (rows == r).any() else 0.0
        assert np.all(np.abs(runs[0][r].astype(np.float64) - expected[r]) <= limit), f"row {r}"
