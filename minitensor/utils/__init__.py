"""mt.utils, as torch.utils: checkpoint.py (activation checkpointing), data/ (datasets, samplers, DataLoader)."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
