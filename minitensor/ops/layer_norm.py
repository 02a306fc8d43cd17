"""LayerNorm, with its backward derived by hand: one graph node where the composite (mean, var, rsqrt, ...) would record
several and keep their temporaries. docs/backprop.md derives the formulas; tests/minitensor/ops/test_fused.py checks
the op equal to the composite it replaces. Notation as in fused.py: x the input, g = dL/dy, a dot a tangent.

    xhat = (x - mu) * rstd, rstd = (var + eps)^-1/2, y = xhat * w + b
    dxhat = g * w;  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    dw = sum over rows of g * xhat;  db = sum over rows of g

float16 computes in float32 and rounds its results (output and gradients) to float16 once, as PyTorch's CPU kernel
does (reductions.opmath_dtype); float32 and float64 compute in their own dtype. The forward and the first-order
backward have in-place speed devices (layer_norm_in_place, layer_norm_grads_in_place) beside the formula; the
backward's xhat and rstd come from the statistics the forward kept (_xhat_rstd).
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function, is_grad_enabled, tangent_sum
from ..autograd.tangents import dual_state, outside_rules, set_tangent, tangent_of
from ..devices import is_host
from .fused import beside
from .reductions import in_opmath, opmath_dtype, to_dtype


class LayerNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last k dims (biased variance);
    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * w
    ẏ = ẋhat * w + xhat * ẇ + ḃ,  ẋhat = rstd * (ẋ - mean(ẋ) - xhat * mean(ẋ * xhat))
    (from ẋc = ẋ - mean(ẋ), var̊ = 2 mean(xc ẋc), rstḋ = -rstd^3 mean(xc ẋc); xhat's Jacobian is symmetric,
    so ẋhat is dx's formula with ẋ for dxhat: docs/backprop.md, "Forward mode")
    Deviation from PyTorch: where dxhat holds an inf (an infinite weight or g), dx is +-inf or NaN by this
    order of sums; PyTorch's kernel (another order) gives NaN for the whole row. Non-finite either way."""

    max_inputs = 3  # x, weight, bias; the affine ones optional

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, k=1, eps=1e-5):
        axes, dtype = tuple(range(x.ndim - k, x.ndim)), x.dtype
        ctx.save_for_backward(x, *(() if weight is None else (weight,)))
        # float16: statistics, output and gradients in float32, each rounded to float16 once (PyTorch's kernel);
        # in float16 itself the squares of activations of a few hundred overflow and the row becomes NaN
        x, weight, bias = (to_dtype(ctx.xp, t, opmath_dtype(dtype)) for t in (x, weight, bias))
        ctx.axes, ctx.eps = axes, eps
        if in_place_ok(x, weight, bias):  # the formula below, in two arrays instead of five
            out, mean, rstd = layer_norm_in_place(ctx.xp, x, weight, bias, axes, eps)
            ctx.save(mean=mean, rstd=rstd)
            return to_dtype(ctx.xp, out, dtype)
        xhat, mean, rstd = _normalized(ctx.xp, x, axes, eps)
        # The row statistics are kept, not xhat: xhat is rebuilt in the backward, so a layer norm holds one
        # activation-sized array (its input) until then instead of two (as PyTorch keeps mean and rstd).
        ctx.save(mean=mean, rstd=rstd)
        if weight is None:
            return to_dtype(ctx.xp, xhat, dtype)
        out = xhat * weight if bias is None else xhat * weight + bias
        return to_dtype(ctx.xp, out, dtype)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, g = (None if t is None else in_opmath(xp, t) for t in (x, w, g))
        return tuple(to_dtype(xp, t, dtype) for t in LayerNorm._grads(ctx, x, w, g))

    @staticmethod
    def _grads(ctx, x, w, g):
        """(dx, dw, db) in x's dtype (float32 for a float16 layer norm), None where not needed."""
        xp, axes = ctx.xp, ctx.axes
        need_x, need_w, need_b = ctx.needs_input_grad
        if need_x and not ctx.create_graph and in_place_ok(x, w, g):  # the formula below, in three arrays
            return layer_norm_grads_in_place(xp, x, w, g, ctx.mean, ctx.rstd, axes, ctx.eps, need_w, need_b)
        xhat, rstd = _xhat_rstd(ctx, x)
        rows = tuple(range(g.ndim - len(axes)))
        gw = xp.sum(g * xhat, axis=rows) if need_w else None
        gb = xp.sum(g, axis=rows) if need_b else None
        gx = None
        if need_x:
            gx = _normalization_vjp(xp, g * w if w is not None else g, xhat, rstd, axes, ctx.eps)
        return gx, gw, gb

    @staticmethod
    def jvp(ctx, tx, tw=None, tb=None):
        xp, axes = ctx.xp, ctx.axes
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, tx, tw, tb = (None if t is None else in_opmath(xp, t) for t in (x, w, tx, tw, tb))
        xhat, rstd = _xhat_rstd(ctx, x)
        dxhat = None
        if tx is not None:
            dxhat = _normalization_vjp(xp, tx, xhat, rstd, axes, ctx.eps)
            dxhat = dxhat * w if w is not None else dxhat
        return to_dtype(xp, tangent_sum(dxhat, xhat * tw if tw is not None else None, tb), dtype)

    @staticmethod
    def backward_jvp(ctx, g, tg, tx, tw=None):
        """The backward with the tangents of its gradients, on arrays (forward over reverse's speed device): the
        product rule on each formula, with ẋhat and ṙstd the normalization's JVP (as _xhat_rstd_unrecorded gives
        them) and m = mean(dxhat * xhat):
            ġw = sum over rows of (ġ xhat + g ẋhat),   ġb = sum over rows of ġ,   ḋxhat = ġ w + g ẇ,
            ġx = ṙstd (dxhat - mean(dxhat) - xhat m) + rstd (ḋxhat - mean(ḋxhat) - ẋhat m - xhat ṁ),
            ṁ = mean(ḋxhat xhat + dxhat ẋhat)    (ġ, ẋ, ẇ: None for none; a missing term is 0)
        ġx's first term is ṙstd / rstd times dx, and ṙstd / rstd = -rstd mean(xhat ẋ): dx is taken as computed."""
        xp, axes = ctx.xp, ctx.axes
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, g, tg, tx, tw = (None if t is None else in_opmath(xp, t) for t in (x, w, g, tg, tx, tw))
        gx, gw, gb = LayerNorm._grads(ctx, x, w, g)  # the backward's, in the opmath dtype
        need_x, need_w, need_b = ctx.needs_input_grad
        xhat, rstd = (x - ctx.mean) * ctx.rstd, ctx.rstd  # the forward's, as in _xhat_rstd
        txhat = m_tx = None
        if tx is not None:
            m_tx = _mean(xp, xhat * tx, axes)
            txhat = _normalization_vjp(xp, tx, xhat, rstd, axes, ctx.eps, m_tx)
        rows = tuple(range(g.ndim - len(axes)))
        tgx = tgw = tgb = None
        if need_w:
            tgw = tangent_sum(
                xp.sum(tg * xhat, axis=rows) if tg is not None else None,
                xp.sum(g * txhat, axis=rows) if txhat is not None else None,
            )
        if need_b and tg is not None:
            tgb = xp.sum(tg, axis=rows)
        if need_x:
            dxhat = g * w if w is not None else g
            tdxhat = (
                tg if w is None else tangent_sum(tg * w if tg is not None else None, g * tw if tw is not None else None)
            )
            if _normalized_size(xhat, axes) == 2:  # gx = eps rstd^3 (dxhat - mean(dxhat)): _normalization_vjp
                tgx = tangent_sum(
                    -(3 * rstd * m_tx) * gx if m_tx is not None else None,  # 3 ṙstd / rstd gx
                    _normalization_vjp(xp, tdxhat, xhat, rstd, axes, ctx.eps) if tdxhat is not None else None,
                )
                return tuple(tuple(to_dtype(xp, t, dtype) for t in ts) for ts in ((gx, gw, gb), (tgx, tgw, tgb)))
            m = _mean(xp, dxhat * xhat, axes)
            tm = tangent_sum(
                _mean(xp, tdxhat * xhat, axes) if tdxhat is not None else None,
                _mean(xp, dxhat * txhat, axes) if txhat is not None else None,
            )
            inner = tangent_sum(  # the tangent of dxhat - mean(dxhat) - xhat m
                tdxhat - _mean(xp, tdxhat, axes) if tdxhat is not None else None,
                -(txhat * m) if txhat is not None else None,
                -(xhat * tm) if tm is not None else None,
            )
            tgx = tangent_sum(
                -(rstd * m_tx) * gx if m_tx is not None else None,  # ṙstd (dxhat - mean(dxhat) - xhat m)
                rstd * inner if inner is not None else None,
            )
        return tuple(tuple(to_dtype(xp, t, dtype) for t in ts) for ts in ((gx, gw, gb), (tgx, tgw, tgb)))


