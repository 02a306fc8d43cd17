"""Convolution as im2col and a matrix product, with the pair of linear primitives that gather and scatter windows.

docs/backprop.md ("Convolution") derives the formulas below. Shapes: x (N, C, *S) with S the spatial sizes (one for
conv1d, two for conv2d), a kernel of spatial size k (K = prod k positions), the output's spatial size O
(L = prod O positions), G groups of Cg = C / G input and Og = O_ch / G output channels.

    im2col   cols[n, c, k, l] = x_pad[n, c, l * s + k * d]       (per spatial dim; x_pad the zero-padded input)
    col2im   its adjoint: each cols[n, c, k, l] added back at x_pad[n, c, l * s + k * d], the padding cropped
    conv     y[n, g, o, l] = sum_j W[g, o, j] cols[n, g, j, l] + b   (j runs over (Cg, K), W = weight viewed so)
             dcols = W^T g (then col2im: dx), dW = sum_n g cols^T, db = sum of g over n and l
             ẏ = conv(ẋ, W) + conv(x, Ẇ) + ḃ  (bilinear in x and W)

Unfold (im2col, torch's F.unfold layout (N, C*K, L)) and Fold (col2im, F.fold) are linear primitives, each the
other's backward, so that a backward written with `unfold` and `fold` below runs on arrays (a first-order backward)
and on Tensors (create_graph), where it records Unfold and Fold nodes that can be differentiated again.

Padding is given per spatial dim as a (before, after) pair, so that the pooling ops (pooling.py) can extend the
last window past the input (ceil_mode) with the same helpers.
"""

from __future__ import annotations

import itertools
import math

from .. import fast
from ..autograd import Function, tangent_sum
from ..devices import array_module
from .namespace import TENSORS


def output_size(size, kernel_size, stride, padding, dilation) -> tuple:
    """The spatial size of the windows' grid: floor((n + before + after - d (k - 1) - 1) / s) + 1 per dim."""
    return tuple(
        (n + lo + hi - d * (k - 1) - 1) // s + 1
        for n, k, s, (lo, hi), d in zip(size, kernel_size, stride, padding, dilation)
    )


def windows(kernel_size, stride, dilation, out):
    """For each kernel position (in C order), the slices of the padded input that it reads for every window."""
    for pos in itertools.product(*(range(k) for k in kernel_size)):
        yield tuple(slice(p * d, p * d + s * (o - 1) + 1, s) for p, s, d, o in zip(pos, stride, dilation, out))


def im2col(x, kernel_size, stride, padding, dilation, fill=0):
    """x (N, C, *S) -> cols (N, C, K, L): window l's K entries, read from x padded with `fill`."""
    out = output_size(x.shape[2:], kernel_size, stride, padding, dilation)
    if any(lo or hi for lo, hi in padding):
        x = _padded(x, padding, fill)
    N, C = x.shape[:2]
    cols = array_module(x).empty((N, C, math.prod(kernel_size), *out), dtype=x.dtype)
    for k, window in enumerate(windows(kernel_size, stride, dilation, out)):
        cols[:, :, k] = x[(slice(None), slice(None), *window)]  # one strided copy per kernel position
    return cols.reshape(N, C, cols.shape[2], math.prod(out))


def col2im(cols, size, kernel_size, stride, padding, dilation):
    """cols (N, C, K, L) -> (N, C, *size): each entry added back where im2col read it (overlaps sum), the padding
    cropped. The adjoint of im2col: <im2col(x), c> = <x, col2im(c)>."""
    N, C = cols.shape[:2]
    out = output_size(size, kernel_size, stride, padding, dilation)
    padded_size = tuple(n + lo + hi for n, (lo, hi) in zip(size, padding))
    x = array_module(cols).zeros((N, C, *padded_size), dtype=cols.dtype)
    cols = cols.reshape(N, C, cols.shape[2], *out)
    for k, window in enumerate(windows(kernel_size, stride, dilation, out)):
        x[(slice(None), slice(None), *window)] += cols[:, :, k]
    if not any(lo or hi for lo, hi in padding):
        return x
    return x[(slice(None), slice(None), *(slice(lo, lo + n) for n, (lo, _) in zip(size, padding)))].copy()


