"""Speed devices of the attention weights' softmax and its backward (ops/fused.py): the same formulas, a block of
scores at a time.

A softmax makes five or six passes over its rows (max, subtract, exp, sum, divide). Over a large array each pass
reads the whole array from memory; a block small enough to stay in the cache is read once from memory and then from
the cache. Each block applies the formula's ufuncs to its own rows in the formula's order, so the numbers are the
formula's bit for bit (tests/minitensor/fast/test_softmax.py). Where a device does not apply (a Tensor under
create_graph, a device array), it runs the formula itself. The scores (..., T_q, T_k) go in blocks along the
leading axes (score_blocks, docs/decisions/012-row-wise-devices.md). Softmax, log_softmax and the cross-entropy
gradient have no device: row blocks of them gain nothing measurable on the benchmark configurations
(docs/decisions/030).
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..devices import is_host
from ..ops import fused
from ..ops.rowwise import is_last

SCORE_BLOCKS = "docs/decisions/012-row-wise-devices.md"


# ----------------------------------------------------------------------------- attention's scores

SCORE_BLOCK_NUMEL = 1 << 18  # 1 MiB of float32 scores: a block and its temporaries stay in the L2 cache


def score_blocks(w):
    """Index tuples that split the scores w (..., T_q, T_k) along the leading axes into blocks of about
    SCORE_BLOCK_NUMEL entries (whole rows only); small scores come as one block.

    Each of the five or six passes of a softmax (mask, max, subtract, exp, sum, divide) then reads a block that
    is still in the cache instead of the whole (B, H, T_q, T_k) array from memory: on the long config (32 MiB
    of scores per attention) that is most of attention's elementwise time."""
    if w.size <= SCORE_BLOCK_NUMEL or w.ndim < 2:
        return [...]
    row = w.shape[-1]
    rows_per_block = max(1, SCORE_BLOCK_NUMEL // row)
    blocks = []
    for idx in np.ndindex(*w.shape[:-2]):
        for start in range(0, w.shape[-2], rows_per_block):
            blocks.append(idx + (slice(start, start + rows_per_block),))
    return blocks


def in_score_blocks(fn, scores, *others) -> None:
    """fn(scores[block], *(a[block] for a in others)) for every block of score_blocks(scores) (a None in others
    passes through as None)."""
    for block in score_blocks(scores):
        fn(scores[block], *(None if a is None else a[block] for a in others))


def masked_softmax_in_score_blocks_(w, keep):
    """fused.masked_softmax_(w, keep), one block of scores at a time (on a device array, one pass: the blocks serve
    the CPU's cache)."""
    if not is_host(w):
        return fused.masked_softmax_(w, keep)
    in_score_blocks(fused.masked_softmax_, w, keep)


def softmax_grad_in_score_blocks(xp, g, w, dim: int = -1):
    """fused.softmax_grad(xp, g, w, dim) over the last axis, one block of scores at a time."""
    if not (is_host(g) and is_host(w) and is_last(dim, w.ndim)):
        return fused.softmax_grad(xp, g, w, dim)
    g, w = np.broadcast_arrays(g, w)  # views
    if len(score_blocks(w)) == 1:
        return fused.softmax_grad(xp, g, w, dim)

    def block(ds, g, w):
        ds[...] = fused.softmax_grad(xp, g, w)

    ds = np.empty(w.shape, dtype=w.dtype)
    in_score_blocks(block, ds, g, w)
    return ds


fast.device("attention_softmax", masked_softmax_in_score_blocks_, evidence=SCORE_BLOCKS)
fast.device("attention_softmax_grad", softmax_grad_in_score_blocks, evidence=SCORE_BLOCKS)
