"""Learning-rate schedules: LambdaLR, StepLR and WarmupInverseSqrt (the paper's schedule).

PyTorch's semantics: a scheduler counts `last_epoch` (the number of `scheduler.step()` calls,
usually once per optimizer step); the constructor makes one initial step, so right after it
`last_epoch == 0` and every group's lr is the schedule's value at 0. Call `optimizer.step()`
then `scheduler.step()`. A scheduler writes `group['lr']`; the optimizer reads it each step.
`state_dict()` holds the counters and the base learning rates, so a run resumes exactly:
build the optimizer and the scheduler as for a fresh run, then load both state dicts.
"""

from __future__ import annotations

import math
import numbers

from .optimizer import Optimizer, check_hyperparameter

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "WarmupInverseSqrt"]


def _check_optimizer(name: str, optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{name}: expected an Optimizer, got {type(optimizer).__name__}")


class LRScheduler:
    """Base class. Subclasses implement `get_lr()` -> one lr per param group at `last_epoch`."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        _check_optimizer(type(self).__name__, optimizer)
        if isinstance(last_epoch, bool) or not isinstance(last_epoch, int):
            raise TypeError(f"{type(self).__name__}: last_epoch must be an int, got {type(last_epoch).__name__}")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"{type(self).__name__}: param 'initial_lr' is not specified in "
                        f"param_groups[{i}] when resuming with last_epoch={last_epoch}"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr: list[float] = []
        self.step()  # the initial step: last_epoch -1 -> 0, lr = schedule(0)

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates the last `step()` wrote, one per param group."""
        return list(self._last_lr)

    def step(self) -> None:
        self.last_epoch += 1
        lrs = self.get_lr()
        for i, lr in enumerate(lrs):
            # Deviation, flagged: torch writes whatever the schedule gives (a LambdaLR returning NaN
            # turns every parameter into NaN at the next step). Refuse it here, naming the step.
            if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not math.isfinite(lr) or lr < 0:
                self.last_epoch -= 1  # nothing changed: the scheduler stays where it was
                raise ValueError(
                    f"{type(self).__name__}: the schedule gave lr={lr!r} for param group {i} at "
                    f"last_epoch={self.last_epoch + 1} (expected a finite number >= 0)"
                )
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _state_keys(self) -> tuple[str, ...]:
        return ("last_epoch", "base_lrs", "_last_lr")

    def state_dict(self) -> dict:
        """Counters, base lrs and hyperparameters (plain Python values; never the optimizer)."""
        return {
            k: (list(getattr(self, k)) if isinstance(getattr(self, k), list) else getattr(self, k))
            for k in self._state_keys()
        }

    def load_state_dict(self, state_dict: dict) -> None:
        missing = [k for k in self._state_keys() if k not in state_dict]
        if missing:
            raise ValueError(f"{type(self).__name__}.load_state_dict: missing keys {missing}")
        for k in self._state_keys():
            v = state_dict[k]
            setattr(self, k, list(v) if isinstance(v, (list, tuple)) else v)
        self.last_epoch = int(self.last_epoch)
        if len(self._last_lr) != len(self.optimizer.param_groups):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: state has {len(self._last_lr)} learning "
                f"rates, the optimizer has {len(self.optimizer.param_groups)} param groups"
            )
        # Deviation, flagged: torch leaves group['lr'] alone here, so resuming works only when the
        # optimizer's state is loaded after the scheduler was built. Writing the saved lr back
        # makes the order of the two load_state_dict calls irrelevant.
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def __repr__(self):
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self._last_lr})"


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(last_epoch); one function, or one per param group.

    As in PyTorch, the functions are not part of state_dict (they are code, not data).
    """

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1):
        _check_optimizer("LambdaLR", optimizer)
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"LambdaLR: expected {n} lr_lambdas (one per param group), got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for f in self.lr_lambdas:
            if not callable(f):
                raise TypeError(f"LambdaLR: lr_lambda must be callable, got {type(f).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base_lr * f(self.last_epoch) for f, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (last_epoch // step_size).

    Computed, like PyTorch's, by chaining: multiply the current lr by gamma every step_size
    steps (so the numbers agree with torch to the last bit, and an lr changed by hand persists).
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size <= 0:
            raise ValueError(f"StepLR: step_size must be a positive int, got {step_size!r}")
        # torch takes any gamma, NaN and infinity included; here a finite gamma >= 0 (flagged).
        check_hyperparameter("StepLR", "Invalid gamma value", gamma)
        self.step_size = step_size
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _state_keys(self):
        return super()._state_keys() + ("step_size", "gamma")


class WarmupInverseSqrt(LRScheduler):
    """The paper's schedule (section 5.3), scaled by the group's base lr:

        lr = base_lr * factor * d_model^-0.5 * min(n^-0.5, n * warmup_steps^-1.5),  n = last_epoch + 1

    Linear warmup for `warmup_steps` steps, then decay as 1/sqrt(n); the peak, at n = warmup_steps,
    is base_lr * factor * (d_model * warmup_steps)^-0.5. `n` counts optimizer steps from 1, as the
    paper's step_num does: the lr in effect for the first update is the value at n = 1, never 0
    (flagged: the Annotated Transformer's LambdaLR clamps step 0 to 1 instead, so its first two
    updates share a rate). PyTorch has no such class; the equivalent there is
    `LambdaLR(opt, lambda e: factor * d_model**-0.5 * min((e+1)**-0.5, (e+1) * warmup_steps**-1.5))`.
    Use it with the optimizer's lr set to the multiplier you want (TrainConfig.lr, 1.0 in the paper).
    """

    def __init__(
        self, optimizer: Optimizer, d_model: int, warmup_steps: int = 4000, factor: float = 1.0, last_epoch: int = -1
    ):
        for name, v in (("d_model", d_model), ("warmup_steps", warmup_steps)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"WarmupInverseSqrt: {name} must be a positive int, got {v!r}")
        check_hyperparameter("WarmupInverseSqrt", "Invalid factor value", factor)
        if factor == 0:
            raise ValueError("WarmupInverseSqrt: Invalid factor value: 0 (expected a finite number > 0)")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.factor = float(factor)
        super().__init__(optimizer, last_epoch)

    def multiplier(self, last_epoch: int) -> float:
        """factor * d_model^-0.5 * min(n^-0.5, n * warmup^-1.5) at n = last_epoch + 1."""
        n = last_epoch + 1
        return self.factor * self.d_model**-0.5 * min(n**-0.5, n * self.warmup_steps**-1.5)

    def get_lr(self) -> list[float]:
        m = self.multiplier(self.last_epoch)
        return [base_lr * m for base_lr in self.base_lrs]

    def _state_keys(self):
        return super()._state_keys() + ("d_model", "warmup_steps", "factor")
