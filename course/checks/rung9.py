"""Rung 9's checks, the capstone: the learner's model (rung 6), optimizer (rung 7) and loop (rung 8) trained on
copy-reverse beside the project's own model (transformer_np.model.Transformer, minitensor's Adam, the project's
loss), from the same initial weights, on the same batches, float64, dropout 0: after every step the loss and every
parameter are compared within minitensor.testing.PARITY_RTOL['float64'], and the first step and tensor that
differ are named; then the learner's weights are set to the project's (lockstep, as the parity report syncs its
sides), so that round-off does not compound over the steps. The loss must fall. Then the learner's greedy
decoding against the same loop run on the project's model with the same weights."""

from __future__ import annotations

import numpy as np

import minitensor as mt
from minitensor.testing import PARITY_RTOL
from transformer_np.data import BOS_ID, EOS_ID, PAD_ID, get_task, make_batches
from transformer_np.loss import compute_loss
from transformer_np.masks import padding_mask, target_mask
from transformer_np.model import Transformer

from ..runner import Exercise
from .common import CheckFailed, compare
from .modules import float64

RTOL = PARITY_RTOL["float64"]
STEPS, FALL, LR = 120, 0.8, 1e-2  # the mean of the last 10 losses must be below FALL x the first 10s
SMALL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "max_len": 64}  # the check's size: fast


def _task_batches(n: int, seed: int):
    task = get_task("copy-reverse")
    r = np.random.default_rng(seed)
    return task, make_batches([task.sample(r) for _ in range(16 * n)], 16)


def _twins(mod, task):
    """The learner's rung 6 model at SMALL size and the project's, holding the same float64 weights."""
    vs, vt = len(task.src_vocab.itos), len(task.tgt_vocab.itos)
    c = SMALL
    with float64():
        mt.manual_seed(0)
        ours = mod.Transformer(vs, vt, **c)
        ref = Transformer(
            vs,
            vt,
            d_model=c["d_model"],
            num_heads=c["num_heads"],
            num_encoder_layers=c["num_layers"],
            num_decoder_layers=c["num_layers"],
            d_ff=c["d_ff"],
            dropout=0.0,
            max_len=c["max_len"],
        )
    mine, theirs = dict(ours.named_parameters()), dict(ref.named_parameters())
    if set(mine) != set(theirs):
        raise CheckFailed(
            f"your model's parameter names differ from the project's: only yours {sorted(set(mine) - set(theirs))}, "
            f"only the project's {sorted(set(theirs) - set(mine))}"
        )
    for name, p in mine.items():
        if p.shape != theirs[name].shape:
            raise CheckFailed(f"parameter {name}: yours is {p.shape}, the project's {theirs[name].shape}")
        theirs[name].data[...] = p.detach().numpy()
    return ours, ref


def _check_key_bias(where, got, want, start, step) -> None:
    """A key projection's bias has a gradient of exactly 0 (a constant added to all of a query's scores leaves its
    softmax unchanged), so what it gets is round-off, which Adam scales up to steps of about lr: the two sides
    drift apart at random. Judged as the parity report judges it: each side within lr per step of its start."""
    bound = LR * step * (1 + 1e-6)
    for side, value in (("yours", got), ("the project's", want)):
        drift = float(np.abs(value - start).max(initial=0.0))
        if not drift <= bound:
            raise CheckFailed(
                f"{where}: {side} moved {drift:.3g} from its start; its gradient is 0 in exact arithmetic, so "
                f"Adam can move it by round-off only, at most lr = {LR} a step ({bound:.3g} in {step} steps)"
            )


