"""Loads every speed device module, so that each registers against its formula (minitensor/__init__.py imports this
last, once the formulas' modules are loaded)."""

from . import allocator, dropout, optim, selection  # noqa: F401  (each module registers its devices when imported)
