"""Every op in the table of tests/support/op_cases.py, forward and backward, against PyTorch.

float64 must agree to round-off (OP_RTOL['float64']), float32 to its precision
(OP_RTOL['float32']); the upstream gradient is random. A handful of behaviours that do not fit
one table line (an all -inf softmax row, what cross-entropy accepts) are tested below it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor.testing import OP_RTOL, assert_close
from tests.minitensor.autograd.test_extended_path import assert_the_extended_path_gives
from tests.support.op_cases import CASES, GUARD_FUNCTIONS, MT, make_inputs, run_case, samples


@pytest.mark.parametrize("case, dtype_name", samples(CASES))
def test_op(case, dtype_name):
    """Values and VJP against torch; then the same forward's outputs are the reference of the extended path."""
    xs, outs = run_case(case, dtype_name)
    assert_the_extended_path_gives(case, dtype_name, xs, outs)


def test_table_overrides_state_a_reason():
    """A tolerance override or a skipped finite-difference check must say why, in the case."""
    for case in CASES:
        if case.rtol or not case.gradcheck:
            assert case.why, f"{case.name}: override without a reason"
        for name, rtol in case.rtol.items():
            assert rtol >= OP_RTOL[name], f"{case.name}: an override may only loosen with a reason"


def _subclasses(cls) -> set:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def test_every_primitive_has_a_case():
    """Each Function subclass of the engine (walked through the subclasses) runs in some case of the table.

    The table's functions are run under the profiler, which records every primitive called."""
    primitives = {
        c.__name__ for c in _subclasses(mt.autograd.Function) if c.__module__.startswith("minitensor.")
    } - GUARD_FUNCTIONS
    assert {"Add", "MatMul", "Softmax", "AttentionWeights", "AMaxMin"} <= primitives  # the walk sees all homes
    with mt.profiler.profile() as prof:
        for case in CASES:
            xs, _, _ = make_inputs(case, "float64")
            case.fn(MT, *xs, **case.kwargs)
    missing = sorted(primitives - set(prof.stats))
    assert not missing, f"primitives without a case in tests/support/op_cases.py: {missing}"


def test_every_primitive_lives_in_the_ops_package():
    homes = {
        c.__name__: c.__module__ for c in _subclasses(mt.autograd.Function) if c.__module__.startswith("minitensor")
    }
    elsewhere = {name: mod for name, mod in homes.items() if not mod.startswith("minitensor.ops.")}
    assert not elsewhere, f"Function subclasses outside minitensor/ops/: {elsewhere}"


def test_the_exported_lists_are_derived():
    """ops.__all__ is every public primitive of ops/, and mt.__all__ every torch.* function of functions/:
    a new primitive or function needs no line in either package's __init__.py."""
    primitives = {
        c.__name__: c
        for c in _subclasses(mt.autograd.Function)
        if c.__module__.startswith("minitensor.ops.") and not c.__name__.startswith("_")
    }
    assert sorted(mt.ops.__all__) == sorted(primitives)
    assert all(getattr(mt.ops, name) is cls for name, cls in primitives.items())
    assert set(mt.functions.__all__) <= set(mt.__all__)
    assert all(getattr(mt, name) is getattr(mt.functions, name) for name in mt.functions.__all__)


