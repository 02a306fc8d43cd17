"""Speed device of `reuse_freed_memory` (minitensor/allocator.py): freed memory is reused, not given back to the OS.

A training step allocates and frees arrays of the same sizes every step (activations, gradients,
scratch). glibc's malloc serves a block above its mmap threshold (128 KiB at start, raised only as far
as the largest block freed so far) by mmap and unmaps it when it is freed, and trims the heap top back
to the kernel, so the next step faults the same pages in again. `reuse_freed_memory()` turns mmap for
large blocks and trimming off, once per process: every block comes from the heap, and freed blocks stay
there and are handed out again. The peak resident size (benchmarks/memory.py) is a high-water mark and
does not grow with it. The price: memory freed by the program stays with the process (resident up to its
own peak) until it exits. What it saves: docs/decisions/008-reuse-freed-memory.md.

Opt-in, process-wide: `import minitensor` leaves malloc alone. The training command line
(`python -m transformer_np`), `transformer_np.train()` / `fit()` and the benchmark workers call it; a library
user who trains in a loop calls `mt.reuse_freed_memory()` once. MINITENSOR_MALLOC=default in the
environment makes it decline; where the C library is not glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

from . import device

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # mallopt parameters (malloc.h)
_applied = None


def heap_reuse() -> bool:
    """Serve every block from the heap and never trim it (glibc mallopt); True if applied."""
    global _applied
    if _applied is None:
        _applied = False
        if os.environ.get("MINITENSOR_MALLOC", "") != "default":
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                mallopt = libc.mallopt
            except (OSError, AttributeError):  # not glibc: nothing to tune
                return False
            mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
            _applied = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    return _applied


device("reuse_freed_memory", heap_reuse, evidence="docs/decisions/008-reuse-freed-memory.md")
