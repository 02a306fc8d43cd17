"""Speed device: the one thread pool that splits large elementwise work over the cores (minitensor.pool).

NumPy releases the GIL inside its ufunc loops, so independent pieces of elementwise work (one
parameter's optimizer update, one gradient's norm or rescaling) run on several cores at once, as
PyTorch's multi-threaded kernels do. The pool has as many threads as the BLAS is allowed
(`num_threads`: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, else the cores), so a comparison run with the
same thread count on both sides stays fair, and with one thread everything runs in the calling thread.
Each piece is computed alone and the same way whichever thread runs it: results are bitwise those of
a serial loop.

Used by the optimizers' step (minitensor/optim), by clip_grad_norm_ (minitensor/nn/utils.py) and by the
attention weights' softmax and its backward, one block of scores per piece (ops/fused.py, in_score_blocks).
A worker runs its pieces under the caller's NumPy floating-point error settings (np.errstate), as the
calling thread would have: inside an op they are quiet (autograd.ieee_quiet).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def num_threads() -> int:
    """Threads for the pool: the BLAS setting (OMP/OPENBLAS_NUM_THREADS) or the cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        v = os.environ.get(var, "")
        if v.isdigit() and int(v) > 0:
            return int(v)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


PARALLEL_MIN_NUMEL = 1 << 20  # below ~1M entries in a step, thread hand-off costs more than it saves


def _numel(p) -> int:
    return p.data.size


class UpdatePool:
    """Runs work(p) for every parameter p (or any piece of work), on a thread pool when there are several and
    they are large. `threaded` is True while a run is spread over threads (optimizer.in_blocks then takes
    larger blocks)."""

    def __init__(self):
        self.threads = 0
        self.executor = None
        self.threaded = False

    def run(self, update, params: list, size=_numel) -> None:
        """update(p) for every p of params; on the pool when there are several and their sizes (entries, by
        `size`) add up to PARALLEL_MIN_NUMEL."""
        n = num_threads()
        if n <= 1 or len(params) < 2 or sum(size(p) for p in params) < PARALLEL_MIN_NUMEL:
            for p in params:
                update(p)
            return
        if self.executor is None or self.threads != n:
            if self.executor is not None:
                self.executor.shutdown(wait=False)
            self.executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="minitensor-pool")
            self.threads = n
        shares = _balanced_shares(params, n, size)
        errors = np.geterr()  # the caller's floating-point error settings, for the workers too
        self.threaded = True
        try:
            futures = [self.executor.submit(_update_all, update, share, errors) for share in shares[1:]]
            _update_all(update, shares[0], errors)  # the calling thread takes a share too: one hand-off fewer
            for f in futures:
                f.result()
        finally:
            self.threaded = False


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


update_pool = UpdatePool()
