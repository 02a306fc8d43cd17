"""Rung 3's checks: each op's backward called alone, then through the engine against PyTorch (float64, float32)
and against finite differences. The shapes include broadcasting and batched matrices."""

from __future__ import annotations

import torch

from .ops import op_exercise


def _sum(t, kw):
    return t[0].sum() if kw["dim"] is None else t[0].sum(dim=kw["dim"], keepdim=kw["keepdim"])


SUM_CASES = [
    (((3, 4),), {"dim": None, "keepdim": False}),
    (((2, 3, 4),), {"dim": 1, "keepdim": False}),
    (((2, 3, 4),), {"dim": (0, 2), "keepdim": True}),
    (((2, 3, 4),), {"dim": -1, "keepdim": False}),
]
EXERCISES = [
    op_exercise(
        "3.1", "Mul.backward", "Mul", [(((3, 4), (3, 4)), {}), (((2, 3, 4), (4,)), {})], lambda t, kw: t[0] * t[1]
    ),
    op_exercise("3.2", "Exp.backward", "Exp", [(((3, 4),), {})], lambda t, kw: torch.exp(t[0])),
    op_exercise("3.3", "Sum.backward", "Sum", SUM_CASES, _sum),
    op_exercise("3.4", "Tanh.backward", "Tanh", [(((3, 4),), {}), (((2, 5),), {})], lambda t, kw: torch.tanh(t[0])),
    op_exercise(
        "3.5",
        "MatMul.backward",
        "MatMul",
        [(((3, 4), (4, 5)), {}), (((2, 3, 4), (4, 5)), {}), (((2, 3, 4), (2, 4, 5)), {})],
        lambda t, kw: t[0] @ t[1],
    ),
]
