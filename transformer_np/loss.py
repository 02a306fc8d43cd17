"""The training loss of transformer_np, in one place: train.py and the parity report's NumPy side call it.

    sequence_loss(logits, labels, label_smoothing)
        mean over the non-PAD target tokens of the label-smoothed cross-entropy
        (1 - s) * (-log p[label]) + s * mean_v(-log p[v])        (the paper's section 5.4, s = 0.1)

parity/loss.py is the same function in PyTorch, line for line.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt
import minitensor.nn.functional as F

from .data import PAD_ID


def sequence_loss(logits: mt.Tensor, labels, label_smoothing: float = 0.0) -> mt.Tensor:
    """Label-smoothed cross-entropy of logits (B, T, V) against labels (B, T), averaged over non-PAD labels."""
    V = logits.shape[-1]
    labels = mt.tensor(np.ascontiguousarray(labels).reshape(-1))  # (B*T,)
    return F.cross_entropy(logits.reshape(-1, V), labels, ignore_index=PAD_ID, label_smoothing=label_smoothing)
