"""Numerics at the edge of a dtype: every reduction and fused op in float16, float32 and float64, on values near
the dtype's limits, forward and backward against PyTorch (CPU) with a random upstream gradient.

The rule checked (minitensor/ops/reductions.py's docstring): a float16 reduction or fused op computes in float32
and rounds once, as PyTorch's CPU kernels do; var and std accumulate in float64, as PyTorch's do; a float32 or
float64 sum, mean, norm or layer norm stays in its dtype (an overflow there is PyTorch's too).

Value kinds, per dtype (finfo): `large` squares overflow the dtype (|x| about 2 sqrt(max)); `huge` up to max / 4,
so that sums overflow too; `tiny` near the smallest normal number; `subnormal` small multiples of the smallest
subnormal; `mixed` large and tiny numbers of both signs in one row. Tiny results are compared relative to their
own scale (both sides multiplied by the same power of two, exactly), not against OP_RTOL's absolute floor.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import OP_RTOL, assert_close

pytestmark = pytest.mark.full

DTYPES = ("float16", "float32", "float64")
KINDS = ("normal", "large", "huge", "tiny", "subnormal", "mixed")


def edge_values(kind: str, dtype: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    fi = np.finfo(dtype)
    n = rng.standard_normal(shape)
    if kind == "normal":
        a = n
    elif kind == "large":
        a = n * 2 * math.sqrt(fi.max)
    elif kind == "huge":
        a = np.clip(n, -4, 4) * (float(fi.max) / 16)
    elif kind == "tiny":
        a = n * 4 * float(fi.tiny)
    elif kind == "subnormal":
        a = rng.integers(-8, 9, shape) * float(fi.smallest_subnormal)
    elif kind == "mixed":
        a = n * np.where(rng.random(shape) < 0.5, math.sqrt(fi.max), 8 * float(fi.tiny))
    else:
        raise ValueError(kind)
    return a.astype(dtype)


class Lib:
    def __init__(self, module, functional):
        self._module, self.F = module, functional

    def __getattr__(self, name):
        return getattr(self._module, name)


MT, TORCH = Lib(mt, F), Lib(torch, torch.nn.functional)


def _attention(t, x):
    """attention_weights(q = k = x); torch has no such function: its fused scaled_dot_product_attention with v the
    identity returns the weights (its float16 CPU kernel computes the scores in float32, as ours; the composite
    softmax(q k^T * scale) rounds the scores to float16 and overflows where they do not)."""
    if t is MT:
        return F.attention_weights(x, x)
    identity = torch.eye(x.shape[0], dtype=x.dtype)
    return torch.nn.functional.scaled_dot_product_attention(x[None], x[None], identity[None])[0]


def _ce_target(x):
    return np.arange(x.shape[0]) % x.shape[1]


# name: f(lib, x) on a (4, 7) input; every reduction and fused op of the engine
OPS = {
    "sum": lambda t, x: x.sum(-1),
    "sum_all": lambda t, x: x.sum(),
    "sum_dim0_keepdim": lambda t, x: x.sum(0, keepdim=True),
    "mean": lambda t, x: x.mean(-1),
    "mean_all": lambda t, x: x.mean(),
    "var": lambda t, x: x.var(-1),
    "var_all_biased": lambda t, x: t.var(x, False),
    "var_correction_2": lambda t, x: t.var(x, 0, correction=2),
    "std": lambda t, x: x.std(-1),
    "std_dim0": lambda t, x: t.std(x, 0, True, True),
    "std_all": lambda t, x: x.std(),
    "std_correction_0": lambda t, x: t.std(x, (0, 1), correction=0),
    "logsumexp": lambda t, x: x.logsumexp(-1),
    "logsumexp_dim0": lambda t, x: x.logsumexp(0),
    "amax": lambda t, x: x.amax(-1),
    "max_dim": lambda t, x: x.max(0).values,
    "norm2": lambda t, x: t.norm(x, dim=-1),
    "norm_fro_all": lambda t, x: t.norm(x),
    "norm1": lambda t, x: t.norm(x, p=1, dim=-1),
    "norm_inf": lambda t, x: t.norm(x, p=math.inf, dim=-1),
    "norm3": lambda t, x: t.norm(x, p=3, dim=-1),
    "norm1_5_all": lambda t, x: t.norm(x, p=1.5),
    "norm0_5": lambda t, x: t.norm(x, p=0.5, dim=0),
    "norm_neg1": lambda t, x: t.norm(x, p=-1, dim=-1),
    "norm_nuc": lambda t, x: t.norm(x, p="nuc"),
    "softmax": lambda t, x: x.softmax(-1),
    "softmax_dim0": lambda t, x: x.softmax(0),
    "log_softmax": lambda t, x: x.log_softmax(-1),
    "log_softmax_dim0": lambda t, x: t.F.log_softmax(x, dim=0),
    "layer_norm": lambda t, x: t.F.layer_norm(x, (7,)),
    "layer_norm_affine": lambda t, x: t.F.layer_norm(
        x, (7,), t.tensor(np.linspace(0.5, 2, 7), dtype=x.dtype), t.tensor(np.linspace(-1, 1, 7), dtype=x.dtype)
    ),
    "layer_norm_2d": lambda t, x: t.F.layer_norm(x, (4, 7)),
    "cross_entropy": lambda t, x: t.F.cross_entropy(x, t.tensor(_ce_target(x))),
    "cross_entropy_sum_smoothing": lambda t, x: t.F.cross_entropy(
        x, t.tensor(_ce_target(x)), reduction="sum", label_smoothing=0.1
    ),
    "mse_loss": lambda t, x: t.F.mse_loss(x, x.detach() * 0.5),
    "l1_loss": lambda t, x: t.F.l1_loss(x, x.detach() * 0.5),
    "bce_with_logits": lambda t, x: t.F.binary_cross_entropy_with_logits(x, t.full_like(x.detach(), 0.25)),
    "linear": lambda t, x: t.F.linear(x, t.tensor(np.linspace(-1, 1, 21).reshape(3, 7), dtype=x.dtype)),
    "attention_weights": _attention,
}

# Where PyTorch's CPU kernels answer what we do not, on purpose (the reason beside each; tested below).
DIFFERENT = {
    # A float32/float64 layer norm whose row variance overflows: ours NaN for the row (fused.py's _normalized),
    # PyTorch's 0 (rstd = 1/sqrt(inf): the output becomes the bias, silently) or NaN, by how its vector lanes
    # split the row. Computing the statistics wider, as for float16, would cost float32 training a float64 pass.
    ("layer_norm", "float32", "large"),
    ("layer_norm", "float32", "huge"),
    ("layer_norm", "float32", "mixed"),
    ("layer_norm", "float64", "large"),
    ("layer_norm", "float64", "huge"),
    ("layer_norm", "float64", "mixed"),
    # Label smoothing's sum over classes of -log p: ours finite where it is (the row terms stay in range), PyTorch's
    # sums every row's classes first and overflows to inf. CrossEntropy (fused.py) is another engineer's part in
    # this round: reported, not changed here.
    ("cross_entropy_sum_smoothing", "float16", "huge"),
    ("cross_entropy_sum_smoothing", "float32", "huge"),
    ("cross_entropy_sum_smoothing", "float64", "huge"),
    # The p-norms' float16 backward: ours in float32 (as their forward, and PyTorch's forward), rounded once;
    # PyTorch's in float16, where |x|^(p-1) and out^(p-1) overflow or underflow: NaN, inf or 0 over whole rows.
    # And a negative p at values of 1e154 (float64) or 1e19 (float32): PyTorch's |x|^(p-1) falls below the
    # dtype's normal range and its gradient becomes 0 where ours is the exact one. Both tested below.
    *(("norm3", "float16", kind) for kind in KINDS if kind != "normal"),
    *(("norm_neg1", "float16", kind) for kind in ("huge", "tiny", "subnormal", "mixed")),
    ("norm_neg1", "float32", "large"),
    ("norm_neg1", "float64", "large"),
    # PyTorch refuses a float16 nuclear norm ("Low precision dtypes not supported"); ours runs the SVD in float32.
    *(("norm_nuc", "float16", kind) for kind in KINDS),
}


def _differs(op: str, dtype: str, kind: str) -> bool:
    return any(op.startswith(o) and (dtype, kind) == (d, k) for o, d, k in DIFFERENT)


def _same_scale(ours: np.ndarray, ref: np.ndarray, kind: str):
    """ours and ref, in their dtype (which picks the floor of the measure). A result of tiny numbers (all below
    2^-20): both multiplied by the power of two that brings ref's largest finite entry into [1, 2) (exact), so that
    it is judged relative to its own size instead of passing under OP_RTOL's absolute floor. Not for the subnormal
    kind, nor for a result with a subnormal entry: there an intermediate (a mean, a product) is rounded to the
    subnormal grid, whose spacing is a large part of each number, so those results are held to the absolute floor
    (their non-finite entries, dtype and shape exactly)."""
    finite = np.abs(ref[np.isfinite(ref)]).astype(np.float64)
    top = finite.max() if finite.size else 0.0
    subnormal = ((finite > 0) & (finite < np.finfo(ref.dtype).tiny)).any()
    if kind == "subnormal" or subnormal or top == 0.0 or top >= 2.0**-20:
        return ours, ref
    k = -math.floor(math.log2(top))
    return np.ldexp(ours, k).astype(ours.dtype), np.ldexp(ref, k).astype(ref.dtype)


def compare_with_torch(op: str, dtype: str, kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = edge_values(kind, dtype, (4, 7), rng)
    x, xt = mt.tensor(a.copy(), requires_grad=True), torch.tensor(a.copy(), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: "degrees of freedom is <= 0" (correction 2 on 4)
        y, yt = OPS[op](MT, x), OPS[op](TORCH, xt)
    assert y.dtype.name == dtype, f"{op}: result dtype {y.dtype}, expected {dtype} (PyTorch's)"
    assert_close(*_same_scale(y.detach().numpy(), yt.detach().numpy(), kind), OP_RTOL[dtype], what=f"{op} forward")
    g = (rng.standard_normal(tuple(yt.shape)) + 0.5).astype(dtype)  # off zero mean: sums do not cancel
    y.backward(mt.tensor(g.copy()))
    yt.backward(torch.tensor(g.copy()))
    assert x.grad.dtype.name == dtype
    assert_close(*_same_scale(x.grad.numpy(), xt.grad.numpy(), kind), OP_RTOL[dtype], what=f"{op} gradient")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(OPS))
def test_op_at_the_edge_of_its_dtype(op, dtype, kind):
    if _differs(op, dtype, kind):
        pytest.skip("a deliberate difference from PyTorch: see DIFFERENT and test_layer_norm_variance_overflow_is_nan")
    for seed in range(3):
        compare_with_torch(op, dtype, kind, seed)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_variance_overflow_is_nan(dtype):
    """Where a row's variance overflows, ours is NaN for the row; PyTorch's is non-finite or the bias alone, never
    the normalized row (its statistics overflow as well)."""
    big = 2 * math.sqrt(np.finfo(dtype).max)
    a = np.array([[big, -big, big / 2, 0.0], [1.0, 2.0, 3.0, 4.0]], dtype=dtype)
    y = F.layer_norm(mt.tensor(a), (4,)).detach().numpy()
    yt = torch.nn.functional.layer_norm(torch.tensor(a), (4,)).detach().numpy()
    assert np.isnan(y[0]).all()
    assert not np.isfinite(yt[0]).all() or (yt[0] == 0).all()
    assert_close(y[1], yt[1], OP_RTOL[dtype])


# ------------------------------------------------------------------------------------------ the examples
def test_std_of_float32_values_whose_squares_overflow():
    a = np.array([1e20, -1e20, 3e20, 2e20], np.float32)
    x, xt = mt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    s, st = x.std(), xt.std()
    assert np.isfinite(s.item()) and np.isinf(x.var().item()) and np.isinf(xt.var().item())
    assert_close(s.detach().numpy(), st.detach().numpy(), OP_RTOL["float32"])
    s.backward(mt.tensor(np.float32(0.7)))
    st.backward(torch.tensor(0.7))
    assert_close(x.grad.numpy(), xt.grad.numpy(), OP_RTOL["float32"], what="gradient")


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "subnormal"])
@pytest.mark.parametrize("op", ["norm3", "norm_neg1", "norm_nuc"])
def test_float16_norms_are_float32_norms_rounded(op, kind):
    """The DIFFERENT float16 norms: ours equal PyTorch's float32 forward and gradient, rounded to float16. (Not on
    subnormal inputs: there the norm itself rounds to float16's subnormal grid, or to 0, and the gradient, computed
    from that rounded norm as PyTorch's is from its own, is far from the float32 one.)"""
    rng = np.random.default_rng(0)
    a = edge_values(kind, "float16", (4, 7), rng)
    x, xt = mt.tensor(a, requires_grad=True), torch.tensor(a.astype(np.float32), requires_grad=True)
    y, yt = OPS[op](MT, x), OPS[op](TORCH, xt)
    g = (rng.standard_normal(tuple(yt.shape)) + 0.5).astype(np.float16)
    y.backward(mt.tensor(g))
    yt.backward(torch.tensor(g.astype(np.float32)))
    assert y.dtype == x.grad.dtype == mt.float16
    assert_close(y.detach().numpy(), yt.detach().numpy().astype(np.float16), OP_RTOL["float16"], what=f"{op} forward")
    # the gradient rounded twice (ours: each factor computed in float32, rounded at the end; the reference: its
    # float32 result rounded) may differ by one float16 step, or where it falls below float16's normal range
    ref = xt.grad.numpy().astype(np.float16)
    assert_close(*_same_scale(x.grad.numpy(), ref, kind), OP_RTOL["float16"], what=f"{op} gradient")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_negative_p_norm_gradient_at_large_values_is_exact(dtype):
    """p = -1 at values near sqrt of the dtype's largest number: the gradient sign(x) (out / |x|)^2 g is of order 1,
    but PyTorch's factor |x|^-2 falls below the normal range and its gradient is 0 for most entries. Ours: exact."""
    big = np.sqrt(np.finfo(dtype).max)
    a = (np.array([[-0.3, 0.5, 0.04, -0.8]]) * big).astype(dtype)
    x = mt.tensor(a, requires_grad=True)
    x.norm(p=-1, dim=-1).backward(mt.ones(1, dtype=x.dtype))
    exact = [Fraction(float(v)) for v in a[0]]
    out = 1 / sum(1 / abs(v) for v in exact)
    expected = np.array([[float(np.sign(float(v)) * (out / abs(v)) ** 2) for v in exact]])
    assert_close(x.grad.numpy(), expected.astype(dtype), OP_RTOL[dtype], what="gradient")


