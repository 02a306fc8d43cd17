"""Speed devices of ops/convolution.py's products (`conv_products`, `conv_grads`): the samples folded into one
matrix product per group.

The formulas lay the windows out per sample, cols (N, G, Cg K, L), and multiply per sample: N products of L columns.
These lay them out channels first, (G, Cg K, N L), so that each product is one GEMM over every sample's windows at
once, the shape the BLAS splits best over its threads; the price is moving the samples' axis: x's inside the
padding's copy, the output's inside the bias add, dx's inside the crop (passes the formula makes anyway), and one copy
of the upstream gradient. The same numbers to round-off (tests/minitensor/fast/test_convolution.py); the gain:
docs/decisions/032-lstm-time-loop.md.
"""

from __future__ import annotations

import math

import numpy as np

from .. import fast
from ..devices import is_host
from ..ops import convolution
from ..ops.convolution import output_size, windows


def _inside(size, padding):
    """The slices of a padded array that hold the unpadded one."""
    return tuple(slice(lo, lo + n) for n, (lo, _) in zip(size, padding))


def conv_products_folded(x, weight, bias, geometry: dict, groups: int):
    """convolution.conv_products on host arrays, with cols (G, Cg K, N L) and one product per group."""
    if not is_host(x):
        return convolution.conv_products(x, weight, bias, geometry, groups)
    N, C, size = x.shape[0], x.shape[1], x.shape[2:]
    kernel, stride, padding, dilation = (geometry[k] for k in ("kernel_size", "stride", "padding", "dilation"))
    out_size = output_size(size, kernel, stride, padding, dilation)
    xt = np.zeros((C, N, *(n + lo + hi for n, (lo, hi) in zip(size, padding))), x.dtype)
    xt[(slice(None), slice(None), *_inside(size, padding))] = x.swapaxes(0, 1)  # padded, channels first
    K = math.prod(kernel)
    cols = np.empty((C, K, N, *out_size), x.dtype)
    for k, window in enumerate(windows(kernel, stride, dilation, out_size)):
        cols[:, k] = xt[(slice(None), slice(None), *window)]
    cols = cols.reshape(groups, C // groups * K, N * math.prod(out_size))
    y = convolution._weight_rows(weight, groups) @ cols  # (G, Og, N L)
    y = y.reshape(weight.shape[0], N, *out_size).swapaxes(0, 1)  # (N, O, *out), a transposed view
    out = np.empty(y.shape, x.dtype)
    if bias is None:
        np.copyto(out, y)
    else:
        np.add(y, bias.reshape(-1, *(1,) * (x.ndim - 2)), out=out)  # the transposition and the bias in one pass
    return out, cols


def conv_grads_folded(xp, g, x, weight, cols, geometry: dict, groups: int, need_x: bool, need_w: bool):
    """convolution.conv_grads on host arrays, given conv_products_folded's cols: one product per group each."""
    if not (is_host(g) and cols is not None and cols.ndim == 3):
        return convolution.conv_grads(xp, g, x, weight, cols, geometry, groups, need_x, need_w)
    N, C, size = x.shape[0], x.shape[1], x.shape[2:]
    kernel, stride, padding, dilation = (geometry[k] for k in ("kernel_size", "stride", "padding", "dilation"))
    out_size = g.shape[2:]
    L = N * math.prod(out_size)
    g2 = np.ascontiguousarray(g.swapaxes(0, 1)).reshape(groups, weight.shape[0] // groups, L)  # (G, Og, N L)
    gx = gw = None
    if need_w:
        gw = (g2 @ cols.swapaxes(-1, -2)).reshape(weight.shape)
    if need_x:
        gcols = convolution._weight_rows(weight, groups).swapaxes(-1, -2) @ g2  # (G, Cg K, N L)
        gcols = gcols.reshape(C, math.prod(kernel), N, *out_size)
        gxt = np.zeros((C, N, *(n + lo + hi for n, (lo, hi) in zip(size, padding))), g.dtype)
        for k, window in enumerate(windows(kernel, stride, dilation, out_size)):
            gxt[(slice(None), slice(None), *window)] += gcols[:, k]
        gx = np.ascontiguousarray(gxt[(slice(None), slice(None), *_inside(size, padding))].swapaxes(0, 1))
    return gx, gw


fast.device("conv_products", conv_products_folded, evidence="docs/decisions/032-lstm-time-loop.md")
fast.device("conv_grads", conv_grads_folded, evidence="docs/decisions/032-lstm-time-loop.md")
