"""Rung 7's checks: the learner's optimizer and torch.optim's, from the same float64 parameters, fed the same
random gradients for several steps (one parameter skipped at one step, as a parameter off the loss's path);
the parameters compared after every step within minitensor.testing.OP_RTOL['float64']."""

from __future__ import annotations

import torch

import minitensor as mt

from ..runner import Exercise
from .common import OP_RTOL, CheckFailed, compare, rng

SHAPES = [(3, 4), (4,), (2, 2, 3)]
STEPS = 5


def _run(where, make_ours, make_torch):
    r = rng(12)
    start = [r.standard_normal(s) for s in SHAPES]
    ours = [mt.tensor(a.copy(), requires_grad=True) for a in start]
    theirs = [torch.tensor(a.copy(), requires_grad=True) for a in start]
    opt, t_opt = make_ours(ours), make_torch(theirs)
    for step in range(1, STEPS + 1):
        for i, (p, t) in enumerate(zip(ours, theirs)):
            if step == 3 and i == 1:  # no gradient reached this one at step 3: both must leave it alone
                p.grad, t.grad = None, None
                continue
            g = r.standard_normal(p.shape)
            p.grad, t.grad = mt.tensor(g.copy()), torch.tensor(g.copy())
        result = opt.step()
        t_opt.step()
        if result is not None and not isinstance(result, (float, int)):
            raise CheckFailed(f"{where}: step() returned {type(result).__name__}; expected None")
        for i, (p, t) in enumerate(zip(ours, theirs)):
            if not isinstance(p, mt.Tensor) or p.shape != tuple(t.shape):
                raise CheckFailed(f"{where}: after step {step}, parameter {i} is no longer a {tuple(t.shape)} array")
            compare(
                f"{where}: after step {step}, parameter {i} {tuple(t.shape)}",
                p.detach().numpy(),
                t.detach(),
                OP_RTOL["float64"],
                "torch.optim",
            )


def _check_sgd(mod):
    for kw in ({"lr": 0.1}, {"lr": 0.05, "momentum": 0.9}, {"lr": 0.1, "momentum": 0.5, "weight_decay": 0.01}):
        args = ", ".join(f"{k}={v}" for k, v in kw.items())
        _run(f"SGD({args})", lambda ps, kw=kw: mod.SGD(ps, **kw), lambda ps, kw=kw: torch.optim.SGD(ps, **kw))


def _check_adam(mod):
    for kw in ({"lr": 0.01}, {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6}, {"lr": 0.01, "weight_decay": 0.1}):
        args = ", ".join(f"{k}={v}" for k, v in kw.items())
        _run(f"Adam({args})", lambda ps, kw=kw: mod.Adam(ps, **kw), lambda ps, kw=kw: torch.optim.Adam(ps, **kw))


EXERCISES = [Exercise("7.1", "SGD.step", _check_sgd), Exercise("7.2", "Adam.step", _check_adam)]
