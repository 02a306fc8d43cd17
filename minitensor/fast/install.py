"""Loads every speed device module, so that each registers against its formula (minitensor/__init__.py imports this
last, once the formulas' modules are loaded)."""

from . import (  # noqa: F401 (they register)
    allocator,
    convolution,
    dropout,
    indexing,
    layer_norm,
    linear,
    matmul,
    quiet,
    recurrent,
    rowwise,
    selection,
    softmax,
)
