"""The functional API of the spatial layers, as torch.nn.functional spells it: conv1d, conv2d, max_pool1d/2d,
avg_pool1d/2d, unfold, fold (mt.nn.functional re-exports each). Each validates its arguments as torch does (clear
errors naming the op, before any work), turns torch's int-or-tuple arguments into one value per spatial dim, and
calls a primitive of ops/convolution.py or ops/pooling.py. pad_by_mode pads an input as the convolution modules'
padding_mode asks ('reflect', 'replicate', 'circular'), by a gather of recorded primitives.

Unbatched inputs ((C, L) for the 1-d ops, (C, H, W) for the 2-d ones) are taken as torch takes them: a batch of one.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from ..tensor import Tensor

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
__all__ = ["avg_pool1d", "avg_pool2d", "conv1d", "conv2d", "fold", "max_pool1d", "max_pool2d", "unfold"]


def per_dim(op: str, name: str, value, n: int, minimum: int) -> tuple:
    """torch's int-or-tuple argument as n ints, each >= minimum, or a ValueError naming it (a 1-tuple stands for all n,
    as torch reads it)."""
    values = (value,) * n if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    try:
        values = tuple(values)
    except TypeError:
        values = None
    if values is not None and len(values) == 1:
        values = values * n
    if (
        values is None
        or len(values) != n
        or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum for v in values)
    ):
        raise ValueError(f"{op}: {name} must be an int >= {minimum} or a tuple of {n} such ints, got {value!r}")
    return tuple(int(v) for v in values)


def _batched(op: str, input, n: int):
    """(input with a batch dim, whether one was added): (C, *S) is a batch of one, (N, C, *S) as it is."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor input, got {type(input).__name__}")
    if input.ndim not in (n + 1, n + 2):
        raise ValueError(f"{op}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, got {input.shape}")
    if input.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating-point input, got {input.dtype}")
    return (input.unsqueeze(0), True) if input.ndim == n + 1 else (input, False)


def _check_grid(op: str, input, out: tuple) -> None:
    if any(o <= 0 for o in out) or 0 in input.shape[1:]:
        raise ValueError(f"{op}: input of size {tuple(input.shape)} gives an output of spatial size {out}: too small")


def pad_by_mode(op: str, x, pads: tuple, mode: str):
    """x (N, C, *S) padded by `pads` ((before, after) per spatial dim) as torch's padding modes pad: 'reflect'
    (mirrored, the edge not repeated), 'replicate' (the edge repeated), 'circular' (wrapped around). A gather along
    each spatial dim (an integer-array index), so the gradient is its scatter-add: repeated sources add up."""
    for dim, (n, (lo, hi)) in enumerate(zip(x.shape[2:], pads)):
        if not (lo or hi):
            continue
        if mode == "reflect" and max(lo, hi) >= n:
            raise ValueError(
                f"{op}: padding_mode='reflect' needs padding smaller than the input: padding ({lo}, "
                f"{hi}) at dimension {dim + 2} of input {tuple(x.shape)}"
            )
        if mode == "circular" and max(lo, hi) > n:
            raise ValueError(
                f"{op}: padding_mode='circular' with padding ({lo}, {hi}) wraps around more than once "
                f"at dimension {dim + 2} of input {tuple(x.shape)}"
            )
        j = np.arange(-lo, n + hi)  # the padded positions, in the input's coordinates
        if mode == "reflect":
            source = np.abs(j)
            source = np.where(source >= n, 2 * (n - 1) - source, source)
        elif mode == "replicate":
            source = j.clip(0, n - 1)
        else:
            source = j % n
        x = x[(slice(None),) * (dim + 2) + (source,)]
    return x


# ----------------------------------------------------------------------------- convolution


