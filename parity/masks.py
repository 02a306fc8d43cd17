"""Attention masks for parity/model.py: transformer_np/masks.py in PyTorch.

Convention (the whole project's): a mask is boolean, True = may attend, and broadcastable to
the attention scores' shape (B, H, T_q, T_k). Masks combine with `&`.

    padding_mask(tokens)  (B, 1, 1, S)        True where the key is a real token (not PAD)
    causal_mask(T)        (1, 1, T, T)        True on and below the diagonal: position i sees j <= i
    target_mask(tgt)      (B, 1, T, T)        causal & padding of the target keys

Deviation from PyTorch, flagged: torch.nn.MultiheadAttention and nn.Transformer take the
opposite convention (bool True = blocked, or an additive float mask); parity/convert.py converts.
"""

from __future__ import annotations

import torch

from transformer_np.data import PAD_ID


def _token_tensor(tokens, who: str) -> torch.Tensor:
    """`tokens` as a (B, L) integer torch.Tensor, checked."""
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"{who}: expected token ids as a torch.Tensor of shape (B, L), got {type(tokens).__name__}")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(f"{who}: expected integer token ids, got dtype {tokens.dtype}")
    if tokens.dim() != 2:
        raise ValueError(f"{who}: expected token ids of shape (B, L), got shape {tuple(tokens.shape)}")
    return tokens


def padding_mask(tokens, pad_id: int = PAD_ID) -> torch.Tensor:
    """(B, 1, 1, S) bool: True where tokens[b, s] != pad_id, so every query ignores padded keys."""
    return (_token_tensor(tokens, "padding_mask") != pad_id)[:, None, None, :]  # (B, 1, 1, S)


def causal_mask(size: int, offset: int = 0, device=None) -> torch.Tensor:
    """(1, 1, T, offset + T) bool: query i (at absolute position offset + i) sees keys j <= offset + i.

    offset > 0 serves incremental decoding: T new queries against the offset cached keys plus
    themselves. offset = 0 is the usual lower-triangular (1, 1, T, T) mask.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"causal_mask: size must be a positive int, got {size!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"causal_mask: offset must be a non-negative int, got {offset!r}")
    tri = torch.ones(size, offset + size, dtype=torch.bool, device=device).tril(diagonal=offset)
    return tri[None, None]  # (1, 1, T, offset + T)


def target_mask(tgt, pad_id: int = PAD_ID) -> torch.Tensor:
    """(B, 1, T, T) bool: causal_mask(T) & padding_mask(tgt), the decoder self-attention mask."""
    tgt = _token_tensor(tgt, "target_mask")
    return padding_mask(tgt, pad_id) & causal_mask(tgt.size(1), device=tgt.device)  # (B, 1, T, T)
