"""One training step and its non-finite check: forward, backward, clip, Adam, schedule, or NonFiniteError.

- `train_step`: one optimizer step on a batch (the loss is transformer_np/loss.py's compute_loss);
  a NaN or infinite loss or gradient norm raises NonFiniteError before the update, so a diverged
  step never reaches the parameters (unless allow_nonfinite=True).
- `NonFiniteError`: the divergence report, with the step, its loss and gradient norm.
- `nonfinite_entries`: the arrays of a (nested) state dict holding a NaN or an infinity (the
  checks before a save and before a resume use it too).

On a device the step reads the device once: the loss, the gradient norm (clip_grad_norm_ keeps it there)
and the per-group squared norms are stacked into one array and copied back together, for the log and the
non-finite guard; the optimizer and the schedule read nothing. The other syncs of a step are the range checks of
the token ids inside the embeddings (tests/minitensor/devices/test_fake_device_training.py counts and names them all).
"""

from __future__ import annotations

import math

import numpy as np

import minitensor as mt
from minitensor.devices import array_module, is_host

from ..config import TrainConfig
from ..device import array_of, to_host
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
        arr = to_host(state)  # a Tensor's or an array's values, on the host (numbers too)
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
        value = array_of(loss)  # read below: on a device together with the norms
    else:  # the global batch's mean loss (a float, each shard's read once), its gradient averaged over the ranks
        value, labels = parallel.backward(model, src, tgt, train_cfg.label_smoothing)
    if not is_host(array_of(params[0])):
        value, total, sq = _read_once(value, params, train_cfg, groups)
        return _guard_and_update(model, optimizer, scheduler, value, total, sq, labels, allow_nonfinite, step)
    value = float(value)  # (loss.item())
    sq = (
        {}
        if groups is None
        else {k: sum(_sq_norm(array_of(p.grad)) for p in ps if p.grad is not None) for k, ps in groups.items()}
    )
    if train_cfg.clip_grad_norm > 0:
        total = float(mt.nn.utils.clip_grad_norm_(params, train_cfg.clip_grad_norm))
    elif sq:
        total = math.sqrt(sum(sq.values()))
    else:
        total = math.sqrt(sum(_sq_norm(array_of(p.grad)) for p in params if p.grad is not None))
    return _guard_and_update(model, optimizer, scheduler, value, total, sq, labels, allow_nonfinite, step)


def _read_once(loss, params, train_cfg, groups):
    """The device step's values for the log and the guard, in ONE host read: (loss, grad norm, {group: sq norm}).
    `loss`: the loss's 0-d device array, or a float already read (data parallel: parallel.backward's).

    The same numbers as the host path above: each squared norm is a float32 dot widened to float64 and summed in
    float64 (as float(np.dot) summed in Python floats); the norm without clipping is computed from them on the host,
    after the read, by the same Python expression."""
    xp = array_module(array_of(params[0]))

    def sq_norm(ps):
        dots = [
            xp.dot(g, g).astype(xp.float64) for g in (array_of(p.grad).reshape(-1) for p in ps if p.grad is not None)
        ]
        return sum(dots, xp.zeros((), dtype=xp.float64))

    sq_dev = {} if groups is None else {k: sq_norm(ps) for k, ps in groups.items()}
    if train_cfg.clip_grad_norm > 0:
        norm = array_of(mt.nn.utils.clip_grad_norm_(params, train_cfg.clip_grad_norm))  # a 0-d device array: no read
    else:
        norm = xp.full((), np.nan) if sq_dev else sq_norm(params)  # (the norm itself comes after the read)
    loss = xp.asarray(loss, dtype=xp.float64)  # (a float is sent over, a transfer, not a sync)
    values = to_host(xp.stack([loss, norm, *sq_dev.values()]))  # the step's one sync
    value, norm, sq = float(values[0]), float(values[1]), dict(zip(sq_dev, map(float, values[2:])))
    if train_cfg.clip_grad_norm > 0:
        total = norm
    elif sq:
        total = math.sqrt(sum(sq.values()))
    else:
        total = math.sqrt(norm)
    return value, total, sq


def _guard_and_update(model, optimizer, scheduler, value, total, sq, labels, allow_nonfinite, step):
    # Any NaN or infinity in a gradient makes the norm non-finite, so these two checks cover every entry.
    if not allow_nonfinite and not (math.isfinite(value) and math.isfinite(total)):
        bad = nonfinite_entries({n: p for n, p in model.named_parameters()})
        detail = f"stopped before its update; the parameters were already non-finite: {bad[0]}" if bad else ""
        raise NonFiniteError(step, value, total, sq, detail=detail)
    optimizer.step()
    scheduler.step()
    return value, total, sq, labels
