"""Training, evaluation and checkpoints for transformer_np, on minitensor.

What this file owns:
- `train(model_cfg, train_cfg, out_dir, resume=False, progress=True, callback=None)`: the
  paper's recipe on a task from `transformer_np.data.TASKS`: Adam (betas 0.9/0.98, eps 1e-9),
  the warmup / StepLR / constant schedule named in TrainConfig, label-smoothed cross-entropy
  that ignores PAD, gradient clipping, progress (loss, lr, tokens/s; transformer_np/progress.py), a
  history of loss, lr, per-layer gradient norms and time per call in `out_dir/history.json`.
- `evaluate`: teacher-forced loss and token accuracy (padding excluded), and exact-sequence
  accuracy by greedy decoding.
- Checkpoints (`out_dir/checkpoint.npz`, written by `mt.save`, never pickled): model,
  optimizer and scheduler state, step, the RNG state, the data-order state (epoch, batch
  index), both configs and both vocabularies. `resume=True` continues to bitwise the same
  parameters as an uninterrupted run. Ctrl-C lets the step in progress finish, saves a checkpoint
  and re-raises; further Ctrl-Cs are held until that save is done, so a checkpoint always holds a
  completed step. A directory that holds a run is refused unless resume=True or overwrite=True.
  Resuming a run already at its step count changes nothing (TrainResult.nothing_to_do).
- Divergence: a NaN or infinite loss or gradient norm raises NonFiniteError before that step's update;
  no checkpoint is ever saved with non-finite values (unless allow_nonfinite=True). docs/training.md
  describes the run directory, the history's format and these rules.
- `load_checkpoint(path)`: a trained model back, with its task and configs (decode, plots).

Why resume is exact: the data order of epoch e is a permutation seeded by (seed, e) only, so
(epoch, batch index) fully determines the next batch; dropout draws from the one minitensor
generator, whose state is saved; Adam's moments and step counts and the scheduler's step are
saved. Nothing else carries state across steps.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field

import numpy as np

import minitensor as mt
from minitensor.random import get_rng_state, set_rng_state
from minitensor.serialization import atomic_write

from .config import ModelConfig, TrainConfig, get_preset
from .data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Task,
    Vocab,
    check_lengths,
    get_task,
    iterate_forever,
    make_batches,
    shift_targets,
)
from .loss import sequence_loss
from .progress import progress as progress_bar

CHECKPOINT_NAME = "checkpoint.npz"
HISTORY_NAME = "history.json"
# Fields that may change between a run and its resumption: they do not alter the trajectory.
RESUMABLE_FIELDS = ("steps", "eval_every", "checkpoint_every")
# What train() needs from a checkpoint to continue, and what decode/plot need to rebuild the model.
RESUME_KEYS = ("model", "optimizer", "scheduler", "rng", "data", "step", "model_config", "train_config")
MODEL_KEYS = ("model", "model_config", "train_config", "step", "src_vocab", "tgt_vocab")


# ----------------------------------------------------------------------------------------------
# Configuration helpers
# ----------------------------------------------------------------------------------------------
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


def _check_model_fits_task(model_cfg: ModelConfig, task: Task) -> None:
    need = (len(task.src_vocab), len(task.tgt_vocab))
    have = (model_cfg.src_vocab_size, model_cfg.tgt_vocab_size)
    if have[0] < need[0] or have[1] < need[1]:
        raise ValueError(
            f"train: task {task.name!r} needs src/tgt vocabularies of {need[0]}/{need[1]} tokens, "
            f"the model config has {have[0]}/{have[1]}; use config_for_task(model_cfg, task)"
        )


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


def _train_cfg_from_dict(d: dict) -> TrainConfig:
    d = dict(d)
    d["betas"] = tuple(d["betas"])
    return TrainConfig(**d)


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
        diffs = config_diff(saved_model.to_dict(), model_cfg.to_dict()) + config_diff(
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


# ----------------------------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------------------------
def build_model(model_cfg: ModelConfig, seed: int):
    """A freshly initialised Transformer; the generator is seeded first so init is reproducible."""
    from .model import Transformer

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


def _sq_norm(arr: np.ndarray) -> float:
    flat = arr.reshape(-1)
    return float(np.dot(flat, flat))


def compute_loss(model, src: np.ndarray, tgt: np.ndarray, label_smoothing: float = 0.0):
    """Teacher-forced loss: mean label-smoothed cross-entropy over non-PAD target tokens.

    Returns (loss Tensor, logits Tensor (B, T-1, V), labels array (B, T-1)).
    """
    from .masks import padding_mask, target_mask

    tgt_in, labels = shift_targets(tgt)  # (B, T-1) each
    src_t, tgt_t = mt.tensor(src), mt.tensor(tgt_in)
    logits = model(src_t, tgt_t, padding_mask(src_t, PAD_ID), target_mask(tgt_t, PAD_ID))  # (B, T-1, V)
    loss = sequence_loss(logits, labels, label_smoothing)
    return loss, logits, labels


class NonFiniteError(ArithmeticError):
    """A training step whose loss or gradient norm is NaN or infinite: the run has diverged.

    train_step raises it before that step's update is applied, so the parameters are still those of
    the step before. `step` is the failing step (1-based), `loss` and `grad_norm` its values, `sq`
    its per-group squared gradient norms; `what` and `detail` say what was found and what was done.
    `message(go_on)` is the one-line report, naming how to go on regardless in the caller's form
    (train() says allow_nonfinite=True, the command line --allow-nonfinite).
    """

    def __init__(self, step, loss: float, grad_norm: float, sq: dict | None = None, what: str = "", detail: str = ""):
        self.step, self.loss, self.grad_norm, self.sq = step, loss, grad_norm, sq or {}
        self.what = what or f"the loss is {loss} and the gradient norm {grad_norm}"
        self.detail = detail or "stopped before applying this step's update"
        super().__init__(self.message("allow_nonfinite=True"))

    def message(self, go_on: str | None) -> str:
        at = f"step {self.step}: " if self.step is not None else ""
        hint = f"; {go_on} goes on regardless" if go_on else ""
        return f"{at}{self.what}: training diverged; {self.detail} (a smaller learning rate may help{hint})"


def nonfinite_entries(state, prefix: str = "") -> list[str]:
    """Names of the arrays in a (nested) state dict that hold a NaN or an infinity, as 'a.b.c (k of n)'."""
    out = []
    if isinstance(state, dict):
        for k, v in state.items():
            out += nonfinite_entries(v, f"{prefix}{k}.")
    elif isinstance(state, (list, tuple)):
        for i, v in enumerate(state):
            out += nonfinite_entries(v, f"{prefix}{i}.")
    else:
        arr = np.asarray(getattr(state, "data", state))
        if arr.dtype.kind in "fc":
            bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
            if bad:
                out.append(f"{prefix[:-1]} ({bad} of {arr.size})")
    return out


def train_step(
    model,
    optimizer,
    scheduler,
    params,
    src,
    tgt,
    train_cfg: TrainConfig,
    groups=None,
    allow_nonfinite: bool = False,
    step: int | None = None,
):
    """One optimizer step on a batch: forward, backward, clip, Adam, schedule.

    Returns (loss, total grad norm before clipping, {group: squared grad norm} or {}, labels).
    A NaN or infinite loss or gradient norm raises NonFiniteError (naming `step`) before the update,
    so a diverged step never reaches the parameters, unless allow_nonfinite=True.
    """
    optimizer.zero_grad()
    # NumPy's overflow warnings are silenced here: a non-finite loss or gradient is checked below and
    # reported in one line (or, with allow_nonfinite, counted by train()), not as a stream of warnings.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _train_step(model, optimizer, scheduler, params, src, tgt, train_cfg, groups, allow_nonfinite, step)


def _train_step(model, optimizer, scheduler, params, src, tgt, train_cfg, groups, allow_nonfinite, step):
    loss, _, labels = compute_loss(model, src, tgt, train_cfg.label_smoothing)
    loss.backward()
    sq = (
        {}
        if groups is None
        else {k: sum(_sq_norm(p.grad.data) for p in ps if p.grad is not None) for k, ps in groups.items()}
    )
    if train_cfg.clip_grad_norm > 0:
        total = float(mt.nn.utils.clip_grad_norm_(params, train_cfg.clip_grad_norm))
    elif sq:
        total = math.sqrt(sum(sq.values()))
    else:
        total = math.sqrt(sum(_sq_norm(p.grad.data) for p in params if p.grad is not None))
    value = loss.item()
    # Any NaN or infinity in a gradient makes the norm non-finite, so these two checks cover every entry.
    if not allow_nonfinite and not (math.isfinite(value) and math.isfinite(total)):
        bad = nonfinite_entries({n: p for n, p in model.named_parameters()})
        detail = f"stopped before its update; the parameters were already non-finite: {bad[0]}" if bad else ""
        raise NonFiniteError(step, value, total, sq, detail=detail)
    optimizer.step()
    scheduler.step()
    return value, total, sq, labels


def fit(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    train_pairs,
    steps: int | None = None,
    progress: bool = False,
    desc: str = "fit",
    allow_nonfinite: bool = False,
):
    """A bare training loop for experiments: no checkpoints, history file or evaluation.

    Returns (model in eval mode, per-step losses, wall seconds). A diverging step raises
    NonFiniteError (see train_step) unless allow_nonfinite=True.
    """
    steps = train_cfg.steps if steps is None else steps
    check_lengths(train_pairs, model_cfg.max_len, "fit")
    mt.reuse_freed_memory()  # a training process: freed activations are reused by the next step
    model = build_model(model_cfg, train_cfg.seed)
    model.train()
    optimizer = build_optimizer(model, train_cfg)
    scheduler = build_scheduler(optimizer, model_cfg, train_cfg)
    params = list(model.parameters())
    batches = iterate_forever(train_pairs, train_cfg.batch_size, train_cfg.seed)
    losses = []
    it = progress_bar(range(steps), desc=desc, leave=False) if progress else range(steps)
    t0 = time.perf_counter()
    for i in it:
        _, _, (src, tgt) = next(batches)
        losses.append(
            train_step(model, optimizer, scheduler, params, src, tgt, train_cfg, None, allow_nonfinite, i + 1)[0]
        )
    wall = time.perf_counter() - t0
    model.eval()
    return model, losses, wall


def _strip(seq) -> list[int]:
    """A decoded row without its leading <bos>, cut before the first <eos>, without padding."""
    out = []
    for i, t in enumerate(np.asarray(seq).reshape(-1).tolist()):
        if i == 0 and t == BOS_ID:
            continue
        if t == EOS_ID:
            break
        if t != PAD_ID:
            out.append(int(t))
    return out


def greedy_outputs(
    model, srcs: list[list[int]], max_new_tokens: int, batch_size: int = 100, use_cache: bool = True
) -> list[list[int]]:
    """Greedy decoding of each source; each result without <bos>/<eos>/padding."""
    from .decode import greedy_decode

    results: list[list[int]] = []
    was_training = model.training
    model.eval()
    try:
        with mt.no_grad():
            for i in range(0, len(srcs), batch_size):
                src = make_batches([(s, [BOS_ID, EOS_ID]) for s in srcs[i : i + batch_size]], batch_size)[0][0]
                out = greedy_decode(
                    model,
                    mt.tensor(src),
                    max_len=max_new_tokens,
                    bos_id=BOS_ID,
                    eos_id=EOS_ID,
                    pad_id=PAD_ID,
                    use_cache=use_cache,
                )
                results.extend(_strip(row) for row in out)
    finally:
        model.train(was_training)
    return results


def evaluate(
    model,
    pairs,
    batch_size: int = 100,
    label_smoothing: float = 0.0,
    exact: bool = True,
    max_new_tokens: int | None = None,
) -> dict:
    """Held-out metrics: loss (label smoothing as given, PAD ignored), token accuracy (PAD excluded),
    and exact-sequence accuracy of greedy decoding (the whole target, up to <eos>, must match)."""
    if len(pairs) == 0:
        raise ValueError("evaluate: the evaluation set is empty")
    was_training = model.training
    model.eval()
    total_loss, total_tokens, correct = 0.0, 0, 0
    try:
        with mt.no_grad():
            for src, tgt in make_batches(pairs, batch_size):
                loss, logits, labels = compute_loss(model, src, tgt, label_smoothing)
                keep = labels != PAD_ID
                n = int(keep.sum())
                total_loss += loss.item() * n
                total_tokens += n
                correct += int((logits.data.argmax(-1) == labels)[keep].sum())
    finally:
        model.train(was_training)
    out = {"loss": total_loss / total_tokens, "token_acc": correct / total_tokens, "num_examples": len(pairs)}
    if exact:
        longest = max(len(t) for _, t in pairs)
        # generated tokens = target length - 1 (<eos> counted, <bos> not); a little slack shows overruns
        max_new = max_new_tokens if max_new_tokens is not None else min(longest + 2, model.max_len)
        preds = greedy_outputs(model, [s for s, _ in pairs], max_new, batch_size)
        hits = sum(p == _strip(t) for p, (_, t) in zip(preds, pairs))
        out["exact_acc"] = hits / len(pairs)
    return out


# ----------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------
@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode), its task and configs, and the raw state."""

    model: object
    task: Task
    model_cfg: ModelConfig
    train_cfg: TrainConfig
    step: int
    state: dict = field(repr=False)
    path: str = ""


