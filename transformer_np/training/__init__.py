"""Training, evaluation and checkpoints for transformer_np, on minitensor, one concern per file.

    recipe.py      a task's configs; the model, Adam and the lr schedule built from them
    step.py        one training step (forward, backward, clip, Adam, schedule) and its non-finite check
    evaluation.py  held-out loss, token accuracy and exact-sequence accuracy (greedy decoding)
    history.py     history.json: written, cut back to a checkpoint, validated
    checkpoint.py  checkpoint.npz: saved (never with non-finite values), read, resumed from, loaded
    checks.py      the run folder's checks, before any work
    interrupt.py   Ctrl-C: the step in progress finishes and a checkpoint is saved
    loop.py        train() (a short loop of those steps) and the bare fit()

The teacher-forced loss is transformer_np/loss.py's (as parity/loss.py's in PyTorch). Every public name
is importable from here: `from transformer_np.training import load_checkpoint`. The package is named
`training`, not `train`, so that no submodule hides behind the function `transformer_np.train`.
docs/training.md describes the run folder, the history's format and the rules on divergence and resume.
"""

from ..loss import compute_loss  # the loss a step takes (transformer_np/loss.py, mirroring parity/loss.py)
from .checkpoint import (
    CHECKPOINT_NAME,
    MODEL_KEYS,
    RESUME_KEYS,
    Checkpoint,
    checkpoint_path,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from .checks import RESUMABLE_FIELDS, check_out_dir, check_resumable, check_run, config_diff, resume_configs
from .evaluation import evaluate, greedy_outputs, strip_decoded
from .history import HISTORY_NAME, PER_STEP_KEYS, load_history
from .loop import TrainResult, fit, train
from .recipe import (
    build_model,
    build_optimizer,
    build_scheduler,
    config_for_task,
    default_configs,
    layer_groups,
    schedule_curve,
)
from .step import NonFiniteError, nonfinite_entries, train_step

__all__ = [
    "CHECKPOINT_NAME",
    "HISTORY_NAME",
    "MODEL_KEYS",
    "PER_STEP_KEYS",
    "RESUMABLE_FIELDS",
    "RESUME_KEYS",
    "Checkpoint",
    "NonFiniteError",
    "TrainResult",
    "build_model",
    "build_optimizer",
    "build_scheduler",
    "check_out_dir",
    "check_resumable",
    "check_run",
    "checkpoint_path",
    "compute_loss",
    "config_diff",
    "config_for_task",
    "default_configs",
    "evaluate",
    "fit",
    "greedy_outputs",
    "layer_groups",
    "load_checkpoint",
    "load_history",
    "nonfinite_entries",
    "read_checkpoint",
    "resume_configs",
    "save_checkpoint",
    "schedule_curve",
    "strip_decoded",
    "train",
    "train_step",
]
