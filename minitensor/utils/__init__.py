"""mt.utils, as torch.utils: checkpoint.py (activation checkpointing)."""

from . import checkpoint

__all__ = ["checkpoint"]
