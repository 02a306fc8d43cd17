"""Speed devices of the softmax family (ops/fused.py, ops/losses.py): the same formulas, a block of rows at a time.

A softmax makes five or six passes over its rows (max, subtract, exp, sum, divide). Over a large array each pass
reads the whole array from memory; a block of whole rows small enough to stay in the cache is read once from memory
and then from the cache, and the blocks, which share nothing, run on the thread pool (fast/pool.py). Each block
applies the formula's ufuncs to its own rows in the formula's order, so the numbers are the formula's bit for bit
(tests/minitensor/fast/test_softmax.py). Where a device does not apply (a Tensor under create_graph, a device
array, a small or non-contiguous array, another axis), it runs the formula itself.

- softmax, log_softmax, log_softmax_grad, cross_entropy_grad: blocks of rows (fast.pool.in_row_blocks), from
  ROW_DEVICE_MIN_NUMEL entries (docs/decisions/015-optimizer-blocks.md).
- attention_softmax, attention_softmax_grad: the attention weights' scores (..., T_q, T_k) in blocks along the
  leading axes (score_blocks, docs/decisions/012-row-wise-devices.md).
"""

from __future__ import annotations

import numpy as np

from .. import fast, pool
from ..devices import is_host
from ..ops import fused, losses
from ..ops.rowwise import is_last, sum_
from .pool import in_row_blocks, in_row_blocks_ok

ROW_BLOCKS = "docs/decisions/015-optimizer-blocks.md"
SCORE_BLOCKS = "docs/decisions/012-row-wise-devices.md"


def _as_rows(*arrays):
    """Each array (None passes) as (rows, last dim): a view of a C-contiguous array."""
    return tuple(None if a is None else a.reshape(-1, a.shape[-1]) for a in arrays)


def softmax_in_blocks(z, dim: int):
    """fused.softmax_formula(z, dim), a block of rows at a time, in place in the output."""
    if not in_row_blocks_ok(z, dim):
        return fused.softmax_formula(z, dim)
    out = np.empty_like(z)
    z2, o2 = _as_rows(z, out)

    def block(r):
        e = np.subtract(z2[r], fast.use.row_max(z2[r]), out=o2[r])
        np.exp(e, out=e)
        e /= sum_(e, -1, keepdims=True)

    in_row_blocks(block, *z2.shape)
    return out


def log_softmax_in_blocks(z, dim: int):
    """fused.log_softmax_formula(z, dim), a block of rows at a time, in place in the output."""
    if not in_row_blocks_ok(z, dim):
        return fused.log_softmax_formula(z, dim)
    out = np.empty_like(z)
    z2, o2 = _as_rows(z, out)

    def block(r):
        shifted = np.subtract(z2[r], fast.use.row_max(z2[r]), out=o2[r])
        shifted -= np.log(sum_(np.exp(shifted), -1, keepdims=True))

    in_row_blocks(block, *z2.shape)
    return out


def log_softmax_grad_in_blocks(xp, g, y, dim: int):
    """fused.log_softmax_grad(xp, g, y, dim), a block of rows at a time."""
    if not in_row_blocks_ok(y, dim, g):
        return fused.log_softmax_grad(xp, g, y, dim)
    dx = np.empty_like(y)
    g2, y2, d2 = _as_rows(g, y, dx)

    def block(r):
        e = np.exp(y2[r])
        e *= sum_(g2[r], -1, keepdims=True)
        np.subtract(g2[r], e, out=d2[r])

    in_row_blocks(block, *y2.shape)
    return dx


def cross_entropy_grad_in_blocks(xp, logp, g_rows, tv, e, dtype, w=None, s=None):
    """losses.cross_entropy_grad(xp, logp, g_rows, tv, e, dtype, w, s) on host arrays, a block of rows at a time.
    Without a weight q is never made: p - q is p - e / C, and at each row's target exp(logp) - (1 - e + e / C), the
    two values q takes."""
    if not in_row_blocks_ok(logp, -1):
        return losses.cross_entropy_grad(xp, logp, g_rows, tv, e, dtype, w, s)
    dx = np.empty_like(logp)
    R, C = logp.shape
    dt = logp.dtype.type

    def block(r):
        p = np.exp(logp[r], out=dx[r])
        if w is None:
            if e:
                p -= dt(e / C)
            rows, t = np.arange(p.shape[0]), tv[r]
            p[rows, t] = np.exp(logp[r][rows, t]) - dt(1 - e + e / C)
        else:
            p *= s[r]
            p -= w * losses.index_q(tv[r], C, e, dtype)
        p *= g_rows[r]

    in_row_blocks(block, R, C)
    return dx


fast.device("softmax", softmax_in_blocks, evidence=ROW_BLOCKS)
fast.device("log_softmax", log_softmax_in_blocks, evidence=ROW_BLOCKS)
fast.device("log_softmax_grad", log_softmax_grad_in_blocks, evidence=ROW_BLOCKS)
fast.device("cross_entropy_grad", cross_entropy_grad_in_blocks, evidence=ROW_BLOCKS)

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
    passes through as None), on the thread pool (pool.update_pool) when there are several and they are large."""

    def run(block):
        fn(scores[block], *(None if a is None else a[block] for a in others))

    pool.update_pool.run(run, score_blocks(scores), size=lambda block: scores[block].size)


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