def _check_fit(mod):
    task, batches = _task_batches(STEPS, seed=2)
    ours, ref = _twins(mod, task)
    ref_opt = mt.optim.Adam(ref.parameters(), lr=LR)
    mine, theirs = dict(ours.named_parameters()), dict(ref.named_parameters())
    start = {name: p.detach().numpy().copy() for name, p in mine.items()}
    seen = []

    def on_step(step, loss):
        if step != len(seen) + 1:
            raise CheckFailed(
                f"fit: on_step was called with step {step} after {len(seen)} steps; expected {len(seen) + 1}"
            )
        src, tgt = batches[step - 1]
        ref_opt.zero_grad()
        want = compute_loss(ref, src, tgt, 0.0)[0]
        want.backward()
        ref_opt.step()
        where = f"fit, step {step} of {STEPS} (your model, optimizer and loop against the project's)"
        compare(f"{where}: the loss", np.float64(loss), np.float64(want.item()), RTOL, "the project's step")
        for name, p in mine.items():  # in the model's order: the first tensor that differs is named
            if name.endswith("W_k.bias"):
                _check_key_bias(
                    f"{where}: parameter {name} after the step",
                    p.detach().numpy(),
                    theirs[name].detach().numpy(),
                    start[name],
                    step,
                )
                continue
            compare(
                f"{where}: parameter {name} after the step",
                p.detach().numpy(),
                theirs[name].detach().numpy(),
                RTOL,
                "the project's step",
            )
        for name, p in mine.items():  # lockstep: the next step starts from the same weights on both sides
            p.data[...] = theirs[name].detach().numpy()
        seen.append(float(loss))

    losses = mod.fit(ours, batches, LR, on_step)
    if len(seen) != STEPS:
        raise CheckFailed(f"fit: on_step was called {len(seen)} times for {STEPS} batches; call it after every step")
    if not isinstance(losses, list) or len(losses) != STEPS:
        got = f"a list of {len(losses)}" if isinstance(losses, list) else type(losses).__name__
        raise CheckFailed(f"fit: expected a list of {STEPS} losses (one per batch), got {got}")
    first, last = float(np.mean(losses[:10])), float(np.mean(losses[-10:]))
    if not last < FALL * first:
        raise CheckFailed(
            f"fit on copy-reverse, {STEPS} steps: the loss fell from {first:.3f} (first 10) to only {last:.3f} (last "
            f"10); expected below {FALL} x {first:.3f}"
        )


def _reference_decode(model, src, max_len):
    """The loop the exercise describes, on the project's model: model(src, ys) each step, argmax, PAD after EOS."""
    B = src.shape[0]
    ys = np.full((B, 1), BOS_ID, dtype=np.int64)
    finished = np.zeros(B, dtype=bool)
    with mt.no_grad():
        for _ in range(max_len):
            logits = model(mt.tensor(src), mt.tensor(ys), padding_mask(src, PAD_ID), target_mask(ys, PAD_ID))
            nxt = np.where(finished, PAD_ID, logits.numpy()[:, -1].argmax(axis=-1))
            ys = np.concatenate([ys, nxt[:, None]], axis=1)
            finished |= nxt == EOS_ID
            if finished.all():
                break
    return ys[:, 1:]


def _check_decode(mod):
    task, batches = _task_batches(30, seed=3)
    ours, ref = _twins(mod, task)
    ref_opt = mt.optim.Adam(ref.parameters(), lr=LR)
    for src, tgt in batches:  # a few steps, so that the decodes are not a random model's
        ref_opt.zero_grad()
        compute_loss(ref, src, tgt, 0.0)[0].backward()
        ref_opt.step()
    for name, p in ours.named_parameters():
        p.data[...] = dict(ref.named_parameters())[name].detach().numpy()
    src = batches[0][0][:6]
    for max_len in (1, 12):
        where = f"greedy_decode on 6 copy-reverse sources, max_len={max_len}"
        want = _reference_decode(ref, src, max_len)
        got = mod.greedy_decode(ours, src, max_len)
        if not isinstance(got, np.ndarray) or got.ndim != 2:
            raise CheckFailed(f"{where}: expected a 2-d array of token ids, got {type(got).__name__}")
        if got.shape != want.shape:
            raise CheckFailed(
                f"{where}: expected shape {want.shape} (without the BOS column, stopped once every row has its EOS), "
                f"got {got.shape}"
            )
        diff = np.argwhere(got != want)
        if len(diff):
            row, t = (int(i) for i in diff[0])
            raise CheckFailed(
                f"{where}: row {row} differs first at step {t}: expected token {int(want[row, t])}, got "
                f"{int(got[row, t])} (expected row {want[row].tolist()}, yours {got[row].tolist()})"
            )


EXERCISES = [
    Exercise("9.1", "fit: your model, optimizer and loop", _check_fit, needs=("6.4", "7.2", "8.1")),
    Exercise("9.2", "greedy_decode", _check_decode, needs=("6.4",)),
]
