"""The speed devices of the training step give the numbers of the plain formulas they stand beside.

Each device is a named helper chosen on arrays (a blocked optimizer update, an array-only fast path of
a fused op); here each is run against the readable formula on the same inputs: bitwise where the
device only reorders work (blocks of an elementwise update), else to OP_RTOL.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor import pool
from minitensor.autograd import quiet


@pytest.mark.parametrize("keep_shape", [None, (2, 1, 1, 40), (2, 1, 24, 40), (24, 40)])
def test_attention_in_score_blocks_is_bitwise_the_whole_array(monkeypatch, keep_shape):
    """AttentionWeights forward and backward over blocks of 100 scores (several rows of each (b, h), a short
    last block, masks broadcast over heads or batch) give exactly the whole-array passes' numbers; and
    the blocked softmax gradient is the readable formula `softmax_grad` that runs on Tensors."""
    from minitensor.ops import fused
    from minitensor.ops.namespace import ARRAYS

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 3, 24, 8), dtype=np.float32), rng.standard_normal((2, 3, 40, 8), dtype=np.float32)
    keep = None if keep_shape is None else rng.random(keep_shape) > 0.3
    g = rng.standard_normal((2, 3, 24, 40), dtype=np.float32)

    def run(block):
        monkeypatch.setattr(fused, "SCORE_BLOCK_NUMEL", block)
        qt, kt = mt.tensor(q, requires_grad=True), mt.tensor(k, requires_grad=True)
        w = mt.nn.functional.attention_weights(qt, kt, None if keep is None else mt.tensor(keep), scale=0.3)
        w.backward(g)
        return w.data, qt.grad.data, kt.grad.data

    assert len(fused.score_blocks(np.empty((2, 3, 24, 40), np.float32))) == 1
    monkeypatch.setattr(fused, "SCORE_BLOCK_NUMEL", 100)
    assert len(fused.score_blocks(np.empty((2, 3, 24, 40), np.float32))) == 2 * 3 * 12
    for whole, blocked in zip(run(10**9), run(100)):
        np.testing.assert_array_equal(blocked, whole)
    w = run(10**9)[0]
    monkeypatch.setattr(fused, "SCORE_BLOCK_NUMEL", 100)
    np.testing.assert_array_equal(fused.softmax_grad_in_blocks(ARRAYS, g, w), fused.softmax_grad(ARRAYS, g, w))


def test_attention_blocks_on_the_pool_are_bitwise_the_one_thread_ones(monkeypatch):
    """At two threads the score blocks of the attention softmax and of its backward run on the shared pool
    (in_score_blocks): the weights and gradients are the one-thread ones, bit for bit, and the work really
    was spread over threads."""
    from minitensor.ops import fused

    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 4, 300, 16), dtype=np.float32)
    k = rng.standard_normal((2, 4, 500, 16), dtype=np.float32)
    keep = rng.random((2, 1, 300, 500)) > 0.2
    keep[0, 0, 7] = False  # a row with no key: zero weights and gradients on any thread
    g = rng.standard_normal((2, 4, 300, 500), dtype=np.float32)
    assert g.size >= pool.PARALLEL_MIN_NUMEL and len(fused.score_blocks(g)) > 2
    seen = set()
    softmax_block = fused._masked_softmax_
    monkeypatch.setattr(fused, "_masked_softmax_", lambda *a: (seen.add(pool.update_pool.threaded), softmax_block(*a)))

    def run(threads):
        monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
        qt, kt = mt.tensor(q, requires_grad=True), mt.tensor(k, requires_grad=True)
        w = mt.nn.functional.attention_weights(qt, kt, mt.tensor(keep))
        w.backward(g)
        return w.data, qt.grad.data, kt.grad.data

    one = run(1)
    assert seen == {False}
    two = run(2)
    assert seen == {False, True}
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    assert not two[0][0, :, 7].any()


def test_pool_workers_run_under_the_callers_floating_point_settings(monkeypatch):
    """A piece of work on a pool thread sees the np.errstate of the thread that called run (inside an op: quiet)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    params = [mt.tensor(np.zeros(1 << 20, np.float32)) for _ in range(4)]
    seen = []
    with np.errstate(all="ignore"):
        pool.update_pool.run(lambda p: seen.append(np.geterr()), params)
    assert len(seen) == 4 and all(set(e.values()) == {"ignore"} for e in seen)


