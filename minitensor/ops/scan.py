"""Scans along a dim: the cumulative sum and product (torch.cumsum, torch.cumprod), and their derivatives.

A float16 input is scanned in float32 and rounded once at the end (PyTorch's opmath). A cumsum's transpose is
the cumsum from the other end, which `cumsum(..., reverse=True)` gives; both namespaces (ops/namespace.py) carry it,
so each backward below is differentiable again.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function


def cumsum(a, axis: int, reverse: bool = False):
    """np.cumsum along axis, or from the far end (out[i] = sum of a[j] for j >= i) when reverse."""
    if reverse:
        return np.flip(cumsum(np.flip(a, axis), axis), axis)
    return _scan(np.cumsum, a, axis)


def cumprod(a, axis: int):
    return _scan(np.cumprod, a, axis)


def _scan(fn, a, axis: int):
    """fn along axis in PyTorch's dtypes: float16 accumulated in float32, an integer or bool input giving int64."""
    if a.dtype == np.float16:
        return fn(a, axis=axis, dtype=np.float32).astype(np.float16)
    return fn(a, axis=axis, dtype=a.dtype if a.dtype.kind == "f" else np.int64)


class CumSum(Function):
    """out[i] = sum_{j <= i} a[j] along dim (from the far end when reverse);  da = the cumsum of g from the far end"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, dim, reverse=False):
        ctx.dim, ctx.reverse = dim, reverse
        return cumsum(a, dim, reverse)

    @staticmethod
    def backward(ctx, g):
        return (ctx.xp.cumsum(g, ctx.dim, not ctx.reverse),)


class CumProd(Function):
    """out[i] = prod_{j <= i} a[j] along dim;  da = cumsum_from_end(g * out) / a,  ẏ = out * cumsum(ȧ / a)
    where the line has no zero (a zero, and a second derivative through it: docs/backprop.md, "CumProd")"""

    @staticmethod
    def forward(ctx, a, dim):
        out = cumprod(a, dim)
        ctx.save_for_backward(a, out)
        ctx.dim = dim
        before, at_first_zero = _zero_masks(a, dim)
        ctx.save(before=before, at_first_zero=at_first_zero)
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_arrays
        xp, dim = ctx.xp, ctx.dim
        if ctx.before is None:
            return (xp.cumsum(g * out, dim, True) / a,)
        if ctx.create_graph:
            # the masks below are constants of this point: differentiating through them would drop the terms that
            # vanish here but not nearby (da[k > z] is 0 at a[z] = 0, its derivative in a[z] is not)
            raise RuntimeError(
                "cumprod: the second derivative where the input has a zero along dim is not implemented here"
            )
        before, at_z = ctx.before, ctx.at_first_zero
        part = xp.where(before, xp.cumsum(g * out, dim, True) / xp.where(before, a, 1), 0)
        out_without_z = xp.cumprod(xp.where(at_z, 1, a), dim)
        return (part + xp.where(at_z, xp.cumsum(g * out_without_z, dim, True), 0),)

    @staticmethod
    def jvp(ctx, ta):
        a, out = ctx.saved_arrays
        xp, dim = ctx.xp, ctx.dim
        if ctx.before is None:
            return out * xp.cumsum(ta / a, dim)
        before, at_z = ctx.before, ctx.at_first_zero
        head = out * xp.cumsum(xp.where(before, ta / xp.where(before, a, 1), 0), dim)
        tail = xp.sum(xp.where(at_z, ta, 0), axis=dim, keepdims=True) * xp.cumprod(xp.where(at_z, 1, a), dim)
        return xp.where(before, head, tail)


def _zero_masks(a, dim: int):
    """(before, at_first_zero) along dim: where no zero has come yet, and the first zero; (None, None) without one."""
    zero = a == 0
    if not zero.any():
        return None, None
    seen = np.cumsum(zero, axis=dim)  # the zeros met so far along the line
    return seen == 0, zero & (seen == 1)
