"""Adagrad, RMSprop and Adadelta: a learning rate per coordinate from running sums of squared gradients.

PyTorch's single-tensor implementations, term for term (g is the gradient, negated under maximize, plus
weight_decay * p where weight_decay is set; every state array has the parameter's dtype):
    Adagrad:   sum += g * g;  p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)
    RMSprop:   v = alpha * v + (1 - alpha) * g * g;  centered: m = lerp(m, g, 1 - alpha), v - m * m in place of v;
               d = sqrt(v) + eps;  momentum: buf = momentum * buf + g / d, p -= lr * buf;  else p -= lr * g / d
    Adadelta:  v = rho * v + (1 - rho) * g * g;  delta = sqrt(u + eps) / sqrt(v + eps) * g;
               u = rho * u + (1 - rho) * delta * delta;  p -= lr * delta
computed in place on `p._data` by the array's own library (np.* dispatch, so on a device too).
"""

from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, check_hyperparameter

__all__ = ["Adadelta", "Adagrad", "RMSprop"]


def check_kernel_choice(owner: str, foreach, fused=None) -> None:
    """torch's foreach and fused pick a kernel, not a result: accepted (None or a bool) and changing nothing here."""
    for name, value in (("foreach", foreach), ("fused", fused)):
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{owner}: {name} must be None or a bool, got {value!r}")


def refuse_unsupported(owner: str, **flags) -> None:
    """torch's capturable and differentiable (CUDA graphs, an optimizer step in the graph) are not here."""
    for name, value in flags.items():
        if value:
            raise NotImplementedError(
                f"{owner}: {name}=True is not supported (minitensor's step runs outside autograd)"
            )


def _gradient(p, group: dict):
    """The step's gradient: negated under maximize, plus weight_decay * p (a new array: .grad is left as it is)."""
    g = -p.grad._data if group["maximize"] else p.grad._data
    return g + group["weight_decay"] * p._data if group["weight_decay"] != 0 else g


class Adagrad(Optimizer):
    """Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, foreach=None,
    *, maximize=False, differentiable=False, fused=None)."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach=None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused=None,
    ):
        check_kernel_choice("Adagrad", foreach, fused)
        refuse_unsupported("Adagrad", differentiable=differentiable)
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
            maximize=maximize,
        )
        self.check_hyperparameters(defaults)
        super().__init__(params, defaults)

    def check_hyperparameters(self, group) -> None:
        check_hyperparameter("Adagrad", "Invalid learning rate", group["lr"])
        check_hyperparameter("Adagrad", "Invalid lr_decay value", group["lr_decay"])
        check_hyperparameter("Adagrad", "Invalid weight_decay value", group["weight_decay"])
        check_hyperparameter("Adagrad", "Invalid initial_accumulator_value value", group["initial_accumulator_value"])
        check_hyperparameter("Adagrad", "Invalid epsilon value", group["eps"])

    def update_parameter(self, p, group: dict) -> None:
        state = self.state_for(p)
        w = p._data
        if not state:
            state["step"] = 0
            state["sum"] = np.full_like(w, group["initial_accumulator_value"])
        state["step"] += 1
        g = _gradient(p, group)
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        state["sum"] += g * g
        w -= clr * (g / (np.sqrt(state["sum"]) + group["eps"]))


class RMSprop(Optimizer):
    """RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, capturable=False,
    foreach=None, maximize=False, differentiable=False)."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach=None,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        check_kernel_choice("RMSprop", foreach)
        refuse_unsupported("RMSprop", capturable=capturable, differentiable=differentiable)
        defaults = dict(
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            maximize=maximize,
        )
        self.check_hyperparameters(defaults)
        super().__init__(params, defaults)

    def check_hyperparameters(self, group) -> None:
        check_hyperparameter("RMSprop", "Invalid learning rate", group["lr"])
        check_hyperparameter("RMSprop", "Invalid epsilon value", group["eps"])
        check_hyperparameter("RMSprop", "Invalid momentum value", group["momentum"])
        check_hyperparameter("RMSprop", "Invalid weight_decay value", group["weight_decay"])
        check_hyperparameter("RMSprop", "Invalid alpha value", group["alpha"])

    def update_parameter(self, p, group: dict) -> None:
        state = self.state_for(p)
        w = p._data
        if not state:
            state["step"] = 0
            state["square_avg"] = np.zeros_like(w)
            if group["momentum"] > 0:
                state["momentum_buffer"] = np.zeros_like(w)
            if group["centered"]:
                state["grad_avg"] = np.zeros_like(w)
        state["step"] += 1
        g = _gradient(p, group)
        alpha = group["alpha"]
        v = state["square_avg"]
        v *= alpha
        v += (1 - alpha) * (g * g)
        if group["centered"]:
            m = state["grad_avg"]
            m += (1 - alpha) * (g - m)  # torch's lerp
            avg = np.sqrt(v - m * m)
        else:
            avg = np.sqrt(v)
        avg += group["eps"]
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf *= group["momentum"]
            buf += g / avg
            w -= group["lr"] * buf
        else:
            w -= group["lr"] * (g / avg)


class Adadelta(Optimizer):
    """Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False, maximize=False,
    differentiable=False)."""

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach=None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        check_kernel_choice("Adadelta", foreach)
        refuse_unsupported("Adadelta", capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        self.check_hyperparameters(defaults)
        super().__init__(params, defaults)

    def check_hyperparameters(self, group) -> None:
        check_hyperparameter("Adadelta", "Invalid learning rate", group["lr"])
        check_hyperparameter("Adadelta", "Invalid rho value", group["rho"], high=1.0)
        check_hyperparameter("Adadelta", "Invalid epsilon value", group["eps"])
        check_hyperparameter("Adadelta", "Invalid weight_decay value", group["weight_decay"])

    def update_parameter(self, p, group: dict) -> None:
        state = self.state_for(p)
        w = p._data
        if not state:
            state["step"] = 0
            state["square_avg"] = np.zeros_like(w)
            state["acc_delta"] = np.zeros_like(w)
        state["step"] += 1
        g = _gradient(p, group)
        rho, eps = group["rho"], group["eps"]
        v, u = state["square_avg"], state["acc_delta"]
        v *= rho
        v += (1 - rho) * (g * g)
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u *= rho
        u += (1 - rho) * (delta * delta)
        w -= group["lr"] * delta
