"""Speed device of the optimizers' elementwise updates: the arrays in cache-sized blocks, not whole.

An update of a dozen passes (Adam) runs each pass over a block still in the cache instead of over whole arrays in
memory (docs/decisions/015-optimizer-blocks.md). Every operation is elementwise, so the result is bitwise the one
of a single pass over the whole arrays (`update_blocks`, minitensor/optim/optimizer.py, the formula).
"""

from __future__ import annotations

import numpy as np

from ..devices import is_host
from ..optim.optimizer import update_blocks
from ..pool import update_pool
from . import device

BLOCK_NUMEL = 1 << 15  # 128 KiB of float32: the five arrays of an Adam block fit in L2 together
# On the update pool, blocks 4x larger: each block's dozen ufunc calls hand the GIL back and forth between
# the threads, and at 32K entries those hand-offs cost as much as the passes (docs/decisions/015-optimizer-blocks.md).
THREADED_BLOCK_NUMEL = 1 << 17


def in_blocks(*arrays):
    """(views of `arrays` over one block, scratch) block by block: BLOCK_NUMEL entries a block,
    THREADED_BLOCK_NUMEL while the pool runs the update on several threads. The formula's one block where blocks
    cannot help or cannot be cut: arrays of at most a block, off the host, or one of them not C-contiguous (a view
    that cannot be flattened without a copy)."""
    n, size = arrays[0].size, THREADED_BLOCK_NUMEL if update_pool.threaded else BLOCK_NUMEL
    if n <= size or not is_host(arrays[0]) or not all(a.flags.c_contiguous for a in arrays):
        yield from update_blocks(*arrays)
        return
    flat = [a.reshape(-1) for a in arrays]
    scratch = np.empty(size, dtype=arrays[0].dtype)
    for start in range(0, n, size):
        block = tuple(a[start : start + size] for a in flat)
        yield block, scratch[: block[0].size]


device("update_blocks", in_blocks, evidence="docs/decisions/015-optimizer-blocks.md")