def test_update_pool_shares_hold_every_parameter_once_and_balance():
    sizes = [1000, 10, 600, 500, 7, 7, 300]
    params = [mt.tensor(np.zeros(n, np.float32)) for n in sizes]
    shares = pool._balanced_shares(params, 2)
    assert sorted(id(p) for s in shares for p in s) == sorted(id(p) for p in params)
    loads = [sum(p.data.size for p in s) for s in shares]
    assert len(shares) == 2 and max(loads) - min(loads) <= max(sizes) and max(loads) <= 1300
    assert len(pool._balanced_shares(params[:1], 4)) == 1  # no empty share


def test_dropout_with_a_bool_mask_is_bitwise_x_times_the_float_mask():
    """Dropout keeps `keep` (bool) and scale, not keep * scale: the same output and gradient, bit for bit,
    signed zeros, inf and NaN included."""
    from minitensor.ops import Dropout

    rng = np.random.default_rng(0)
    x = rng.standard_normal(200).astype(np.float32)
    x[:4] = [-0.0, np.inf, -np.inf, np.nan]
    keep = rng.random(200) > 0.5
    keep[:4] = [False, False, True, True]
    g = rng.standard_normal(200).astype(np.float32)
    for scale in (np.float32(1 / 0.9), np.float32(0)):
        xt = mt.tensor(x, requires_grad=True)
        y = Dropout.apply(xt, mt.tensor(keep), scale=scale)
        y.backward(g)
        m = keep * scale
        with np.errstate(invalid="ignore"):  # inf * 0 = NaN, on both sides
            ref = x * m
        np.testing.assert_array_equal(np.signbit(y.data), np.signbit(ref))
        np.testing.assert_array_equal(y.data, ref)
        np.testing.assert_array_equal(xt.grad.data, g * m)
        assert y.dtype == np.float32 and xt.grad.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_scatter_add_is_bitwise_np_add_at(dtype):
    """index_put's row device (the embedding's backward) against np.add.at: repeated rows (up to all the
    same), signed zeros, an empty index; negative rows take np.add.at itself."""
    from minitensor.ops.indexing import index_put

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
    """add_rows_at's runs (add_row_runs: a row repeated more than RUN_MIN times summed by np.add.reduce over axis 0)
    against np.add.at: a small vocabulary's embedding (most rows heavy), heavy and light rows mixed, a nonzero
    `out` (its value comes first), rows of one number (D = 1: the passes), float16 (the passes)."""
    from minitensor.ops.indexing import RUN_MIN, add_rows_at

    rng = np.random.default_rng(2)
    for V, D, N in [(20, 128, 704), (100, 128, 320), (3, 1, 200), (50, 7, 400), (1, 2, 1000)]:
        ids = rng.integers(0, V, N)
        ids[: N // 3] = 0  # a padding-like row far beyond RUN_MIN
        assert np.bincount(ids).max() > RUN_MIN
        g = (rng.standard_normal((N, D)) * 10.0 ** rng.integers(-3, 4, (N, 1))).astype(dtype)
        g[rng.random(g.shape) < 0.1] = -0.0
        for start in (np.zeros((V, D), dtype), rng.standard_normal((V, D)).astype(dtype)):
            ref = start.copy()
            np.add.at(ref, ids, g)
            out = start.copy()
            add_rows_at(out, ids, g)
            np.testing.assert_array_equal(out, ref)
            np.testing.assert_array_equal(np.signbit(out), np.signbit(ref))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape, k", [((32, 22, 128), 1), ((16, 25, 512), 1), ((3, 5, 4, 6), 2), ((7, 1), 1), ((9, 2), 1)]
)
def test_layer_norm_in_place_is_bitwise_the_formula(monkeypatch, dtype, shape, k):
    """LayerNorm's in-place devices (layer_norm_in_place, layer_norm_grads_in_place) against its plain formulas
    (in_place_ok made False): output, dx, dw, db bit for bit, with a random upstream gradient, a constant row
    (variance 0) and every subset of the gradients asked for; rows of one number (7, 1) take np.sum for dw, db; rows
    of two (9, 2) take the short form of dx (_normalization_vjp)."""
    from minitensor.ops import layer_norm

    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    x[0, ...] = 2.5  # a constant slice: rows of variance 0
    w, b = (rng.standard_normal(shape[-k:]).astype(dtype) for _ in range(2))
    g = rng.standard_normal(shape).astype(dtype)

    def run(needs):
        xt, wt, bt = (mt.tensor(a, requires_grad=r) for a, r in zip((x, w, b), needs))
        y = mt.nn.functional.layer_norm(xt, shape[-k:], wt, bt)
        y.backward(mt.tensor(g))
        return [y.data] + [t.grad.data if t.grad is not None else None for t in (xt, wt, bt)]

    for needs in [(True, True, True), (True, False, True), (True, True, False), (False, True, True)]:
        fast = run(needs)
        with monkeypatch.context() as m:
            m.setattr(layer_norm, "in_place_ok", lambda *a: False)
            plain = run(needs)
        for a, ref in zip(fast, plain):
            assert (a is None) == (ref is None)
            if a is not None:
                assert a.dtype == ref.dtype
                np.testing.assert_array_equal(a, ref)
                np.testing.assert_array_equal(np.signbit(a), np.signbit(ref))


