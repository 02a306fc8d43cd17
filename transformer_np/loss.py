"""The training loss of transformer_np, in one place: training/ and the parity report's NumPy side call it.

    sequence_loss(logits, labels, label_smoothing)
        mean over the non-PAD target tokens of the label-smoothed cross-entropy
        (1 - s) * (-log p[label]) + s * mean_v(-log p[v])        (the paper's section 5.4, s = 0.1)
    compute_loss(model, src, tgt, label_smoothing)
        the teacher-forced forward and that loss
    shard_loss(logits, labels, n_global, world_size, label_smoothing)
        one rank's part of data-parallel training: its shard's SUMMED loss times N / n_global, which is
        the rank's mean times N * n_rank / n_global. Averaged over N ranks by DistributedDataParallel, the
        gradients are those of the global mean over all n_global tokens; a shard of PAD only gives 0, not NaN.

parity/loss.py is the same two functions in PyTorch, line for line.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt
import minitensor.nn.functional as F

from .data import PAD_ID, shift_targets
from .device import array_of, on_device
from .masks import padding_mask, target_mask


def sequence_loss(logits: mt.Tensor, labels, label_smoothing: float = 0.0) -> mt.Tensor:
    """Label-smoothed cross-entropy of logits (B, T, V) against labels (B, T), averaged over non-PAD labels."""
    V = logits.shape[-1]
    labels = on_device(mt.tensor(np.ascontiguousarray(labels).reshape(-1)), array_of(logits))  # (B*T,) beside logits
    return F.cross_entropy(logits.reshape(-1, V), labels, ignore_index=PAD_ID, label_smoothing=label_smoothing)


def shard_loss(logits: mt.Tensor, labels, n_global: int, world_size: int, label_smoothing: float = 0.0) -> mt.Tensor:
    """One rank's loss in data-parallel training: sum over its non-PAD labels times world_size / n_global.

    n_global is the non-PAD label count of the whole global batch (all ranks' shards). Summing before scaling,
    rather than taking the shard's mean, is what keeps an all-PAD shard at 0 instead of 0/0."""
    if n_global < 1:
        raise ValueError(f"shard_loss: the global batch has no non-PAD target token (n_global={n_global})")
    V = logits.shape[-1]
    labels = on_device(mt.tensor(np.ascontiguousarray(labels).reshape(-1)), array_of(logits))  # (B*T,) beside logits
    total = F.cross_entropy(
        logits.reshape(-1, V), labels, ignore_index=PAD_ID, label_smoothing=label_smoothing, reduction="sum"
    )
    return total * (world_size / n_global)


def compute_loss(model, src: np.ndarray, tgt: np.ndarray, label_smoothing: float = 0.0):
    """Teacher-forced loss: mean label-smoothed cross-entropy over non-PAD target tokens.
    src, tgt are host batches; on a device the model copies them (and their masks) over, and the labels follow.

    Returns (loss Tensor, logits Tensor (B, T-1, V), labels array (B, T-1)).
    """
    tgt_in, labels = shift_targets(tgt)  # (B, T-1) each
    src_t, tgt_t = mt.tensor(src), mt.tensor(tgt_in)
    logits = model(src_t, tgt_t, padding_mask(src_t, PAD_ID), target_mask(tgt_t, PAD_ID))  # (B, T-1, V)
    loss = sequence_loss(logits, labels, label_smoothing)
    return loss, logits, labels
