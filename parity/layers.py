"""The two pieces of minitensor that torch.nn has no twin for, written in torch for parity/model.py.

- `attention_weights(q, k, mask, scale)`: minitensor fuses masked softmax(q k^T * scale) into one
  primitive (minitensor.ops.AttentionWeights, derived in docs/backprop.md); here it is the torch
  composite of the same math, so the parity report checks the fused op against it.
- `Dropout`: torch.nn.Dropout plus minitensor.nn.Dropout's `mask_fn` hook, through which the parity
  report feeds both frameworks the same dropout masks.

With these two, parity/model.py and transformer_np/model.py call the same names and differ in spelling.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def _raw(x) -> torch.Tensor:
    """A torch.Tensor as is, a NumPy array as a tensor (sharing its memory)."""
    return torch.from_numpy(x) if isinstance(x, np.ndarray) else x


def attention_weights(q: torch.Tensor, k: torch.Tensor, mask=None, scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * scale) over the keys where the bool `mask` is True: (..., T_q, T_k).

    Masked scores are set to the dtype's lowest finite value (a stand-in for -inf) before the
    softmax, so they get exactly zero weight. A query row with nothing to attend to would then be
    uniform; its weights are multiplied by 0 after the softmax, giving zero weights and finite
    (zero) gradients, as the fused minitensor op does. A true -inf would give NaN there.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # Scaling q (T_q * Dh numbers) instead of the scores (T_q * T_k) is cheaper, as torch's MHA does.
    scores = (q * scale) @ k.transpose(-2, -1)  # (B, H, T_q, T_k)
    if mask is None:
        return F.softmax(scores, dim=-1)
    keep = _raw(mask).to(scores.device)
    weights = F.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1)
    row_has_key = keep.any(dim=-1, keepdim=True)  # (.., T_q, 1)
    if not row_has_key.all():
        weights = weights * row_has_key.to(weights.dtype)  # rows with no key allowed were uniform: zero them
    return weights


class Dropout(nn.Dropout):
    """torch.nn.Dropout with minitensor.nn.Dropout's `mask_fn` hook.

    Extension, flagged (not in PyTorch): when `mask_fn` is set, the module is training and p > 0,
    forward calls `keep = mask_fn(shape)` for a boolean keep-mask of the input's shape (NumPy
    array or tensor) instead of sampling, and returns input * keep / (1 - p). The parity report
    feeds both frameworks the same masks this way, so training-mode parity is checked too.
    """

    def __init__(self, p: float = 0.5):
        super().__init__(p)
        self.mask_fn = None

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.mask_fn is None or not self.training or self.p == 0:
            return super().forward(input)
        keep = _raw(self.mask_fn(tuple(input.shape)))
        if keep.dtype != torch.bool or tuple(keep.shape) != tuple(input.shape):
            raise ValueError(
                f"Dropout.mask_fn: expected a bool keep-mask of shape {tuple(input.shape)}, "
                f"got {keep.dtype} of shape {tuple(keep.shape)}"
            )
        return input * keep.to(input.device) / (1.0 - self.p)
