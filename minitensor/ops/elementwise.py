"""Elementwise primitives: arithmetic, unary functions, activations, dtype cast and clone (clamp,
maximum/minimum, where and masked_fill, which select between inputs, are in selection.py).

Gradients are returned in the output's broadcast shape; the graph walk sums them back to each
input's shape (autograd.unbroadcast), so no formula here deals with broadcasting. Each backward is
written with operators and `ctx.xp` (ops/namespace.py), so that the same lines run on arrays and,
under create_graph, on Tensors: masks such as `out > 0` are then constant bool Tensors."""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Function
from ..devices import is_host

# ----------------------------------------------------------------------------- arithmetic


class Add(Function):
    """out = a + b;  da = g, db = g"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(Function):
    """out = a - b;  da = g, db = -g"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, g):
        return g, (-g if ctx.needs_input_grad[1] else None)


class Mul(Function):
    """out = a * b;  da = g * b, db = g * a"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_arrays
        need_a, need_b = ctx.needs_input_grad
        return (g * b if need_a else None), (g * a if need_b else None)


class Div(Function):
    """out = a / b;  da = g / b, db = -g * a / b^2 = -g * out / b"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a, b):
        out = a / b
        ctx.save_for_backward(b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        b, out = ctx.saved_arrays
        need_a, need_b = ctx.needs_input_grad
        return (g / b if need_a else None), (-g * out / b if need_b else None)


class DivRounded(Function):
    """out = trunc(a / b) or floor(a / b) (rounding_mode 'trunc' or 'floor');  da = 0, db = 0
    (the result is piecewise constant: PyTorch's derivative is 0 everywhere, at the steps too)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a, b, rounding_mode):
        if rounding_mode == "floor":  # Python's floor division (fmod-based, as PyTorch's), inf or NaN at b == 0
            return np.floor_divide(a, b)
        if a.dtype.kind in "iu":  # integer division rounded toward zero, exact (a / b in floats is not)
            q = np.abs(a) // np.abs(b)
            return np.where((a < 0) != (b < 0), -q, q).astype(q.dtype, copy=False)
        return np.trunc(a / b)

    @staticmethod
    def backward(ctx, g):
        zero = ctx.xp.zeros_like(g)
        need_a, need_b = ctx.needs_input_grad
        return (zero if need_a else None), (zero if need_b else None)


class Remainder(Function):
    """out = a - floor(a / b) * b, the sign of b (Python's %, fmod-based as PyTorch's);  da = g, db = -g * floor(a / b)
    (the quotient is piecewise constant, so torch takes it as a constant at the steps too)"""

    @staticmethod
    def forward(ctx, a, b):
        if a.dtype.kind == "f":
            ctx.save(quotient=np.floor_divide(a, b))
        return np.remainder(a, b)

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        return (g if need_a else None), (-g * ctx.xp.constant(ctx.quotient, g) if need_b else None)

    @staticmethod
    def jvp(ctx, ta, tb):
        """ẏ = ȧ - ḃ floor(a / b)"""
        if tb is None:
            return ctx.xp.broadcast_to(ta, ctx.quotient.shape)
        step = -tb * ctx.xp.constant(ctx.quotient, tb)
        return step if ta is None else ta + step


class Pow(Function):
    """out = a ** b (both tensors);  da = g * b * a^(b-1), db = g * out * log(a)
    PyTorch's conventions at the edges: da = 0 where b == 0 (selected, so even an infinite g gives 0),
    db = 0 where a == 0 and b >= 0 (multiplied, as PyTorch does)."""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a, b):
        out = np.power(a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_arrays
        xp = ctx.xp
        need_a, need_b = ctx.needs_input_grad
        ga = xp.where(b == 0, 0, g * (b * a ** (b - 1))) if need_a else None
        gb = g * xp.where((a == 0) & (b >= 0), 0, out * xp.log(a)) if need_b else None
        return ga, gb


class PowScalar(Function):
    """out = a ** e (e a Python number);  da = g * e * a^(e-1), and 0 for e == 0 whatever g is (as in PyTorch)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a, exponent):
        ctx.save_for_backward(a)
        ctx.e = exponent
        if exponent == -0.5:  # as PyTorch, 1 / sqrt(a): -inf at -0.0 and NaN at -inf (IEEE pow: inf, 0)
            return 1 / np.sqrt(a)
        return np.power(a, a.dtype.type(exponent))

    @staticmethod
    def backward(ctx, g):
        (a,), e = ctx.saved_arrays, ctx.e
        if e == 0:
            return (ctx.xp.zeros_like(a),)
        if e == 0.5:  # a^(-1/2) as the forward computes it (PyTorch's rsqrt: -inf at -0.0)
            return (g * (a.dtype.type(0.5) / ctx.xp.sqrt(a)),)
        return (g * (e * a ** a.dtype.type(e - 1)),)


