"""Independent pieces of work, run one after another: the plain formula that the thread pool speeds up.

The optimizers' step (a parameter's update a piece), clip_grad_norm_ (a gradient's norm), the attention weights'
score blocks and the row-wise fused ops' row blocks each hand their pieces to `update_pool.run`. The formula is
the loop below; the speed device (minitensor/fast/pool.py) spreads large runs over a pool of threads, each piece
computed alone and the same way whichever thread runs it, so that both give the same bits.
"""

from __future__ import annotations

from . import fast


def for_each(work, pieces, size=None, min_numel=None) -> None:
    """work(p) for every p of pieces, in order, in the calling thread. (size, min_numel: how the thread pool
    weighs pieces and when it takes threads; one after another, neither matters.)"""
    for p in pieces:
        work(p)


fast.formula("for_each", for_each)


class UpdatePool:
    """`update_pool.run(work, pieces)` runs fast.use.for_each."""

    def run(self, work, pieces, size=None, min_numel=None) -> None:
        fast.use.for_each(work, pieces, size, min_numel)


update_pool = UpdatePool()
