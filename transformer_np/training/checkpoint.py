"""checkpoint.npz: what a run saves (written by `mt.save`, never pickled), reads back, and resumes from.

- `save_checkpoint`: model, optimizer and scheduler state, step, the RNG state, the data-order state
  (epoch, batch index), both configs and both vocabularies; history.json is written first. A data-parallel
  run adds every rank's generator state (`rank_rngs`) and its world size (in `data`).
- `nonfinite_update_error`: the divergence guard on saves: no checkpoint is saved with non-finite
  values (unless the run allows them).
- `read_checkpoint` (checked: one ValueError naming the file), `restore_state` (resume into a freshly
  built model, optimizer and scheduler), `load_checkpoint` (a trained model back, with its task and
  configs: decode, plots).

A run trained on a device saves which device each array came from (mt.save); the readers here load every array
onto the CPU (map_location="cpu") and let the model and the optimizer copy it to where their parameters live,
as torch's load_state_dict does. So a run trained with --device cuda decodes, plots and resumes on the CPU, and
a CPU run resumes on the device.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import minitensor as mt
from minitensor.random import set_rng_state

from ..config import ModelConfig, TrainConfig
from ..data import Task, Vocab, get_task
from ..model import Transformer
from .history import HISTORY_NAME, write_history
from .step import NonFiniteError, nonfinite_entries

CHECKPOINT_NAME = "checkpoint.npz"
# What train() needs from a checkpoint to continue, and what decode/plot need to rebuild the model.
RESUME_KEYS = ("model", "optimizer", "scheduler", "rng", "data", "step", "model_config", "train_config")
MODEL_KEYS = ("model", "model_config", "train_config", "step", "src_vocab", "tgt_vocab")


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


def _train_cfg_from_dict(d: dict) -> TrainConfig:
    d = dict(d)
    d["betas"] = tuple(d["betas"])
    return TrainConfig(**d)


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


def read_checkpoint(path: str, keys=MODEL_KEYS, map_location="cpu") -> tuple[dict, ModelConfig, TrainConfig]:
    """(state, model config, train config) of a checkpoint (run dir or file) that holds `keys`, its arrays
    placed by `map_location` (mt.load's, as torch's; the CPU unless told otherwise, whatever device saved them).

    A missing file is a FileNotFoundError; anything else that is not a transformer_np checkpoint
    (another .npz, a damaged file, configs that do not validate) is one ValueError naming the file.
    """
    file = checkpoint_path(path)
    state = mt.load(file, map_location=map_location)
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"{file!r} is not a transformer_np checkpoint: missing {', '.join(map(repr, missing))}")
    try:
        model_cfg = ModelConfig(**state["model_config"])
        train_cfg = _train_cfg_from_dict(state["train_config"])
    except (TypeError, ValueError, KeyError) as e:
        raise ValueError(f"{file!r} holds a damaged configuration: {e}") from None
    return state, model_cfg, train_cfg


def load_checkpoint(path: str, device="cpu") -> Checkpoint:
    """Rebuild the model of a checkpoint (run dir or file) on `device`, in eval mode, with its task and configs.
    The state is read onto the CPU whatever device trained it (`Checkpoint.state` holds NumPy arrays)."""
    state, model_cfg, train_cfg = read_checkpoint(path)
    file = checkpoint_path(path)
    model = Transformer.from_config(model_cfg).to(device=device)  # the weights are copied over by load_state_dict
    try:
        model.load_state_dict(state["model"])
        task = _task_from_state(state)
    except (TypeError, ValueError, KeyError, IndexError, RuntimeError, AttributeError) as e:
        raise ValueError(f"{file!r} does not hold the model its configuration describes: {_shorten(e)}") from None
    model.eval()
    return Checkpoint(model, task, model_cfg, train_cfg, int(state["step"]), state, file)


def restore_state(out_dir: str, model, optimizer, scheduler) -> tuple[int, int, int]:
    """Load the checkpoint in `out_dir` into a freshly built model, optimizer and scheduler, and the
    generator's state; return its (step, epoch, batch index). ValueError if they do not fit. The model may be on
    any device: the state is read onto the CPU and copied to its parameters' device by the two load_state_dicts."""
    state, _, _ = read_checkpoint(out_dir, RESUME_KEYS)
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        return int(state["step"]), int(state["data"]["epoch"]), int(state["data"]["batch_index"])
    except (TypeError, ValueError, KeyError, IndexError, RuntimeError) as e:
        raise ValueError(
            f"{checkpoint_path(out_dir)!r} does not hold a run of its own configuration: {_shorten(e)}"
        ) from None


def save_checkpoint(
    out_dir,
    model,
    optimizer,
    scheduler,
    step,
    rng_state,
    data_state,
    model_cfg,
    train_cfg,
    task,
    history,
    rank_rngs=None,
) -> str:
    """Write history.json, then checkpoint.npz (both atomic); return the checkpoint's path.

    rank_rngs: data parallelism's every rank's generator state, in rank order (rng_state is rank 0's)."""
    # The history goes first: a crash between the two files leaves a history ahead of the
    # checkpoint, which resuming cuts back, never one that lacks the checkpoint's steps.
    write_history(out_dir, history)
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
            **({} if rank_rngs is None else {"rank_rngs": list(rank_rngs)}),
        },
        path,
    )
    return path


def kept_checkpoint(saved_step: int | None) -> str:
    """What is on disk after a diverged step: 'no checkpoint was saved' or 'checkpoint.npz keeps step N'."""
    return "no checkpoint was saved" if saved_step is None else f"{CHECKPOINT_NAME} keeps step {saved_step}"


def nonfinite_update_error(model, optimizer, step: int, history: dict, saved_step: int | None):
    """The NonFiniteError a save must raise instead of writing, or None if every array is finite.

    train_step stops at a non-finite loss or gradient; an update can still overflow a parameter."""
    bad = nonfinite_entries({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    if not bad:
        return None
    return NonFiniteError(
        step,
        history["loss"][-1] if history["loss"] else float("nan"),
        history["grad_norm"][-1] if history["grad_norm"] else float("nan"),
        what=f"the update made {len(bad)} arrays non-finite (e.g. {bad[0]})",
        detail=f"not saved: {kept_checkpoint(saved_step)}, {HISTORY_NAME} records the steps up to it",
    )