def _normalization_vjp(xp, v, xhat, rstd, axes: tuple, eps: float, m=None):
    """rstd * (v - mean(v) - xhat * mean(v * xhat)): xhat's Jacobian (symmetric) times v, which is dx for v = dxhat
    and ẋhat for v = ẋ (m: mean(v * xhat), when the caller has it).

    Over two elements the same value is eps * rstd^3 * (v - mean(v)), and that form is taken: there xhat = +-h with
    h^2 = var rstd^2, so xhat * mean(v * xhat) = h^2 (v - mean(v)), and 1 - h^2 = eps rstd^2. The general form gets
    that eps part as the difference of two nearly equal terms and loses about -log10(eps rstd^2) digits (dx of a
    (1, 2) row of variance 1 with eps 1e-5: 4e-11 from the exact value; PyTorch's kernel, 7e-11); this one is exact
    to round-off. With three or more elements the terms cancel only where v nearly lies in the span of 1 and xhat,
    and there a round-off change of v moves dx as much: the problem's own condition, no formula's."""
    if _normalized_size(xhat, axes) == 2:
        return (eps * rstd * rstd * rstd) * (v - _mean(xp, v, axes))
    m = _mean(xp, v * xhat, axes) if m is None else m
    return rstd * (v - _mean(xp, v, axes) - xhat * m)


