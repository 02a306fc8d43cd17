"""Speed device: memory freed by one training step is reused by the next instead of going back to the OS.

A training step allocates and frees arrays of the same sizes every step (activations, gradients,
scratch). glibc's malloc serves a block above its mmap threshold (128 KiB at start, raised only as far
as the largest block freed so far) by mmap and unmaps it when it is freed, and trims the heap top back
to the kernel, so the next step faults the same pages in again: about 5,000 page faults in a
copy-reverse step, 10-15% of its time. `reuse_freed_memory()` sets the threshold to glibc's maximum
(32 MiB) and turns trimming off, once per process: freed blocks stay in the heap and are handed out
again. The peak resident size (what benchmarks/memory.py reports) is a high-water mark and does not
grow with it; what a finished step leaves resident is the step's own peak.

Process-wide, from the first `import minitensor` on (autograd.py calls it). MINITENSOR_MALLOC=default
in the environment leaves malloc alone; where the C library is not glibc it does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3       # mallopt parameters (malloc.h)
MMAP_THRESHOLD_MAX = 32 << 20                         # glibc's ceiling on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
_applied = None


def reuse_freed_memory() -> bool:
    """Keep freed blocks up to 32 MiB in the heap and never trim it (glibc mallopt); True if applied."""
    global _applied
    if _applied is None:
        _applied = False
        if os.environ.get("MINITENSOR_MALLOC", "") != "default":
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                mallopt = libc.mallopt
            except (OSError, AttributeError):                   # not glibc: nothing to tune
                return False
            mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
            _applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(
                mallopt(_M_TRIM_THRESHOLD, 2 ** 31 - 1))
    return _applied
