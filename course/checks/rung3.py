"""Rung 3's checks: as rung 2's (the backward alone, then PyTorch in float64 and float32, then finite
differences), with the torch functions torch.nn.functional.softmax, layer_norm and cross_entropy.
Cross-entropy's forward (3.3) is judged alone first, so a wrong loss is not reported as a wrong gradient."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .ops import op_exercise


def _target(r, shapes):
    N, C = shapes[0]
    return {"target": r.integers(0, C, N), "label_smoothing": 0.1}


def _ce(t, kw):
    return F.cross_entropy(t[0], torch.as_tensor(kw["target"]), label_smoothing=kw["label_smoothing"])


CE_CASES = [(((4, 5),), _target), (((6, 3),), lambda r, s: {"target": r.integers(0, 3, 6), "label_smoothing": 0.0})]
EXERCISES = [
    op_exercise(
        "3.1",
        "Softmax.backward",
        "Softmax",
        [(((3, 5),), {"dim": -1}), (((2, 3, 4),), {"dim": 1})],
        lambda t, kw: F.softmax(t[0], dim=kw["dim"]),
    ),
    op_exercise(
        "3.2",
        "LayerNorm.backward",
        "LayerNorm",
        [(((4, 6), (6,), (6,)), {}), (((2, 3, 5), (5,), (5,)), {})],
        lambda t, kw: F.layer_norm(t[0], t[0].shape[-1:], t[1], t[2], eps=1e-5),
    ),
    op_exercise("3.3", "CrossEntropy.forward", "CrossEntropy", CE_CASES, _ce, check_forward_only=True),
    op_exercise("3.4", "CrossEntropy.backward", "CrossEntropy", CE_CASES, _ce),
]