def _normalized_size(a, axes: tuple) -> int:
    """How many elements each normalized row of `a` holds (the product of the normalized dims)."""
    return int(np.prod([a.shape[d] for d in axes]))


def _normalized(xp, x, axes: tuple, eps: float):
    """(xhat, mean, rstd): xhat = (x - mean) * rstd, rstd = (var + eps)^-1/2 over axes (biased variance)."""
    mean = xp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    var = xp.mean(xc * xc, axis=axes, keepdims=True)
    rstd = _rstd(xp, var, eps)
    return xc * rstd, mean, rstd


def _rstd(xp, var, eps: float):
    """(var + eps)^-1/2, NaN where var overflowed (finite |x| beyond ~1e154 would make rstd 0 and the output the
    bias: NaN instead, as PyTorch gives)."""
    return xp.where(var == np.inf, np.nan, 1.0 / xp.sqrt(var + var.dtype.type(eps)))


def in_place_ok(x, *others) -> bool:
    """Whether LayerNorm may take its in-place speed devices: host arrays, float32 or float64, all of x's dtype
    (so that writing a result into a buffer of x's dtype casts nothing the formula would promote)."""
    return all(is_host(t) and t.dtype == x.dtype for t in (x, *others)) and x.dtype in (np.float32, np.float64)


def layer_norm_in_place(xp, x, weight, bias, axes: tuple, eps: float):
    """(xhat * weight + bias, mean, rstd): _normalized and the affine map, the same ufuncs on the same operands in
    the same order, bitwise (tests/minitensor/test_speed_devices.py), in two activation-sized arrays instead of five: x
    - mean becomes xhat in place, and the squares of x - mean are taken in the output's buffer, which then takes
    xhat * weight and the bias. Speed device of LayerNorm.forward (host arrays: in_place_ok)."""
    mean = xp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    out = np.multiply(xc, xc)
    rstd = _rstd(xp, xp.mean(out, axis=axes, keepdims=True), eps)
    xhat = np.multiply(xc, rstd, out=xc)
    np.multiply(xhat, weight, out=out)
    out += bias
    return out, mean, rstd


