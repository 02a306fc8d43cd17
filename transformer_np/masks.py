"""Attention masks for transformer_np/model.py.

Convention (the whole project's): a mask is boolean, True = may attend, and broadcastable to
the attention scores' shape (B, H, T_q, T_k). Masks combine with `&`.

    padding_mask(tokens)  (B, 1, 1, S)        True where the key is a real token (not PAD)
    causal_mask(T)        (1, 1, T, T)        True on and below the diagonal: position i sees j <= i
    target_mask(tgt)      (B, 1, T, T)        causal & padding of the target keys

Deviation from PyTorch, flagged: torch.nn.MultiheadAttention and nn.Transformer take the
opposite convention (bool True = blocked, or an additive float mask); parity/ converts.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt
from minitensor.devices import array_module
from transformer_np.data import PAD_ID
from transformer_np.device import array_of


def _token_array(tokens, who: str) -> np.ndarray:
    """The raw (B, L) integer array behind `tokens` (an mt.Tensor or a NumPy array), checked. A Tensor's array may
    live on a device: the masks below are then built there, by the array's own library."""
    if isinstance(tokens, mt.Tensor):
        arr = array_of(tokens)
    elif isinstance(tokens, np.ndarray):
        arr = tokens
    else:
        raise TypeError(
            f"{who}: expected token ids as an mt.Tensor or NumPy array of shape (B, L), got {type(tokens).__name__}"
        )
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{who}: expected integer token ids, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{who}: expected token ids of shape (B, L), got shape {tuple(arr.shape)}")
    return arr


def padding_mask(tokens, pad_id: int = PAD_ID) -> mt.Tensor:
    """(B, 1, 1, S) bool: True where tokens[b, s] != pad_id, so every query ignores padded keys."""
    arr = _token_array(tokens, "padding_mask")
    return mt.Tensor.wrap((arr != pad_id)[:, None, None, :])  # (B, 1, 1, S), on tokens' device


def causal_mask(size: int, offset: int = 0) -> mt.Tensor:
    """(1, 1, T, offset + T) bool: query i (at absolute position offset + i) sees keys j <= offset + i.

    offset > 0 serves incremental decoding: T new queries against the offset cached keys plus
    themselves. offset = 0 is the usual lower-triangular (1, 1, T, T) mask.
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"causal_mask: size must be a positive int, got {size!r}")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise ValueError(f"causal_mask: offset must be a non-negative int, got {offset!r}")
    tri = np.tri(int(size), int(offset) + int(size), k=int(offset), dtype=bool)  # (T, offset + T)
    return mt.from_numpy(tri[None, None])  # (1, 1, T, offset + T)


def target_mask(tgt, pad_id: int = PAD_ID) -> mt.Tensor:
    """(B, 1, T, T) bool: causal_mask(T) & padding_mask(tgt), the decoder self-attention mask."""
    arr = _token_array(tgt, "target_mask")
    T = arr.shape[1]
    # Built in NumPy and wrapped once: the same values as padding_mask(tgt) & causal_mask(T).
    keep = (arr != pad_id)[:, None, None, :] & array_module(arr).tri(T, T, dtype=bool)[None, None]  # (B, 1, T, T)
    return mt.Tensor.wrap(keep)
