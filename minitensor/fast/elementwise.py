"""Speed device of ops/elementwise.py's `elementwise`: an elementwise formula evaluated a block of entries at a time.

GELU's passes (its CDF or tanh halves, the product, the backward's polynomial) each read and write whole arrays.
Evaluated one block of ROW_BLOCK_NUMEL entries at a time into whole-size outputs, each pass reads numbers still in
the cache, and at two threads or more the blocks share the thread pool. The same ufuncs on the same entries: bit
for bit the formula's numbers (tests/minitensor/fast/test_elementwise.py).

It engages for large float32 host arrays (fast.pool.in_row_blocks_ok) at more than one thread: at one thread the
blocks buy nothing (docs/decisions/015-optimizer-blocks.md: the plain formula's 4 MiB temporaries already sit in
the L3 cache, and the blocks add a copy into the outputs); their use is to share the passes among the pool's
threads. (float64's erf is math.erf element by element, holding the GIL: threads would not help there.)
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..ops import elementwise as ops
from .pool import in_row_blocks, in_row_blocks_ok, num_threads


def elementwise_in_blocks(xp, formula, *arrays, outputs: int = 1):
    """ops.elementwise(xp, formula, *arrays, outputs=outputs), a block of entries at a time."""
    a = arrays[0]
    if not (a.dtype == np.float32 and num_threads() > 1 and in_row_blocks_ok(a, -1, *arrays[1:])):
        return ops.elementwise(xp, formula, *arrays, outputs=outputs)
    flat = [t.reshape(-1) for t in arrays]
    outs = [np.empty_like(flat[0]) for _ in range(outputs)]

    def block(r):
        results = formula(xp, *(t[r] for t in flat))
        for out, result in zip(outs, results if outputs > 1 else (results,)):
            out[r] = result

    in_row_blocks(block, flat[0].size, 1)
    outs = [out.reshape(a.shape) for out in outs]
    return tuple(outs) if outputs > 1 else outs[0]


fast.device("elementwise", elementwise_in_blocks, evidence="docs/decisions/015-optimizer-blocks.md")
