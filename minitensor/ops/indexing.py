"""Indexing primitives: a[index] and the embedding lookup W[ids]. Both scatter g back into zeros;
repeated integer indices accumulate, as in PyTorch: np.add.at on the CPU, and on a device the same additions in
the same order by occurrence passes (add_rows_at), with no atomic adds, so a GPU's sum is deterministic and equal
to the CPU's. Whole rows scatter through the slot `fast.use.add_rows_at` (fast/indexing.py: faster ways on both).
All are linear in their tensor input: the tangent is the lookup (or the scatter) of the input's tangent."""

from __future__ import annotations

import numpy as np

from .. import fast
from ..autograd import Function
from ..core import is_tensor_like
from ..devices import array_module, is_host


def index_on(index, like):
    """`index` with each host array in it copied to the device of the array `like` (PyTorch lets a CPU index
    tensor index a CUDA tensor); on the CPU, or for an index of numbers and slices, `index` as it is."""
    if is_host(like):
        return index
    xp = array_module(like)
    items = index if isinstance(index, tuple) else (index,)
    moved = tuple(xp.asarray(i) if isinstance(i, np.ndarray) else i for i in items)
    return moved if isinstance(index, tuple) else moved[0]


def index_put(shape: tuple, index, values: np.ndarray, advanced: bool) -> np.ndarray:
    """zeros(shape) with `values` written at a basic index, or added at integer-array indices (repeats
    accumulate, as np.add.at adds them): the gradient of a[index]."""
    index = index_on(index, values)
    out = array_module(values).zeros(shape, dtype=values.dtype)
    if not advanced:
        out[index] = values
    elif not is_host(out):  # no np.add.at on a device (CuPy's would add atomically, in no fixed order)
        add_at(out, index, values)
    elif _is_row_index(index, values, shape):
        fast.use.add_rows_at(out, index, values)
    else:
        np.add.at(out, index, values)
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


def add_rows_at(out, rows, values) -> None:
    """np.add.at(out, rows, values) for whole rows (rows a 1-D array of non-negative row numbers, values one row
    each): np.add.at itself on the host; on a device the same additions in the same order, by occurrence passes.
    Each pass adds the r-th occurrence of every repeated row at once, a fancy-index += over distinct rows, so every
    row receives its values in the order they come, as np.add.at adds them: deterministic without atomic adds."""
    if is_host(out):
        np.add.at(out, rows, values)
        return
    add_in_occurrence_passes(out, rows, values)


fast.formula("add_rows_at", add_rows_at)


def occurrences(rows):
    """(order, sorted_rows, occurrence, ends) of a 1-D array of row numbers: the stable order that puts each row's
    occurrences together, the rows in that order, each entry's place among its row's occurrences (0, 1, ...), and
    where each pass (all r-th occurrences) ends once sorted by pass (one host read: how many entries each takes)."""
    xp = array_module(rows)
    order = xp.argsort(rows, kind="stable")  # each row's occurrences together, in their order
    sorted_rows = rows[order]
    occurrence = xp.arange(rows.shape[0]) - xp.searchsorted(sorted_rows, sorted_rows, side="left")
    ends = xp.cumsum(xp.bincount(occurrence)).tolist()
    return order, sorted_rows, occurrence, ends


def add_in_occurrence_passes(out, rows, values, found=None) -> None:
    """add_rows_at by passes, one per occurrence: the first occurrences of every row, then the second ones, ...
    (found: occurrences(rows), when the caller has it)."""
    if rows.shape[0] == 0:
        return
    xp = array_module(rows)
    order, _, occurrence, ends = occurrences(rows) if found is None else found
    by_pass = order[xp.argsort(occurrence, kind="stable")]  # the first occurrences, then the second ones, ...
    for start, end in zip([0, *ends], ends):
        take = by_pass[start:end]  # the r-th occurrences: distinct rows
        out[rows[take]] += values[take]