def _conv(op: str, n: int, input, weight, bias, stride, padding, dilation, groups) -> Tensor:
    x, added = _batched(op, input, n)
    if not isinstance(weight, Tensor) or weight.ndim != n + 2:
        raise ValueError(f"{op}: expected a {n + 2}-D weight (out_channels, in_channels / groups, *kernel)")
    stride, dilation = per_dim(op, "stride", stride, n, 1), per_dim(op, "dilation", dilation, n, 1)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    kernel = weight.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * n
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
            totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
            pads = tuple((t // 2, t - t // 2) for t in totals)  # an odd total puts the extra one after, as torch
        else:
            raise ValueError(f"{op}: padding must be 'valid', 'same', an int or a tuple of ints, got {padding!r}")
    else:
        pads = tuple((p, p) for p in per_dim(op, "padding", padding, n, 0))
    C, O = x.shape[1], weight.shape[0]
    if O % groups or C != weight.shape[1] * groups:
        raise ValueError(
            f"{op}: given groups={groups}, weight of size {tuple(weight.shape)}, expected input{tuple(x.shape)} to "
            f"have {weight.shape[1] * groups} channels (and out_channels divisible by groups), got {C} channels"
        )
    if bias is not None and (not isinstance(bias, Tensor) or bias.shape != (O,)):
        raise ValueError(f"{op}: expected bias of shape ({O},), got {getattr(bias, 'shape', bias)!r}")
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        raise TypeError(f"{op}: input {x.dtype}, weight {weight.dtype} and bias must share one dtype")
    _check_grid(op, x, ops.convolution.output_size(x.shape[2:], kernel, stride, pads, dilation))
    tensors = (x, weight) if bias is None else (x, weight, bias)
    out = ops.Conv.apply(*tensors, stride=stride, padding=pads, dilation=dilation, groups=int(groups))
    return out.squeeze(0) if added else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """y[n, o, l] = b[o] + sum_{c, k} W[o, c, k] x[n, c, l * stride + k * dilation - padding] (per group)."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """y[n, o, i, j] = b[o] + sum_{c, p, q} W[o, c, p, q] x[n, c, i s + p d - pad, j s + q d - pad] (per group)."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


# ----------------------------------------------------------------------------- pooling


def _pool_geometry(op: str, n: int, x, kernel_size, stride, padding, dilation, ceil_mode: bool):
    """(kernel, stride, pads as (before, after) pairs, dilation) of a pooling op, with torch's checks; ceil_mode
    extends `after` so that the last window may run past the input (but starts inside it or its padding)."""
    kernel = per_dim(op, "kernel_size", kernel_size, n, 1)
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else stride
    stride = per_dim(op, "stride", stride, n, 1)
    pad, dilation = per_dim(op, "padding", padding, n, 0), per_dim(op, "dilation", dilation, n, 1)
    for p, k, d in zip(pad, kernel, dilation):
        if p > (d * (k - 1) + 1) // 2 if op.startswith("max") else p > k // 2:
            raise ValueError(
                f"{op}: pad should be at most half of effective kernel size, but got pad={p}, "
                f"kernel_size={k} and dilation={d}"
            )
    if not isinstance(ceil_mode, bool):
        raise TypeError(f"{op}: ceil_mode must be a bool, got {ceil_mode!r}")
    pads = []
    for size, k, s, p, d in zip(x.shape[2:], kernel, stride, pad, dilation):
        span = size + 2 * p - d * (k - 1) - 1
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= size + p:  # the last window would start past the input's padding
            out -= 1
        pads.append((p, max(0, (out - 1) * s + d * (k - 1) + 1 - size - p)))
    pads = tuple(pads)
    _check_grid(op, x, ops.convolution.output_size(x.shape[2:], kernel, stride, pads, dilation))
    return kernel, stride, pads, dilation, pad


def _max_pool(op, n, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, added = _batched(op, input, n)
    kernel, stride, pads, dilation, _ = _pool_geometry(op, n, x, kernel_size, stride, padding, dilation, ceil_mode)
    out = ops.MaxPool.apply(x, kernel_size=kernel, stride=stride, padding=pads, dilation=dilation)
    out = out.squeeze(0) if added else out
    if not return_indices:
        return out
    _, flat = ops.pooling.max_pool_indices(x._data, kernel, stride, pads, dilation)
    plane = int(np.prod(x.shape[2:]))
    indices = Tensor(flat % plane)  # torch's indices: a position in each (n, c) plane of the input
    return out, indices.squeeze(0) if added else indices


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """y[n, c, l] = max over k of x[n, c, l * stride + k * dilation - padding] (padding reads -inf)."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """y[n, c, i, j] = max over the (dilated) kernel window at (i, j) (padding reads -inf)."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_pool(op, n, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x, added = _batched(op, input, n)
    kernel, stride, pads, _, pad = _pool_geometry(op, n, x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and (
        isinstance(divisor_override, bool)
        or not isinstance(divisor_override, (int, np.integer))
        or divisor_override == 0
    ):
        raise ValueError(f"{op}: divisor_override must be a non-zero int or None, got {divisor_override!r}")
    divisor = ops.pooling.avg_pool_divisor(
        x.shape[2:], kernel, stride, pads, bool(count_include_pad), pad, divisor_override
    )
    out = ops.AvgPool.apply(x, kernel_size=kernel, stride=stride, padding=pads, divisor=divisor)
    return out.squeeze(0) if added else out


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """y[n, c, l] = the mean of x over window l (zero padding counted if count_include_pad)."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    """y[n, c, i, j] = the sum of x over window (i, j) / its divisor (torch's rules, or divisor_override)."""
    return _avg_pool(
        "avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


# ----------------------------------------------------------------------------- unfold, fold


def unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """im2col: (N, C, H, W) -> (N, C * prod(kernel_size), L), column l the entries of window l."""
    x, added = _batched("unfold", input, 2)
    if added:
        raise ValueError(f"unfold: expected a 4-D input (N, C, H, W), got {input.shape}")
    kernel = per_dim("unfold", "kernel_size", kernel_size, 2, 1)
    geometry = dict(
        kernel_size=kernel,
        stride=per_dim("unfold", "stride", stride, 2, 1),
        padding=tuple((p, p) for p in per_dim("unfold", "padding", padding, 2, 0)),
        dilation=per_dim("unfold", "dilation", dilation, 2, 1),
    )
    _check_grid("unfold", x, ops.convolution.output_size(x.shape[2:], **geometry))
    return ops.Unfold.apply(x, **geometry)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """col2im, unfold's adjoint: (N, C * prod(kernel_size), L) -> (N, C, *output_size), overlapping entries added."""
    if not isinstance(input, Tensor) or input.ndim != 3 or input.dtype.kind != "f":
        raise ValueError(
            f"fold: expected a 3-D floating-point input (N, C * K, L), got {getattr(input, 'shape', input)}"
        )
    size = per_dim("fold", "output_size", output_size, 2, 1)
    kernel = per_dim("fold", "kernel_size", kernel_size, 2, 1)
    geometry = dict(
        kernel_size=kernel,
        stride=per_dim("fold", "stride", stride, 2, 1),
        padding=tuple((p, p) for p in per_dim("fold", "padding", padding, 2, 0)),
        dilation=per_dim("fold", "dilation", dilation, 2, 1),
    )
    K, L = int(np.prod(kernel)), int(np.prod(ops.convolution.output_size(size, **geometry)))
    if input.shape[1] % K or input.shape[2] != L:
        raise ValueError(
            f"fold: expected an input of shape (N, C * {K}, {L}) for output_size={size} and kernel_size={kernel}, "
            f"got {tuple(input.shape)}"
        )
    return ops.Fold.apply(input, output_size=size, **geometry)