def test_float16_std_and_layer_norm_of_a_few_hundred():
    a = np.array([[300.0, -200.0, 500.0, 100.0]], np.float16)
    assert np.isfinite(mt.tensor(a).std().item())
    assert np.isfinite(F.layer_norm(mt.tensor(a), (4,)).detach().numpy()).all()


def test_float16_sum_accumulates_in_float32_and_float32_sum_stays_float32():
    h = np.array([60000.0, 60000.0, -60000.0], np.float16)
    assert mt.tensor(h).sum().item() == torch.tensor(h).sum().item() == 60000.0
    f = np.array([1e8, 1.0, -1e8, 1.0], np.float32)
    ours = mt.tensor(f).sum()
    assert ours.dtype == mt.float32 and ours.item() == np.sum(f)  # no float64 accumulation: PyTorch's CPU sum


# ------------------------------------------------------------------------------- the devices beside the formulas
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("dim", [None, 0, 1])
def test_var_in_float64_agrees_with_the_plain_formula_where_both_are_finite(dtype, dim):
    """Var/Std sum their squares in float64 (reductions._in_float64); the plain formula in the input's dtype gives
    the same numbers, to the dtype's precision, wherever its squares stay finite."""
    a = np.random.default_rng(1).standard_normal((5, 6)).astype(dtype) * 3
    centered = a - a.mean(axis=dim, keepdims=True, dtype=np.float32).astype(dtype)
    plain = (centered * centered).sum(axis=dim, dtype=np.float32 if dtype == "float16" else None) / (
        (a.size if dim is None else a.shape[dim]) - 1
    )
    for ours, reference in ((mt.tensor(a).var(dim), plain), (mt.tensor(a).std(dim), np.sqrt(plain))):
        assert_close(ours.detach().numpy(), np.asarray(reference).astype(dtype), OP_RTOL[dtype])


