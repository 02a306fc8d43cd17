"""Loads every speed device module, so that each registers against its formula (minitensor/__init__.py imports this
last, once the formulas' modules are loaded)."""

from . import elementwise, indexing, layer_norm, linear, matmul, pool, rowwise, softmax  # noqa: F401 (they register)
