"""transformer_np.gpt: decoder-only Transformers (GPT-2 and Llama shapes) on minitensor.

config.py     GPTConfig, the shape of a model (shared with the PyTorch twin, parity.gpt)
model.py      GPT and its parts (attention with RoPE and grouped-query heads, MLP, blocks), GPTCache
generate.py   sampling with a key/value cache: greedy, temperature, top-k, top-p
decoding.py   the speed device of a cached generation step (one new position through the model, on arrays)
"""

from . import decoding, generate  # noqa: F401 (decoding registers its speed device)
from .config import GPTConfig, gpt2_shape, llama_shape
from .model import GPT, GPTCache

__all__ = ["GPT", "GPTCache", "GPTConfig", "generate", "gpt2_shape", "llama_shape"]