def checkpoint_path(path: str) -> str:
    """A run directory or a checkpoint file to the checkpoint file; FileNotFoundError if absent."""
    p = os.path.join(path, CHECKPOINT_NAME) if os.path.isdir(path) else path
    if not os.path.isfile(p):
        raise FileNotFoundError(
            f"no checkpoint at {path!r} (expected a run directory holding {CHECKPOINT_NAME} "
            f"or the file itself); train one with `python -m transformer_np train`"
        )
    return p


def _task_from_state(state: dict) -> Task:
    task = get_task(state["train_config"]["task"])
    # The vocabularies travel with the checkpoint, so an edited corpus cannot silently remap ids.
    task.src_vocab = Vocab.from_dict(state["src_vocab"])
    task.tgt_vocab = Vocab.from_dict(state["tgt_vocab"])
    return task


def _shorten(e: Exception, limit: int = 200) -> str:
    """An exception's message cut to `limit` characters (a state-dict mismatch lists every parameter)."""
    text = str(e)
    return text if len(text) <= limit else text[:limit] + " ..."


def read_checkpoint(path: str, keys=MODEL_KEYS) -> tuple[dict, ModelConfig, TrainConfig]:
    """(state, model config, train config) of a checkpoint (run dir or file) that holds `keys`.

    A missing file is a FileNotFoundError; anything else that is not a transformer_np checkpoint
    (another .npz, a damaged file, configs that do not validate) is one ValueError naming the file.
    """
    file = checkpoint_path(path)
    state = mt.load(file)
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"{file!r} is not a transformer_np checkpoint: missing {', '.join(map(repr, missing))}")
    try:
        model_cfg = ModelConfig(**state["model_config"])
        train_cfg = _train_cfg_from_dict(state["train_config"])
    except (TypeError, ValueError, KeyError) as e:
        raise ValueError(f"{file!r} holds a damaged configuration: {e}") from None
    return state, model_cfg, train_cfg