def layer_norm_grads_in_place(xp, x, w, g, mean, rstd, axes: tuple, eps: float, need_w: bool, need_b: bool):
    """(dx, dw, db) of LayerNorm._grads for a weight, dx needed: the same arithmetic in the same order, bitwise
    (tests/minitensor/test_speed_devices.py; rstd * y is y * rstd exactly), in three activation-sized arrays instead of
    eight: xhat rebuilt in place, dxhat = g * w turned into dx in place, dw and db summed by einsum. Speed device
    of LayerNorm's backward (host arrays: in_place_ok)."""
    rows = tuple(range(g.ndim - len(axes)))
    xhat = np.subtract(x, mean)
    xhat *= rstd  # the forward's xhat, bit for bit
    if w.size > 1:  # the sums over rows by einsum, without g * xhat in memory: row after row, as np.sum adds along
        # a slow axis (bitwise); rows of one number would be its fast axis, which np.sum adds pairwise
        g2, xhat2 = g.reshape(-1, w.size), xhat.reshape(-1, w.size)
        gw = np.einsum("rn,rn->n", g2, xhat2).reshape(w.shape) if need_w else None
        gb = np.einsum("rn->n", g2).reshape(w.shape) if need_b else None
    else:
        gw = xp.sum(g * xhat, axis=rows) if need_w else None
        gb = xp.sum(g, axis=rows) if need_b else None
    dxhat = np.multiply(g, w)
    if _normalized_size(xhat, axes) == 2:  # _normalization_vjp's form for rows of two: eps rstd^3 (dxhat - mean)
        gx = np.subtract(dxhat, _mean(xp, dxhat, axes), out=dxhat)
        gx *= eps * rstd * rstd * rstd
        return gx, gw, gb
    mean_dxhat_xhat = _mean(xp, dxhat * xhat, axes)
    gx = np.subtract(dxhat, _mean(xp, dxhat, axes), out=dxhat)  # dxhat - mean(dxhat)
    gx -= np.multiply(xhat, mean_dxhat_xhat, out=xhat)  # - xhat * mean(dxhat * xhat)
    gx *= rstd
    return gx, gw, gb


def _mean(xp, a, axes: tuple):
    """The mean of a over the normalized axes, kept as size-1 dims (broadcasts against a)."""
    return xp.mean(a, axis=axes, keepdims=True)


def _xhat_rstd(ctx, x):
    """(xhat, rstd) for LayerNorm's backward and JVP: xhat = (x - mean) * rstd rebuilt from the row statistics the
    forward kept, bit for bit the forward's; on Tensors that reverse mode records (create_graph, a recorded rule;
    ctx.intermediate's rule) the whole normalization recomputed from the saved x, so that both are differentiable,
    its xhat taken as it comes (not rebuilt again); on Tensors that nothing records, _xhat_rstd_unrecorded."""
    if not ctx.create_graph:
        return (x - ctx.mean) * ctx.rstd, ctx.rstd
    if is_grad_enabled():
        xhat, _, rstd = _normalized(ctx.xp, x, ctx.axes, ctx.eps)
        return xhat, rstd
    return _xhat_rstd_unrecorded(ctx, x)


def _xhat_rstd_unrecorded(ctx, x):
    """(xhat, rstd) as Tensors that no reverse pass will differentiate: forward over reverse's backward, which needs
    only their tangents, and a forward-mode rule run unrecorded, which needs none. Speed device of _xhat_rstd: both
    rebuilt from the forward's statistics, and given the normalization's JVP as their tangents when x has one,
        ẋhat = rstd * (ẋ - mean(ẋ) - xhat * mean(xhat * ẋ)),   ṙstd = -rstd * rstd * mean(xhat * ẋ)
    (ṙstd = -(var + eps)^-3/2 * mean((x - mu) * ẋ)), in five primitives where the recomputed normalization takes
    nine, each with its own tangent (tests/minitensor/autograd/test_forward_ad_fused.py checks the two equal)."""
    xp = ctx.xp
    tx = None if dual_state.in_rule else tangent_of(x)  # a rule's primitives carry no tangent
    with outside_rules():  # no tangent for these primitives: the formula below gives it
        rstd = x.wrap(ctx.rstd)
        xhat = (x - beside(x, ctx.mean)) * rstd
        if tx is not None:
            m = _mean(xp, xhat * tx, ctx.axes)
            set_tangent(xhat, _normalization_vjp(xp, tx, xhat, rstd, ctx.axes, ctx.eps, m))
            set_tangent(rstd, -(rstd * rstd) * m)
    return xhat, rstd
