"""parity.gpt: the PyTorch twin of transformer_np.gpt, file for file (model.py, generate.py)."""

from . import generate, model

__all__ = ["generate", "model"]
