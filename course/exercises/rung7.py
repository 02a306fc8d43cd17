"""Rung 7, the optimizer: SGD (with momentum and weight decay) and Adam, by hand, as torch.optim computes them.

YOUR FILE: fill every `raise NotImplementedError("exercise N.M")`; the checks import it as it is on disk.

A parameter `p` is a minitensor Tensor: `p.detach().numpy()` is its NumPy array, the parameter's own memory
(update it in place: `w = p.detach().numpy(); w -= ...`), and `p.grad.numpy()` the gradient the last backward left
(`p.grad` is None for a parameter no gradient reached: skip it). Check with `python -m course check 7` (against
torch.optim over several steps, float64).
"""

from __future__ import annotations

import numpy as np


class SGD:
    """torch.optim.SGD: g = grad + weight_decay * p; with momentum, buf = momentum * buf + g (buf = g at the
    first step) and g = buf; then p -= lr * g"""

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        self.params = list(params)
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.buffers = [None] * len(self.params)  # the momentum buffer of each parameter

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        # exercise 7.1
        raise NotImplementedError("exercise 7.1")


class Adam:
    """torch.optim.Adam (Kingma and Ba, 2015), weight decay added to the gradient as torch's (not AdamW):
        g = grad + weight_decay * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2   (m, v start at 0)
        m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t);  p -= lr * m_hat / (sqrt(v_hat) + eps)
    t = 1, 2, ... counts the steps that gave THIS parameter a gradient (each parameter has its own t, m and v).
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, tuple(betas), eps, weight_decay
        self.t = [0] * len(self.params)
        self.m = [np.zeros_like(p.detach().numpy()) for p in self.params]
        self.v = [np.zeros_like(p.detach().numpy()) for p in self.params]

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        # exercise 7.2
        raise NotImplementedError("exercise 7.2")