def test_float16_sum_in_float32_agrees_with_the_plain_float16_sum_where_finite():
    a = np.random.default_rng(2).standard_normal((6, 40)).astype(np.float16)
    assert_close(mt.tensor(a).sum(1).detach().numpy(), a.sum(1), OP_RTOL["float16"])


# ---------------------------------------------------------------------------------- var and std: torch's forms
VAR_FORMS = {
    "(x, True)": lambda t, op, x: getattr(t, op)(x, True),
    "(x, False)": lambda t, op, x: getattr(t, op)(x, False),
    "method (False)": lambda t, op, x: getattr(x, op)(False),
    "(x, 0, False)": lambda t, op, x: getattr(t, op)(x, 0, False),
    "(x, 0, False, True)": lambda t, op, x: getattr(t, op)(x, 0, False, True),
    "(x, (0, 1), False)": lambda t, op, x: getattr(t, op)(x, (0, 1), False),
    "(x, None, False)": lambda t, op, x: getattr(t, op)(x, None, False),
    "(x, dim=0, unbiased=False)": lambda t, op, x: getattr(t, op)(x, dim=0, unbiased=False),
    "(x, unbiased=False)": lambda t, op, x: getattr(t, op)(x, unbiased=False),
    "(x, 0, True, keepdim=True)": lambda t, op, x: getattr(t, op)(x, 0, True, keepdim=True),
    "(x, 0, correction=0)": lambda t, op, x: getattr(t, op)(x, 0, correction=0),
    "(x, correction=0.5)": lambda t, op, x: getattr(t, op)(x, correction=0.5),
    "(x, 0, correction=2) n=2": lambda t, op, x: getattr(t, op)(x, 0, correction=2),
    "(x, 0, correction=3) n=2": lambda t, op, x: getattr(t, op)(x, 0, correction=3),
    "(x, 0, correction=-1)": lambda t, op, x: getattr(t, op)(x, 0, correction=-1),
    "(x, 0, correction=True)": lambda t, op, x: getattr(t, op)(x, 0, correction=True),
    "(x, 0, correction=nan)": lambda t, op, x: getattr(t, op)(x, 0, correction=math.nan),
    "(x, 0, correction=inf)": lambda t, op, x: getattr(t, op)(x, 0, correction=math.inf),
    "method (0, correction=0, keepdim=True)": lambda t, op, x: getattr(x, op)(0, correction=0, keepdim=True),
    "method (0, True, True)": lambda t, op, x: getattr(x, op)(0, True, True),
}
VAR_ERRORS = {  # torch: TypeError (no overload matches)
    "(x, 0, True, correction=1)": lambda t, op, x: getattr(t, op)(x, 0, True, correction=1),
    "(x, unbiased=True, correction=1)": lambda t, op, x: getattr(t, op)(x, unbiased=True, correction=1),
    "(x, 0, 1)": lambda t, op, x: getattr(t, op)(x, 0, 1),
    "(x, 0, correction='a')": lambda t, op, x: getattr(t, op)(x, 0, correction="a"),
    "(x, True, keepdim=True)": lambda t, op, x: getattr(t, op)(x, True, keepdim=True),
}


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("form", sorted(VAR_FORMS))
def test_var_std_forms_as_torch(op, form):
    a = np.arange(6.0).reshape(2, 3) ** 1.5
    x, xt = mt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: "degrees of freedom is <= 0"
        y, yt = VAR_FORMS[form](MT, op, x), VAR_FORMS[form](TORCH, op, xt)
    assert_close(y.detach().numpy(), yt.detach().numpy(), OP_RTOL["float64"])
    g = np.random.default_rng(3).standard_normal(tuple(yt.shape)) + 0.5
    y.backward(mt.tensor(g))
    yt.backward(torch.tensor(g))
    assert_close(x.grad.numpy(), xt.grad.numpy(), OP_RTOL["float64"], what="gradient")


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("form", sorted(VAR_ERRORS))
def test_var_std_refuse_what_torch_refuses(op, form):
    a = np.arange(6.0).reshape(2, 3)
    with pytest.raises(TypeError):
        VAR_ERRORS[form](TORCH, op, torch.tensor(a))
    with pytest.raises(TypeError, match=op):
        VAR_ERRORS[form](MT, op, mt.tensor(a))


