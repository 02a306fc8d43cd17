"""The softmax family's speed devices (minitensor/fast/softmax.py) against their formulas (ops/fused.py,
ops/losses.py): blocks of rows and blocks of attention scores, at one and two threads, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor import fast
from minitensor.fast import pool, softmax
from minitensor.ops import fused, losses
from minitensor.ops.namespace import ARRAYS
from tests.support.fast_devices import assert_bitwise, devices_on  # noqa: F401 (devices_on: the devices in slots)

BIG = (1031, 1019)  # odd sizes, past ROW_DEVICE_MIN_NUMEL entries: the row devices engage as they are


def big(rng, dtype, scale=3.0):
    return (rng.standard_normal(BIG) * scale).astype(dtype)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_devices_on_large_arrays_are_bitwise_their_formulas(rng, monkeypatch, dtype, threads):
    """softmax, log_softmax, log_softmax_grad and cross_entropy_grad (with and without a weight and label smoothing)
    as registered, on an array past the devices' threshold, contiguous (the device engages: it runs the row blocks)
    and strided (it hands over to the formula), at one and two threads."""
    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    blocks, real = [], pool.row_blocks
    monkeypatch.setattr(pool, "row_blocks", lambda *a: blocks.append(1) or real(*a))
    z, g = big(rng, dtype), big(rng, dtype, 1.0)
    y = fused.log_softmax_formula(z, -1)
    assert_bitwise([softmax.softmax_in_blocks(z, -1)], [fused.softmax_formula(z, -1)], "softmax")
    assert_bitwise([softmax.log_softmax_in_blocks(z, -1)], [y], "log_softmax")
    assert_bitwise(
        [softmax.log_softmax_grad_in_blocks(ARRAYS, g, y, -1)], [fused.log_softmax_grad(ARRAYS, g, y, -1)], "grad"
    )
    tv, w = rng.integers(0, BIG[1], BIG[0]), rng.random(BIG[1]).astype(dtype)
    g_rows = rng.standard_normal((BIG[0], 1)).astype(dtype)
    for e, weight in [(0.0, None), (0.1, None), (0.1, w)]:
        s = None if weight is None else ((1 - e) * w[tv] + e / BIG[1] * w.sum()).reshape(-1, 1).astype(dtype)
        args = (ARRAYS, y, g_rows, tv, e, np.dtype(dtype), weight, s)
        got, want = softmax.cross_entropy_grad_in_blocks(*args), losses.cross_entropy_grad(*args)
        assert_bitwise([got], [want], f"cross_entropy_grad e={e} weight={weight is not None}")
    assert len(blocks) == 6
    strided = big(rng, dtype)[:, ::2]  # not C-contiguous: the formula
    assert_bitwise([softmax.softmax_in_blocks(strided, -1)], [fused.softmax_formula(strided, -1)], "strided")
    assert len(blocks) == 6
    assert_bitwise([softmax.softmax_in_blocks(z.T, 0)], [fused.softmax_formula(z.T, 0)], "another axis")


def _row_device_cases(rng, dtype):
    """(name, function of Tensors, inputs) of the ops with a row-blocked speed device."""
    F = mt.nn.functional
    x = (rng.standard_normal((6, 7, 50)) * 3).astype(dtype)
    t = rng.integers(0, 50, 42)
    t[3] = 0  # an ignored row
    w = rng.random(50).astype(dtype)
    return [
        ("softmax", lambda x: F.softmax(x, dim=-1), (x,)),
        ("log_softmax", lambda x: F.log_softmax(x, dim=-1), (x,)),
        ("cross_entropy", lambda x: F.cross_entropy(x.reshape(42, 50), mt.tensor(t), ignore_index=0), (x,)),
        (
            "cross_entropy_smoothed_weighted",
            lambda x: F.cross_entropy(x.reshape(42, 50), mt.tensor(t), weight=mt.tensor(w), label_smoothing=0.1),
            (x,),
        ),
        (
            "cross_entropy_smoothed",
            lambda x: F.cross_entropy(x.reshape(42, 50), mt.tensor(t), label_smoothing=0.1),
            (x,),
        ),
    ]


def run_case(fn, inputs, g_rng):
    ts = [mt.tensor(a, requires_grad=True) for a in inputs]
    y = fn(*ts)
    y.backward(mt.tensor(g_rng.standard_normal(y.shape).astype(y.dtype)))
    return [y.data.copy()] + [t.grad.data.copy() for t in ts]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_row_blocked_ops_are_bitwise_the_plain_formulas(monkeypatch, dtype, threads):
    """softmax, log_softmax and cross_entropy (with and without weight and label smoothing), forward and backward,
    on their row-blocked devices -- blocks of 100 entries, a short last block, at one and two threads on the pool --
    give the plain formulas' outputs and gradients, bit for bit."""
    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    monkeypatch.setattr(pool, "ROWS_PARALLEL_MIN_NUMEL", 0)
    monkeypatch.setattr(pool, "ROW_BLOCK_NUMEL", 100)
    calls, row_blocks = [], pool.row_blocks
    monkeypatch.setattr(pool, "row_blocks", lambda *a: calls.append(1) or row_blocks(*a))
    for name, fn, inputs in _row_device_cases(np.random.default_rng(0), dtype):
        monkeypatch.setattr(pool, "ROW_DEVICE_MIN_NUMEL", 10**9)  # the devices hand over: the plain formulas
        plain = run_case(fn, inputs, np.random.default_rng(1))
        assert not calls
        monkeypatch.setattr(pool, "ROW_DEVICE_MIN_NUMEL", 0)
        blocked = run_case(fn, inputs, np.random.default_rng(1))
        assert calls, name
        calls.clear()
        assert_bitwise(blocked, plain, name)


