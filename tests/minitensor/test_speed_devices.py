"""The speed devices of the training step give the numbers of the plain formulas they stand beside.

Each device is a named helper chosen on arrays (a blocked optimizer update, an array-only fast path of
a fused op); here each is run against the readable formula on the same inputs: bitwise where the
device only reorders work (blocks of an elementwise update), else to OP_RTOL.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt


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
        np.testing.assert_array_equal(np.signbit(y._data), np.signbit(ref))
        np.testing.assert_array_equal(y._data, ref)
        np.testing.assert_array_equal(xt.grad._data, g * m)
        assert y.dtype == np.float32 and xt.grad.dtype == np.float32


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
        return y._data, [t.grad._data for t in ts]

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
