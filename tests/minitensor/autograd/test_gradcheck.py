"""Finite differences in float64 for every differentiable op of the table, and gradcheck's own test.

`mt.autograd.gradcheck` compares each analytic input gradient with central differences
(GRADCHECK's eps/atol/rtol from minitensor/testing.py). A checker that never fails proves
nothing, so the second half feeds it a Function with a deliberately wrong backward and
asserts it is caught, with the worst element named.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.testing import GRADCHECK
from tests.support.op_cases import CASES, MT, as_list, make_inputs, samples

DIFFERENTIABLE = [c for c in CASES if c.grad and c.gradcheck and any(s.is_float and s.grad for s in c.specs)]


def _wrapped(case, xs):
    """fn(*differentiable inputs) -> one tensor; the other inputs stay fixed."""
    diff_idx = [i for i, x in enumerate(xs) if x.requires_grad]

    def f(*diff):
        full = list(xs)
        for i, d in zip(diff_idx, diff):
            full[i] = d
        outs = [o for o in as_list(case.fn(MT, *full, **case.kwargs)) if o.dtype.kind == "f"]
        return outs[0] if len(outs) == 1 else mt.cat([o.reshape(-1) for o in outs])

    return f, [xs[i] for i in diff_idx]


@pytest.mark.parametrize("case", samples(DIFFERENTIABLE, None))
def test_gradcheck(case):
    xs, _, _ = make_inputs(case, "float64")
    f, inputs = _wrapped(case, xs)
    assert mt.autograd.gradcheck(f, inputs, **GRADCHECK)


# ----------------------------------------------------------------------------- gradcheck catches bugs
def square_with_vjp(vjp):
    """A custom Function y = x^2 whose backward is `vjp(x, g)`: right or deliberately wrong."""

    class Square(mt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return x * x

        @staticmethod
        def backward(ctx, g):
            return (vjp(ctx.x, g),)

    return Square


def _off_at_1_2(x, g):
    gx = 2.0 * x * g
    gx[1, 2] += 0.5  # correct everywhere but at element (1, 2)
    return gx


SquareRight = square_with_vjp(lambda x, g: 2.0 * x * g)
SquareWrongFactor = square_with_vjp(lambda x, g: 3.0 * x * g)  # wrong everywhere
SquareOneBadElement = square_with_vjp(_off_at_1_2)


def _x():
    return mt.tensor(np.random.default_rng(3).standard_normal((3, 4)), requires_grad=True)


def _check_fails(fn, *xs) -> str:
    """Run gradcheck expecting a failure; return its report (raised message or False)."""
    try:
        ok = mt.autograd.gradcheck(fn, list(xs), **GRADCHECK)
    except Exception as e:  # torch-style: raise with a report
        return str(e)
    assert ok is False, "gradcheck accepted a wrong backward"
    return ""


def test_gradcheck_accepts_correct_custom_function():
    assert mt.autograd.gradcheck(lambda x: SquareRight.apply(x), [_x()], **GRADCHECK)


def test_gradcheck_detects_wrong_backward():
    report = _check_fails(lambda x: SquareWrongFactor.apply(x), _x())
    assert report, "gradcheck must say what went wrong"


def test_gradcheck_names_worst_element():
    report = _check_fails(lambda x: SquareOneBadElement.apply(x), _x())
    # the one wrong entry is the worst one: its position must appear in the report
    assert "(1, 2)" in report or "[1, 2]" in report, report


def test_gradcheck_refuses_float32_inputs():
    x = mt.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    with pytest.raises(TypeError, match="float32"):
        mt.autograd.gradcheck(lambda x: x * 2, [x], **GRADCHECK)


def test_gradcheck_checks_every_input():
    """A wrong gradient on the second input only is still caught, and that input is named."""

    def f(a, b):
        return SquareRight.apply(a) + SquareWrongFactor.apply(b)

    report = _check_fails(f, _x(), _x())
    assert "input 1" in report, report
