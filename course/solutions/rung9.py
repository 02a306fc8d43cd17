"""Rung 9, the capstone: YOUR model (rung 6) trained by YOUR optimizer (rung 7) in YOUR loop (rung 8) on the
copy-reverse task, then decoded greedily by YOUR decoder.

This rung runs on the project's engine (minitensor), as rungs 5 to 8 do: your model is made of minitensor's
Modules. The check trains the project's own model (transformer_np) beside yours, from the same initial weights,
on the same batches, in float64 with no dropout and no label smoothing, and compares the two after every step
within minitensor.testing's parity tolerance: the first step and the first tensor that differ are named.

Check with `python -m course check 9`; see your model learn with `python -m course.exercises.rung9`, which trains
it, draws the loss curve, and decodes a few held-out examples (`--steps`, `--plot FILE`).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import minitensor as mt
from transformer_np.data import BOS_ID, EOS_ID, PAD_ID, get_task, make_batches

from .rung6 import Transformer
from .rung7 import Adam
from .rung8 import train_step

# Given: the size of the model (a step takes tens of milliseconds on a laptop CPU) and the learning rate.
CONFIG = {"d_model": 64, "num_heads": 4, "num_layers": 2, "d_ff": 128, "max_len": 64}
LR = 2e-3


def build(src_vocab_size: int, tgt_vocab_size: int) -> Transformer:
    """Given: your rung 6 Transformer at the capstone's size."""
    return Transformer(src_vocab_size, tgt_vocab_size, **CONFIG)


def fit(model, batches, lr: float = LR, on_step=None) -> list:
    """Train `model` on `batches` ((src, tgt) pairs, in order): YOUR Adam over model.parameters() at `lr`, YOUR
    train_step on each batch (no label smoothing). After each step call on_step(step, loss) when it is given
    (step counts from 1): the check compares your model with the project's there. Returns the losses."""
    # exercise 9.1
    optimizer = Adam(model.parameters(), lr=lr)
    losses = []
    for step, (src, tgt) in enumerate(batches, 1):
        losses.append(train_step(model, optimizer, src, tgt, 0.0))
        if on_step is not None:
            on_step(step, losses[-1])
    return losses


def greedy_decode(model, src: np.ndarray, max_len: int) -> np.ndarray:
    """src (B, S) token ids -> (B, L) ids, L <= max_len: at each step run model(src, ys) on what was decoded so
    far (ys starts as a column of BOS_ID), take the argmax of the last position's logits, and append it. A row
    that has produced EOS_ID gets PAD_ID from then on; stop as soon as every row has produced EOS_ID. The result
    leaves out the BOS column (as transformer_np.decode.greedy_decode)."""
    # exercise 9.2
    B = src.shape[0]
    ys = np.full((B, 1), BOS_ID, dtype=np.int64)
    finished = np.zeros(B, dtype=bool)
    with mt.no_grad():
        for _ in range(max_len):
            logits = model(src, ys)  # (B, t, V)
            nxt = np.where(finished, PAD_ID, logits.numpy()[:, -1].argmax(axis=-1))
            ys = np.concatenate([ys, nxt[:, None]], axis=1)
            finished |= nxt == EOS_ID
            if finished.all():
                break
    return ys[:, 1:]


# Given: training on copy-reverse, the curve, a few decodes.
def main(argv=None) -> int:

    p = argparse.ArgumentParser(prog="python -m course.exercises.rung9", description="train YOUR model")
    p.add_argument("--steps", type=int, default=3000, help="training steps, batches of 16 (default: 3000)")
    p.add_argument("--plot", metavar="FILE", help="also draw the loss curve into FILE (a .png; needs matplotlib)")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error(f"--steps: expected a positive number, got {args.steps}")
    task = get_task("copy-reverse")
    r = np.random.default_rng(0)
    batches = make_batches([task.sample(r) for _ in range(16 * args.steps)], 16)
    mt.manual_seed(0)
    model = build(len(task.src_vocab.itos), len(task.tgt_vocab.itos))
    losses = fit(model, batches)
    print(f"loss: {losses[0]:.3f} at step 1, {np.mean(losses[-10:]):.3f} over the last 10 of {len(losses)} steps")
    print(sparkline(losses))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3))
        ax.plot(range(1, len(losses) + 1), losses)
        ax.set(xlabel="step", ylabel="loss", title="your model on copy-reverse")
        fig.savefig(args.plot, dpi=100, bbox_inches="tight")
        print(f"loss curve: {args.plot}")
    rh = np.random.default_rng(1)  # samples the training batches did not draw
    held_out = [task.sample(rh) for _ in range(100)]
    src, tgt = make_batches(held_out, len(held_out))[0]
    out = greedy_decode(model, src, tgt.shape[1])
    right = [_strip(o) == _strip(t[1:]) for o, t in zip(out, tgt)]
    print(f"held-out exact match: {sum(right)}/{len(right)}")
    for i in range(3):
        print(
            f"  {task.src_vocab.decode(src[i], strip_special=True)!r:32} -> "
            f"{task.tgt_vocab.decode(out[i], strip_special=True)!r}"
        )
    return 0


def _strip(ids) -> list:
    """The ids up to (not including) the first EOS_ID."""
    ids = list(ids)
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids


def sparkline(values, width: int = 60) -> str:
    """The curve in one line of block characters, its range beside it."""
    v = np.asarray(values, dtype=np.float64)
    v = np.array([chunk.mean() for chunk in np.array_split(v, min(width, len(v)))])
    bars = "▁▂▃▄▅▆▇█"
    lo, hi = float(v.min()), float(v.max())
    idx = np.zeros(len(v), dtype=int) if hi == lo else ((v - lo) / (hi - lo) * (len(bars) - 1)).round().astype(int)
    return "".join(bars[i] for i in idx) + f"  {hi:.2f} .. {lo:.2f}"


if __name__ == "__main__":
    sys.exit(main())
