"""transformer_np/gpt/generate.py's greedy decoding with the twin's key/value cache, in PyTorch: the same window
(the last block_size tokens fed afresh when the cache is full), argmax each step."""

from __future__ import annotations

import numpy as np
import torch


@torch.no_grad()
def generate(model, idx, max_new_tokens: int, greedy: bool = True) -> np.ndarray:
    """idx (B, T) -> (B, T + max_new_tokens) int64, greedy (the twin samples nothing: only its greedy tokens are
    compared with the engine's)."""
    if not greedy:
        raise ValueError("parity.gpt.generate: only greedy decoding is mirrored")
    bs = model.config.block_size
    was_training = model.training
    model.eval()
    idx = torch.as_tensor(np.asarray(idx, dtype=np.int64), device=next(model.parameters()).device)
    cache = None
    try:
        for _ in range(max_new_tokens):
            if cache is None or cache.length >= bs:
                cache = model.init_cache(bs)
                logits = model(idx[:, -bs:], cache=cache)
            else:
                logits = model(idx[:, -1:], cache=cache)
            idx = torch.cat([idx, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    finally:
        model.train(was_training)
    return idx.cpu().numpy()