def test_clip_grad_norm_on_the_pool_is_bitwise_the_serial_one(monkeypatch):
    """clip_grad_norm_ computes each gradient's norm and rescales each gradient on the shared pool
    (minitensor/pool.py); the total and the clipped gradients are the one-thread ones, bit for bit."""

    def run(threads):
        monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
        rng = np.random.default_rng(0)
        params = [
            mt.nn.Parameter(mt.tensor(rng.standard_normal(s).astype(np.float32)))
            for s in [(900, 800), (700, 900), (5,)]
        ]
        for p in params:
            p.grad = mt.tensor(rng.standard_normal(p.shape).astype(np.float32))
        total = mt.nn.utils.clip_grad_norm_(params, 1.0)
        return total, [p.grad.data.copy() for p in params]

    assert 900 * 800 + 700 * 900 >= pool.PARALLEL_MIN_NUMEL
    (t1, g1), (t2, g2) = run(1), run(2)
    assert t1 == t2
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a, b)


def _f16_case(op: str, rng):
    """(inputs as float16 arrays, the function of Tensors, the upstream gradient) of a fused op."""
    F = mt.nn.functional
    x = (rng.standard_normal((3, 5, 12)) * 4).astype(np.float16)
    g = rng.standard_normal((3, 5, 12)).astype(np.float16)
    if op == "layer_norm":
        w, b = rng.standard_normal(12).astype(np.float16), rng.standard_normal(12).astype(np.float16)
        return (x, w, b), lambda x, w, b: F.layer_norm(x, (12,), w, b), g
    if op == "attention_weights":
        k = rng.standard_normal((3, 7, 12)).astype(np.float16)
        return (x, k), lambda q, k: F.attention_weights(q, k, None, scale=0.3), g[..., :7]
    return (x,), lambda x: getattr(F, op)(x, dim=-1), g


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "attention_weights"])
def test_float16_fused_ops_are_the_float32_formula_rounded_once(op):
    """The float16 device of the fused ops (reductions.opmath_dtype, in_opmath, to_dtype): the forward is the
    float32 op on the float16 inputs, rounded once; the backward is the plain float32 formula on the float16
    inputs, g and saved output, rounded once. Bit for bit."""
    from minitensor.ops.fused import softmax_grad
    from minitensor.ops.namespace import ARRAYS as xp

    arrays, fn, g = _f16_case(op, np.random.default_rng(3))

    def run(dtype):
        ts = [mt.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
        y = fn(*ts)
        y.backward(mt.tensor(g.astype(dtype)))
        return y.data, [t.grad.data for t in ts]

    y16, grads16 = run(np.float16)
    y32, grads32 = run(np.float32)
    assert y16.dtype == np.float16 and all(d.dtype == np.float16 for d in grads16)
    np.testing.assert_array_equal(y16, y32.astype(np.float16))
    g32, out = g.astype(np.float32), y16.astype(np.float32)  # the backward reads the rounded output
    if op == "layer_norm":  # saves its input and row statistics, not its output: the float32 gradients, rounded
        expected = [d.astype(np.float16) for d in grads32]
    elif op == "softmax":
        expected = [softmax_grad(xp, g32, out, -1)]
    elif op == "log_softmax":
        expected = [g32 - xp.exp(out) * xp.sum(g32, axis=-1, keepdims=True)]
    else:
        q, k = (a.astype(np.float32) for a in arrays)
        ds = softmax_grad(xp, g32, out)
        expected = [(ds @ k) * np.float32(0.3), (np.swapaxes(ds, -1, -2) @ q) * np.float32(0.3)]
    for got, want in zip(grads16, expected):
        np.testing.assert_array_equal(got, want.astype(np.float16))


def test_no_op_calls_an_in_place_namespace_device():
    """Every backward is its formula: the namespaces define no in-place device (sub_, mul_, sub_at_, ...) and no
    op in minitensor/ops/ calls one."""
    import re
    from pathlib import Path

    from minitensor.ops.namespace import ARRAYS, TENSORS

    for ns in (ARRAYS, TENSORS):
        assert [n for n in dir(ns) if n.endswith("_") and not n.startswith("_")] == []
    ops_dir = Path(mt.__file__).parent / "ops"
    calls = {p.name: re.findall(r"xp\.\w+_\(", p.read_text()) for p in ops_dir.glob("*.py")}
    assert {name: c for name, c in calls.items() if c} == {}


# ----------------------------------------------------------------------------- row-blocked fused ops


def _row_device_cases(rng, dtype):
    """(name, function of Tensors, inputs) of the ops with a row-blocked speed device (pool.in_row_blocks)."""
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
        ("gelu", lambda x: F.gelu(x), (x,)),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), (x,)),
    ]