# ------------------------------------------------------------------------------------------ clip_grad_norm_'s norm
@pytest.mark.parametrize("norm_type", [2.0, 3.0, math.inf])
@pytest.mark.parametrize("kind", ["normal", "large", "tiny"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_grad_norm_at_the_edge_of_its_dtype(dtype, kind, norm_type):
    """The norm of float16 gradients is taken in float32 (finite for gradients of a few hundred); float32's squares
    overflow beyond ~1e19 to an inf norm, as PyTorch's (which then zeroes the gradients, as ours)."""
    rng = np.random.default_rng(4)
    grads = [edge_values(kind, dtype, shape, rng) for shape in [(3, 4), (5,)]]
    ours = [mt.tensor(np.zeros_like(g), requires_grad=True) for g in grads]
    ref = [torch.tensor(np.zeros_like(g), requires_grad=True) for g in grads]
    for p, pt, g in zip(ours, ref, grads):
        p.grad, pt.grad = mt.tensor(g.copy()), torch.tensor(g.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an overflow is inf, silently, as in PyTorch
        total = mt.nn.utils.clip_grad_norm_(ours, 1.0, norm_type)
    total_t = torch.nn.utils.clip_grad_norm_(ref, 1.0, norm_type)
    # ours is a Python float (flagged in nn/utils.py), torch's rounded to the dtype
    assert_close(np.asarray(total, dtype=dtype), total_t.detach().numpy(), OP_RTOL[dtype], what="total norm")
    for p, pt in zip(ours, ref):
        assert_close(p.grad.numpy(), pt.grad.numpy(), OP_RTOL[dtype], what="clipped gradient")


@pytest.mark.parametrize("op", ["var", "std"])
def test_float16_var_gradient_over_more_elements_than_float16_counts(op):
    """1 / n for n = 70000 is beyond float16's range as n and below its normal range as 1 / n: the gradient is taken
    in float32 and rounded once, as PyTorch's scalar multiplication (it was 0 everywhere)."""
    a = np.random.default_rng(5).standard_normal(70000).astype(np.float16)
    x, xt = mt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    getattr(x, op)().backward()
    getattr(xt, op)().backward()
    assert_close(x.grad.numpy(), xt.grad.numpy(), OP_RTOL["float16"], what="gradient")
    assert np.abs(x.grad.numpy()).max() > 0