# ----------------------------------------------------------------------------- IEEE edges
# Values at the edge of an op's domain: PyTorch returns inf/NaN silently, and so does minitensor
# (its forwards and backward walk run under autograd.ieee_quiet): any NumPy RuntimeWarning is an
# error here. Each input is [0, -1, 2].
EDGES = {
    "x/0": lambda t, x: x / (x * 0),
    "1/x": lambda t, x: 1 / x,
    "log(x)": lambda t, x: x.log(),
    "sqrt(x)": lambda t, x: x.sqrt(),
    "x**-1": lambda t, x: x**-1,
    "x**0": lambda t, x: x**0,
    "x**0.5": lambda t, x: x**0.5,
    "x**x": lambda t, x: x**x,
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
    _compare_quietly(name, fn, x, xt, np.array([0.7, -1.3, 0.4]))


def _compare_quietly(name, fn, x, xt, g):
    """fn in both libraries, forward and backward with upstream g: same values, and no warning here."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = fn(mt, x)
        y.backward(mt.tensor(g[: y.numel()].reshape(y.shape)))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns on std with n <= correction
        yt = fn(torch, xt)
        yt.backward(torch.tensor(g[: yt.numel()].reshape(yt.shape)))
    assert_close(y.detach().numpy(), yt.detach().numpy(), OP_RTOL["float64"], f"{name} forward")
    assert_close(x.grad.numpy(), xt.grad.numpy(), OP_RTOL["float64"], f"{name} grad")


# 0/0 in a backward formula: the value PyTorch defines at that point (a constant row's std has
# gradient 0, 0 ** x has gradient 0 for x >= 0), or NaN where PyTorch gives NaN too.
ZERO_OVER_ZERO = {
    "std(constant row)": (lambda t, x: x.std(dim=1), [[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]),
    "std(constant, biased)": (lambda t, x: x.std(unbiased=False), [3.0, 3.0, 3.0]),
    "std(one element)": (lambda t, x: x.std(), [2.0]),
    "std(n <= correction)": (lambda t, x: x.std(dim=0, correction=2), [1.0, 2.0]),
    "var(one element)": (lambda t, x: x.var(), [2.0]),
    "var(one element, biased)": (lambda t, x: x.var(unbiased=False), [2.0]),
    "sqrt(0)": (lambda t, x: x.sqrt(), [0.0, 4.0]),
    "sqrt(sum of squares) at 0": (lambda t, x: (x * x).sum().sqrt(), [0.0, 0.0]),
    "0 ** x": (lambda t, x: 0**x, [0.0, 1.0, -1.0]),
    "(-2) ** x": (lambda t, x: (-2) ** x, [0.0, 1.0, 2.0]),
    "x ** 0.5 at 0": (lambda t, x: x**0.5, [0.0, 1.0]),
    "x / x at 0": (lambda t, x: x / x, [0.0, 2.0]),
    "layer_norm eps=0 constant row": (
        lambda t, x: t.nn.functional.layer_norm(x, (3,), eps=0.0),
        [[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]],
    ),
    "amax(ties)": (lambda t, x: x.amax(), [1.0, 1.0, -1.0]),
}


@pytest.mark.parametrize("name", list(ZERO_OVER_ZERO))
def test_zero_over_zero_in_backward_matches_torch(name):
    fn, z = ZERO_OVER_ZERO[name]
    z = np.array(z)
    x, xt = mt.tensor(z.copy(), requires_grad=True), torch.tensor(z.copy(), requires_grad=True)
    _compare_quietly(name, fn, x, xt, np.random.default_rng(6).standard_normal(z.size) + 0.5)


# ----------------------------------------------------------------------------- dropout's random draw
# The table drives dropout with a given mask; the random draw itself cannot equal torch's, so its
# properties are checked instead: survivors scaled by exactly 1/(1-p), the drop rate near p, the
# backward using the forward's mask, and reproducibility from mt.manual_seed.
@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
def test_dropout_random_mask(dtype_name):
    p, n = 0.3, 20_000
    x = mt.tensor(np.random.default_rng(1).uniform(0.5, 2.0, n).astype(dtype_name), requires_grad=True)
    y = F.dropout(x, p=p, training=True)
    assert y.dtype == x.dtype
    kept = y.detach().numpy() != 0
    # survivors are x / (1 - p) computed in the input's dtype, exactly as torch does
    expected = x.detach().numpy()[kept] * x.dtype.type(1 / (1 - p))
    assert_close(y.detach().numpy()[kept], expected, OP_RTOL[dtype_name], "dropout survivors")
    rate, sigma = 1 - kept.mean(), np.sqrt(p * (1 - p) / n)
    assert abs(rate - p) < 6 * sigma, f"drop rate {rate:.4f} vs p={p}"
    g = np.random.default_rng(2).standard_normal(n).astype(dtype_name)
    y.backward(mt.tensor(g))
    assert_close(x.grad.numpy(), np.where(kept, g * x.dtype.type(1 / (1 - p)), 0), OP_RTOL[dtype_name], "dropout grad")


def test_dropout_reproducible_from_manual_seed():
    x = mt.ones(1000)
    mt.manual_seed(123)
    a = F.dropout(x, p=0.5).numpy().copy()
    mt.manual_seed(123)
    b = F.dropout(x, p=0.5).numpy().copy()
    c = F.dropout(x, p=0.5).numpy().copy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c), "two draws after one seed gave the same mask"


def test_dropout_p1_and_eval_match_torch():
    z = np.random.default_rng(3).standard_normal((3, 4))
    for kw in (dict(p=1.0, training=True), dict(p=0.5, training=False)):
        x, xt = mt.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
        y, yt = F.dropout(x, **kw), torch.nn.functional.dropout(xt, **kw)
        assert_close(y.detach().numpy(), yt.detach().numpy(), OP_RTOL["float64"], f"dropout {kw}")
        g = np.random.default_rng(4).standard_normal((3, 4))
        y.backward(mt.tensor(g))
        yt.backward(torch.tensor(g))
        assert_close(x.grad.numpy(), xt.grad.numpy(), OP_RTOL["float64"], f"dropout {kw} grad")