def _padded(x, padding, fill):
    """x (N, C, *S) inside a border of `fill`, (before, after) entries per spatial dim (np.pad, on any device)."""
    shape = x.shape[:2] + tuple(n + lo + hi for n, (lo, hi) in zip(x.shape[2:], padding))
    out = array_module(x).full(shape, fill, dtype=x.dtype)
    out[(slice(None), slice(None), *(slice(lo, lo + n) for n, (lo, _) in zip(x.shape[2:], padding)))] = x
    return out


def unfold(xp, x, **geometry):
    """im2col(x) as (N, C, K, L) in the namespace xp: on Tensors the recorded Unfold primitive."""
    N, C = x.shape[:2]
    if xp is not TENSORS:
        return im2col(x, **geometry)
    K = math.prod(geometry["kernel_size"])  # (sizes counted, not -1: N or C may be 0)
    return Unfold.apply(x, **geometry).reshape(N, C, K, math.prod(_out(x.shape[2:], geometry)))


def fold(xp, cols, size, **geometry):
    """col2im(cols (N, C, K, L)) in the namespace xp: on Tensors the recorded Fold primitive."""
    if xp is not TENSORS:
        return col2im(cols, size, **geometry)
    N, C, K, L = cols.shape
    return Fold.apply(cols.reshape(N, C * K, L), output_size=tuple(size), **geometry)


def _out(size, geometry) -> tuple:
    return output_size(size, geometry["kernel_size"], geometry["stride"], geometry["padding"], geometry["dilation"])


