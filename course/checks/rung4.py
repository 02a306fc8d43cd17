"""Rung 4's checks: as rung 3's (the backward alone, then PyTorch in float64 and float32, then finite
differences), with the torch functions torch.nn.functional.softmax, layer_norm and cross_entropy.
Cross-entropy's forward (4.3) is judged alone first, so a wrong loss is not reported as a wrong gradient."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .ops import op_exercise


def _softmax_known(arrays, G, kw, i):
    """Softmax's backward with only the Jacobian's diagonal: g_i y_i (1 - y_i)."""
    x, dim = arrays[0], kw["dim"]
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    y = e / e.sum(axis=dim, keepdims=True)
    return [
        (
            G * y * (1 - y),
            "Yours equals the diagonal-only product g_i y_i (1 - y_i): the Jacobian dy_i/dx_j = y_i (delta_ij - y_j) "
            "has off-diagonal terms -y_i y_j too; with them, dx = y * (g - sum_j g_j y_j).",
        )
    ]


def _layer_norm_known(arrays, G, kw, i):
    """LayerNorm's dx with the mean and variance held constant, and with only the Jacobian's diagonal."""
    if i != 0:
        return []
    x, w = arrays[0], arrays[1]
    n = x.shape[-1]
    rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
    xhat = (x - x.mean(axis=-1, keepdims=True)) * rstd
    gx = G * w
    return [
        (
            rstd * gx,
            "Yours is rstd * gx, as if the mean and the variance were constants: both depend on x (the Jacobian's "
            "off-diagonal terms), which adds - mean(gx) - xhat * mean(gx * xhat) inside the bracket.",
        ),
        (
            rstd * gx * (1 - 1 / n - xhat * xhat / n),
            "Yours keeps only the Jacobian's diagonal, rstd (1 - 1/n - xhat_i^2 / n): the off-diagonal terms "
            "-rstd (1 + xhat_i xhat_j) / n are missing; with them, "
            "dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)).",
        ),
    ]


def _target(r, shapes):
    N, C = shapes[0]
    return {"target": r.integers(0, C, N), "label_smoothing": 0.1}


def _ce(t, kw):
    return F.cross_entropy(t[0], torch.as_tensor(kw["target"]), label_smoothing=kw["label_smoothing"])


CE_CASES = [(((4, 5),), _target), (((6, 3),), lambda r, s: {"target": r.integers(0, 3, 6), "label_smoothing": 0.0})]
EXERCISES = [
    op_exercise(
        "4.1",
        "Softmax.backward",
        "Softmax",
        [(((3, 5),), {"dim": -1}), (((2, 3, 4),), {"dim": 1})],
        lambda t, kw: F.softmax(t[0], dim=kw["dim"]),
        known=_softmax_known,
    ),
    op_exercise(
        "4.2",
        "LayerNorm.backward",
        "LayerNorm",
        [(((4, 6), (6,), (6,)), {}), (((2, 3, 5), (5,), (5,)), {})],
        lambda t, kw: F.layer_norm(t[0], t[0].shape[-1:], t[1], t[2], eps=1e-5),
        known=_layer_norm_known,
    ),
    op_exercise("4.3", "CrossEntropy.forward", "CrossEntropy", CE_CASES, _ce, check_forward_only=True),
    op_exercise("4.4", "CrossEntropy.backward", "CrossEntropy", CE_CASES, _ce, needs=("4.3",)),
]
