"""Adagrad, RMSprop and Adadelta step by step against torch's single-tensor loop: the same random gradients (never
all ones) for several steps, float64 to round-off and float32 to its precision, maximize included; the kernel
choices (foreach, fused) accepted; what is not supported refused by name. (Training runs: test_optim.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

CONFIGS = {
    "Adagrad": [{}, {"lr": 0.3, "lr_decay": 0.1, "weight_decay": 0.05, "initial_accumulator_value": 0.2}],
    "RMSprop": [{}, {"lr": 0.05, "alpha": 0.8, "momentum": 0.7, "centered": True, "weight_decay": 0.05}],
    "Adadelta": [{}, {"lr": 0.5, "rho": 0.7, "eps": 1e-4, "weight_decay": 0.05}],
}
SAMPLES = [(name, i, maximize) for name, configs in CONFIGS.items() for i in range(len(configs)) for maximize in (0, 1)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name, config, maximize", SAMPLES)
def test_steps_match_torch(name, config, maximize, dtype):
    rng = np.random.default_rng(len(name) + config)
    kwargs = dict(CONFIGS[name][config], maximize=bool(maximize))
    shapes = [(3, 4), (5,)]
    ours = [mt.nn.Parameter(rng.standard_normal(s).astype(dtype)) for s in shapes]
    theirs = [torch.nn.Parameter(torch.tensor(p.detach().numpy().copy())) for p in ours]
    opt = getattr(mt.optim, name)(ours, **kwargs)
    topt = getattr(torch.optim, name)(theirs, foreach=False, **kwargs)
    for _ in range(6):
        for p, tp in zip(ours, theirs):
            g = (rng.standard_normal(p.shape) + 0.3).astype(dtype)
            p.grad, tp.grad = mt.tensor(g), torch.tensor(g.copy())
        opt.step()
        topt.step()
    for p, tp in zip(ours, theirs):
        assert p.dtype == np.dtype(dtype)
        assert_close(p.detach().numpy(), tp.detach().numpy(), OP_RTOL[dtype], what=f"{name} {kwargs} [{dtype}]")


@pytest.mark.parametrize("name", ["Adagrad", "RMSprop", "Adadelta", "Adam", "AdamW"])
def test_kernel_choices_accepted_and_bad_values_refused(name):
    p = [mt.nn.Parameter(np.ones(2))]
    getattr(mt.optim, name)(p, foreach=True)
    with pytest.raises(ValueError, match="foreach must be None or a bool"):
        getattr(mt.optim, name)(p, foreach="yes")
    with pytest.raises(NotImplementedError, match="differentiable=True is not supported"):
        getattr(mt.optim, name)(p, differentiable=True)


def test_adamw_fused_accepted_as_torch():
    p = [mt.nn.Parameter(np.ones(2))]
    mt.optim.AdamW(p, fused=True)
    mt.optim.Adagrad(p, fused=False)
    with pytest.raises(ValueError, match="fused must be None or a bool"):
        mt.optim.AdamW(p, fused=1)


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        ("Adagrad", {"lr": -1.0}, "Invalid learning rate"),
        ("Adagrad", {"lr_decay": -0.1}, "Invalid lr_decay"),
        ("RMSprop", {"alpha": -0.5}, "Invalid alpha"),
        ("RMSprop", {"momentum": -0.5}, "Invalid momentum"),
        ("Adadelta", {"rho": 1.5}, "Invalid rho"),
        ("Adadelta", {"eps": -1.0}, "Invalid epsilon"),
    ],
)
def test_hyperparameters_refused_as_torch(name, kwargs, match):
    with pytest.raises(ValueError):
        getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], **kwargs)
    with pytest.raises(ValueError, match=match):
        getattr(mt.optim, name)([mt.nn.Parameter(np.ones(2))], **kwargs)


def test_state_dict_keys_as_torch():
    for name in CONFIGS:
        p, tp = mt.nn.Parameter(np.ones(3)), torch.nn.Parameter(torch.ones(3))
        config = CONFIGS[name][-1]
        opt, topt = getattr(mt.optim, name)([p], **config), getattr(torch.optim, name)([tp], **config)
        p.grad, tp.grad = mt.ones(3, dtype=mt.float64), torch.ones(3)
        opt.step()
        topt.step()
        assert set(opt.state_dict()["state"][0]) == set(topt.state_dict()["state"][0])
