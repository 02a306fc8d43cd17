"""The small model and recipe that the training experiments vary one field of, and training and scoring one.

With steps <= SMOKE_STEPS (the tests' handful of steps) every held-out set shrinks to SMOKE_EVAL examples.
"""

from __future__ import annotations

import numpy as np

from ..config import ModelConfig, TrainConfig
from ..data import get_task
from ..training import config_for_task, evaluate, fit

SMOKE_STEPS = 10  # at or below this many steps, held-out sets shrink to SMOKE_EVAL examples
SMOKE_EVAL = 16

# The small model every training experiment varies one field of.
BASE_MODEL = dict(
    d_model=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=128, dropout=0.0, max_len=64
)
# StepLR from 2e-3, halved every quarter of the run (no warmup: these models are 2 layers deep),
# the recipe that converged fastest in the acceptance tuning (tests/transformer_np/test_task_trainings.py).
BASE_TRAIN = dict(
    task="copy-reverse",
    batch_size=32,
    lr=2e-3,
    schedule="step",
    gamma=0.5,
    label_smoothing=0.0,
    clip_grad_norm=1.0,
    train_size=20000,
    eval_size=200,
    seed=0,
)


def eval_size(steps: int, default: int) -> int:
    """The held-out set's size: `default`, or SMOKE_EVAL for a smoke run of at most SMOKE_STEPS steps."""
    return SMOKE_EVAL if steps <= SMOKE_STEPS else default


def small_configs(task_name: str = "copy-reverse", steps: int = 1000, **model_changes):
    """(task, model config, train config): BASE_MODEL with `model_changes`, BASE_TRAIN for `steps` steps."""
    task = get_task(task_name)
    model_cfg = config_for_task(
        ModelConfig(src_vocab_size=1, tgt_vocab_size=1, **{**BASE_MODEL, **model_changes}), task
    )
    train_cfg = TrainConfig(
        **{
            **BASE_TRAIN,
            "task": task_name,
            "steps": steps,
            "step_size": max(1, steps // 4),
            "eval_size": eval_size(steps, BASE_TRAIN["eval_size"]),
        }
    )
    return task, model_cfg, train_cfg


def num_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def train_and_score(task, model_cfg, train_cfg, steps, progress, desc) -> tuple[object, dict]:
    """Train one model (fit) and score it on the task's held-out split: (model, its row's figures)."""
    train_pairs, held = task.splits(train_cfg.train_size, train_cfg.eval_size, train_cfg.seed)
    model, losses, wall = fit(model_cfg, train_cfg, train_pairs, steps, progress, desc)
    m = evaluate(model, held, label_smoothing=0.0)
    tail = losses[-max(1, len(losses) // 10) :]
    return model, {
        "params": num_params(model),
        "train_s": wall,
        "train_loss": float(np.mean(tail)) if tail else float("nan"),
        "heldout_loss": m["loss"],
        "token_acc": m["token_acc"],
        "exact_acc": m["exact_acc"],
    }
