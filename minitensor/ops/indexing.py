"""Indexing primitives: a[index] and the embedding lookup W[ids]. Both scatter g back into zeros;
repeated integer indices accumulate, as in PyTorch: np.add.at on the CPU, and on a device the same additions in
the same order by occurrence passes (add_rows_at), with no atomic adds, so a GPU's sum is deterministic and equal
to the CPU's. Where a row repeats more than RUN_MIN times on a device, its values are summed as a tree instead
(add_runs_in_tree): deterministic too, equal to the CPU's to round-off. All are linear in their tensor input: the
tangent is the lookup (or the scatter) of the input's tangent."""

from __future__ import annotations

import numpy as np

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
        add_rows_at(out, index, values)
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
    each), bitwise the same. Each pass adds the r-th occurrence of every repeated row at once, a fancy-index +=
    over distinct rows, so every row still receives its values in the order they come, as np.add.at adds them.
    On the CPU a speed device (np.add.at goes element by element; see docs/decisions/014-embedding-backward.md);
    on a device the scatter-add itself, deterministic without atomics. One host read: how many entries each pass
    takes.
    Rows that occur more than RUN_MIN times are summed by add_row_runs on the host (a call per row, bitwise the
    same) and by add_runs_in_tree on a device (a tree, the same to round-off)."""
    n = rows.shape[0]
    if n == 0:
        return
    floats = out.dtype in (np.float32, np.float64) and values.dtype == out.dtype  # (no cast between the two)
    if is_host(out) and out.ndim == 2 and out.shape[1] > 1 and floats:
        # rows that repeat often (a small vocabulary's embedding) take a call each, not one per repeat
        heavy = np.flatnonzero(np.bincount(rows) > RUN_MIN)
        if heavy.size:
            add_row_runs(out, heavy, rows, values)
            light = ~np.isin(rows, heavy)
            rows, values, n = rows[light], values[light], int(light.sum())  # left: at most RUN_MIN passes
            if n == 0:
                return
    xp = array_module(rows)
    order = xp.argsort(rows, kind="stable")  # each row's occurrences together, in their order
    sorted_rows = rows[order]
    occurrence = xp.arange(n) - xp.searchsorted(sorted_rows, sorted_rows, side="left")  # 0, 1, ... within a row
    ends = xp.cumsum(xp.bincount(occurrence)).tolist()  # where each pass ends, sorted by pass (the host read)
    if len(ends) > RUN_MIN and not is_host(out) and floats:  # a row repeats often: one tree, not a pass a repeat
        add_runs_in_tree(out, sorted_rows, values[order], occurrence, n_rows=ends[0], most=len(ends))
        return
    by_pass = order[xp.argsort(occurrence, kind="stable")]  # the first occurrences, then the second ones, ...
    for start, end in zip([0, *ends], ends):
        take = by_pass[start:end]  # the r-th occurrences: distinct rows
        out[rows[take]] += values[take]


# A row that occurs more than this often is added by add_row_runs (a call per row) instead of by add_rows_at's passes
# (a call per occurrence): about 3 times faster on the benchmark batches' target ids
# (docs/decisions/014-embedding-backward.md)
RUN_MIN = 8


def add_row_runs(out, which, rows, values) -> None:
    """np.add.at(out, rows, values) restricted to the rows `which` (distinct row numbers) of a 2-D float32 or float64
    `out` of rows longer than 1, on the host, bitwise the same: each row's values, in the order they come, are put
    behind its current value and summed by np.add.reduce over axis 0. NumPy sums pairwise only along the fast
    (contiguous) axis; along axis 0 of rows it adds row after row, left to right, as np.add.at does (a row of one
    number would make axis 0 the fast one: add_rows_at keeps those; np.add.reduceat differs as well).
    Speed device of add_rows_at for rows that repeat often: one call per row, not one per repeat."""
    for r in which.tolist():
        run = np.concatenate((out[r : r + 1], values[rows == r]))  # (1 + occurrences, D): out[r] first
        out[r] = np.add.reduce(run, axis=0)


def add_runs_in_tree(out, sorted_rows, v, occurrence, n_rows: int, most: int) -> None:
    """add_rows_at for rows that repeat often, on a device. `v` holds the values in `sorted_rows`' order (each
    row's values together, in the order they come), `occurrence` each entry's place in its row's run, `n_rows` the
    number of distinct rows and `most` the longest run.

    Level by level, the entry at place k of a run takes in the partial sum at place k + step, for k a multiple of
    2 step: log2(most) levels, each over all rows at once, instead of a pass per repeat (965 passes for the long
    preset's embeddings: docs/decisions/017-gpu-tree-scatter-add.md). Then each run's head, now its row's whole
    sum, is added to out. Every addition's operands are fixed by the sorted order, so the sum is deterministic
    without atomic adds; the order is a tree's, not np.add.at's left to right, so it equals the CPU's to round-off
    (tests/minitensor/devices/test_fake_device_ops.py).
    Speed device of add_rows_at's occurrence passes on a device; no host read of its own."""
    xp = array_module(v)
    n = v.shape[0]
    run_end = xp.searchsorted(sorted_rows, sorted_rows, side="right")  # one past each entry's run
    here = xp.arange(n)
    column = (-1,) + (1,) * (v.ndim - 1)  # a per-entry flag against a row of values
    step = 1
    while step < most:
        partner = here + step
        takes = (occurrence % (2 * step) == 0) & (partner < run_end)
        v = xp.where(takes.reshape(column), v + v[xp.minimum(partner, n - 1)], v)
        step *= 2
    heads = xp.argsort(xp.minimum(occurrence, 1), kind="stable")[:n_rows]  # each run's first entry, in row order
    out[sorted_rows[heads]] += v[heads]


def add_at(out, index, values) -> None:
    """np.add.at(out, index, values) for any advanced index, by add_rows_at: one integer array picks rows of out;
    anything else (several arrays, a mask, slices beside them) picks elements, found as positions in the flat
    out (an arange indexed the same way). Each element's additions come in np.add.at's order (its C order)."""
    xp = array_module(out)
    if not isinstance(index, tuple) and index.dtype.kind in "iu":
        rows = xp.arange(out.shape[0])[index]  # negative rows counted from the end, as the index reads them
        rows_shape = (rows.size,) + out.shape[1:]
        add_rows_at(out, rows.reshape(-1), xp.broadcast_to(values, rows.shape + out.shape[1:]).reshape(rows_shape))
        return
    positions = xp.arange(out.size).reshape(out.shape)[index]
    add_rows_at(out.reshape(-1), positions.reshape(-1), xp.broadcast_to(values, positions.shape).reshape(-1))


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
