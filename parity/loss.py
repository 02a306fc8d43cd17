"""The training loss of transformer_np (transformer_np/loss.py) in PyTorch, line for line.

    sequence_loss(logits, labels, label_smoothing)
        mean over the non-PAD target tokens of the label-smoothed cross-entropy
        (1 - s) * (-log p[label]) + s * mean_v(-log p[v])        (the paper's section 5.4, s = 0.1)
    compute_loss(model, src, tgt, label_smoothing)
        the teacher-forced forward and that loss: transformer_np.loss.compute_loss in PyTorch
    shard_loss / compute_shard_loss
        one rank's loss in data-parallel training (transformer_np/loss.py and transformer_np/parallel.py):
        the shard's summed loss times N / n_global

The labels may be a NumPy array; they go to the logits' device.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from transformer_np.data import PAD_ID, shift_targets

from .masks import padding_mask, target_mask


def sequence_loss(logits: torch.Tensor, labels, label_smoothing: float = 0.0) -> torch.Tensor:
    """Label-smoothed cross-entropy of logits (B, T, V) against labels (B, T), averaged over non-PAD labels."""
    V = logits.shape[-1]
    labels = torch.as_tensor(np.ascontiguousarray(labels).reshape(-1), device=logits.device)  # (B*T,)
    return F.cross_entropy(logits.reshape(-1, V), labels, ignore_index=PAD_ID, label_smoothing=label_smoothing)


def compute_loss(model, src, tgt, label_smoothing: float = 0.0):
    """Teacher-forced loss: transformer_np.loss.compute_loss in PyTorch; the model's device holds the batch.

    Returns (loss tensor, logits tensor (B, T-1, V), labels array (B, T-1)).
    """
    tgt_in, labels = shift_targets(tgt)  # (B, T-1) each
    src_t = torch.as_tensor(src, device=model.device)
    tgt_t = torch.as_tensor(np.ascontiguousarray(tgt_in), device=model.device)
    logits = model(src_t, tgt_t, padding_mask(src_t, PAD_ID), target_mask(tgt_t, PAD_ID))  # (B, T-1, V)
    loss = sequence_loss(logits, labels, label_smoothing)
    return loss, logits, labels


def shard_loss(logits: torch.Tensor, labels, n_global: int, world_size: int, label_smoothing: float = 0.0):
    """One rank's loss in data-parallel training: sum over its non-PAD labels times world_size / n_global."""
    if n_global < 1:
        raise ValueError(f"shard_loss: the global batch has no non-PAD target token (n_global={n_global})")
    V = logits.shape[-1]
    labels = torch.as_tensor(np.ascontiguousarray(labels).reshape(-1), device=logits.device)  # (B*T,)
    total = F.cross_entropy(
        logits.reshape(-1, V), labels, ignore_index=PAD_ID, label_smoothing=label_smoothing, reduction="sum"
    )
    return total * (world_size / n_global)


def compute_shard_loss(model, src, tgt, n_global: int, world_size: int, label_smoothing: float = 0.0):
    """Teacher-forced forward of one rank's shard and its shard_loss; `model` may be a torch DDP wrapper."""
    device = getattr(model, "module", model).device  # torch's DDP holds the model as .module
    tgt_in, labels = shift_targets(tgt)  # (b, T-1) each
    src_t = torch.as_tensor(src, device=device)
    tgt_t = torch.as_tensor(np.ascontiguousarray(tgt_in), device=device)
    logits = model(src_t, tgt_t, padding_mask(src_t, PAD_ID), target_mask(tgt_t, PAD_ID))  # (b, T-1, V)
    return shard_loss(logits, labels, n_global, world_size, label_smoothing), logits, labels
