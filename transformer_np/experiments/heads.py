"""The number of attention heads, 1..16 at a fixed width D = 64: held-out quality, parameters, training time."""

from __future__ import annotations

import os

from .. import plots
from .recipe import BASE_MODEL, small_configs, train_and_score
from .results import write_result


def exp_heads(out_dir: str, steps: int, progress: bool = True) -> dict:
    """Same model (D=64), H in 1, 2, 4, 8, 16: does splitting the width into more heads help?"""
    rows = []
    for H in (1, 2, 4, 8, 16):
        task, model_cfg, train_cfg = small_configs(steps=steps, num_heads=H)
        _, r = train_and_score(task, model_cfg, train_cfg, steps, progress, f"heads={H}")
        rows.append({"heads": H, "head_dim": model_cfg.d_model // H, **r})
    x = [r["heads"] for r in rows]
    fig = plots.plot_lines(
        x,
        {
            "held-out exact match": [r["exact_acc"] for r in rows],
            "held-out token accuracy": [r["token_acc"] for r in rows],
        },
        os.path.join(out_dir, "heads.png"),
        "attention heads (D = 64 fixed)",
        "accuracy",
        f"copy-reverse after {steps} steps: effect of the head count",
        logx=True,
    )
    note = (
        f"copy-reverse, D=64, 2+2 layers, d_ff=128, {steps} steps of batch 32 per model; the parameter count "
        "does not depend on H (the projections stay D x D), only the split of the width does."
    )
    return write_result(
        out_dir,
        "heads",
        "Number of attention heads",
        note,
        rows,
        ["heads", "head_dim", "params", "train_s", "train_loss", "heldout_loss", "token_acc", "exact_acc"],
        [fig],
        {"steps": steps, "model": BASE_MODEL},
    )
