"""Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay).

PyTorch's single-tensor implementation, term for term (t counts this parameter's steps from 1):
    AdamW only:  p = p * (1 - lr * weight_decay)
    Adam only:   g = grad + weight_decay * p
    m = m + (1 - beta1) * (g - m)                 (torch's lerp form of beta1*m + (1-beta1)*g)
    v = beta2 * v + (1 - beta2) * g * g
    vmax = max(vmax, v)                           (amsgrad only; then used in place of v)
    p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
In one line: p -= lr * m_hat / (sqrt(v_hat) + eps), with the bias corrections placed as torch
places them (eps is added after dividing sqrt(v) by sqrt(1 - beta2^t)).
Everything runs in place on `p._data`, in NumPy or, on a device, in the array's own library (np.* dispatch);
m, v (and vmax) have the parameter's dtype, and
one scratch array per parameter per step holds the intermediate terms.
"""

from __future__ import annotations

import math

import numpy as np

from .adaptive import check_kernel_choice, refuse_unsupported
from .optimizer import Optimizer, check_hyperparameter

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False, *,
    foreach=None, capturable=False, differentiable=False, fused=None). foreach and fused pick torch's kernel, not the
    result: accepted and changing nothing; capturable and differentiable are refused."""

    _decoupled = False

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        maximize: bool = False,
        *,
        foreach=None,
        capturable: bool = False,
        differentiable: bool = False,
        fused=None,
    ):
        check_kernel_choice(type(self).__name__, foreach, fused)
        refuse_unsupported(type(self).__name__, capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize)
        self.check_hyperparameters(defaults)  # before the parameters are looked at, as torch does
        defaults["betas"] = tuple(betas)
        super().__init__(params, defaults)

    def check_hyperparameters(self, group) -> None:
        name = type(self).__name__
        check_hyperparameter(name, "Invalid learning rate", group["lr"])
        check_hyperparameter(name, "Invalid epsilon value", group["eps"])
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        for i, b in enumerate(betas):
            check_hyperparameter(name, f"Invalid beta parameter at index {i}", b, high=1.0)
        check_hyperparameter(name, "Invalid weight_decay value", group["weight_decay"])

    def update_parameter(self, p, group: dict) -> None:
        state = self.state_for(p)
        w = p._data
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(w)
            state["exp_avg_sq"] = np.zeros_like(w)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = np.zeros_like(w)
        state["step"] += 1
        arrays = (w, p.grad._data, state["exp_avg"], state["exp_avg_sq"])
        if group["amsgrad"]:
            arrays += (state["max_exp_avg_sq"],)
        self._update_arrays(*arrays, tmp=np.empty_like(w), t=state["step"], group=group)

    def _update_arrays(self, w, g, m, v, vmax=None, *, tmp, t: int, group: dict) -> None:
        """The update of one parameter: w, m, v (and vmax) in place; tmp the scratch for intermediate terms (beside
        the arrays, on their device)."""
        lr = group["lr"]
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        wd = group["weight_decay"]
        if group["maximize"]:
            g = -g
        if wd != 0:
            if self._decoupled:
                w *= 1 - lr * wd
            else:
                g = g + wd * w
        np.subtract(g, m, out=tmp)
        tmp *= 1 - beta1
        m += tmp  # m = lerp(m, g, 1 - beta1)
        v *= beta2
        np.multiply(g, 1 - beta2, out=tmp)
        tmp *= g
        v += tmp  # v = beta2 v + (1 - beta2) g g

        bias_correction1 = 1 - beta1**t
        bias_correction2_sqrt = math.sqrt(1 - beta2**t)
        step_size = lr / bias_correction1
        if vmax is not None:  # amsgrad
            np.maximum(vmax, v, out=vmax)
            np.sqrt(vmax, out=tmp)
        else:
            np.sqrt(v, out=tmp)
        tmp /= bias_correction2_sqrt
        tmp += eps  # denom
        np.divide(m, tmp, out=tmp)
        tmp *= -step_size
        w += tmp


class AdamW(Adam):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False).

    Decoupled weight decay (Loshchilov & Hutter): p *= 1 - lr * weight_decay before the Adam step.
    """

    _decoupled = True

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        maximize: bool = False,
        *,
        foreach=None,
        capturable: bool = False,
        differentiable: bool = False,
        fused=None,
    ):
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
        )
