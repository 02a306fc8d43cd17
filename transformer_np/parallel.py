"""The data-parallel pieces of transformer_np: which rows of a global batch a rank takes, its token counts, its loss.

The rule (docs/distributed.md): the global batch of B rows is drawn from the one seeded stream, the same whatever
the number of ranks N; rank r takes rows [r * B/N, (r + 1) * B/N). Its loss is `shard_loss` (loss.py): the sum over
its non-PAD target tokens times N / n_global, where n_global counts the whole global batch's non-PAD targets
(one all-reduce of an integer, or computed from the global batch that every rank holds). DistributedDataParallel
then averages the gradients, and the mean of the N shard gradients is the full-batch mean's gradient.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt

from .data import PAD_ID, shift_targets
from .loss import shard_loss
from .masks import padding_mask, target_mask


def shard_rows(global_batch: int, world_size: int, rank: int) -> slice:
    """The rows of a global batch that `rank` of `world_size` ranks takes; a batch N does not divide is refused."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"shard_rows: expected 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    if global_batch < world_size:
        raise ValueError(
            f"data parallelism: the global batch has {global_batch} rows, fewer than the {world_size} ranks: "
            f"every rank needs at least one row (use at most {global_batch} ranks or a larger --batch-size)"
        )
    if global_batch % world_size:
        raise ValueError(
            f"data parallelism: the global batch of {global_batch} rows does not divide into {world_size} equal "
            f"shards: use a batch size that is a multiple of {world_size}"
        )
    per = global_batch // world_size
    return slice(rank * per, (rank + 1) * per)


def count_targets(tgt) -> int:
    """The number of non-PAD labels of a (B, T) target batch (the teacher-forced labels tgt[:, 1:])."""
    return int(np.count_nonzero(shift_targets(tgt)[1] != PAD_ID))


def compute_shard_loss(model, src, tgt, n_global: int, world_size: int, label_smoothing: float = 0.0):
    """Teacher-forced forward of one rank's shard and its `shard_loss`; returns (loss, logits, labels)."""
    tgt_in, labels = shift_targets(tgt)  # (b, T-1) each
    src_t, tgt_t = mt.tensor(src), mt.tensor(tgt_in)
    logits = model(src_t, tgt_t, padding_mask(src_t, PAD_ID), target_mask(tgt_t, PAD_ID))  # (b, T-1, V)
    return shard_loss(logits, labels, n_global, world_size, label_smoothing), logits, labels
