"""parity.gpt: the PyTorch twin of transformer_np.gpt, file for file (model.py, generate.py), and the GPT's
layer-by-layer parity report (report.py, its two sides in sides.py: `python -m parity report --model gpt2|llama`)."""

from . import generate, model

__all__ = ["generate", "model"]