def test_row_blocks_run_on_the_pool_at_two_threads(monkeypatch):
    """At two threads a large enough row-blocked op spreads its blocks over the pool; at one it never does."""
    from minitensor import pool as pieces

    x = np.random.default_rng(0).standard_normal((256, 4096)).astype(np.float32)
    assert x.size >= pool.ROWS_PARALLEL_MIN_NUMEL
    seen = set()
    real_max = fast.use.row_max
    monkeypatch.setattr(fast.use, "row_max", lambda z: (seen.add(pieces.update_pool.threaded), real_max(z))[1])
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = fused.log_softmax(x, -1)
    assert True not in seen
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    two = fused.log_softmax(x, -1)
    assert True in seen
    np.testing.assert_array_equal(one, two)


# ----------------------------------------------------------------------------- attention's score blocks


@pytest.mark.parametrize("keep_shape", [None, (2, 1, 1, 40), (2, 1, 24, 40), (24, 40)])
def test_attention_in_score_blocks_is_bitwise_the_whole_array(monkeypatch, keep_shape):
    """AttentionWeights forward and backward over blocks of 100 scores (several rows of each (b, h), a short
    last block, masks broadcast over heads or batch) give exactly the formulas' numbers (attention_softmax and
    attention_softmax_grad in their slots), and so does the device of softmax_grad called alone."""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 3, 24, 8), dtype=np.float32), rng.standard_normal((2, 3, 40, 8), dtype=np.float32)
    keep = None if keep_shape is None else rng.random(keep_shape) > 0.3
    g = rng.standard_normal((2, 3, 24, 40), dtype=np.float32)

    def run():
        qt, kt = mt.tensor(q, requires_grad=True), mt.tensor(k, requires_grad=True)
        w = mt.nn.functional.attention_weights(qt, kt, None if keep is None else mt.tensor(keep), scale=0.3)
        w.backward(g)
        return [w.data, qt.grad.data, kt.grad.data]

    assert len(softmax.score_blocks(np.empty((2, 3, 24, 40), np.float32))) == 1
    monkeypatch.setattr(softmax, "SCORE_BLOCK_NUMEL", 100)
    assert len(softmax.score_blocks(np.empty((2, 3, 24, 40), np.float32))) == 2 * 3 * 12
    blocks, real = [], softmax.score_blocks
    monkeypatch.setattr(softmax, "score_blocks", lambda w: blocks.append(1) or real(w))
    with monkeypatch.context() as plain:
        plain.setattr(fast.use, "attention_softmax", fused.masked_softmax_)
        plain.setattr(fast.use, "attention_softmax_grad", fused.softmax_grad)
        whole = run()
    assert not blocks
    blocked = run()
    assert blocks
    assert_bitwise(blocked, whole, "attention weights, dq, dk")
    w = whole[0]
    assert_bitwise([softmax.softmax_grad_in_score_blocks(ARRAYS, g, w)], [fused.softmax_grad(ARRAYS, g, w)], "dS")
    scores = rng.standard_normal((2, 3, 24, 40)).astype(np.float32)[..., ::-1]  # strided: blocks are views too
    mask = None if keep is None else np.broadcast_to(keep, scores.shape)
    by_blocks, by_formula = scores.copy(), scores.copy()
    softmax.masked_softmax_in_score_blocks_(by_blocks, mask)
    fused.masked_softmax_(by_formula, mask)
    assert_bitwise([by_blocks], [by_formula], "the masked softmax in place")


