"""history.json: a run's per-step record (loss, lr, gradient norms, time), written, cut back and validated.

- `new_history(groups)`: an empty history with one gradient-norm list per layer group.
- `write_history` (atomic, through a symlink too) and `load_history` (checked: one ValueError naming
  the file and what is wrong with it).
- `cut_history(history, step)`: what a checkpoint of `step` covers (a history saved ahead of its
  checkpoint would repeat steps on resume).
docs/training.md describes the format.
"""

from __future__ import annotations

import json
import os

from minitensor.serialization import atomic_write

HISTORY_NAME = "history.json"
PER_STEP_KEYS = ("step", "loss", "lr", "grad_norm", "tokens_per_s")  # one entry per completed step each


def new_history(groups) -> dict:
    return {
        "step": [],
        "loss": [],
        "lr": [],
        "grad_norm": [],
        "tokens_per_s": [],
        "layer_grad_norms": {k: [] for k in groups},
        "eval": [],
    }


def cut_history(history: dict, step: int) -> dict:
    """A history saved ahead of its checkpoint (a crash between the two files, a diverged step) would
    repeat steps on resume: keep what the checkpoint's `step` covers. Segments (time spent) all stay."""
    keep = sum(1 for s in history["step"] if s <= step)
    for k in PER_STEP_KEYS:
        history[k] = history[k][:keep]
    for k in history["layer_grad_norms"]:
        history["layer_grad_norms"][k] = history["layer_grad_norms"][k][:keep]
    history["eval"] = [e for e in history["eval"] if e["step"] <= step]
    return history


def write_history(out_dir: str, history: dict) -> None:
    with atomic_write(os.path.join(out_dir, HISTORY_NAME)) as f:  # through a symlink too
        json.dump(history, f)


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


def history_at(out_dir: str, step: int, groups) -> dict | None:
    """The history.json beside a checkpoint of `step`, cut back to that step (None: there is none).
    ValueError if it records the gradient norms of other layers than `groups`."""
    path = os.path.join(out_dir, HISTORY_NAME)
    if not os.path.isfile(path):
        return None
    history = cut_history(load_history(out_dir), step)
    if set(history["layer_grad_norms"]) != set(groups):
        raise ValueError(
            f"{path!r} records gradient norms of layers {sorted(history['layer_grad_norms'])}, "
            f"the model has {sorted(groups)}"
        )
    return history
