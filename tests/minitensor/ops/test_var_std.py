"""var and std where no degree of freedom is left (n - correction <= 0) and on empty tensors, against PyTorch:
value, gradient (a random upstream gradient) and forward-mode tangent (a random tangent), NaN and inf in the same
places, the numbers to minitensor/testing.py's tolerance (assert_close pairs NaNs and equal infinities, and fails
a NaN or an inf against anything else).

PyTorch's rules, followed by minitensor/ops/reductions.py: an empty slice's value is NaN whatever the correction;
the backward over every element with n - correction <= 0 is g * (NaN where x equals the mean, else +inf), over
dims it is g * 2 (x - mean) / (n - correction) unclamped; the JVP is the backward's formula with the tangent for g,
summed (so an empty slice's tangent is 0, not 0 * inf); std's are var's over 2 std, and 0 where std is 0.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
import torch
from torch.func import jvp as torch_jvp

import minitensor as mt
import minitensor.autograd.forward_ad as fwAD
from minitensor.testing import OP_RTOL, assert_close

pytestmark = pytest.mark.full

SHAPES_AND_DIMS = [
    ((0,), [None, 0]),
    ((0, 3), [None, 0, 1, (0, 1)]),
    ((3, 0), [None, 0, 1]),
    ((), [None]),
    ((1,), [None, 0]),
    ((1, 3), [None, 0, 1]),
    ((2, 1), [0, 1]),
    ((2,), [None, 0]),
    ((1, 1), [None, (0, 1)]),
]
CASES = [
    (op, shape, dim, correction, keepdim)
    for shape, dims in SHAPES_AND_DIMS
    for dim in dims
    for correction in (0, 1, 2, 0.5, 1.3, -1)
    for keepdim in (False, True)
    for op in ("var", "std")
]


def _ids(case) -> str:
    op, shape, dim, correction, keepdim = case
    return f"{op}-{shape}-dim{dim}-c{correction}-{'keep' if keepdim else 'drop'}"


def _torch_side(op, x, t, kwargs, rng):
    """torch's value, gradient (for a random upstream gradient, returned too) and tangent."""
    f = lambda z: getattr(torch, op)(z, **kwargs)
    tx = torch.tensor(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "degrees of freedom is <= 0" UserWarning
        y = f(tx)
        g = rng.standard_normal(tuple(y.shape)).astype(x.dtype)
        y.backward(torch.tensor(g))
        _, tangent = torch_jvp(f, (torch.tensor(x),), (torch.tensor(t),))
    return (y.detach().numpy(), tx.grad.numpy(), tangent.numpy()), g


def _our_side(op, x, g, t, kwargs):
    f = lambda z: getattr(mt, op)(z, **kwargs)
    mx = mt.tensor(x, requires_grad=True)
    y = f(mx)
    y.backward(mt.tensor(g))
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(f(fwAD.make_dual(mt.tensor(x), mt.tensor(t)))).tangent
    return y.detach().numpy(), mx.grad.numpy(), tangent.numpy()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_var_and_std_without_degrees_of_freedom_match_torch(case, dtype):
    op, shape, dim, correction, keepdim = case
    kwargs = {"correction": correction, "keepdim": keepdim, **({} if dim is None else {"dim": dim})}
    rng = np.random.default_rng(zlib.crc32(_ids(case).encode()))
    x = rng.standard_normal(shape).astype(dtype)
    t = rng.standard_normal(shape).astype(dtype)
    theirs, g = _torch_side(op, x, t, kwargs, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NumPy warning reaches the user (the mean of an empty slice, 0/0)
        ours = _our_side(op, x, g, t, kwargs)
    for what, a, b in zip(("value", "gradient", "tangent"), ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
        assert_close(a, b, OP_RTOL[dtype], what=f"{_ids(case)} {what}")