def test_attention_blocks_on_the_pool_are_bitwise_the_one_thread_ones(monkeypatch):
    """At two threads the score blocks of the attention softmax and of its backward run on the shared pool
    (in_score_blocks): the weights and gradients are the one-thread ones, bit for bit, and the work really
    was spread over threads."""
    from minitensor import pool as pieces

    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 4, 300, 16), dtype=np.float32)
    k = rng.standard_normal((2, 4, 500, 16), dtype=np.float32)
    keep = rng.random((2, 1, 300, 500)) > 0.2
    keep[0, 0, 7] = False  # a row with no key: zero weights and gradients on any thread
    g = rng.standard_normal((2, 4, 300, 500), dtype=np.float32)
    assert g.size >= pool.PARALLEL_MIN_NUMEL and len(softmax.score_blocks(g)) > 2
    seen = set()
    softmax_block = fused.masked_softmax_
    monkeypatch.setattr(fused, "masked_softmax_", lambda *a: (seen.add(pieces.update_pool.threaded), softmax_block(*a)))

    def run(threads):
        monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
        qt, kt = mt.tensor(q, requires_grad=True), mt.tensor(k, requires_grad=True)
        w = mt.nn.functional.attention_weights(qt, kt, mt.tensor(keep))
        w.backward(g)
        return [w.data, qt.grad.data, kt.grad.data]

    one = run(1)
    assert seen == {False}
    two = run(2)
    assert seen == {False, True}
    assert_bitwise(two, one, "two threads against one")
    assert not two[0][0, :, 7].any()


def test_attention_devices_hand_a_device_array_and_tensors_to_the_formula():
    """On Tensors (create_graph) and on a device array the score devices run the formula whole."""
    from minitensor import fakecuda

    rng = np.random.default_rng(2)
    g, w = (rng.standard_normal((2, 3, 4, 5)).astype(np.float32) for _ in range(2))
    gd, wd = fakecuda.asarray(g), fakecuda.asarray(w)
    np.testing.assert_array_equal(
        fakecuda.asnumpy(softmax.softmax_grad_in_score_blocks(ARRAYS, gd, wd)),
        fakecuda.asnumpy(fused.softmax_grad(ARRAYS, gd, wd)),
    )
    gt, wt = mt.tensor(g), mt.tensor(w)
    from minitensor.ops.namespace import TENSORS

    got = softmax.softmax_grad_in_score_blocks(TENSORS, gt, wt)
    assert isinstance(got, mt.Tensor)
    np.testing.assert_array_equal(got.numpy(), fused.softmax_grad(TENSORS, gt, wt).numpy())
