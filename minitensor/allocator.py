"""Reuse of the memory a training step frees: an opt-in switch, whose speed device is fast/allocator.py.

A training step allocates and frees arrays of the same sizes every step. The formula leaves the C library's
malloc as it is; the device (glibc's mmap and heap trimming off) hands a step's freed blocks to the next
(docs/decisions/008-reuse-freed-memory.md). Opt-in, process-wide: `import minitensor` leaves malloc alone; the
training command line, `transformer_np.train()` / `fit()` and the benchmark workers call it.
"""

from __future__ import annotations

from . import fast


def malloc_as_it_is() -> bool:
    """The formula: nothing to change (memory goes back to the OS as the C library decides); False, not applied."""
    return False


fast.formula("reuse_freed_memory", malloc_as_it_is)


def reuse_freed_memory() -> bool:
    """Let freed memory be reused by the next step (once per process); True if the device applied it."""
    return fast.use.reuse_freed_memory()
