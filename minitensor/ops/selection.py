"""Elementwise primitives that select between their inputs: clamp, maximum/minimum, where, masked_fill.

Each output element is one of its inputs' elements (or a number), chosen by a comparison or a mask; the
backward sends g to the input chosen, and the forward-mode rule picks that input's tangent the same way.
Gradients are returned in the output's broadcast shape (the graph walk sums them back, as in elementwise.py).
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..autograd import Function


class Clamp(Function):
    """out = min(max(a, lo), hi);  da = g [lo <= a <= hi], dlo = g [a < lo < hi], dhi = g [a > hi or hi < lo];
    ẏ: ȧ, l̇o or ḣi, the input selected (docs/backprop.md, "Clamp": ties, lo > hi, number bounds)"""

    @staticmethod
    def forward(ctx, a, *bounds, has_min, has_max, number_bounds=False):
        lo, hi = _lo_hi(bounds, has_min, has_max)
        ctx.save_for_backward(a, *bounds)
        ctx.has_min, ctx.has_max, ctx.number_bounds = has_min, has_max, number_bounds
        out = a if lo is None else np.maximum(lo, a)  # a on a tie (-0.0 stays), as PyTorch
        return out if hi is None else np.minimum(hi, out)

    @staticmethod
    def backward(ctx, g):
        a, *bounds = ctx.saved_arrays
        lo, hi = _lo_hi(bounds, ctx.has_min, ctx.has_max)
        xp, need = ctx.xp, ctx.needs_input_grad
        inside, to_lo, to_hi = _clamp_masks(a, lo, hi)
        grads = [xp.where(inside, g, 0) if need[0] else None]
        if lo is not None:
            grads.append(xp.where(to_lo, g, 0) if need[1] else None)
        if hi is not None:
            grads.append(xp.where(to_hi, g, 0) if need[-1] else None)
        return tuple(grads)

    @staticmethod
    def jvp(ctx, ta, *t_bounds):
        a, *bounds = ctx.saved_arrays
        xp, zero = ctx.xp, ctx.xp.zeros_like(a)  # the tangent of an input without one
        lo, hi = _lo_hi(bounds, ctx.has_min, ctx.has_max)
        t_lo, t_hi = _lo_hi(t_bounds, ctx.has_min, ctx.has_max)
        ta, t_lo, t_hi = (zero if t is None else t for t in (ta, t_lo, t_hi))
        if ctx.number_bounds:  # the bounds carry no tangent
            return xp.where(_clamp_masks(a, lo, hi)[0], ta, 0)
        if lo is not None and hi is not None:
            return xp.where(lo > hi, t_hi, xp.where(a < lo, t_lo, xp.where(a > hi, t_hi, ta)))
        return xp.where(a > lo, ta, t_lo) if lo is not None else xp.where(a < hi, ta, t_hi)


def _lo_hi(bounds, has_min: bool, has_max: bool) -> tuple:
    """(lo, hi) from Clamp's bounds (or their tangents), given in that order; None for a bound not given."""
    return (bounds[0] if has_min else None), (bounds[-1] if has_max else None)


def _clamp_masks(a, lo, hi) -> tuple:
    """(inside, to_lo, to_hi): where clamp's output is a (on a tie too), lo and hi; None for a bound not given."""
    if lo is not None and hi is not None:
        return (a >= lo) & (a <= hi), (a < lo) & (lo < hi), (a > hi) | (hi < lo)
    if lo is not None:
        return a >= lo, a < lo, None
    return a <= hi, None, a > hi


def _to_larger(xp, g, a, b):
    """The share of g of `a` in max(a, b), as PyTorch: g, half of it on a tie, 0 where b is larger.
    A NaN operand is never smaller, so both operands of a NaN get g."""
    return xp.where(a < b, 0, xp.where(a == b, g * 0.5, g))


def _toward_larger(xp, a_wins, a, b, ta, tb):
    """PyTorch's forward formula of maximum and minimum: ẏ = ḃ + w (ȧ - ḃ), w = 1 where a wins (a_wins), 1/2 on a
    tie, 0 elsewhere; so a NaN operand gives ḃ (where the backward sends g to both)."""
    ta, tb = (xp.zeros_like(x) if t is None else t for x, t in ((a, ta), (b, tb)))
    return tb + xp.where(a == b, 0.5, xp.astype(a_wins, tb.dtype)) * (ta - tb)


class Maximum(Function):
    """out = max(a, b);  the gradient goes to the larger input, split in half on ties (as in PyTorch);
    ẏ = ḃ + w (ȧ - ḃ), w = [a > b], 1/2 on a tie"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.maximum(b, a)  # on a tie NumPy returns its second operand, PyTorch a (-0.0 vs 0.0)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_arrays
        return _to_larger(ctx.xp, g, a, b), _to_larger(ctx.xp, g, b, a)

    @staticmethod
    def jvp(ctx, ta, tb):
        a, b = ctx.saved_arrays
        return _toward_larger(ctx.xp, a > b, a, b, ta, tb)


class Minimum(Function):
    """out = min(a, b);  the gradient goes to the smaller input, split in half on ties;
    ẏ = ḃ + w (ȧ - ḃ), w = [a < b], 1/2 on a tie"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.minimum(b, a)  # a on a tie, as PyTorch

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_arrays
        return _to_larger(ctx.xp, g, b, a), _to_larger(ctx.xp, g, a, b)  # a is the smaller where b is larger

    @staticmethod
    def jvp(ctx, ta, tb):
        a, b = ctx.saved_arrays
        return _toward_larger(ctx.xp, a < b, a, b, ta, tb)


class Where(Function):
    """out = cond ? a : b;  da = g where cond, db = g where not cond"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a, b, cond):
        ctx.save(cond=cond)  # torch's where saves its condition too
        return fast.use.select(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        need_a, need_b = ctx.needs_input_grad
        return (ctx.xp.where(ctx.cond, g, 0) if need_a else None), (ctx.xp.where(ctx.cond, 0, g) if need_b else None)


def select(cond, a, b):
    """out = cond ? a : b, np.where: Where's formula (fast/selection.py has its device for a 0-d zero branch)."""
    return np.where(cond, a, b)


fast.formula("select", select)


class MaskedFill(Function):
    """out = mask ? value : a  (value a 0-d tensor, mask broadcast with a);
    da = g where not mask, dvalue = g where mask (summed to value's shape () by the graph walk)"""

    jvp_kind = "elementwise"

    @staticmethod
    def forward(ctx, a, value, mask):
        ctx.save(mask=mask)
        return np.where(mask, value, a)

    @staticmethod
    def backward(ctx, g):
        need_a, need_value = ctx.needs_input_grad
        return (
            ctx.xp.where(ctx.mask, 0, g) if need_a else None,
            ctx.xp.where(ctx.mask, g, 0) if need_value else None,
        )
