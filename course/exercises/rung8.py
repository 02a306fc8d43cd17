"""Rung 8, training: one training step, then a loop of them, on the project's Transformer.

YOUR FILE: fill every `raise NotImplementedError("exercise N.M")`; the checks import it as it is on disk.

The model is transformer_np's (`model(src, tgt_in)` gives logits (B, T, V), masks built from PAD_ID = 0), so a
slip in your rung 6 model does not show up here; the optimizer is any with zero_grad() and step() (yours from
rung 7 works too). Check with `python -m course check 8`: the step against the project's own, then a short
training curve on the copy-reverse task that must fall.
"""

from __future__ import annotations

import minitensor as mt
import minitensor.nn.functional as F
from transformer_np.masks import PAD_ID


def train_step(model, optimizer, src, tgt, label_smoothing: float = 0.0) -> float:
    """One step of teacher forcing on a batch: src (B, S), tgt (B, T) token ids, tgt = <bos> ... <eos> <pad>...

    The decoder reads tgt[:, :-1] and must predict tgt[:, 1:]; the loss is the label-smoothed cross-entropy
    averaged over the labels that are not PAD_ID. Returns the loss as a Python float.
    """
    # exercise 8.1: clear the old gradients, forward, loss, backward, step
    raise NotImplementedError("exercise 8.1")


def train(model, optimizer, batches, label_smoothing: float = 0.0) -> list:
    """One train_step per (src, tgt) batch, in order; returns the list of losses (floats)."""
    # exercise 8.2
    raise NotImplementedError("exercise 8.2")