def load_checkpoint(path: str) -> Checkpoint:
    """Rebuild the model of a checkpoint (run dir or file), in eval mode, with its task and configs."""
    state, model_cfg, train_cfg = read_checkpoint(path)
    file = checkpoint_path(path)
    from .model import Transformer

    model = Transformer.from_config(model_cfg)
    try:
        model.load_state_dict(state["model"])
        task = _task_from_state(state)
    except (TypeError, ValueError, KeyError, IndexError, RuntimeError, AttributeError) as e:
        raise ValueError(f"{file!r} does not hold the model its configuration describes: {_shorten(e)}") from None
    model.eval()
    return Checkpoint(model, task, model_cfg, train_cfg, int(state["step"]), state, file)


def _save_checkpoint(
    out_dir, model, optimizer, scheduler, step, rng_state, data_state, model_cfg, train_cfg, task, history
) -> str:
    # The history goes first: a crash between the two files leaves a history ahead of the
    # checkpoint, which resuming cuts back, never one that lacks the checkpoint's steps.
    _write_history(out_dir, history)
    path = os.path.join(out_dir, CHECKPOINT_NAME)
    mt.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "step": int(step),
            "rng": rng_state,
            "data": dict(data_state),
            "model_config": model_cfg.to_dict(),
            "train_config": train_cfg.to_dict(),
            "src_vocab": task.src_vocab.to_dict(),
            "tgt_vocab": task.tgt_vocab.to_dict(),
        },
        path,
    )
    return path


