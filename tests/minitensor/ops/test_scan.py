"""cumprod where a line holds zeros: its gradient against torch, its tangent against finite differences, and the
second derivative there, which refuses (the op table covers the scans without zeros, both orders and both modes)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.autograd import forward_ad as fw
from minitensor.testing import OP_RTOL, assert_close

# one zero, none, two zeros (the second after the first), a zero first and last
LINES = np.array(
    [[0.5, 0.0, 1.5, -2.0, 0.7], [1.2, -0.8, 0.9, 1.1, -1.3], [0.0, 2.0, 0.0, 0.6, 1.4], [0.3, 1.1, -0.4, 2.0, 0.0]]
)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("dim", [0, 1])
def test_cumprod_gradient_with_zeros_matches_torch(dtype, dim):
    a = LINES.astype(dtype) if dim == 1 else LINES.T.copy().astype(dtype)
    g = (np.random.default_rng(dim).standard_normal(a.shape) + 0.5).astype(dtype)
    x = mt.tensor(a, requires_grad=True)
    r = torch.tensor(a, requires_grad=True)
    out = mt.cumprod(x, dim)
    ref = torch.cumprod(r, dim)
    assert_close(out.detach().numpy(), ref.detach().numpy(), OP_RTOL[dtype], what="cumprod forward")
    out.backward(mt.tensor(g))
    ref.backward(torch.tensor(g))
    assert_close(x.grad.numpy(), r.grad.numpy(), OP_RTOL[dtype], what="cumprod gradient with zeros")


def test_cumprod_tangent_with_zeros_is_the_jacobian_times_the_tangent():
    """Against the Jacobian that the (torch-checked) backward gives, row by row: torch's own forward mode gives NaN
    here, so it is not the reference."""
    a = LINES
    v = np.random.default_rng(3).standard_normal(a.shape)
    with fw.dual_level():
        out = mt.cumprod(fw.make_dual(mt.tensor(a), mt.tensor(v)), 1)
        tangent = fw.unpack_dual(out).tangent.numpy()
    x = torch.tensor(a, requires_grad=True)
    jac = torch.autograd.functional.jacobian(lambda t: torch.cumprod(t, 1), x).numpy()
    want = np.einsum("ijkl,kl->ij", jac, v)
    assert_close(tangent, want, OP_RTOL["float64"], what="cumprod tangent with zeros")


def test_cumprod_second_derivative_with_zeros_refuses():
    x = mt.tensor(LINES, requires_grad=True)
    (g,) = mt.autograd.grad(mt.cumprod(x[1:2], 1).sum(), x, create_graph=True)  # no zero in that line: allowed
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="second derivative where the input has a zero"):
        mt.autograd.grad(mt.cumprod(x, 1).sum(), x, create_graph=True)


def test_cumsum_and_cumprod_dtypes_as_torch():
    for dtype in ["int32", "int64", "bool", "float16", "float32"]:
        a = np.array([[1, 0, 2], [3, 1, 1]]).astype(dtype)
        for op in ["cumsum", "cumprod"]:
            ours, ref = getattr(mt, op)(mt.tensor(a), 1), getattr(torch, op)(torch.tensor(a), 1)
            assert ours.dtype.name == str(ref.dtype).removeprefix("torch."), (op, dtype)
            np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    assert mt.cumsum(mt.tensor([1, 2]), 0, dtype=mt.float64).dtype == mt.float64
    assert mt.cumsum(mt.tensor(3.0), 0).shape == () and torch.cumsum(torch.tensor(3.0), 0).shape == ()