def add_at(out, index, values) -> None:
    """np.add.at(out, index, values) for any advanced index, by fast.use.add_rows_at: one integer array picks rows
    of out; anything else (several arrays, a mask, slices beside them) picks elements, found as positions in the
    flat out (an arange indexed the same way). Each element's additions come in np.add.at's order (its C order)."""
    xp = array_module(out)
    if not isinstance(index, tuple) and index.dtype.kind in "iu":
        rows = xp.arange(out.shape[0])[index]  # negative rows counted from the end, as the index reads them
        rows_shape = (rows.size,) + out.shape[1:]
        fast.use.add_rows_at(
            out, rows.reshape(-1), xp.broadcast_to(values, rows.shape + out.shape[1:]).reshape(rows_shape)
        )
        return
    positions = xp.arange(out.size).reshape(out.shape)[index]
    fast.use.add_rows_at(out.reshape(-1), positions.reshape(-1), xp.broadcast_to(values, positions.shape).reshape(-1))


class GetItem(Function):
    """out = a[index];  da = zeros with g written (basic index) or scatter-added (integer arrays:
    repeated indices accumulate) at index"""

    returns_view = True  # a basic index gives a view (an integer-array index a copy)
    jvp_kind = "linear"  # ẏ = ȧ[index]

    @staticmethod
    def forward(ctx, a, index, advanced):
        index = index_on(index, a)
        ctx.save(index=index)  # an integer-array index is kept (torch saves index tensors too)
        ctx.shape, ctx.advanced = a.shape, advanced
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
        index = index_on(index, v)
        ctx.save(index=index)
        ctx.advanced = advanced
        return index_put(shape, index, v, advanced)

    @staticmethod
    def backward(ctx, g):
        return (g[ctx.index],)


class Embedding(Function):
    """out = W[ids];  dW = scatter-add of g into the rows ids (repeated ids accumulate), padding row 0;  ẏ = Ẇ[ids]

    scale_grad_by_freq divides each row's gradient by the count of its id in ids (torch's convention, not a
    derivative: the tangent stays Ẇ[ids], as torch's)."""

    @staticmethod
    def forward(ctx, weight, ids, padding_idx=None, scale_grad_by_freq=False):
        ids = index_on(ids, weight)
        ctx.num, ctx.padding_idx = weight.shape[0], padding_idx
        if scale_grad_by_freq:  # each position's id count
            ctx.save(ids=ids, freq=array_module(ids).bincount(ids.reshape(-1), minlength=ctx.num)[ids])
        else:
            ctx.save(ids=ids)
            ctx.freq = None
        return weight[ids]

    @staticmethod
    def backward(ctx, g):
        D = g.shape[-1]
        if ctx.padding_idx is not None:  # the padding row gets no gradient
            g = ctx.xp.where((ctx.ids == ctx.padding_idx)[..., None], 0, g)
        if ctx.freq is not None:  # each occurrence's share divided by its id's count
            if is_tensor_like(g):
                # Differentiated again, this division would be seen twice (here and in the outer lookup's backward):
                # torch's double backward leaves it out here; rather than a second rule, no second order.
                raise RuntimeError(
                    "embedding: scale_grad_by_freq=True is differentiable once only; create_graph=True needs "
                    "scale_grad_by_freq=False"
                )
            g = g / ctx.freq[..., None].astype(g.dtype)
        # rows counted, not inferred (-1): an embedding of size D = 0 has no size to infer them from
        return ctx.xp.index_put((ctx.num, D), ctx.ids.reshape(-1), g.reshape(ctx.ids.size, D), True), None

    @staticmethod
    def jvp(ctx, tw, t_ids):
        """ẏ = Ẇ[ids], the padding row's tangent included, as torch's forward AD gives (its `auto_linear`).
        Deviation from this op's own backward, as in PyTorch: that one sends the padding row no gradient (a
        frozen row by convention), while the tangent is the true derivative. A plain GetItem, not Embedding,
        so that a gradient of this tangent (reverse over forward) reaches the padding row too."""
        return None if tw is None else GetItem.apply(tw, index=ctx.ids, advanced=True)