def _write_history(out_dir: str, history: dict) -> None:
    with atomic_write(os.path.join(out_dir, HISTORY_NAME)) as f:  # through a symlink too
        json.dump(history, f)


PER_STEP_KEYS = ("step", "loss", "lr", "grad_norm", "tokens_per_s")  # one entry per completed step each


def load_history(path: str) -> dict:
    """The history.json of a run directory (or the file), checked: FileNotFoundError if absent, else
    one ValueError naming the file and what is wrong with it (not JSON, truncated, wrong structure)."""
    p = os.path.join(path, HISTORY_NAME) if os.path.isdir(path) else path
    if not os.path.isfile(p):
        raise FileNotFoundError(f"no training history at {p!r}")
    try:
        with open(p, encoding="utf-8") as f:
            history = json.load(f)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError both are ValueErrors
        raise ValueError(f"{p!r} is not a readable training history (truncated or damaged?): {e}") from None
    problem = _history_problem(history)
    if problem:
        raise ValueError(f"{p!r} is not a valid training history: {problem}")
    return history


def _is_number(v) -> bool:
    # NaN and infinities are numbers here: a diverged run records them (json writes NaN, Infinity)
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _number_list_problem(name: str, v, n: int | None) -> str:
    if not isinstance(v, list):
        return f"{name!r} should be a list, it is {type(v).__name__}"
    bad = [x for x in v if not _is_number(x)]
    if bad:
        return f"{name!r} should hold numbers, it holds {bad[0]!r}"
    if n is not None and len(v) != n:
        return f"{name!r} has {len(v)} entries, 'step' has {n}"
    return ""


