"""Speed device of pool.for_each: the one thread pool that splits large elementwise work over the cores.

NumPy releases the GIL inside its ufunc loops, so independent pieces of elementwise work (one
parameter's optimizer update, one gradient's norm or rescaling) run on several cores at once, as
PyTorch's multi-threaded kernels do. The pool has as many threads as the BLAS is allowed
(`num_threads`: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, else the cores), so a comparison run with the
same thread count on both sides stays fair, and with one thread everything runs in the calling thread.
Each piece is computed alone and the same way whichever thread runs it: results are bitwise those of
a serial loop.

Registered as the device of `for_each` (minitensor/pool.py, a loop over the pieces), which the optimizers' step,
clip_grad_norm_ and the score blocks of attention (fast/softmax.py) call through `pool.update_pool.run`; and
`in_row_blocks` below, which the row-blocked devices (fast/softmax.py, fast/elementwise.py) use: one block of whole
rows per piece, small enough that its passes stay in the cache.

Why NumPy's loops on this pool and not numexpr or numba: their wheels on the package mirror (no VML, no SVML) call
a scalar exp and tanh per entry, slower than NumPy's SIMD loops (see docs/decisions/002-no-numexpr-no-numba.md).
A worker runs its pieces under the caller's NumPy floating-point error settings (np.errstate), as the
calling thread would have: inside an op they are quiet (autograd.ieee_quiet).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import fast, pool
from ..devices import is_host
from ..ops.rowwise import is_last


def num_threads() -> int:
    """Threads for the pool: the BLAS setting (OMP/OPENBLAS_NUM_THREADS) or the cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        v = os.environ.get(var, "")
        if v.isdigit() and int(v) > 0:
            return int(v)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


PARALLEL_MIN_NUMEL = 1 << 20  # below ~1M entries in a step, thread hand-off costs more than it saves


def _numel(p) -> int:
    return p._data.size


class ThreadPool:
    """Runs work(p) for every parameter p (or any piece of work), on a thread pool when there are several and
    they are large."""

    def __init__(self):
        self.threads = 0
        self.executor = None

    def run(self, update, params: list, size=None, min_numel: int | None = None) -> None:
        """update(p) for every p of params; on the pool when there are several and their sizes (entries, by
        `size`, default p._data.size) add up to min_numel (PARALLEL_MIN_NUMEL)."""
        size, min_numel = size or _numel, PARALLEL_MIN_NUMEL if min_numel is None else min_numel
        n = num_threads()
        if n <= 1 or len(params) < 2 or sum(size(p) for p in params) < min_numel:
            pool.for_each(update, params)
            return
        if self.executor is None or self.threads != n:
            if self.executor is not None:
                self.executor.shutdown(wait=False)
            self.executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="minitensor-pool")
            self.threads = n
        shares = _balanced_shares(params, n, size)
        errors = np.geterr()  # the caller's floating-point error settings, for the workers too
        futures = [self.executor.submit(_update_all, update, share, errors) for share in shares[1:]]
        _update_all(update, shares[0], errors)  # the calling thread takes a share too: one hand-off fewer
        for f in futures:
            f.result()


def _update_all(update, params: list, errors: dict) -> None:
    with np.errstate(**errors):
        for p in params:
            update(p)


def _balanced_shares(params: list, n: int, size=_numel) -> list:
    """params split into n lists of about equal total size (largest first, each to the lightest list):
    one task per thread rather than one per parameter, whose hand-offs would cost more than the small
    parameters' updates (a copy-reverse step has 130)."""
    shares, loads = [[] for _ in range(n)], [0] * n
    for p in sorted(params, key=lambda p: -size(p)):
        i = loads.index(min(loads))
        shares[i].append(p)
        loads[i] += size(p)
    return [share for share in shares if share]


thread_pool = ThreadPool()
fast.device("for_each", thread_pool.run, evidence="docs/decisions/005-second-core-of-a-2-core-vm.md")


def _forget_threads_after_fork() -> None:
    """In a forked child the pool's threads do not exist (fork copies only the calling thread): a run there would
    wait for ever on work that no thread takes. The child starts a pool of its own when it needs one."""
    thread_pool.executor, thread_pool.threads = None, 0


os.register_at_fork(after_in_child=_forget_threads_after_fork)

ROW_BLOCK_NUMEL = 1 << 17  # 512 KiB of float32: a block and a temporary of its passes stay in L2 (1 MiB a core)
ROWS_PARALLEL_MIN_NUMEL = PARALLEL_MIN_NUMEL  # a layer norm of 2^18 entries lost 3x on two threads (hand-offs)


def row_blocks(rows: int, row_numel: int, block_numel: int | None = None) -> list:
    """Slices of whole rows of a (rows, row_numel) array, each about block_numel (ROW_BLOCK_NUMEL) entries, at
    least one row."""
    per = max(1, (block_numel or ROW_BLOCK_NUMEL) // max(row_numel, 1))
    return [slice(start, min(start + per, rows)) for start in range(0, rows, per)]


# Below 1M entries the plain formula: blocks bought nothing for a softmax or layer norm of 2^18 entries (4 MiB
# with its temporaries: the L2 and L3 already hold it; docs/decisions/015-optimizer-blocks.md)
ROW_DEVICE_MIN_NUMEL = 1 << 20


def in_row_blocks_ok(a, dim=-1, *others) -> bool:
    """Whether a (and each of `others`, of a's shape) may take a row-blocked speed device along `dim`: host
    arrays (not Tensors; on a device, the plain formula: the blocks serve the CPU's cache), float32 or float64,
    C-contiguous (so that a block of rows is a plain slice), at least ROW_DEVICE_MIN_NUMEL entries, `dim` the
    last axis."""
    return (
        is_host(a)
        and a.dtype in (np.float32, np.float64)
        and a.size >= ROW_DEVICE_MIN_NUMEL
        and is_last(dim, a.ndim)
        and all(is_host(o) and o.shape == a.shape and o.dtype == a.dtype for o in others)
        and all(t.flags.c_contiguous for t in (a, *others))
    )


def in_row_blocks(fn, rows: int, row_numel: int, block_numel: int | None = None) -> None:
    """fn(block) for every slice of row_blocks(rows, row_numel, block_numel), on the pool when the whole holds at
    least ROWS_PARALLEL_MIN_NUMEL entries. Each block's passes read and write numbers still in the cache instead
    of making each pass over the whole array in memory; fn must make a block's numbers from its own rows only,
    so that they are the same whichever thread runs it (tests/minitensor/fast/test_pool.py)."""
    blocks = row_blocks(rows, row_numel, block_numel)

    def size(block):
        return (block.stop - block.start) * row_numel

    pool.update_pool.run(fn, blocks, size=size, min_numel=ROWS_PARALLEL_MIN_NUMEL)
