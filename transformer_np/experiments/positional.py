"""Sinusoidal vs learned positions, tested on sequences longer than any seen in training."""

from __future__ import annotations

import os

import numpy as np

from .. import plots
from ..data import BOS_ID, EOS_ID
from ..training import evaluate, fit
from .recipe import BASE_TRAIN, eval_size, num_params, small_configs
from .results import write_result


def _reverse_pairs(rng: np.random.Generator, n: int, lo: int, hi: int) -> list:
    """Reversal pairs with lengths lo..hi over the 16-symbol alphabet (ids 4..19)."""
    pairs = []
    for _ in range(n):
        s = (rng.integers(0, 16, size=int(rng.integers(lo, hi + 1))) + 4).tolist()
        pairs.append(([BOS_ID] + s + [EOS_ID], [BOS_ID] + s[::-1] + [EOS_ID]))
    return pairs


TRAIN_LENGTHS = (3, 10)
TEST_BUCKETS = ((3, 10), (11, 14), (15, 20))


def exp_positional(out_dir: str, steps: int, progress: bool = True) -> dict:
    """Sinusoidal vs learned positions on reversal, trained on lengths 3-10, tested up to length 20.

    A learned table has never updated the rows past the longest training position (12 with
    <bos>/<eos>), so it cannot place those tokens; the sinusoid is defined everywhere, though
    the model has not learned to use the unseen phases either.
    """
    rng = np.random.default_rng(0)
    train_pairs = _reverse_pairs(rng, BASE_TRAIN["train_size"], *TRAIN_LENGTHS)
    tests = {f"{lo}-{hi}": _reverse_pairs(rng, eval_size(steps, 100), lo, hi) for lo, hi in TEST_BUCKETS}
    rows = []
    for positional in ("sinusoidal", "learned"):
        task, model_cfg, train_cfg = small_configs("reverse", steps, positional=positional)
        model, losses, wall = fit(model_cfg, train_cfg, train_pairs, steps, progress, positional)
        row = {
            "positional": positional,
            "params": num_params(model),
            "train_s": wall,
            "train_loss": float(np.mean(losses[-max(1, len(losses) // 10) :])) if losses else float("nan"),
        }
        for name, pairs in tests.items():
            m = evaluate(model, pairs, label_smoothing=0.0, max_new_tokens=min(24, model_cfg.max_len))
            row[f"exact_{name}"] = m["exact_acc"]
            row[f"token_acc_{name}"] = m["token_acc"]
        rows.append(row)
    buckets = [
        f"lengths {lo}-{hi}" + (" (trained)" if (lo, hi) == TRAIN_LENGTHS else " (longer)") for lo, hi in TEST_BUCKETS
    ]
    series = {f"{r['positional']} positions": [r[f"exact_{lo}-{hi}"] for lo, hi in TEST_BUCKETS] for r in rows}
    fig = plots.plot_lines(
        buckets,
        series,
        os.path.join(out_dir, "positional.png"),
        "test sequences, by source length",
        "held-out exact match",
        f"reversal trained on lengths {TRAIN_LENGTHS[0]}-{TRAIN_LENGTHS[1]}, {steps} steps: length generalisation",
    )
    cols = (
        ["positional", "params", "train_s", "train_loss"]
        + [f"exact_{lo}-{hi}" for lo, hi in TEST_BUCKETS]
        + [f"token_acc_{lo}-{hi}" for lo, hi in TEST_BUCKETS]
    )
    note = (
        f"reverse task, trained on lengths {TRAIN_LENGTHS[0]}-{TRAIN_LENGTHS[1]} for {steps} steps; 100 test "
        "sequences per length bucket. Lengths 11+ never occur in training."
    )
    return write_result(
        out_dir,
        "positional",
        "Sinusoidal vs learned positional encoding",
        note,
        rows,
        cols,
        [fig],
        {"steps": steps, "train_lengths": TRAIN_LENGTHS, "test_buckets": TEST_BUCKETS},
    )