class Unfold(Function):
    """cols = im2col(x) in torch's F.unfold layout (N, C * K, L);  dx = col2im(g);  linear: ẏ = im2col(ẋ)"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, dilation):
        ctx.geometry = dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)
        ctx.size = x.shape[2:]
        cols = im2col(x, kernel_size, stride, padding, dilation)
        N, C, K, L = cols.shape
        return cols.reshape(N, C * K, L)

    @staticmethod
    def backward(ctx, g):
        N, CK, L = g.shape
        K = math.prod(ctx.geometry["kernel_size"])
        return (fold(ctx.xp, g.reshape(N, CK // K, K, L), ctx.size, **ctx.geometry),)


class Fold(Function):
    """x = col2im(cols), cols (N, C * K, L) as torch's F.fold takes them;  dcols = im2col(g);  linear"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, cols, output_size, kernel_size, stride, padding, dilation):
        ctx.geometry = dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)
        N, CK, L = cols.shape
        K = math.prod(kernel_size)
        return col2im(cols.reshape(N, CK // K, K, L), output_size, kernel_size, stride, padding, dilation)

    @staticmethod
    def backward(ctx, g):
        cols = unfold(ctx.xp, g, **ctx.geometry)
        N, C, K, L = cols.shape
        return (cols.reshape(N, C * K, L),)


def conv_products(x, weight, bias, geometry: dict, groups: int):
    """The forward on arrays: (y (N, O, *out) with the bias added, cols as the backward reads them (N, G, Cg K, L)):
    im2col, then one product per sample."""
    N, C = x.shape[:2]
    cols = im2col(x, **geometry)  # (N, C, K, L)
    cols = cols.reshape(N, groups, C // groups * cols.shape[2], cols.shape[-1])  # (N, G, Cg*K, L): grouped
    out = (_weight_rows(weight, groups) @ cols).reshape(N, weight.shape[0], *_out(x.shape[2:], geometry))
    if bias is not None:
        out += bias.reshape(-1, *(1,) * (x.ndim - 2))  # in place on a fresh array
    return out, cols


def conv_grads(xp, g, x, weight, cols, geometry: dict, groups: int, need_x: bool, need_w: bool):
    """(dx, dW) for g (None where not needed): dcols = W^T g per sample, then col2im; dW = sum_n g cols^T. `cols` is
    what conv_products kept, or None: recomputed from x (on Tensors, under create_graph, it is differentiable)."""
    N, C = x.shape[:2]
    g4 = g.reshape(N, groups, weight.shape[0] // groups, math.prod(g.shape[2:]))  # (N, G, Og, L)
    gx = gw = None
    if need_x:
        gcols = xp.swapaxes(_weight_rows(weight, groups), -1, -2) @ g4  # (N, G, Cg*K, L)
        K = math.prod(geometry["kernel_size"])
        gx = fold(xp, gcols.reshape(N, C, K, g4.shape[-1]), x.shape[2:], **geometry)
    if need_w:
        if cols is None or cols.ndim != 4:  # none kept, or kept in a speed device's layout (fast/convolution.py)
            cols = _grouped_cols(xp, x, geometry, groups)
        gw = xp.sum(g4 @ xp.swapaxes(cols, -1, -2), axis=0).reshape(weight.shape)  # (G, Og, Cg*K) summed over n
    return gx, gw


fast.formula("conv_products", conv_products)
fast.formula("conv_grads", conv_grads)


class Conv(Function):
    """y = W * x + b, the cross-correlation of torch's conv1d/conv2d (any number of spatial dims), groups G:
    y[n, g, o, l] = sum_j W[g, o, j] cols[n, g, j, l] + b[g, o], cols = im2col(x) with its channels in G groups;
    dx = col2im(W^T g), dW = sum_n g cols^T, db = sum g;  ẏ = conv(ẋ, W) + conv(x, Ẇ) + ḃ
    (the products are slots, `fast.use.conv_products` and `conv_grads`: fast/convolution.py folds the samples into
    one product)"""

    max_inputs = 3  # x, weight, bias; bias optional

    @staticmethod
    def forward(ctx, x, weight, bias=None, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
        geometry = dict(kernel_size=weight.shape[2:], stride=stride, padding=padding, dilation=dilation)
        ctx.geometry, ctx.groups = geometry, groups
        out, cols = fast.use.conv_products(x, weight, bias, geometry, groups)
        ctx.save_for_backward(x, weight)
        ctx.save(cols=cols)
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_arrays
        need_x, need_w, need_b = ctx.needs_input_grad
        cols = None if ctx.create_graph else ctx.cols  # on Tensors: recomputed, differentiable
        grads = fast.use.conv_grads(ctx.xp, g, x, weight, cols, ctx.geometry, ctx.groups, need_x, need_w)
        return (*grads, ctx.xp.sum(g, axis=(0, *range(2, g.ndim))) if need_b else None)

    @staticmethod
    def jvp(ctx, tx, tw, tb=None):
        x, weight = ctx.saved_arrays
        kw = dict(stride=ctx.geometry["stride"], padding=ctx.geometry["padding"], dilation=ctx.geometry["dilation"])
        return tangent_sum(
            Conv.apply(tx, weight, groups=ctx.groups, **kw) if tx is not None else None,
            Conv.apply(x, tw, groups=ctx.groups, **kw) if tw is not None else None,
            tb.reshape(-1, *(1,) * (x.ndim - 2)) if tb is not None else None,
        )


def _weight_rows(weight, groups: int):
    """weight (O, Cg, *k) as (G, Og, Cg * K): group g's output channels by its (channel, kernel position) pairs."""
    return weight.reshape(groups, weight.shape[0] // groups, math.prod(weight.shape[1:]))


def _grouped_cols(xp, x, geometry, groups: int):
    """im2col(x) as (N, G, Cg * K, L): what the forward kept, recomputed (on Tensors, under create_graph)."""
    cols = unfold(xp, x, **geometry)
    return cols.reshape(x.shape[0], groups, x.shape[1] // groups * cols.shape[2], cols.shape[-1])
