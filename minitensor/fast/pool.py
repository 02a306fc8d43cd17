"""Speed device of pool.for_each: the one thread pool that splits large elementwise work over the cores.

NumPy releases the GIL inside its ufunc loops, so independent pieces of elementwise work (one
parameter's optimizer update, one gradient's norm or rescaling) run on several cores at once, as
PyTorch's multi-threaded kernels do. The pool has as many threads as the BLAS is allowed
(`num_threads`: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, else the cores), so a comparison run with the
same thread count on both sides stays fair, and with one thread everything runs in the calling thread.
Each piece is computed alone and the same way whichever thread runs it: results are bitwise those of
a serial loop.

Registered as the device of `for_each` (minitensor/pool.py, a loop over the pieces), which the optimizers' step,
clip_grad_norm_ and the score blocks of attention (fast/softmax.py) call through `pool.update_pool.run`.

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