def _run_case(fn, inputs, g_rng):
    ts = [mt.tensor(a, requires_grad=True) for a in inputs]
    y = fn(*ts)
    y.backward(mt.tensor(g_rng.standard_normal(y.shape).astype(y.dtype)))
    return [y.data.copy()] + [t.grad.data.copy() for t in ts]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_row_blocked_devices_are_bitwise_the_plain_formulas(monkeypatch, dtype, threads):
    """softmax, log_softmax, cross_entropy (with and without weight and label smoothing) and GELU (exact and tanh,
    float32) on their row-blocked speed devices -- blocks of 100 entries, a short last block, at one and two
    threads on the pool -- give the plain formulas' outputs and gradients, bit for bit."""
    from minitensor.ops import rowwise

    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    monkeypatch.setattr(pool, "ROWS_PARALLEL_MIN_NUMEL", 0)
    monkeypatch.setattr(pool, "ROW_BLOCK_NUMEL", 100)
    calls, row_blocks = [], pool.row_blocks
    monkeypatch.setattr(pool, "row_blocks", lambda *a: calls.append(1) or row_blocks(*a))
    for name, fn, inputs in _row_device_cases(np.random.default_rng(0), dtype):
        monkeypatch.setattr(rowwise, "ROW_DEVICE_MIN_NUMEL", 10**9)  # off: the plain formulas
        plain = _run_case(fn, inputs, np.random.default_rng(1))
        assert not calls
        monkeypatch.setattr(rowwise, "ROW_DEVICE_MIN_NUMEL", 0)
        blocked = _run_case(fn, inputs, np.random.default_rng(1))
        assert calls or ("gelu" in name and (dtype == np.float64 or threads == 1)), name  # GELU: see _gelu_in_blocks_ok
        calls.clear()
        for a, b in zip(plain, blocked):
            assert a.dtype == b.dtype, name
            np.testing.assert_array_equal(b, a, err_msg=name)


