"""The run folder's checks: everything `train` refuses before any work, and what a resume must find.

- `check_out_dir`: an output that would lose a run (a file, a run without resume or overwrite,
  resume with nothing to resume).
- `check_run`: that, the task and the model's fit to it, and with resume the checkpoint's configs
  (only RESUMABLE_FIELDS may differ) and `check_resumable` (finite values, a history as long as it).
- `resume_configs`: the configs of the run checkpointed in a folder (`train --resume`).
"""

from __future__ import annotations

import os

from ..config import ModelConfig, TrainConfig
from ..data import Task, check_lengths, get_task
from .checkpoint import CHECKPOINT_NAME, RESUME_KEYS, checkpoint_path, read_checkpoint
from .history import HISTORY_NAME, load_history
from .step import nonfinite_entries

# Fields that may change between a run and its resumption: they do not alter the trajectory (activation
# checkpointing changes what a step keeps in memory, not one bit of its numbers:
# tests/minitensor/utils/test_checkpoint.py).
RESUMABLE_FIELDS = ("steps", "eval_every", "checkpoint_every", "activation_checkpointing")


def config_diff(saved: dict, requested: dict, skip=()) -> list[str]:
    """Human-readable differences 'field: checkpoint X vs requested Y' between two config dicts."""
    out = []
    for k in sorted(set(saved) | set(requested)):
        if k in skip:
            continue
        a, b = saved.get(k, "<missing>"), requested.get(k, "<missing>")
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            a, b = list(a), list(b)
        if a != b:
            out.append(f"{k}: checkpoint {a!r} vs requested {b!r}")
    return out


def _check_model_fits_task(model_cfg: ModelConfig, task: Task) -> None:
    need = (len(task.src_vocab), len(task.tgt_vocab))
    have = (model_cfg.src_vocab_size, model_cfg.tgt_vocab_size)
    if have[0] < need[0] or have[1] < need[1]:
        raise ValueError(
            f"train: task {task.name!r} needs src/tgt vocabularies of {need[0]}/{need[1]} tokens, "
            f"the model config has {have[0]}/{have[1]}; use config_for_task(model_cfg, task)"
        )


def check_out_dir(out_dir: str, resume: bool = False, overwrite: bool = False) -> None:
    """Refuse, before any work, an output that would lose a run: `out_dir` naming a file, a directory
    holding a run without resume or overwrite, or resume with nothing to resume."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"train: the output {out_dir!r} is a file, expected a directory for the run")
    has_run = any(os.path.exists(os.path.join(out_dir, n)) for n in (CHECKPOINT_NAME, HISTORY_NAME))
    if resume and overwrite:
        raise ValueError("train: resume and overwrite exclude each other (continue the run, or start it again)")
    if resume:
        checkpoint_path(out_dir)
    elif has_run and not overwrite and not os.path.exists(os.path.join(out_dir, CHECKPOINT_NAME)):
        raise ValueError(
            f"train: {out_dir!r} holds the {HISTORY_NAME} of a run that saved no checkpoint (it diverged or "
            "stopped before its first); nothing to resume, replace it with --overwrite"
        )
    elif has_run and not overwrite:
        raise ValueError(
            f"train: {out_dir!r} already holds a run ({CHECKPOINT_NAME} or {HISTORY_NAME}); "
            "continue it with --resume or replace it with --overwrite"
        )


def check_run(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    out_dir: str,
    resume: bool = False,
    overwrite: bool = False,
    allow_nonfinite: bool = False,
) -> tuple[Task, list, list]:
    """Every check `train` makes before any work (also run by the command line before it prints):
    the output directory, the task, the model's fit to it, and with resume the checkpoint (its configs,
    finite values unless allow_nonfinite) and the history beside it (readable, as long as the checkpoint).
    Returns (task, training pairs, held-out pairs)."""
    if not isinstance(model_cfg, ModelConfig) or not isinstance(train_cfg, TrainConfig):
        raise TypeError(
            f"train: expected (ModelConfig, TrainConfig), got ({type(model_cfg).__name__}, {type(train_cfg).__name__})"
        )
    check_out_dir(out_dir, resume, overwrite)
    if resume:
        state, saved_model, saved_train = read_checkpoint(out_dir, RESUME_KEYS)
        diffs = config_diff(saved_model.to_dict(), model_cfg.to_dict(), skip=RESUMABLE_FIELDS) + config_diff(
            saved_train.to_dict(), train_cfg.to_dict(), skip=RESUMABLE_FIELDS
        )
        if diffs:
            raise ValueError(
                f"train: cannot resume from {checkpoint_path(out_dir)!r}, it was trained with a "
                "different configuration: " + "; ".join(diffs)
            )
        check_resumable(out_dir, allow_nonfinite, state)
    task = get_task(train_cfg.task)
    _check_model_fits_task(model_cfg, task)
    train_pairs, eval_pairs = task.splits(train_cfg.train_size, train_cfg.eval_size, train_cfg.seed)
    check_lengths(train_pairs, model_cfg.max_len, "train")
    check_lengths(eval_pairs, model_cfg.max_len, "train (held-out)")
    return task, train_pairs, eval_pairs


def check_resumable(out_dir: str, allow_nonfinite: bool = False, state: dict | None = None) -> None:
    """Refuse to resume from a checkpoint that holds NaN or infinite values (a run saved with
    allow_nonfinite after it diverged), or whose history.json is damaged or stops before it.
    `state`: the checkpoint's, if already read."""
    if state is None:
        state, _, _ = read_checkpoint(out_dir, RESUME_KEYS)
    file = checkpoint_path(out_dir)
    if not allow_nonfinite:
        bad = nonfinite_entries({"model": state["model"], "optimizer": state["optimizer"]})
        if bad:
            raise ValueError(
                f"train: {file!r} holds non-finite values ({len(bad)} arrays, e.g. {bad[0]}): its run "
                "diverged; start it again with other settings, or allow non-finite values to go on regardless"
            )
    if os.path.isfile(os.path.join(out_dir, HISTORY_NAME)):
        history = load_history(out_dir)
        step = int(state["step"])
        if len(history["step"]) < step:
            raise ValueError(
                f"train: {os.path.join(out_dir, HISTORY_NAME)!r} ends at step {len(history['step'])}, before "
                f"the checkpoint's step {step}: it does not belong to this checkpoint"
            )


def resume_configs(out_dir: str) -> tuple[ModelConfig, TrainConfig]:
    """The configurations of the run checkpointed in `out_dir` (for `train --resume`)."""
    _, model_cfg, train_cfg = read_checkpoint(out_dir, RESUME_KEYS)
    return model_cfg, train_cfg
