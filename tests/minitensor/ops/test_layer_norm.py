"""layer_norm over rows of two elements, against the exact values (60-digit decimals from the same float64 inputs).

Over two elements xhat = +-h with 1 - h^2 = eps rstd^2, so dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))
is eps rstd^3 (dxhat - mean(dxhat)): the general formula gets it as the difference of two nearly equal terms and
loses about -log10(eps rstd^2) digits (rows of spread 100: 9 of them). ops/layer_norm.py's normalization_vjp takes
the short form there, on every path: the backward (its in-place speed device and the plain formula), the backward on
Tensors (create_graph), forward mode (xhat's tangent) and forward over reverse (backward_jvp, and the backward on
Tensors without it). Each is checked here against the exact value to float64's op tolerance.
"""

from __future__ import annotations

from decimal import Decimal, getcontext

import numpy as np
import pytest

import minitensor as mt
import minitensor.autograd.forward_ad as fwAD
from minitensor import fast
from minitensor.ops import layer_norm
from minitensor.testing import OP_RTOL, error_stats

getcontext().prec = 60
RTOL = OP_RTOL["float64"]


def assert_exact(ours, ref, what: str) -> None:
    """Relative to the reference's own size (scale_free: assert_close's floor of 1e-3 would hide the error of a dx of
    1e-10, which is what a row of spread 100 has)."""
    _, rel = error_stats(ours, ref, scale_free=True)
    assert rel <= RTOL, (
        f"{what}: max relative error {rel:.3e} > {RTOL:.0e}: ours {ours.ravel()[:4]}, exact {ref.ravel()[:4]}"
    )


def _dec(v) -> Decimal:
    return Decimal(float(v))  # a float64 is an exact decimal


def exact_dx(x_row, w, g_row, eps) -> list[Decimal]:
    """dx of one row by the general formula, in decimals (60 digits: the cancellation costs nothing here)."""
    n = Decimal(len(x_row))
    mu = sum(x_row) / n
    xc = [v - mu for v in x_row]
    rstd = 1 / (sum(c * c for c in xc) / n + _dec(eps)).sqrt()
    xhat = [c * rstd for c in xc]
    dxhat = [gi * wi for gi, wi in zip(g_row, w)]
    m1, m2 = sum(dxhat) / n, sum(d * h for d, h in zip(dxhat, xhat)) / n
    return [rstd * (d - m1 - h * m2) for d, h in zip(dxhat, xhat)]


def exact(x, w, g, eps) -> np.ndarray:
    return np.array(
        [[float(v) for v in exact_dx([_dec(a) for a in xr], [_dec(a) for a in w], [_dec(a) for a in gr], eps)]
         for xr, gr in zip(x, g)]
    )  # fmt: skip


def exact_dx_tangent(x, w, g, eps, t, tw) -> np.ndarray:
    """d/ds dx(x + s t, w + s tw): a central difference in decimals (step 1e-20: its error is far below float64's)."""
    h = Decimal("1e-20")
    out = []
    for xr, gr, tr in zip(x, g, t):
        gd = [_dec(a) for a in gr]
        shifted = [[_dec(a) + s * h * _dec(b) for a, b in zip(v, tv)] for s in (1, -1) for v, tv in ((xr, tr), (w, tw))]
        up, down = exact_dx(shifted[0], shifted[1], gd, eps), exact_dx(shifted[2], shifted[3], gd, eps)
        out.append([float((u - d) / (2 * h)) for u, d in zip(up, down)])
    return np.array(out)


CASES = [(1.0, 1e-5), (100.0, 1e-5), (30.0, 1e-3), (1.0, 0.5)]  # (spread of the rows, eps)


def inputs(spread, eps, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 2)) * spread + 3.0
    w = rng.standard_normal(2)
    g = rng.standard_normal((4, 2)) + 0.5
    t = rng.standard_normal((4, 2))
    return x, w, g, t


@pytest.mark.parametrize("in_place", [True, False], ids=["in_place", "plain"])
@pytest.mark.parametrize("spread, eps", CASES)
def test_the_gradient_over_two_elements_is_exact_to_round_off(monkeypatch, spread, eps, in_place):
    x, w, g, _ = inputs(spread, eps)
    if not in_place:
        monkeypatch.setattr(fast.use, "layer_norm_grads", layer_norm.layer_norm_grads)  # the formula
    xt, wt = mt.tensor(x, requires_grad=True), mt.tensor(w, requires_grad=True)
    mt.nn.functional.layer_norm(xt, (2,), wt, None, eps).backward(mt.tensor(g))
    assert_exact(xt.grad.numpy(), exact(x, w, g, eps), "dx")
    # create_graph: the backward on Tensors
    xt = mt.tensor(x, requires_grad=True)
    (gx,) = mt.autograd.grad(mt.nn.functional.layer_norm(xt, (2,), wt, None, eps), xt, mt.tensor(g), create_graph=True)
    assert_exact(gx.detach().numpy(), exact(x, w, g, eps), "dx on Tensors")


@pytest.mark.parametrize("spread, eps", CASES)
def test_the_tangent_over_two_elements_is_exact_to_round_off(spread, eps):
    """ẏ = w ẋhat and ẋhat is dx's formula with ẋ for dxhat (xhat's Jacobian is symmetric)."""
    x, w, _, t = inputs(spread, eps)
    with fwAD.dual_level():
        d = fwAD.make_dual(mt.tensor(x), mt.tensor(t))
        tangent = fwAD.unpack_dual(mt.nn.functional.layer_norm(d, (2,), mt.tensor(w), None, eps)).tangent.numpy()
    assert_exact(tangent, exact(x, np.ones(2), t, eps) * w, "tangent")


@pytest.mark.parametrize("by_rule", [True, False], ids=["backward_jvp", "on_tensors"])
@pytest.mark.parametrize("spread, eps", CASES)
def test_forward_over_reverse_over_two_elements_is_exact_to_round_off(monkeypatch, spread, eps, by_rule):
    """The tangent of dx along (ẋ, ẇ) (a Hessian-vector product), by LayerNorm.backward_jvp and by the backward on
    Tensors, against the derivative of the exact dx; ẇ gives dxhat a tangent, which meets the same cancellation."""
    x, w, g, t = inputs(spread, eps)
    tw = np.random.default_rng(1).standard_normal(2)
    if not by_rule:
        monkeypatch.setattr(layer_norm.LayerNorm, "backward_jvp", None)
    with fwAD.dual_level():
        d = fwAD.make_dual(mt.tensor(x, requires_grad=True), mt.tensor(t))
        y = mt.nn.functional.layer_norm(d, (2,), fwAD.make_dual(mt.tensor(w), mt.tensor(tw)), None, eps)
        (gx,) = mt.autograd.tangent_grad(y, d, mt.tensor(g))
        gx_value, gx_tangent = gx.detach().numpy(), fwAD.unpack_dual(gx).tangent.numpy()
    assert_exact(gx_value, exact(x, w, g, eps), "dx")
    assert_exact(gx_tangent, exact_dx_tangent(x, w, g, eps, t, tw), "the tangent of dx")