def test_row_blocks_run_on_the_pool_at_two_threads(monkeypatch):
    """At two threads a large enough row-blocked op spreads its blocks over the pool; at one it never does."""
    from minitensor.ops import fused

    x = np.random.default_rng(0).standard_normal((256, 4096)).astype(np.float32)
    assert x.size >= pool.ROWS_PARALLEL_MIN_NUMEL
    seen = set()
    real_max = fused._max
    monkeypatch.setattr(fused, "_max", lambda z, d: (seen.add(pool.update_pool.threaded), real_max(z, d))[1])
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = fused.log_softmax(x, -1)
    assert True not in seen
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    two = fused.log_softmax(x, -1)
    assert True in seen
    np.testing.assert_array_equal(one, two)


def _erf_fit_with_where(x):
    """erf's float32 fit as it was first written (np.full_like, then Horner, then np.where): the reference."""
    from minitensor.ops.elementwise import _ERFC_COEFFS

    z = np.abs(x)
    t = 1 / (1 + z * x.dtype.type(0.5))
    poly = np.full_like(t, _ERFC_COEFFS[-1])
    for c in reversed(_ERFC_COEFFS[:-1]):
        poly = poly * t + x.dtype.type(c)
    poly = np.exp(poly - z * z) * t
    return np.where(x >= 0, 1 - poly, poly - 1)


def test_erf_fit_and_sigmoid_pair_are_bitwise_their_plain_formulas():
    """erf's float32 fit (in place, its select branch-free) gives the plain fit's bits; sigmoid_pair (the tanh
    GELU's two halves from one exponential) gives stable_sigmoid(v) and stable_sigmoid(-v)."""
    from minitensor.ops.elementwise import _erf_float32_fit, sigmoid_pair, stable_sigmoid

    rng = np.random.default_rng(2)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, -50.0, -800.0, 800.0]
    x = np.concatenate([specials, rng.standard_normal(20000) * 4]).astype(np.float32)
    with np.errstate(all="ignore"):
        got, want = _erf_float32_fit(x), _erf_fit_with_where(x)
        np.testing.assert_array_equal(got, want)
        for dtype in (np.float16, np.float32, np.float64):
            v = x.astype(dtype)
            for got, want in zip(sigmoid_pair(v), (stable_sigmoid(v), stable_sigmoid(-v))):
                assert got.dtype == want.dtype == dtype
                np.testing.assert_array_equal(got, want)


def test_branch_free_selections_are_bitwise_np_where():
    """erf's fit ends with np.where(x >= 0, 1 - c, c - 1) and stable_sigmoid selects 1 or e^-|a| as numerator:
    both are written without np.where (50x slower on a random sign pattern); the numbers are np.where's, signed
    zeros, inf and NaN included (a NaN's sign bit aside)."""
    from minitensor.ops.elementwise import _plus_minus, stable_sigmoid

    rng = np.random.default_rng(0)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, -50.0, -800.0, 800.0]
    for dtype in (np.float16, np.float32, np.float64):
        a = np.concatenate([specials, rng.standard_normal(5000) * 6]).astype(dtype)
        with np.errstate(all="ignore"):
            e = np.exp(-np.abs(a))
            want = np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(dtype, copy=False)
            got = stable_sigmoid(a)
        c = np.concatenate([[1.0, 1.0, np.nan], rng.random(a.size - 3) * 2]).astype(dtype)
        want_pm, got_pm = np.where(a >= 0, 1 - c, c - 1), _plus_minus(a, c.copy())
        for w, g in ((want, got), (want_pm, got_pm)):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
            real = ~np.isnan(w)
            np.testing.assert_array_equal(np.signbit(g[real]), np.signbit(w[real]))


