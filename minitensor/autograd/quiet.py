"""ieee_quiet(): NumPy's floating-point warnings off for a block, as every op runs (the engine's `points.quiet`)."""

from __future__ import annotations

from ..core import points


def ieee_quiet():
    """NumPy's floating-point warnings off: ops return IEEE values (inf, NaN) silently, as PyTorch does."""
    return points.quiet()
