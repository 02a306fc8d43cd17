"""One training step and its non-finite check: forward, backward, clip, Adam, schedule, or NonFiniteError.

- `train_step`: one optimizer step on a batch (the loss is transformer_np/loss.py's compute_loss);
  a NaN or infinite loss or gradient norm raises NonFiniteError before the update, so a diverged
  step never reaches the parameters (unless allow_nonfinite=True).
- `NonFiniteError`: the divergence report, with the step, its loss and gradient norm.
- `nonfinite_entries`: the arrays of a (nested) state dict holding a NaN or an infinity (the
  checks before a save and before a resume use it too).
"""

from __future__ import annotations

import math

import numpy as np

import minitensor as mt

from ..config import TrainConfig
from ..loss import compute_loss


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


def _sq_norm(arr: np.ndarray) -> float:
    flat = arr.reshape(-1)
    return float(np.dot(flat, flat))


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
    parallel=None,
):
    """One optimizer step on a batch: forward, backward, clip, Adam, schedule.

    `parallel` (transformer_np/parallel.py's DataParallel): the batch is the global one; this process backpropagates
    its ranks' shards and the gradients are averaged across ranks before clipping, so clipping (the global norm),
    Adam and the schedule see the same gradient, and take the same step, on every rank.

    Returns (loss, total grad norm before clipping, {group: squared grad norm} or {}, labels).
    A NaN or infinite loss or gradient norm raises NonFiniteError (naming `step`) before the update,
    so a diverged step never reaches the parameters, unless allow_nonfinite=True.
    """
    optimizer.zero_grad()
    # NumPy's overflow warnings are silenced here: a non-finite loss or gradient is checked below and
    # reported in one line (or, with allow_nonfinite, counted by train()), not as a stream of warnings.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _train_step(
            model, optimizer, scheduler, params, src, tgt, train_cfg, groups, allow_nonfinite, step, parallel
        )


def _train_step(model, optimizer, scheduler, params, src, tgt, train_cfg, groups, allow_nonfinite, step, parallel):
    if parallel is None:
        loss, _, labels = compute_loss(model, src, tgt, train_cfg.label_smoothing)
        loss.backward()
        value = loss.item()
    else:  # the global batch's mean loss, its gradient averaged over the ranks
        value, labels = parallel.backward(model, src, tgt, train_cfg.label_smoothing)
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
    # Any NaN or infinity in a gradient makes the norm non-finite, so these two checks cover every entry.
    if not allow_nonfinite and not (math.isfinite(value) and math.isfinite(total)):
        bad = nonfinite_entries({n: p for n, p in model.named_parameters()})
        detail = f"stopped before its update; the parameters were already non-finite: {bad[0]}" if bad else ""
        raise NonFiniteError(step, value, total, sq, detail=detail)
    optimizer.step()
    scheduler.step()
    return value, total, sq, labels
