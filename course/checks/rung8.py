"""Rung 8's checks: the learner's training step against the project's own (transformer_np.loss.compute_loss,
zero_grad, backward, minitensor's Adam) on a twin of the same tiny model, three steps, loss and every parameter
compared after each (float64, OP_RTOL); then the learner's loop on copy-reverse, which must call the step on
every batch in order and bring the loss down."""

from __future__ import annotations

import numpy as np

import minitensor as mt
from transformer_np.data import get_task, make_batches
from transformer_np.loss import compute_loss
from transformer_np.model import Transformer

from ..runner import Exercise
from .common import OP_RTOL, CheckFailed, compare
from .modules import float64

RTOL = OP_RTOL["float64"]
CURVE_STEPS, CURVE_FALL = 150, 0.75  # the mean of the last 10 losses must be below 0.75 x the first 10's


def _setup(n_batches: int, batch_size: int = 16, seed: int = 0):
    task = get_task("copy-reverse")
    r = np.random.default_rng(seed)
    batches = make_batches([task.sample(r) for _ in range(n_batches * batch_size)], batch_size)
    vs, vt = len(task.src_vocab.itos), len(task.tgt_vocab.itos)

    def model():
        with float64():
            mt.manual_seed(seed)
            return Transformer(
                vs,
                vt,
                d_model=32,
                num_heads=2,
                num_encoder_layers=1,
                num_decoder_layers=1,
                d_ff=64,
                dropout=0.0,
                max_len=64,
            )

    return batches, model


def _reference_step(model, opt, src, tgt, smoothing):
    opt.zero_grad()
    loss = compute_loss(model, src, tgt, smoothing)[0]
    loss.backward()
    opt.step()
    return loss.item()


def _check_step(mod):
    batches, make = _setup(3)
    ours, ref = make(), make()
    opt, ref_opt = mt.optim.Adam(ours.parameters(), lr=1e-2), mt.optim.Adam(ref.parameters(), lr=1e-2)
    ref_params = dict(ref.named_parameters())
    for step, (src, tgt) in enumerate(batches, 1):
        where = f"train_step, step {step} (label_smoothing=0.1)"
        got = mod.train_step(ours, opt, src, tgt, 0.1)
        want = _reference_step(ref, ref_opt, src, tgt, 0.1)
        if not isinstance(got, float):
            raise CheckFailed(f"{where}: expected the loss as a Python float, got {type(got).__name__} (use .item())")
        compare(f"{where}: the loss", np.float64(got), np.float64(want), RTOL, "the project's step")
        for name, p in ours.named_parameters():
            try:
                compare(
                    f"{where}: parameter {name} after the step",
                    p.detach().numpy(),
                    ref_params[name].detach().numpy(),
                    RTOL,
                    "the project's step",
                )
            except CheckFailed as e:
                hint = (
                    (
                        " (the first step agreed: are the previous step's gradients still there? clear them with "
                        "optimizer.zero_grad() before backward)"
                    )
                    if step > 1
                    else ""
                )
                raise CheckFailed(f"{e}{hint}") from None


def _check_curve(mod):
    batches, make = _setup(CURVE_STEPS, seed=1)
    ours, ref = make(), make()
    losses = mod.train(ours, mt.optim.Adam(ours.parameters(), lr=5e-3), batches, 0.0)
    if not isinstance(losses, list) or len(losses) != len(batches):
        got = f"a list of {len(losses)}" if isinstance(losses, list) else type(losses).__name__
        raise CheckFailed(f"train: expected a list of {len(batches)} losses (one per batch), got {got}")
    ref_opt = mt.optim.Adam(ref.parameters(), lr=5e-3)
    want = [_reference_step(ref, ref_opt, s, t, 0.0) for s, t in batches[:3]]
    compare(
        "train: the first 3 losses",
        np.array(losses[:3], dtype=np.float64),
        np.array(want),
        RTOL,
        "train_step on each batch in order",
    )
    first, last = float(np.mean(losses[:10])), float(np.mean(losses[-10:]))
    if not last < CURVE_FALL * first:
        raise CheckFailed(
            f"train on copy-reverse, {len(batches)} steps: the loss fell from {first:.3f} (first 10) to "
            f"only {last:.3f} (last 10); expected below {CURVE_FALL} x {first:.3f}"
        )


EXERCISES = [
    Exercise("8.1", "train_step", _check_step),
    Exercise("8.2", "train: a short curve", _check_curve, needs=("8.1",)),
]
