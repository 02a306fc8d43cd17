"""Loads every speed device module, so that each registers against its formula (minitensor/__init__.py imports this
last, once the formulas' modules are loaded)."""

from . import quiet  # noqa: F401 (the quiet error state around every op)