def _history_problem(h) -> str:
    """What is wrong with a loaded history.json, or '' if it has the structure train() writes."""
    if not isinstance(h, dict):
        return f"expected a JSON object at the top level, got {type(h).__name__}"
    missing = [k for k in (*PER_STEP_KEYS, "layer_grad_norms", "eval") if k not in h]
    if missing:
        return f"missing {', '.join(map(repr, missing))}"
    steps = h["step"]
    problem = _number_list_problem("step", steps, None)
    if problem:
        return problem
    if steps != list(range(1, len(steps) + 1)):
        return (
            f"'step' should count 1, 2, 3, ... (one entry per step), got {steps[:5]}{' ...' if len(steps) > 5 else ''}"
        )
    for k in PER_STEP_KEYS[1:]:
        problem = _number_list_problem(k, h[k], len(steps))
        if problem:
            return problem
    if not isinstance(h["layer_grad_norms"], dict):
        return f"'layer_grad_norms' should be an object, it is {type(h['layer_grad_norms']).__name__}"
    for k, v in h["layer_grad_norms"].items():
        problem = _number_list_problem(f"layer_grad_norms.{k}", v, len(steps))
        if problem:
            return problem
    if not isinstance(h["eval"], list):
        return f"'eval' should be a list, it is {type(h['eval']).__name__}"
    for e in h["eval"]:
        if not isinstance(e, dict) or not isinstance(e.get("step"), int) or not _is_number(e.get("loss")):
            return f"each 'eval' entry should be an object with an integer 'step' and a number 'loss', got {e!r}"
        bad = [k for k, v in e.items() if not _is_number(v)]
        if bad:
            return f"'eval' entry of step {e['step']}: {bad[0]!r} should be a number, it is {e[bad[0]]!r}"
    if "wall_time" in h and not _is_number(h["wall_time"]):
        return f"'wall_time' should be a number, it is {h['wall_time']!r}"
    segments = h.get("segments", [])
    if not isinstance(segments, list) or not all(
        isinstance(g, dict)
        and all(_is_number(g.get(k)) for k in ("start_step", "end_step", "wall_time"))
        and isinstance(g.get("end"), str)
        for g in segments
    ):
        return "'segments' should be a list of objects with start_step, end_step, wall_time and end"
    return ""


