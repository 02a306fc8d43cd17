"""Max and average pooling over windows of the spatial dims, on the windows of convolution.py's im2col.

docs/backprop.md ("Pooling") derives the formulas. x (N, C, *S); a window l reads K positions of the padded input.

    max  y_l = x[a_l], a_l the window's argmax (padding reads -inf, never chosen over a number)
         dx = the scatter-add of g at the argmaxes (overlapping windows that choose one x add);  ẏ = ẋ[a]
    avg  y_l = sum_k x_pad[l, k] / D_l, D_l the divisor (torch's rules: the window's size, or its entries that
         are not padding, or divisor_override)
         dx = col2im(g / D spread over the window's K entries);  linear: ẏ = avg(ẋ)

Ties, NaN and windows of -inf choose as torch's CPU kernels do (a strict > scan, NaN taken): the first maximum; the
last NaN of a window; a window whose entries are all -inf routes its gradient to its first entry inside the input.
Padding comes as (before, after) pairs per spatial dim: ceil_mode's last window, which may run past the padding,
is a larger `after` (nn/spatial.py computes it), read as -inf by max and left out of avg's divisor.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Function
from ..devices import array_module, is_host
from .convolution import fold, im2col, output_size


def max_pool_indices(x, kernel_size, stride, padding, dilation):
    """(values, flat): each window's maximum and its position as a flat index into x (N, C, *S) (a position in
    the window chosen as torch's kernel chooses: see the module docstring)."""
    N, C = x.shape[:2]
    size = x.shape[2:]
    out = output_size(size, kernel_size, stride, padding, dilation)
    cols = im2col(x, kernel_size, stride, padding, dilation, fill=-np.inf)  # (N, C, K, L)
    k = cols.argmax(axis=2)  # (N, C, L): the first maximum, or the first NaN
    nan = np.isnan(cols)
    if not is_host(x) or nan.any():  # torch's scan takes every NaN it meets, so the last one stays
        last_nan = cols.shape[2] - 1 - nan[:, :, ::-1].argmax(axis=2)  # (on a device, no host read to skip it)
        k = np.where(nan.any(axis=2), last_nan, k)
    values = np.take_along_axis(cols, k[:, :, None], axis=2)[:, :, 0]
    # the input coordinate of entry k of window l, per spatial dim: l_d * s_d - before_d + k_d * d_d
    xp = array_module(x)
    l_index = xp.arange(math.prod(out))
    flat = xp.zeros(k.shape, dtype=np.int64)
    for dim, (s, (lo, _), d, n) in enumerate(zip(stride, padding, dilation, size)):
        kd = k // math.prod(kernel_size[dim + 1 :]) % kernel_size[dim]  # np.unravel_index, by arithmetic
        start = l_index // math.prod(out[dim + 1 :]) % out[dim] * s - lo
        coord = start + kd * d
        # a window of -inf only (padding ties with it): its first entry inside the input, as torch's kernel starts
        first = start + ((d - 1 - start) // d).clip(min=0) * d
        coord = np.where((coord < 0) | (coord >= n), first, coord).clip(0, n - 1)
        flat = flat * n + coord
    planes = xp.arange(N * C).reshape(N, C, 1) * math.prod(size)
    return values.reshape(N, C, *out), (flat + planes).reshape(N, C, *out)


class MaxPool(Function):
    """y = x[argmax over each window];  dx = scatter-add of g at the argmaxes;  ẏ = ẋ[argmax]"""

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, dilation):
        out, flat = max_pool_indices(x, kernel_size, stride, padding, dilation)
        ctx.save(flat=flat)
        ctx.size = x.size
        ctx.shape = x.shape
        return out

    @staticmethod
    def backward(ctx, g):
        gx = ctx.xp.index_put((ctx.size,), ctx.flat.reshape(-1), g.reshape(-1), True)  # repeats add
        return (gx.reshape(ctx.shape),)

    @staticmethod
    def jvp(ctx, tx):
        return tx.reshape(-1)[ctx.flat]


def avg_pool_divisor(size, kernel_size, stride, padding, count_include_pad: bool, pad: tuple, divisor_override):
    """D_l per window (an array of the output's spatial shape): divisor_override; else the window's entries inside
    the input, plus with count_include_pad those in the symmetric padding `pad` (never ceil_mode's extension).
    What is counted is a box, so D is the outer product of one count per spatial dim."""
    out = output_size(size, kernel_size, stride, padding, (1,) * len(size))
    if divisor_override is not None:
        return np.full(out, float(divisor_override))
    divisor = np.ones(())
    for n, k, s, (lo, hi), p, o in zip(size, kernel_size, stride, padding, pad, out):
        counted = np.zeros(lo + n + hi)  # 1 where an entry counts, along this dim of the padded input
        counted[lo - p if count_include_pad else lo : lo + n + (min(p, hi) if count_include_pad else 0)] = 1
        per_window = np.array([counted[i * s : i * s + k].sum() for i in range(o)])
        divisor = np.multiply.outer(divisor, per_window)
    return divisor


class AvgPool(Function):
    """y = (sum of each window of the zero-padded x) / D;  dx = col2im(g / D on each window entry);  linear"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, divisor):
        ctx.geometry = dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=(1,) * len(stride))
        ctx.size = x.shape[2:]
        divisor = array_module(x).asarray(divisor)  # computed on the host, used beside x
        ctx.save(divisor=divisor)
        cols = im2col(x, **ctx.geometry)  # (N, C, K, L)
        out = cols.sum(axis=2).reshape(*x.shape[:2], *divisor.shape)
        out /= divisor.astype(x.dtype, copy=False)
        return out

    @staticmethod
    def backward(ctx, g):
        N, C = g.shape[:2]
        K = math.prod(ctx.geometry["kernel_size"])
        L = math.prod(g.shape[2:])  # (counted, not -1: N or C may be 0)
        per_entry = (g / ctx.xp.constant(ctx.divisor.astype(g.dtype, copy=False), g)).reshape(N, C, 1, L)
        spread = ctx.xp.broadcast_to(per_entry, (N, C, K, per_entry.shape[-1]))  # (N, C, K, L)
        return (fold(ctx.xp, spread, ctx.size, **ctx.geometry),)
