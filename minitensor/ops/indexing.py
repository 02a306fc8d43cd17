"""Indexing primitives: a[index] and the embedding lookup W[ids]. Both scatter g back into zeros;
repeated integer indices accumulate (np.add.at), as in PyTorch. All are linear in their tensor input:
the tangent is the lookup (or the scatter) of the input's tangent."""

from __future__ import annotations

import numpy as np

from ..autograd import Function


def index_put(shape: tuple, index, values: np.ndarray, advanced: bool) -> np.ndarray:
    """zeros(shape) with `values` written at a basic index, or added at integer-array indices (repeats
    accumulate, np.add.at): the gradient of a[index]."""
    out = np.zeros(shape, dtype=values.dtype)
    if advanced and _is_row_index(index, values, shape):
        _add_rows_at(out, index, values)
    elif advanced:
        np.add.at(out, index, values)
    else:
        out[index] = values
    return out


def _is_row_index(index, values, shape) -> bool:
    """index is one 1-D array of non-negative row numbers and values one row per entry (the embedding's case)."""
    return (
        isinstance(index, np.ndarray)
        and index.ndim == 1
        and index.dtype.kind in "iu"
        and len(shape) == 2
        and values.shape == (index.size, shape[1])
        and (index.size == 0 or index.min() >= 0)
    )


def _add_rows_at(out, rows, values) -> None:
    """np.add.at(out, rows, values) for whole rows, bitwise the same and faster (measured: benchmarks/README.md).
    Speed device: np.add.at goes element by element; here each
    pass adds the r-th occurrence of every repeated row at once, a fancy-index += over distinct rows, so
    every row still receives its values in the order they come, as np.add.at adds them."""
    order = np.argsort(rows, kind="stable")
    sorted_rows = rows[order]
    starts = np.flatnonzero(np.r_[True, sorted_rows[1:] != sorted_rows[:-1]])
    occurrence = np.arange(rows.size) - np.repeat(starts, np.diff(np.r_[starts, rows.size]))
    for r in range(int(occurrence.max()) + 1 if rows.size else 0):
        take = order[occurrence == r]  # the r-th occurrences: distinct rows
        out[rows[take]] += values[take]


class GetItem(Function):
    """out = a[index];  da = zeros with g written (basic index) or scatter-added (integer arrays:
    repeated indices accumulate) at index"""

    returns_view = True  # a basic index gives a view (an integer-array index a copy)
    jvp_kind = "linear"  # ẏ = ȧ[index]

    @staticmethod
    def forward(ctx, a, index, advanced):
        ctx.shape, ctx.index, ctx.advanced = a.shape, index, advanced
        return a[index]

    @staticmethod
    def backward(ctx, g):
        return (ctx.xp.index_put(ctx.shape, ctx.index, g, ctx.advanced),)


class IndexPut(Function):
    """out = zeros(shape) with v put at index (added where integer arrays repeat an index): the backward
    of GetItem as a primitive of its own, so that a[index] can be differentiated twice;  dv = g[index]"""

    jvp_kind = "linear"  # ẏ = zeros with v̇ put at index

    @staticmethod
    def forward(ctx, v, shape, index, advanced):
        ctx.index, ctx.advanced = index, advanced
        return index_put(shape, index, v, advanced)

    @staticmethod
    def backward(ctx, g):
        return (g[ctx.index],)


class Embedding(Function):
    """out = W[ids];  dW = scatter-add of g into the rows ids (repeated ids accumulate), padding row 0;  ẏ = Ẇ[ids]"""

    @staticmethod
    def forward(ctx, weight, ids, padding_idx=None):
        ctx.ids, ctx.num, ctx.padding_idx = ids, weight.shape[0], padding_idx
        return weight[ids]

    @staticmethod
    def backward(ctx, g):
        D = g.shape[-1]
        if ctx.padding_idx is not None:  # the padding row gets no gradient
            g = ctx.xp.where((ctx.ids == ctx.padding_idx)[..., None], 0, g)
        # rows counted, not inferred (-1): an embedding of size D = 0 has no size to infer them from
        return ctx.xp.index_put((ctx.num, D), ctx.ids.reshape(-1), g.reshape(ctx.ids.size, D), True), None

    @staticmethod
    def jvp(ctx, tw, t_ids):
        """ẏ = Ẇ[ids], the padding row's tangent included, as torch's forward AD gives (its `auto_linear`).
        Deviation from this op's own backward, as in PyTorch: that one sends the padding row no gradient (a
        frozen row by convention), while the tangent is the true derivative. A plain GetItem, not Embedding,
        so that a gradient of this tangent (reverse over forward) reaches the padding row too."""
        return None if tw is None else GetItem.apply(tw, index=ctx.ids, advanced=True)