# ----------------------------------------------------------------------------------------------
# The training loop
# ----------------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    model: object
    task: Task
    history: dict
    metrics: dict  # final held-out metrics (evaluate); with nothing to do, the run's last ones (or {})
    out_dir: str
    step: int
    wall_time: float  # seconds this call spent (training, evaluations, checkpoints)
    start_step: int = 0  # the step this call started from (the checkpoint's with resume)
    total_wall_time: float = 0.0  # seconds over every call that worked on this run (history's wall_time)
    runs: int = 1  # how many calls worked on this run (history's segments)
    nothing_to_do: bool = False  # resume found the run already at (or past) train_cfg.steps: nothing written


class _InterruptGuard:
    """Ctrl-C (SIGINT) during training never leaves a half-done step in a checkpoint.

    Inside `atomic()` (an optimizer step with its bookkeeping, a checkpoint save) a SIGINT is only
    recorded, and KeyboardInterrupt is raised when the block ends. Elsewhere (evaluation, the
    progress bar, the callback) the state is that of a completed step, so the first SIGINT raises
    at once. From then on the run is stopping: every further SIGINT is recorded and dropped, so
    the checkpoint saved on the way out is written in full however often Ctrl-C is pressed.
    Only the main thread can install signal handlers; elsewhere the guard does nothing.
    """

    def __init__(self):
        self.pending = False  # a SIGINT arrived inside an atomic block
        self.stopping = False  # KeyboardInterrupt raised: the run is on its way out
        self._depth = 0
        self._old = None

    def _handler(self, signum, frame):
        if self.stopping or self._depth:
            self.pending = True
            # os.write, not print: a signal handler may run in the middle of a print
            os.write(2, b"\nCtrl-C: finishing the step in progress and saving a checkpoint first\n")
            return
        self.stopping = True
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def atomic(self):
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self.pending and not self._depth and not self.stopping:
            self.stopping = True
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
        return False


def _new_history(groups) -> dict:
    return {
        "step": [],
        "loss": [],
        "lr": [],
        "grad_norm": [],
        "tokens_per_s": [],
        "layer_grad_norms": {k: [] for k in groups},
        "eval": [],
    }


def _cut_history(history: dict, step: int) -> dict:
    """A history saved ahead of its checkpoint (a crash between the two files, a diverged step) would
    repeat steps on resume: keep what the checkpoint's `step` covers. Segments (time spent) all stay."""
    keep = sum(1 for s in history["step"] if s <= step)
    for k in PER_STEP_KEYS:
        history[k] = history[k][:keep]
    for k in history["layer_grad_norms"]:
        history["layer_grad_norms"][k] = history["layer_grad_norms"][k][:keep]
    history["eval"] = [e for e in history["eval"] if e["step"] <= step]
    return history


