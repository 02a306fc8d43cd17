"""Attention masks for parity/model.py, mirroring transformer_np/masks.py in PyTorch.

Boolean, True = may attend, broadcastable to (B, H, T_q, T_k). PyTorch's own attention uses the
opposite convention (True = blocked, or additive float masks): parity/convert.py converts.
"""
from __future__ import annotations

import torch

from transformer_np.data import PAD_ID


def padding_mask(tokens: torch.Tensor, pad_id: int = PAD_ID) -> torch.Tensor:
    """(B, 1, 1, S): True where the key is a real token, so every query ignores padded keys."""
    if tokens.dim() != 2:
        raise ValueError(f"padding_mask: expected token ids of shape (B, S), got shape {tuple(tokens.shape)}")
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(size: int, device=None) -> torch.Tensor:
    """(1, 1, T, T): True on and below the diagonal, so position i sees positions <= i."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]


def target_mask(tgt: torch.Tensor, pad_id: int = PAD_ID) -> torch.Tensor:
    """(B, 1, T, T): padding mask of the target keys & causal mask."""
    return padding_mask(tgt, pad_id) & causal_mask(tgt.size(1), device=tgt.device)
