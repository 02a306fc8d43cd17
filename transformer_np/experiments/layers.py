"""The encoder/decoder depth, 1..6 layers at D = 64: train and held-out loss, parameters, training time."""

from __future__ import annotations

import os

from .. import plots
from .recipe import BASE_MODEL, small_configs, train_and_score
from .results import write_result


def exp_layers(out_dir: str, steps: int, progress: bool = True) -> dict:
    """N = 1..6 encoder and decoder layers at D=64: loss, parameters and training time."""
    rows = []
    for N in range(1, 7):
        task, model_cfg, train_cfg = small_configs(steps=steps, num_encoder_layers=N, num_decoder_layers=N)
        _, r = train_and_score(task, model_cfg, train_cfg, steps, progress, f"layers={N}")
        rows.append({"layers": N, **r})
    x = [r["layers"] for r in rows]
    fig = plots.plot_lines(
        x,
        {
            "train loss (last 10% of steps)": [r["train_loss"] for r in rows],
            "held-out loss": [r["heldout_loss"] for r in rows],
        },
        os.path.join(out_dir, "layers.png"),
        "encoder = decoder layers",
        "cross-entropy",
        f"copy-reverse after {steps} steps: effect of depth",
    )
    note = f"copy-reverse, D=64, 4 heads, d_ff=128, post-norm, {steps} steps of batch 32 per model."
    return write_result(
        out_dir,
        "layers",
        "Number of layers",
        note,
        rows,
        ["layers", "params", "train_s", "train_loss", "heldout_loss", "token_acc", "exact_acc"],
        [fig],
        {"steps": steps, "model": BASE_MODEL},
    )