def _errstate_seen() -> tuple:
    """What NumPy's error state says inside a block: the modes, the buffer size, the callback."""
    return np.geterr(), np.getbufsize(), np.geterrcall()


@pytest.mark.parametrize(
    "outer",
    [
        {},
        dict(all="raise"),
        dict(divide="warn", over="raise", under="ignore", invalid="call", call=print),
    ],
)
def test_ieee_quiet_sets_the_state_np_errstate_sets(outer):
    """autograd/quiet.py's speed device against its plain formula np.errstate(all="ignore"), from several states in
    force (a user's errstate around the model, a custom buffer size), nested and not; both restore the state."""
    quiet.errstate_formula()  # (a warm-up: the formula itself must not touch the device's table)
    before = _errstate_seen()
    with np.errstate(**outer):
        old_size = np.setbufsize(16384)
        try:
            outside = _errstate_seen()
            with quiet.errstate_formula():
                plain = _errstate_seen()
            assert not quiet.is_quiet()
            with quiet.ieee_quiet():
                device = _errstate_seen()
                assert quiet.is_quiet()
                with quiet.ieee_quiet():  # already quiet: nothing is set
                    assert _errstate_seen() == device
                with np.errstate(divide="raise"):  # a state set inside: not quiet, and made quiet again
                    assert not quiet.is_quiet()
                    with quiet.ieee_quiet():
                        assert _errstate_seen() == device
                assert _errstate_seen() == device
            assert _errstate_seen() == outside
        finally:
            np.setbufsize(old_size)
    assert device == plain and plain[0] == {k: "ignore" for k in plain[0]} and plain[1] == 16384
    assert _errstate_seen() == before


def test_ieee_quiet_restores_the_state_when_an_op_raises():
    before = np.geterr()
    with pytest.raises(ValueError), quiet.ieee_quiet():
        raise ValueError("inside an op")
    assert np.geterr() == before


def test_ieee_quiet_is_per_thread():
    """NumPy's error state follows the thread (a context variable): an op in a thread under np.errstate(all="raise") is
    quiet all the same, and neither thread's state leaks into the other's."""
    import threading

    seen = {}

    def worker():
        with np.errstate(all="raise"):
            seen["result"] = (1.0 / mt.tensor([0.0])).numpy()[0]
            seen["after"] = np.geterr()["divide"]

    before = np.geterr()
    with quiet.ieee_quiet():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert np.geterr()["divide"] == "ignore"
    assert np.isinf(seen["result"]) and seen["after"] == "raise" and np.geterr() == before


def test_a_forked_child_runs_the_pool_with_threads_of_its_own(monkeypatch):
    """fork copies only the calling thread: a child that reused the parent's executor would wait for ever on work
    no thread takes (the course runner forks one child per exercise). The child starts its own pool."""
    import os
    import signal
    import time

    monkeypatch.setattr(pool, "num_threads", lambda: 2)
    params = [mt.tensor(np.zeros(pool.PARALLEL_MIN_NUMEL, np.float32)) for _ in range(4)]

    def add_one(p):
        np.add(p.data, 1, out=p.data)

    pool.update_pool.run(add_one, params)  # the parent's pool now has its threads
    assert pool.update_pool.executor is not None
    pid = os.fork()
    if pid == 0:  # the child: the same run, then out at once
        try:
            pool.update_pool.run(add_one, params)
            os._exit(0 if all((p.data == 2).all() for p in params) else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child waited on the parent's pool threads for 30 s")
