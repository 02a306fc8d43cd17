"""The training loss of transformer_np, in one place: training/ and the parity report's NumPy side call it.

    sequence_loss(logits, labels, label_smoothing)
        mean over the non-PAD target tokens of the label-smoothed cross-entropy
        (1 - s) * (-log p[label]) + s * mean_v(-log p[v])        (the paper's section 5.4, s = 0.1)
    compute_loss(model, src, tgt, label_smoothing)
        the teacher-forced forward and that loss

parity/loss.py is the same two functions in PyTorch, line for line.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt
import minitensor.nn.functional as F

from .data import PAD_ID, shift_targets
from .masks import padding_mask, target_mask


def sequence_loss(logits: mt.Tensor, labels, label_smoothing: float = 0.0) -> mt.Tensor:
    """Label-smoothed cross-entropy of logits (B, T, V) against labels (B, T), averaged over non-PAD labels."""
    V = logits.shape[-1]
    labels = mt.tensor(np.ascontiguousarray(labels).reshape(-1))  # (B*T,)
    return F.cross_entropy(logits.reshape(-1, V), labels, ignore_index=PAD_ID, label_smoothing=label_smoothing)


def compute_loss(model, src: np.ndarray, tgt: np.ndarray, label_smoothing: float = 0.0):
    """Teacher-forced loss: mean label-smoothed cross-entropy over non-PAD target tokens.

    Returns (loss Tensor, logits Tensor (B, T-1, V), labels array (B, T-1)).
    """
    tgt_in, labels = shift_targets(tgt)  # (B, T-1) each
    src_t, tgt_t = mt.tensor(src), mt.tensor(tgt_in)
    logits = model(src_t, tgt_t, padding_mask(src_t, PAD_ID), target_mask(tgt_t, PAD_ID))  # (B, T-1, V)
    loss = sequence_loss(logits, labels, label_smoothing)
    return loss, logits, labels
