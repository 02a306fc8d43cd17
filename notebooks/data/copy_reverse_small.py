"""Writes notebooks/data/copy_reverse_small.npz: the small trained copy-reverse model whose attention maps
notebook 03 shows (so that a reader, and the rendered notebook in tiny mode, see a trained model's maps without
training one). The recipe is notebook 05's: width 64, 4 heads, 2+2 layers, 800 steps (about a minute on one core).

    python notebooks/data/copy_reverse_small.py          # from the repository root

The weights are stored as float16 (half the size; the maps do not change visibly) with the model config as JSON.
"""

from __future__ import annotations

import json
import os

import numpy as np

from transformer_np.config import ModelConfig, TrainConfig
from transformer_np.data import get_task
from transformer_np.training import config_for_task, fit
from transformer_np.training.evaluation import evaluate

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "copy_reverse_small.npz")
STEPS = 800


def main() -> None:
    task = get_task("copy-reverse")
    model_cfg = config_for_task(
        ModelConfig(
            1, 1, d_model=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=128, dropout=0.0, max_len=64
        ),
        task,
    )
    train_cfg = TrainConfig(
        task="copy-reverse",
        steps=STEPS,
        batch_size=32,
        lr=2e-3,
        schedule="step",
        step_size=STEPS // 4,
        gamma=0.5,
        label_smoothing=0.0,
    )
    train_pairs, held_out = task.splits(20000, 100, seed=0)
    model, losses, wall = fit(model_cfg, train_cfg, train_pairs, STEPS)
    metrics = evaluate(model, held_out)
    arrays = {k: v.numpy().astype(np.float16) for k, v in model.state_dict().items()}
    meta = {
        "model_config": model_cfg.to_dict(),
        "steps": STEPS,
        "last_loss": float(np.mean(losses[-10:])),
        "held_out": {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))},
    }
    np.savez_compressed(PATH, __meta__=np.array(json.dumps(meta)), **arrays)
    print(f"{PATH}: {STEPS} steps in {wall:.0f} s, last loss {meta['last_loss']:.3f}, held-out {meta['held_out']}")


if __name__ == "__main__":
    main()
