"""Speed devices of ops/indexing.py's `add_rows_at`, the scatter-add of whole rows (the embedding's backward).

On the host the formula is np.add.at, which goes element by element. The device adds by occurrence passes instead
(indexing.add_in_occurrence_passes: each pass a fancy-index += over distinct rows), and a row that occurs more than
RUN_MIN times in one call of its own (add_row_runs), bitwise np.add.at's sums either way
(docs/decisions/014-embedding-backward.md).

On a device the formula is one occurrence pass per repeat; where a row repeats more than RUN_MIN times, the device
sums each row's run as a tree instead (add_runs_in_tree): log2 of the longest run in levels, not a pass per repeat
(docs/decisions/017-gpu-tree-scatter-add.md). Deterministic, and equal to np.add.at's sums to round-off.
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..devices import array_module, is_host
from ..ops import indexing

# A row that occurs more than this often is added by add_row_runs (a call per row) instead of by the occurrence
# passes (a call per occurrence): about 3 times faster on the benchmark batches' target ids
# (docs/decisions/014-embedding-backward.md)
RUN_MIN = 8


def add_rows_at_fast(out, rows, values) -> None:
    """indexing.add_rows_at(out, rows, values): on the host by occurrence passes and row runs (bitwise); on a device
    by a tree for the rows that repeat more than RUN_MIN times (to round-off)."""
    n = rows.shape[0]
    if n == 0:
        return
    floats = out.dtype in (np.float32, np.float64) and values.dtype == out.dtype  # (no cast between the two)
    if is_host(out):
        if out.ndim == 2 and out.shape[1] > 1 and floats:
            # rows that repeat often (a small vocabulary's embedding) take a call each, not one per repeat
            heavy = np.flatnonzero(np.bincount(rows) > RUN_MIN)
            if heavy.size:
                add_row_runs(out, heavy, rows, values)
                light = ~np.isin(rows, heavy)
                rows, values = rows[light], values[light]  # left: at most RUN_MIN passes
        indexing.add_in_occurrence_passes(out, rows, values)
        return
    found = indexing.occurrences(rows)
    order, sorted_rows, occurrence, ends = found
    if len(ends) > RUN_MIN and floats:  # a row repeats often: one tree, not a pass a repeat
        add_runs_in_tree(out, sorted_rows, values[order], occurrence, n_rows=ends[0], most=len(ends))
        return
    indexing.add_in_occurrence_passes(out, rows, values, found)


def add_row_runs(out, which, rows, values) -> None:
    """np.add.at(out, rows, values) restricted to the rows `which` (distinct row numbers) of a 2-D float32 or float64
    `out` of rows longer than 1, on the host, bitwise the same: each row's values, in the order they come, are put
    behind its current value and summed by np.add.reduce over axis 0. NumPy sums pairwise only along the fast
    (contiguous) axis; along axis 0 of rows it adds row after row, left to right, as np.add.at does (a row of one
    number would make axis 0 the fast one: the occurrence passes keep those; np.add.reduceat differs as well)."""
    for r in which.tolist():
        run = np.concatenate((out[r : r + 1], values[rows == r]))  # (1 + occurrences, D): out[r] first
        out[r] = np.add.reduce(run, axis=0)


def add_runs_in_tree(out, sorted_rows, v, occurrence, n_rows: int, most: int) -> None:
    """The scatter-add of rows that repeat often, on a device. `v` holds the values in `sorted_rows`' order (each
    row's values together, in the order they come), `occurrence` each entry's place in its row's run, `n_rows` the
    number of distinct rows and `most` the longest run.

    Level by level, the entry at place k of a run takes in the partial sum at place k + step, for k a multiple of
    2 step: log2(most) levels, each over all rows at once, instead of a pass per repeat (965 passes for the long
    preset's embeddings). Then each run's head, now its row's whole sum, is added to out. Every addition's operands
    are fixed by the sorted order, so the sum is deterministic without atomic adds; the order is a tree's, not
    np.add.at's left to right, so it equals the CPU's to round-off (tests/minitensor/fast/test_indexing.py). No
    host read of its own."""
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


fast.device("add_rows_at", add_rows_at_fast, evidence="docs/decisions/014-embedding-backward.md")