def train(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    out_dir: str,
    resume: bool = False,
    progress: bool = True,
    callback=None,
    overwrite: bool = False,
    on_start=None,
    allow_nonfinite: bool = False,
    resume_hint: str = "train(..., resume=True)",
) -> TrainResult:
    """Train a Transformer on `train_cfg.task` for `train_cfg.steps` optimizer steps; see the module docstring.

    `callback(step, record)` runs after every completed step with that step's record (loss, lr,
    grad norm, ...); it may raise KeyboardInterrupt to stop the run (a checkpoint is saved first).
    With resume=True the run continues from `out_dir/checkpoint.npz`; its configuration must
    equal the requested one except for RESUMABLE_FIELDS, else ValueError names the differences.
    Resuming a run already at (or past) `train_cfg.steps` writes nothing and returns with
    nothing_to_do=True. A directory already holding a run is refused unless resume=True or overwrite=True.
    `on_start()` runs once every check has passed and a resumed state is restored, before the
    first step or file write (the command line prints the configuration there).

    Divergence: a step whose loss or gradient norm is NaN or infinite raises NonFiniteError before
    its update is applied. The checkpoint on disk (the last one saved, all finite) is left as it
    is; history.json records the steps up to the failing one, whose loss and norm show what
    happened. allow_nonfinite=True trains on regardless (and may save non-finite parameters).
    `resume_hint` is how the interrupt message tells to continue (the command line gives its own).
    """
    task, train_pairs, eval_pairs = check_run(model_cfg, train_cfg, out_dir, resume, overwrite, allow_nonfinite)
    mt.reuse_freed_memory()  # a training process: freed activations are reused by the next step
    model = build_model(model_cfg, train_cfg.seed)
    model.train()
    optimizer = build_optimizer(model, train_cfg)
    scheduler = build_scheduler(optimizer, model_cfg, train_cfg)
    groups = layer_groups(model)
    params = [p for ps in groups.values() for p in ps]
    history = _new_history(groups)
    step, epoch, batch_index = 0, 0, 0

    if resume:
        state, _, _ = read_checkpoint(out_dir, RESUME_KEYS)
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            set_rng_state(state["rng"])
            step = int(state["step"])
            epoch, batch_index = int(state["data"]["epoch"]), int(state["data"]["batch_index"])
        except (TypeError, ValueError, KeyError, IndexError, RuntimeError) as e:
            raise ValueError(
                f"{checkpoint_path(out_dir)!r} does not hold a run of its own configuration: {_shorten(e)}"
            ) from None
        if os.path.isfile(os.path.join(out_dir, HISTORY_NAME)):
            history = _cut_history(load_history(out_dir), step)
            if set(history["layer_grad_norms"]) != set(groups):
                raise ValueError(
                    f"{os.path.join(out_dir, HISTORY_NAME)!r} records gradient norms of layers "
                    f"{sorted(history['layer_grad_norms'])}, the model has {sorted(groups)}"
                )
        # At (or past) the requested step with the final evaluation recorded: the run is done as asked.
        # Without that evaluation (a Ctrl-C during it) the run goes on below to evaluate and save.
        evals = [e for e in history["eval"] if e["step"] == step]
        if step > train_cfg.steps or (step == train_cfg.steps and evals):
            segments = history.get("segments", [])
            return TrainResult(
                model, task, history, dict(evals[-1]) if evals else {}, out_dir, step, 0.0, step,
                history.get("wall_time", 0.0), len(segments), nothing_to_do=True,
            )  # fmt: skip
    if on_start is not None:
        on_start()
    os.makedirs(out_dir, exist_ok=True)

    batches = iterate_forever(train_pairs, train_cfg.batch_size, train_cfg.seed, epoch, batch_index)
    start_step, t_start = step, time.perf_counter()
    # This call's share of the run: steps and seconds, updated at each save (so an interrupted or
    # diverged call's time reaches history.json too); wall_time is the sum over every call.
    segment = {"start_step": step, "end_step": step, "wall_time": 0.0, "end": "running"}
    history.setdefault("segments", []).append(segment)
    history.setdefault("wall_time", 0.0)
    saved = [step if resume else None]  # the step of the checkpoint on disk (None: none yet)

    def record_time(end: str) -> None:
        spent = time.perf_counter() - t_start
        history["wall_time"] += spent - segment["wall_time"]
        segment.update(end_step=step, wall_time=spent, end=end)

    def save(end: str = "running"):
        record_time(end)
        if not allow_nonfinite:
            # train_step stops at a non-finite loss or gradient; an update can still overflow a parameter
            bad = nonfinite_entries({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
            if bad:
                segment["end"] = "diverged"
                _write_history(out_dir, history)  # what happened, up to this step; the checkpoint stays
                last = "no checkpoint was saved" if saved[0] is None else f"{CHECKPOINT_NAME} keeps step {saved[0]}"
                raise NonFiniteError(
                    step,
                    history["loss"][-1] if history["loss"] else float("nan"),
                    history["grad_norm"][-1] if history["grad_norm"] else float("nan"),
                    what=f"the update made {len(bad)} arrays non-finite (e.g. {bad[0]})",
                    detail=f"not saved: {last}, {HISTORY_NAME} records the steps up to it",
                )
        saved[0] = step
        data = {"epoch": epoch, "batch_index": batch_index}
        return _save_checkpoint(
            out_dir, model, optimizer, scheduler, step, get_rng_state(), data, model_cfg, train_cfg, task, history
        )

    bar = None
    if progress:
        bar = progress_bar(total=train_cfg.steps, initial=step, desc=f"train {task.name}")
    guard = _InterruptGuard()
    nonfinite_steps = 0
    # Outside guard.atomic() the model, optimizer, scheduler, RNG, (epoch, batch_index) and history
    # always describe the same completed step, so a checkpoint may be saved there at any moment.
    try:
        with guard:
            try:
                while step < train_cfg.steps:
                    with guard.atomic():
                        t0 = time.perf_counter()
                        epoch_i, index_i, (src, tgt) = next(batches)
                        lr = optimizer.param_groups[0]["lr"]
                        try:
                            loss, total, sq, labels = train_step(
                                model,
                                optimizer,
                                scheduler,
                                params,
                                src,
                                tgt,
                                train_cfg,
                                groups,
                                allow_nonfinite,
                                step + 1,
                            )
                        except NonFiniteError as e:
                            last = (
                                "no checkpoint was saved"
                                if saved[0] is None
                                else f"{CHECKPOINT_NAME} keeps step {saved[0]}"
                            )
                            e.detail += f"; {last}, {HISTORY_NAME} records the steps up to it"
                            e.args = (e.message("allow_nonfinite=True"),)
                            # the step is not applied; the history records it (what happened), the checkpoint stays
                            for k, v in zip(PER_STEP_KEYS, (step + 1, e.loss, float(lr), e.grad_norm, 0.0)):
                                history[k].append(v)
                            for k, v in e.sq.items():
                                history["layer_grad_norms"][k].append(math.sqrt(v))
                            record_time("diverged")
                            _write_history(out_dir, history)
                            raise
                        nonfinite_steps += not (math.isfinite(loss) and math.isfinite(total))
                        step += 1
                        epoch, batch_index = epoch_i, index_i + 1  # the next batch's position
                        n_tokens = int(np.count_nonzero(src != PAD_ID) + np.count_nonzero(labels != PAD_ID))
                        dt = time.perf_counter() - t0
                        record = {
                            "step": step,
                            "loss": loss,
                            "lr": float(lr),
                            "grad_norm": total,
                            "tokens_per_s": n_tokens / dt if dt > 0 else 0.0,
                        }
                        for k in PER_STEP_KEYS:
                            history[k].append(record[k])
                        for k, v in sq.items():
                            history["layer_grad_norms"][k].append(math.sqrt(v))
                    if bar is not None:
                        # refresh=False: shown at the bar's next redraw (or progress line), not redrawn now
                        bar.set_postfix(
                            loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{record['tokens_per_s']:.0f}", refresh=False
                        )
                        bar.update(1)
                    if train_cfg.eval_every and step % train_cfg.eval_every == 0 and step < train_cfg.steps:
                        m = evaluate(model, eval_pairs, label_smoothing=train_cfg.label_smoothing)
                        history["eval"].append({"step": step, **m})
                        if bar is not None:
                            bar.write(
                                f"step {step}: held-out loss {m['loss']:.4f}, token acc {m['token_acc']:.4f}, "
                                f"exact {m['exact_acc']:.4f}"
                            )
                    if train_cfg.checkpoint_every and step % train_cfg.checkpoint_every == 0:
                        with guard.atomic():
                            save()
                    if callback is not None:
                        callback(step, record)
                metrics = evaluate(model, eval_pairs, label_smoothing=train_cfg.label_smoothing)
                with guard.atomic():
                    history["eval"].append({"step": step, **metrics})
                    save("done")
            except KeyboardInterrupt:
                guard.stopping = True  # from here on every Ctrl-C is dropped: the save below runs in full
                path = save("interrupted")
                if bar is not None:
                    bar.close()
                    bar = None
                print(f"\ninterrupted: checkpoint of step {step} saved to {path}; continue with {resume_hint}")
                raise
    finally:
        if bar is not None:
            bar.close()
    if nonfinite_steps:
        print(f"warning: {nonfinite_steps} steps had a non-finite loss or gradient norm (allow_nonfinite)")
    return TrainResult(
        model, task, history, metrics, out_dir, step, segment["wall_time"], start_step,
        history["wall_time"], len(history["segments"]),
    )  # fmt: skip
