"""Checking a learner's layer against its PyTorch twin in parity/ (rungs 4 and 5), as the parity report does:
the learner's weights copied into the twin name for name (parity.convert.load_arrays, which refuses key sets or
shapes that differ), the same float64 inputs and a random upstream gradient on both, then the output, every
input's gradient and every parameter's gradient compared within PARITY_RTOL['float64'].
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch

import minitensor as mt
from minitensor.testing import PARITY_RTOL
from parity.convert import load_arrays, state_arrays

from .common import CheckFailed, case, compare, expect_array, rng

RTOL = PARITY_RTOL["float64"]


@contextmanager
def float64():
    """Modules built inside are float64 on both sides (minitensor's and torch's default dtype)."""
    previous, previous_torch = mt.get_default_dtype(), torch.get_default_dtype()
    mt.set_default_dtype(mt.float64)
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        mt.set_default_dtype(previous)
        torch.set_default_dtype(previous_torch)


def copy_into_twin(where: str, ours, twin) -> None:
    try:
        load_arrays(twin, state_arrays(ours), what=where)
    except (ValueError, TypeError) as e:
        raise CheckFailed(
            f"{where}: your module's parameters must carry the project's names and shapes, so that they copy into "
            f"parity/'s twin: {e}"
        ) from None


def compare_module(where: str, ours, twin, inputs: list, call=None, constants=()) -> None:
    """ours(*inputs, *constants) against twin(...) in float64: output, input gradients, parameter gradients.

    `inputs`: float64 arrays (differentiated); `constants`: (minitensor value, torch value) pairs passed after
    them (masks, token ids)."""
    call = call or (lambda m, *a: m(*a))
    with case(where):
        copy_into_twin(where, ours, twin)
        xs = [mt.tensor(a, requires_grad=True) for a in inputs]
        ts = [torch.tensor(a, requires_grad=True) for a in inputs]
        y = call(ours, *xs, *(c[0] for c in constants))
        t_y = call(twin, *ts, *(c[1] for c in constants))
        if not isinstance(y, mt.Tensor):
            raise CheckFailed(f"{where}: forward returned {type(y).__name__}, expected a Tensor")
        expect_array(f"{where}: output", y.detach().numpy(), tuple(t_y.shape), np.float64)
        compare(f"{where}: output", y, t_y, RTOL, "parity/'s torch twin")
        G = rng(5).standard_normal(tuple(t_y.shape))
        y.backward(mt.tensor(G))
        t_y.backward(torch.tensor(G))
        for i, (x, t) in enumerate(zip(xs, ts)):
            if x.grad is None:
                raise CheckFailed(f"{where}: no gradient reached input {i}")
            compare(f"{where}: gradient of input {i}", x.grad, t.grad, RTOL, "parity/'s torch twin")
        theirs = dict(twin.named_parameters())
        for name, p in ours.named_parameters():
            if p.grad is None:
                raise CheckFailed(f"{where}: no gradient reached parameter {name}")
            compare(f"{where}: gradient of {name}", p.grad, theirs[name].grad, RTOL, "parity/'s torch twin")
