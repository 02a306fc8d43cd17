"""Every op in the table of tests/op_cases.py, forward and backward, against PyTorch.

float64 must agree to round-off (OP_RTOL['float64']), float32 to its precision
(OP_RTOL['float32']); the upstream gradient is random. A handful of behaviours that do not fit
one table line (an all -inf softmax row, what cross-entropy accepts) are tested below it.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import OP_RTOL, assert_close

from .op_cases import CASES, run_case


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case, dtype_name):
    run_case(case, dtype_name)


def test_table_overrides_state_a_reason():
    """A tolerance override or a skipped finite-difference check must say why, in the case."""
    for case in CASES:
        if case.rtol or not case.gradcheck:
            assert case.why, f"{case.name}: override without a reason"
        for name, rtol in case.rtol.items():
            assert rtol >= OP_RTOL[name], f"{case.name}: an override may only loosen with a reason"


# ----------------------------------------------------------------------------- IEEE edges
# Values at the edge of an op's domain: PyTorch returns inf/NaN silently. minitensor returns the
# same values but lets NumPy's RuntimeWarning through (pyproject turns those into errors inside
# minitensor during tests, so an unintended NaN is caught where it is born); here the warnings are
# silenced and only the values and gradients are compared. Each input is [0, -1, 2].
EDGES = {
    "x/0": lambda t, x: x / (x * 0),
    "1/x": lambda t, x: 1 / x,
    "log(x)": lambda t, x: x.log(),
    "sqrt(x)": lambda t, x: x.sqrt(),
    "x**-1": lambda t, x: x ** -1,
    "x**0": lambda t, x: x ** 0,
    "x**0.5": lambda t, x: x ** 0.5,
    "x**x": lambda t, x: x ** x,
    "x**(x+1)": lambda t, x: x ** (x + 1),
    "exp(1000x)": lambda t, x: (x * 1000).exp(),
    "sigmoid(-1000x)": lambda t, x: (x * -1000).sigmoid(),
    "tanh(1000x)": lambda t, x: (x * 1000).tanh(),
    "inf*x": lambda t, x: x * float("inf"),
    "softmax(inf*x)": lambda t, x: t.nn.functional.softmax(x * float("inf"), dim=0),
    "log_softmax(inf*x)": lambda t, x: t.nn.functional.log_softmax(x * float("inf"), dim=0),
    "logsumexp(-inf*|x|)": lambda t, x: (x.abs() * -float("inf")).logsumexp(dim=0),
}


@pytest.mark.parametrize("name", list(EDGES))
def test_ieee_edges_match_torch(name):
    fn, z = EDGES[name], np.array([0.0, -1.0, 2.0])
    x, xt = mt.tensor(z.copy(), requires_grad=True), torch.tensor(z.copy(), requires_grad=True)
    g = np.array([0.7, -1.3, 0.4])
    with np.errstate(all="ignore"):
        y, yt = fn(mt, x), fn(torch, xt)
        y.backward(mt.tensor(g[: y.numel()].reshape(y.shape)))
        yt.backward(torch.tensor(g[: yt.numel()].reshape(yt.shape)))
    assert_close(y.numpy(), yt.detach().numpy(), OP_RTOL["float64"], f"{name} forward")
    assert_close(x.grad.numpy(), xt.grad.numpy(), OP_RTOL["float64"], f"{name} grad")
