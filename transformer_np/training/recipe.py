"""The training recipe: a task's configs, and the model, Adam and learning-rate schedule built from them.

- `default_configs(task)`: the task's preset, its vocabulary sizes set; `config_for_task` sets them on any config.
- `build_model` (seeded init), `build_optimizer` (the paper's Adam), `build_scheduler` (warmup, step or
  constant, as TrainConfig.schedule names), `schedule_curve` (the lr at each step, from the real scheduler).
- `layer_groups`: parameters grouped by layer, the keys of history.json's per-layer gradient norms.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt

from ..config import ModelConfig, TrainConfig, get_preset
from ..data import Task, get_task
from ..model import Transformer


def default_configs(task_name: str) -> tuple[ModelConfig, TrainConfig]:
    """The preset recipe of a task, with the model's vocabulary sizes set to the task's.

    Tasks without their own preset (reverse, sort, addition) train with copy-reverse's.
    """
    task = get_task(task_name)
    preset = get_preset(task.preset)
    model_cfg = config_for_task(preset.model, task)
    train_cfg = preset.train.replace(task=task.name)
    return model_cfg, train_cfg


def config_for_task(model_cfg: ModelConfig, task: Task) -> ModelConfig:
    """`model_cfg` with src/tgt vocabulary sizes equal to the task's (the toy corpus sets its own)."""
    return model_cfg.replace(src_vocab_size=len(task.src_vocab), tgt_vocab_size=len(task.tgt_vocab))


def build_model(model_cfg: ModelConfig, seed: int):
    """A freshly initialised Transformer; the generator is seeded first so init is reproducible."""
    mt.manual_seed(seed)
    return Transformer.from_config(model_cfg)


def build_optimizer(model, train_cfg: TrainConfig):
    # With the warmup schedule Adam's lr is the schedule's multiplier (the paper's 1.0 by default).
    return mt.optim.Adam(
        model.parameters(),
        lr=train_cfg.lr,
        betas=tuple(train_cfg.betas),
        eps=train_cfg.eps,
        weight_decay=train_cfg.weight_decay,
    )


def build_scheduler(optimizer, model_cfg: ModelConfig, train_cfg: TrainConfig):
    """The lr schedule named by train_cfg.schedule: 'warmup' (paper), 'step' (StepLR) or 'constant'."""
    sched = mt.optim.lr_scheduler
    if train_cfg.schedule == "warmup":
        # lr = TrainConfig.lr * d_model^-0.5 * min(n^-0.5, n * warmup^-1.5): Adam's lr is the multiplier
        return sched.WarmupInverseSqrt(optimizer, d_model=model_cfg.d_model, warmup_steps=train_cfg.warmup_steps)
    if train_cfg.schedule == "step":
        return sched.StepLR(optimizer, step_size=train_cfg.step_size, gamma=train_cfg.gamma)
    return sched.LambdaLR(optimizer, lambda _: 1.0)  # 'constant' (TrainConfig allows no other)


def schedule_curve(model_cfg: ModelConfig, train_cfg: TrainConfig, steps: int | None = None) -> np.ndarray:
    """The lr at each of the first `steps` optimizer steps, from the real scheduler on a dummy parameter."""
    steps = train_cfg.steps if steps is None else steps
    p = mt.nn.Parameter(mt.zeros(1))
    opt = mt.optim.Adam([p], lr=train_cfg.lr, betas=tuple(train_cfg.betas), eps=train_cfg.eps)
    sch = build_scheduler(opt, model_cfg, train_cfg)
    lrs = np.empty(steps)
    for i in range(steps):
        lrs[i] = opt.param_groups[0]["lr"]
        sch.step()
    return lrs


def layer_groups(model) -> dict[str, list]:
    """Parameters grouped by layer, for per-layer gradient norms: 'encoder.layers.0', 'src_embed', ..."""
    groups: dict[str, list] = {}
    for name, p in model.named_parameters():
        parts = name.split(".")
        if len(parts) > 2 and parts[1] == "layers":
            key = ".".join(parts[:3])
        elif parts[0] in ("encoder", "decoder") and len(parts) > 2:
            key = ".".join(parts[:2])
        else:
            key = parts[0]
        groups.setdefault(key, []).append(p)
    return groups
