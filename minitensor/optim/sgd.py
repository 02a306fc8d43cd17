"""Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay.

The update is PyTorch's single-tensor SGD, term for term (so 20 steps agree to round-off):
    g = grad + weight_decay * p
    buf = g                                  on the first step (no dampening applied)
    buf = momentum * buf + (1 - dampening) * g   afterwards
    g = g + momentum * buf  (nesterov)   or   g = buf
    p = p - lr * g
computed in place on `p._data` by the array's own library (NumPy, or CuPy on a device); the momentum
buffer has the parameter's dtype.
"""

from __future__ import annotations

from .optimizer import Optimizer, check_hyperparameter

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False)."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        maximize: bool = False,
    ):
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        self.check_hyperparameters(defaults)  # before the parameters are looked at, as torch does
        super().__init__(params, defaults)

    def check_hyperparameters(self, group) -> None:
        check_hyperparameter("SGD", "Invalid learning rate", group["lr"])
        check_hyperparameter("SGD", "Invalid momentum value", group["momentum"])
        # torch does not check dampening; a negative one would scale the gradient by more than 1.
        check_hyperparameter("SGD", "Invalid dampening value", group["dampening"])
        check_hyperparameter("SGD", "Invalid weight_decay value", group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum > 0 and zero dampening")

    def update_parameter(self, p, group: dict) -> None:
        momentum, dampening = group["momentum"], group["dampening"]
        wd = group["weight_decay"]
        w = p._data
        g = -p.grad._data if group["maximize"] else p.grad._data
        if wd != 0:
            g = g + wd * w  # new array: the stored .grad is left untouched, as in torch
        if momentum != 0:
            state = self.state_for(p)
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.astype(w.dtype, copy=True)  # on g's device
            else:
                buf *= momentum
                if dampening == 0:
                    buf += g
                else:
                    buf += (1 - dampening) * g
            g = g + momentum * buf if group["nesterov"] else buf
        # p += (-lr) * g with one temporary; torch's add_(g, alpha=-lr) computes the same.
        w += g * (-group["lr"])
