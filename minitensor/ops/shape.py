"""Shape primitives: reshape, transpose, permute, expand, repeat, cat, stack, tril, triu.

Reshape, transpose, permute and expand return NumPy views of their input (no copy); their
backward moves g back the same way. Every op here is linear in its inputs, so each declares
jvp_kind = "linear": its tangent is the op applied to the inputs' tangents (tangents.py).
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function


class Reshape(Function):
    """out = a viewed with a new shape (a copy only when NumPy cannot view);  da = g reshaped back"""

    returns_view = True
    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return (g.reshape(ctx.shape),)


class Transpose(Function):
    """out = a with dims d0 and d1 swapped (a view);  da = g swapped back"""

    returns_view = True
    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, dim0, dim1):
        ctx.dims = (dim0, dim1)
        return np.swapaxes(a, dim0, dim1)

    @staticmethod
    def backward(ctx, g):
        return (ctx.xp.swapaxes(g, *ctx.dims),)


class Permute(Function):
    """out = a with axes reordered (a view);  da = g with the inverse permutation"""

    returns_view = True
    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, dims):
        ctx.inverse = tuple(int(d) for d in np.argsort(dims))
        return np.transpose(a, dims)

    @staticmethod
    def backward(ctx, g):
        return (ctx.xp.transpose(g, ctx.inverse),)


class Expand(Function):
    """out = a broadcast to shape (a read-only view);  da = g summed back by the graph walk"""

    returns_view = True
    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, shape):
        return np.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, g):
        return (g,)


class Repeat(Function):
    """out = a tiled `sizes` times per dim (torch.Tensor.repeat);  da = g summed over the tiles"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, sizes):
        ctx.shape, ctx.sizes = a.shape, sizes
        return np.tile(a, sizes)

    @staticmethod
    def backward(ctx, g):
        shape = (1,) * (len(ctx.sizes) - len(ctx.shape)) + ctx.shape
        tiles_and_sizes = [n for pair in zip(ctx.sizes, shape) for n in pair]  # (r0, n0, r1, n1, ...)
        g = ctx.xp.sum(g.reshape(tiles_and_sizes), axis=tuple(range(0, len(tiles_and_sizes), 2)))
        return (g.reshape(ctx.shape),)


class Cat(Function):
    """out = inputs joined along dim;  each input's gradient is its slice of g
    (PyTorch's legacy rule: a 1-D empty input beside others is skipped, and its gradient is empty)"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, *arrays, dim=0):
        legacy = [x.shape == (0,) for x in arrays]
        ctx.dim, ctx.skipped = dim, legacy if not all(legacy) else [False] * len(arrays)
        kept = [x for x, skip in zip(arrays, ctx.skipped) if not skip]
        ctx.bounds = [int(b) for b in np.cumsum([x.shape[dim] for x in kept])[:-1]]
        return np.concatenate(kept, axis=dim)

    @staticmethod
    def backward(ctx, g):
        slices = iter(ctx.xp.split(g, ctx.bounds, axis=ctx.dim))
        return tuple(g.reshape(-1)[:0] if skip else next(slices) for skip in ctx.skipped)


class Stack(Function):
    """out = inputs stacked along a new dim;  each input's gradient is g indexed at its position"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, *arrays, dim=0):
        ctx.dim = dim
        return np.stack(arrays, axis=dim)

    @staticmethod
    def backward(ctx, g):
        return tuple(ctx.xp.unstack(g, axis=ctx.dim))


class Tril(Function):
    """out = lower triangle of the last two dims (entries above `diagonal` zeroed);  da = tril(g)"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, diagonal=0):
        ctx.k = diagonal
        return np.tril(a, diagonal)

    @staticmethod
    def backward(ctx, g):
        return (ctx.xp.tril(g, ctx.k),)


class Triu(Function):
    """out = upper triangle of the last two dims;  da = triu(g)"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, diagonal=0):
        ctx.k = diagonal
        return np.triu(a, diagonal)

    @staticmethod
    def backward(ctx, g):
        return (ctx.xp.triu(g, ctx.k),)