class RPowScalar(Function):
    """out = c ** a (c a Python number);  da = g * out * log(c)
    (PyTorch's value at c == 0: 0 where a >= 0, where out * log(c) would be 0 * -inf)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a, base):
        out = np.power(a.dtype.type(base), a)
        ctx.save_for_backward(a, out)
        ctx.base = base
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_arrays
        log_c = out.dtype.type(math.log(ctx.base) if ctx.base > 0 else (-math.inf if ctx.base == 0 else math.nan))
        da = out * log_c
        if ctx.base == 0:
            da = ctx.xp.where(a >= 0, 0, da)
        return (g * da,)


class Neg(Function):
    """out = -a;  da = -g"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, g):
        return (-g,)


# ----------------------------------------------------------------------------- unary functions


class Exp(Function):
    """out = e^a;  da = g * out"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        out = np.exp(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_arrays
        return (g * out,)


class Log(Function):
    """out = ln a;  da = g / a"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.log(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        return (g / a,)


class Sqrt(Function):
    """out = sqrt(a);  da = g / (2 out)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        out = np.sqrt(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_arrays
        return (g / (2 * out),)


class Abs(Function):
    """out = |a|;  da = g * sign(a)  (sign 0 at a == 0 and at NaN, as in PyTorch)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.abs(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        return (g * ctx.xp.sign(a),)


class Sin(Function):
    """out = sin a;  da = g * cos a"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.sin(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        return (g * ctx.xp.cos(a),)


class Cos(Function):
    """out = cos a;  da = -g * sin a"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.cos(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        return (-g * ctx.xp.sin(a),)


class Tanh(Function):
    """out = tanh a;  da = g * (1 - out^2)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        out = np.tanh(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_arrays
        return (g * (1 - out * out),)


def stable_sigmoid(a: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-a), split by sign so that e^x never overflows: 1 / (1 + e) for a >= 0, e / (1 + e) below, with
    e = e^-|a|. The numerator, 1 or e, is max(e, a >= 0) (e <= 1): the same bits as np.where, which is several
    times slower on a random sign pattern (tests/minitensor/test_speed_devices.py)."""
    e = np.exp(-np.abs(a))
    numerator = np.maximum(e, a >= 0)
    e += 1
    numerator /= e  # in place on an array (a 0-d input gives NumPy scalars, which /= rebinds)
    return numerator.astype(a.dtype, copy=False)


def sigmoid_pair(v: np.ndarray) -> tuple:
    """(stable_sigmoid(v), stable_sigmoid(-v)), the same bits, from one e = e^-|v| and one 1 + e: the tanh GELU's
    two halves (a speed device: 10 passes instead of 16)."""
    e = np.exp(-np.abs(v))
    s, rest = np.maximum(e, v >= 0), np.maximum(e, v <= 0)  # v <= 0 is -v >= 0, NaN included
    e += 1
    s /= e  # in place on arrays (a 0-d input gives NumPy scalars, which /= rebinds)
    rest /= e
    return s.astype(v.dtype, copy=False), rest.astype(v.dtype, copy=False)


class Sigmoid(Function):
    """out = 1 / (1 + e^-a);  da = g * out * (1 - out) = g * out * sigmoid(-a)
    (1 - out is computed as sigmoid(-a): where out rounds to 1 it would be 0, and the derivatives of
    higher order, which are made of such factors, would lose their value there)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        out = stable_sigmoid(a)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_arrays
        return (g * out * ctx.xp.sigmoid(-a),)


def log_sigmoid(a: np.ndarray) -> np.ndarray:
    """log sigmoid(a) = min(a, 0) - log1p(e^-|a|): e^x never overflows, and log1p keeps the tiny values
    of large a (log(1 + e) would round them to 0). a = -inf gives -inf, a = +inf gives 0."""
    return np.minimum(a, 0) - np.log1p(np.exp(-np.abs(a)))


class LogSigmoid(Function):
    """out = log sigmoid(a) = min(a, 0) - log1p(e^-|a|);  da = g * sigmoid(-a)
    (one smooth formula, although min and |a| have kinks at 0. A primitive of its own because the gradients
    of BCE with logits for its target and pos_weight are made of log sigmoid, and under create_graph they
    need it differentiable: log(sigmoid(a)) would underflow to -inf below a = -745 in float64.)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return log_sigmoid(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        return (g * ctx.xp.sigmoid(-a),)


class Relu(Function):
    """out = max(a, 0);  da = g where out > 0 (or is NaN), else 0
    (selected, not g * mask: an inf or NaN g stays where it belongs and gives 0 elsewhere, as in PyTorch)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        out = np.maximum(a.dtype.type(0), a)  # on a tie NumPy returns its second operand: relu(-0.0) = -0.0,
        # as PyTorch. The backward needs only where out <= 0: kept as booleans, a quarter of out's bytes.
        ctx.save(dead=out <= 0)
        return out

    @staticmethod
    def backward(ctx, g):
        return (ctx.xp.zero_where(ctx.dead, g),)


# erf for the exact GELU. NumPy has no erf: float64 uses math.erf element by element (exact, slow);
# float32 uses the Chebyshev fit of erfc from Numerical Recipes (fractional error < 1.2e-7 everywhere,
# about two float32 ulps), evaluated in float32.
_math_erf = np.frompyfunc(math.erf, 1, 1)
_ERFC_COEFFS = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function of a float array, in its dtype."""
    if x.ndim == 0:  # as 1 element: NumPy turns 0-d intermediates into scalars, which take no out=
        return erf(x.reshape(1)).reshape(())
    if x.dtype == np.float64:
        if type(x).__module__.startswith("cupy"):  # a GPU runs no Python function per element: CuPy's own erf
            import cupyx.scipy.special  # (optional, the [gpu] extra: only reached holding a CuPy array)

            return cupyx.scipy.special.erf(x)
        return _math_erf(x).astype(np.float64)  # (the fake device runs this Python ufunc as NumPy does)
    return _erf_float32_fit(x)


def _erf_float32_fit(x: np.ndarray) -> np.ndarray:
    """erf(x) = 1 - erfc(|x|) (sign restored), erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2).
    Evaluated in place in x's dtype: one temporary per intermediate, not per Horner step."""
    z = np.abs(x)
    t = z * x.dtype.type(0.5)
    t += 1
    np.reciprocal(t, out=t)
    poly = t * x.dtype.type(_ERFC_COEFFS[-1])
    for c in reversed(_ERFC_COEFFS[1:-1]):
        poly += x.dtype.type(c)
        poly *= t
    poly += x.dtype.type(_ERFC_COEFFS[0])
    z *= z
    np.subtract(poly, z, out=poly)
    np.exp(poly, out=poly)
    poly *= t  # erfc(|x|)
    return _plus_minus(x, poly)


def _plus_minus(x, c):
    """np.where(x >= 0, 1 - c, c - 1), bit for bit (signed zeros and NaN included), without np.where: over a
    random sign pattern np.where is ~50x slower than a product (branch misses). With s = +-1 by the sign,
    s - c * s is 1 - c, or -1 + c = c - 1 exactly (a product by +-1 is exact)."""
    sign = (x >= 0) * x.dtype.type(2)
    sign -= 1
    c *= sign
    return np.subtract(sign, c, out=c)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_TANH_C = 0.044715


class Erf(Function):
    """out = erf(a);  da = g * 2/sqrt(pi) e^(-a^2)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return erf(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        return (g * (a.dtype.type(2 / math.sqrt(math.pi)) * ctx.xp.exp(-(a * a))),)


def _gelu_tanh_halves(xp, a):
    """(s, 1 - s) with s = (1 + tanh u) / 2 = sigmoid(2u), u = sqrt(2/pi) (a + 0.044715 a^3): the tanh
    GELU's inner values (forward and backward). Both as sigmoids, each accurate where it is tiny, where
    1 + t and 1 - t^2 computed from t = tanh u would round to 0 and lose the higher derivatives."""
    dt = a.dtype.type
    two_u = dt(2 * _SQRT_2_OVER_PI) * (a + dt(_GELU_TANH_C) * a * a * a)
    if is_host(two_u):  # arrays: both from one exponential (sigmoid_pair, the same bits)
        return sigmoid_pair(two_u)
    return xp.sigmoid(two_u), xp.sigmoid(-two_u)


def _gelu_cdf(xp, a):
    """Phi(a) = (1 + erf(a / sqrt 2)) / 2, the standard normal CDF (forward and backward)."""
    dt = a.dtype.type
    return dt(0.5) * (1 + xp.erf(a * dt(_INV_SQRT_2)))


class Gelu(Function):
    """approximate='none': out = a * Phi(a), da = g * (Phi(a) + a * phi(a));
    approximate='tanh':   out = a/2 (1 + t), t = tanh(u), u = sqrt(2/pi)(a + 0.044715 a^3),
                          da = g * (1/2 (1 + t) + a/2 (1 - t^2) du/da), du/da = sqrt(2/pi)(1 + 3*0.044715 a^2),
                          computed with s = (1 + t)/2 and 1 - s:  out = a s,  da = g * (s + 2 a s (1 - s) du/da).
    Where a^2 overflows (a < -1.3e154 in float64) da is 0, the limit; torch's formula gives NaN there (0 * inf)."""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a, approximate="none"):
        ctx.save_for_backward(a)
        ctx.approximate = approximate
        if approximate == "tanh":
            s, rest = _gelu_tanh_halves(ctx.xp, a)
            ctx.save(halves=(s, rest))
            return a * s
        cdf = _gelu_cdf(ctx.xp, a)
        ctx.save(cdf=cdf)
        return a * cdf

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        if ctx.approximate == "tanh":
            halves = ctx.intermediate(ctx.halves, _gelu_tanh_halves, a)
            return (_gelu_tanh_grad(ctx.xp, g, a, *halves),)
        cdf = ctx.intermediate(ctx.cdf, _gelu_cdf, a)
        return (_gelu_grad(ctx.xp, g, a, cdf),)


def _gelu_grad(xp, g, a, cdf):
    """dx = g * (Phi(a) + a phi(a)), phi(a) = e^(-a^2/2) / sqrt(2 pi): the exact GELU's backward."""
    dt = a.dtype.type
    pdf = dt(_INV_SQRT_2PI) * xp.exp(dt(-0.5) * a * a)  # phi(a)
    return g * (cdf + a * pdf)


def _gelu_tanh_grad(xp, g, a, s, rest):
    """dx = g * (s + 2 a s (1 - s) du/da), du/da = sqrt(2/pi) (1 + 3 * 0.044715 a^2): the tanh GELU's backward."""
    dt = a.dtype.type
    du = dt(_SQRT_2_OVER_PI) * (1 + dt(3 * _GELU_TANH_C) * a * a)
    return g * (s + 2 * a * s * rest * du)


# ----------------------------------------------------------------------------- dtype and memory


class Cast(Function):
    """out = a as another float dtype;  da = g cast back to a's dtype"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, dtype):
        ctx.dtype = a.dtype
        return a.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return (ctx.xp.astype(g, ctx.dtype),)


class Clone(Function):
    """out = a copied into fresh memory (C order);  da = g"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a):
        # np.array also makes a NumPy scalar (a 0-d result of NumPy) an array; on a device the array's own copy
        return np.array(a, order="C", copy=True) if is_host(a) else a.copy(order="C")

    @staticmethod
    def backward(ctx, g):
        return (g,)
