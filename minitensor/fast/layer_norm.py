"""Speed devices of ops/layer_norm.py: the forward and backward in place, and the backward with its tangents on arrays
(forward over reverse).

- layer_norm, layer_norm_grads: the formulas' ufuncs on the same operands in the same order, bitwise, in 2 and 3
  activation-sized arrays instead of 5 and 8 (host float32 and float64 arrays, with a weight:
  docs/decisions/012-row-wise-devices.md).
- layer_norm_backward_jvp: LayerNorm.backward_jvp, the gradients and their tangents on arrays in one call, where the
  engine would otherwise run the backward on Tensors (docs/decisions/006-hvp-cost.md).
tests/minitensor/fast/test_layer_norm.py checks each against its formula.
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..autograd import tangent_sum
from ..devices import is_host
from ..ops import layer_norm
from ..ops.layer_norm import mean_over, normalization_vjp, normalized_size
from ..ops.reductions import in_opmath, to_dtype


def in_place_ok(x, *others) -> bool:
    """Whether LayerNorm may take its in-place speed devices: host arrays, float32 or float64, all of x's dtype
    (so that writing a result into a buffer of x's dtype casts nothing the formula would promote)."""
    return all(is_host(t) and t.dtype == x.dtype for t in (x, *others)) and x.dtype in (np.float32, np.float64)


def layer_norm_in_place(xp, x, weight, bias, axes: tuple, eps: float):
    """layer_norm.layer_norm(xp, x, weight, bias, axes, eps): the same ufuncs on the same operands in the same order,
    bitwise, in two activation-sized arrays instead of five: x - mean becomes xhat in place, and the squares of
    x - mean are taken in the output's buffer, which then takes xhat * weight and the bias (host arrays with a
    weight and a bias: in_place_ok)."""
    if not in_place_ok(x, weight, bias):
        return layer_norm.layer_norm(xp, x, weight, bias, axes, eps)
    mean = xp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    out = np.multiply(xc, xc)
    rstd = layer_norm.rstd_of(xp, xp.mean(out, axis=axes, keepdims=True), eps)
    xhat = np.multiply(xc, rstd, out=xc)
    np.multiply(xhat, weight, out=out)
    out += bias
    return out, mean, rstd


def layer_norm_grads_in_place(ctx, x, w, g):
    """layer_norm.layer_norm_grads(ctx, x, w, g) for a weight, dx needed, on arrays nothing records: the same
    arithmetic in the same order, bitwise (rstd * y is y * rstd exactly), in three activation-sized arrays instead
    of eight: xhat rebuilt in place, dxhat = g * w turned into dx in place, dw and db summed by einsum."""
    need_x, need_w, need_b = ctx.needs_input_grad
    if not (need_x and not ctx.create_graph and in_place_ok(x, w, g)):
        return layer_norm.layer_norm_grads(ctx, x, w, g)
    xp, axes, eps, mean, rstd = ctx.xp, ctx.axes, ctx.eps, ctx.mean, ctx.rstd
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
    if normalized_size(xhat, axes) == 2:  # normalization_vjp's form for rows of two: eps rstd^3 (dxhat - mean)
        gx = np.subtract(dxhat, mean_over(xp, dxhat, axes), out=dxhat)
        gx *= eps * rstd * rstd * rstd
        return gx, gw, gb
    mean_dxhat_xhat = mean_over(xp, dxhat * xhat, axes)
    gx = np.subtract(dxhat, mean_over(xp, dxhat, axes), out=dxhat)  # dxhat - mean(dxhat)
    gx -= np.multiply(xhat, mean_dxhat_xhat, out=xhat)  # - xhat * mean(dxhat * xhat)
    gx *= rstd
    return gx, gw, gb


def layer_norm_backward_jvp(ctx, g, tg, tx, tw=None):
    """LayerNorm's backward with the tangents of its gradients, on arrays (forward over reverse's speed device; without
    it the engine runs the backward on Tensors): the product rule on each formula, with ẋhat and ṙstd the
    normalization's JVP and m = mean(dxhat * xhat):
        ġw = sum over rows of (ġ xhat + g ẋhat),   ġb = sum over rows of ġ,   ḋxhat = ġ w + g ẇ,
        ġx = ṙstd (dxhat - mean(dxhat) - xhat m) + rstd (ḋxhat - mean(ḋxhat) - ẋhat m - xhat ṁ),
        ṁ = mean(ḋxhat xhat + dxhat ẋhat)    (ġ, ẋ, ẇ: None for none; a missing term is 0)
    ġx's first term is ṙstd / rstd times dx, and ṙstd / rstd = -rstd mean(xhat ẋ): dx is taken as computed."""
    xp, axes = ctx.xp, ctx.axes
    x, w = (ctx.saved_arrays + (None,))[:2]
    dtype = x.dtype
    x, w, g, tg, tx, tw = (None if t is None else in_opmath(xp, t) for t in (x, w, g, tg, tx, tw))
    gx, gw, gb = fast.use.layer_norm_grads(ctx, x, w, g)  # the backward's, in the opmath dtype
    need_x, need_w, need_b = ctx.needs_input_grad
    xhat, rstd = (x - ctx.mean) * ctx.rstd, ctx.rstd  # the forward's, as in layer_norm.xhat_rstd
    txhat = m_tx = None
    if tx is not None:
        m_tx = mean_over(xp, xhat * tx, axes)
        txhat = normalization_vjp(xp, tx, xhat, rstd, axes, ctx.eps, m_tx)
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
        if normalized_size(xhat, axes) == 2:  # gx = eps rstd^3 (dxhat - mean(dxhat)): _normalization_vjp
            tgx = tangent_sum(
                -(3 * rstd * m_tx) * gx if m_tx is not None else None,  # 3 ṙstd / rstd gx
                normalization_vjp(xp, tdxhat, xhat, rstd, axes, ctx.eps) if tdxhat is not None else None,
            )
            return tuple(tuple(to_dtype(xp, t, dtype) for t in ts) for ts in ((gx, gw, gb), (tgx, tgw, tgb)))
        m = mean_over(xp, dxhat * xhat, axes)
        tm = tangent_sum(
            mean_over(xp, tdxhat * xhat, axes) if tdxhat is not None else None,
            mean_over(xp, dxhat * txhat, axes) if txhat is not None else None,
        )
        inner = tangent_sum(  # the tangent of dxhat - mean(dxhat) - xhat m
            tdxhat - mean_over(xp, tdxhat, axes) if tdxhat is not None else None,
            -(txhat * m) if txhat is not None else None,
            -(xhat * tm) if tm is not None else None,
        )
        tgx = tangent_sum(
            -(rstd * m_tx) * gx if m_tx is not None else None,  # ṙstd (dxhat - mean(dxhat) - xhat m)
            rstd * inner if inner is not None else None,
        )
    return tuple(tuple(to_dtype(xp, t, dtype) for t in ts) for ts in ((gx, gw, gb), (tgx, tgw, tgb)))


fast.device("layer_norm", layer_norm_in_place, evidence="docs/decisions/012-row-wise-devices.md")
fast.device("layer_norm_grads", layer_norm_grads_in_place, evidence="docs/decisions/012-row-wise-devices.md")
fast.device("layer_norm_backward_jvp", layer_norm_backward_jvp, evidence="docs/decisions/006-hvp-cost.md")
